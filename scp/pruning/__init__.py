"""Pruning contexts: the `ShapleyPruner` API, the pruned result, corpus pruning (locally or
on Ray), the ranker registry and baseline rankers, evaluation on labelled contexts and model cards.
"""
