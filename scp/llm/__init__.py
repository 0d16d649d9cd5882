"""Readers: question + context → answer, and LM scoring (log-probabilities, per-token distributions) for the
experiments that value evidence by what a reader does with it.
"""
