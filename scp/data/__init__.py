"""Data: datasets as `Example` objects, sentence splitting and tokens, synthetic contexts,
the paper's worked cases, text embedders with their cache, and the features and padded batches value networks read.
"""
