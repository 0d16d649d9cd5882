"""Training value networks: the pairwise margin loss on Monte-Carlo Shapley values, the loop with exact resume,
named runs that are reused or resumed, and the check that a run reproduces a reference checkpoint.
"""
