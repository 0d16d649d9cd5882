"""The engine: cooperative games, Shapley estimators (exact, Monte Carlo with the batched Deep Sets fast path, leave-one-out, the certified adaptive budget), the paper's theory (error bounds, sample sizes, the core, supermodularity), unit selection and the metrics every layer reports.

It imports nothing of the package above it: a game is any callable on a boolean coalition matrix, and the fast
path reads a value network through the small protocol a game offers (``first_layer_rows``).
"""
