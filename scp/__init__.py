"""Shapley Context Pruning: sentences are players, a set value network scores coalitions, Shapley values rank.

The public API, importable from ``scp`` itself (each name is loaded on first use, so ``import scp`` stays light)::

    from scp import ShapleyPruner
    pruner = ShapleyPruner.from_checkpoint("models/scp-hotpotqa-best.safetensors")
    result = pruner.prune(query, sentences, keep_ratio=0.5)

- pruning: :class:`ShapleyPruner`, :class:`PruneResult`, :func:`prune` (keep by scores you already have);
- estimation: :func:`estimate` (one entry point to every registered estimator), its result :class:`ShapleyResult`
  with the adaptive budget's :class:`TopKCertificate`, :func:`register_estimator` and :data:`ESTIMATORS`;
- games: :class:`Game` and the teaching games, :class:`ValueNetGame` (a value network on one context);
- value networks: :class:`DeepSetsValue`, :class:`ConvexDeepSets`, :class:`ContextDeepSets`, :class:`PointwiseScorer`,
  their :class:`TrainConfig` and :func:`config_from_preset`, :func:`build_model`, :func:`score_contexts` (the batched
  scorer);
- checkpoints: :func:`load_checkpoint`.
"""

from scp.exports import lazy_exports

__version__ = "0.1.0"

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "scp.pruning.pruner": ("ShapleyPruner",),
        "scp.pruning.result": ("PruneResult", "prune"),
        "scp.core.estimators": ("ESTIMATORS", "Estimator", "estimate", "register_estimator"),
        "scp.core.result": ("ShapleyResult", "TopKCertificate"),
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
        ),
        "scp.models.game": ("ValueNetGame",),
        "scp.models.value_net": ("ConvexDeepSets", "DeepSetsValue"),
        "scp.models.context_net": ("ContextDeepSets",),
        "scp.models.pointwise": ("PointwiseScorer",),
        "scp.models.config": ("TrainConfig", "config_from_preset"),
        "scp.models.factory": ("build_model", "load_checkpoint"),
        "scp.models.scoring": ("score_contexts",),
    },
)
