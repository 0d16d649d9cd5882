"""The engine: cooperative games, Shapley estimators behind one registry and entry point, the paper's theory, unit
selection and the metrics every layer reports.

Estimators: exact, Monte Carlo with the batched Deep Sets fast path, leave-one-out and the certified adaptive
budget; theory: error bounds, sample sizes, the core, supermodularity.  It imports nothing of the package above it:
a game is any callable on a boolean coalition matrix, and the fast path reads a value network through the small
protocol a game offers (``first_layer_rows``).  The names below load from their modules on first use::

    from scp.core import GloveGame, exact, monte_carlo, theory
"""

from scp.exports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "scp.core.games": (
            "AdditiveGame",
            "FunctionGame",
            "Game",
            "GloveGame",
            "LookupGame",
            "MajorityGame",
            "MaxSumGame",
            "TableGame",
            "UnanimityGame",
            "all_coalitions",
        ),
        "scp.core.estimators": ("ESTIMATORS", "estimate", "register_estimator"),
        "scp.core.result": ("ShapleyResult", "TopKCertificate"),
        "scp.core.enumeration": ("exact", "leave_one_out", "shapley_from_table"),
        "scp.core.monte_carlo": ("monte_carlo",),
        "scp.core.adaptive": ("adaptive_monte_carlo",),
        "scp.core.closed_forms": ("max_game_shapley", "max_shapley"),
        "scp.core.metrics": (
            "SeedAggregate",
            "aggregate",
            "kendall_tau_b",
            "over_seeds",
            "paired_difference",
            "pairwise_auc",
            "recall_at_keep",
        ),
    },
)
