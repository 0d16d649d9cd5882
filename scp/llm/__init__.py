"""Readers: question + context → answer, LM scoring (log-probabilities, per-token distributions) for the experiments
that value evidence by what a reader does with it, and the peers that run on a reader: ContextCite (attribution) and
LongLLMLingua (compression), each through its own package.
"""
