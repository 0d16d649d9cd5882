"""Benchmarks: scripts that time the estimators, accuracy per second, prefix sums, long contexts, the adaptive budget,
end-to-end pruning and the GPU check, and print ratios measured in one run (``python -m scp.bench SECTION``).

One module per section (:mod:`scp.bench.estimator`, ``accuracy``, ``prefix``, ``long_contexts``, ``adaptive``,
``convexity``, ``gpu``, ``e2e``, ``report``), on shared plumbing and data (:mod:`scp.bench.common`), the compared
estimators (:mod:`scp.bench.methods`) and their peers (:mod:`scp.bench.peers`); the command line is
:mod:`scp.bench.cli`.

Methodology.  Every time is the median of ≥ 5 repeats (``--quick``: fewer, labelled) with min and max, methods
taking turns in an order rotated between repeats, after one untimed warm-up call each.  Every baseline gets the
best game it can use: a :class:`~scp.models.game.ValueNetGame` with ``cache_psi=True``, which computes ψ and ρ's first
layer once per context (g_c = W₁ψ_c, v(S) = rest_of_ρ(g₀ + Σ_S g_c)) and keeps them across calls; shapiq's
permutation sampler values all its permutations in one game call.  The cost of ψ is outside every timing.  Each
accuracy is measured on the same calls that are timed: RMSE = sqrt(mean over repeats and players of (φ̂_i − φ_i)²)
against exact values (n ≤ 16) or an antithetic + position-control-variate estimate with M_ref permutations (its
own standard error is recorded), and the mean overlap of the estimated and reference Top-5 sets.
"""

from scp.exports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {"scp.bench.cli": ("main",)})
