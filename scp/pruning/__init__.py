"""Pruning contexts: the `ShapleyPruner` API, the pruned result, corpus pruning (locally or
on Ray), the method registry (names, labels, figure styles, constructors) and the baseline rankers,
evaluation on labelled contexts and model cards.
"""
