"""Benchmarks: scripts that time the estimators, accuracy per second, prefix sums, long contexts, the adaptive budget,
end-to-end pruning and the GPU check, and print ratios measured in one run (``python -m scp.bench SECTION``).
"""
