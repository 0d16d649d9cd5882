"""Shapley Context Pruning: sentences are players, a set value network scores coalitions, Shapley values rank."""

__version__ = "0.1.0"
