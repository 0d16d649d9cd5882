"""Which models a notebook trains: from its resolved parameters, every :class:`~scp.models.config.TrainConfig` it
passes to :func:`scp.training.runs.train_or_load`, so that a training stage can train them all before the notebooks
run and the notebooks only load.

- :func:`trained_configs` the configs of one notebook (deduplicated by :func:`scp.training.runs.run_name`, the most
  expensive first); :data:`PLANS` one planner per training notebook; :func:`training_cost` the estimate they are
  ordered by;
- :func:`chosen_variant` the variant notebook 13 picks on validation AUC, read from its trained variant models: its
  learning curve trains that variant only, which nobody knows before those models are trained: plan
  ``trained_configs(name, params, chosen=())``, train it, then ``chosen=chosen_variant(params, root)`` (with the
  full parameters 40 models, then 20 more; ``chosen=None``, every variant's curve, is 160).

The configs come from the functions the notebooks call (:func:`scp.experiments.reranking.per_dataset_config`,
:func:`scp.experiments.interaction.variant_configs` and :func:`~scp.experiments.interaction.curve_configs`,
:func:`scp.models.config.config_from_preset` as :func:`scp.experiments.embedder_ablation.train_with_embedder` calls
it); where a notebook builds a config in a code cell (01, 04, 07), the planner repeats that cell and names it.

Notebooks 00, 03, 05, 08 and 11 train nothing (03, 05 and 08 read the committed ``models/`` checkpoints, 04 and
06 read one each besides what they train): they have no planner and their plan is ``[]``.  Left out of the plans,
because ``train_or_load`` does not train them:

- notebook 06's TF-IDF model (``tfidf``): :func:`scp.experiments.embedder_ablation.train_with_embedder` fits the
  TF-IDF+SVD embedder on the training split and trains on its vectors itself (its run folder is
  ``run_name`` of ``config_from_preset(preset, embedder=tfidf_config_name(tfidf_dim), **overrides)``);
- notebook 06's hub embedders (:data:`HUB_EMBEDDERS`, and any sentence-transformers name holding "/"): offline they
  raise :class:`~scp.errors.ModelUnavailableError` and the notebook records them as not available; where the hub is
  reachable the notebook trains them itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scp.errors import InputError
from scp.experiments import interaction as ia
from scp.experiments.embedder_ablation import TFIDF
from scp.experiments.reranking import per_dataset_config
from scp.models.config import TrainConfig, config_from_preset
from scp.training.runs import run_name

__all__ = [
    "staged_configs",
    "stage_priority",
    "HUB_EMBEDDERS",
    "NO_TRAINING",
    "PLANS",
    "TRAIN_SPLITS",
    "chosen_variant",
    "trained_configs",
    "training_cost",
]

HUB_EMBEDDERS = ("bert-base",)
"""Embedders of :data:`scp.models.config.EMBEDDERS` that load from the Hugging Face hub (not shipped in a package)."""

TRAIN_SPLITS: dict[str, tuple[int, float]] = {
    "hotpotqa": (805, 41.6),
    "2wiki": (148, 32.5),
    "musique": (234, 71.0),
    "msmarco": (158, 8.2),
    "fever": (972, 10.6),
}
"""(training contexts, mean units per context) of each dataset's train split in the shared data samples
(``$SCP_DATA_DIR``); they only order a plan (:func:`training_cost`), a dataset not here counts as HotpotQA."""

PAPER = config_from_preset("paper")


def _param(params: Mapping[str, Any], key: str, notebook: str) -> Any:
    if key not in params:
        raise InputError(f"notebook {notebook}: the parameters lack {key!r} (pass the resolved parameters)")
    return params[key]


def _overrides(params: Mapping[str, Any], notebook: str, key: str = "train_overrides") -> dict:
    return dict(_param(params, key, notebook) or {})


def _per_dataset(datasets: Iterable[str], overrides: Mapping[str, Any]) -> list[TrainConfig]:
    """The configs :func:`scp.experiments.reranking.train_checkpoints` trains for ``("best", "pointwise")``."""
    return [per_dataset_config(p, d, **dict(overrides)) for d in datasets for p in ("best", "pointwise")]


def _plan_01(params: Mapping[str, Any]) -> list[TrainConfig]:
    name = "01_train_value_network"
    p = {k: _param(params, k, name) for k in ("dataset", "embedder", "query_mode", "preset", "n_permutations")}
    d = p["dataset"]
    common = dict(  # cell 4: None values keep the preset's
        embedder=p["embedder"],
        seed=_param(params, "seed", name),
        max_train_examples=_param(params, "max_train_examples", name),
        max_val_examples=_param(params, "max_val_examples", name),
    )
    section_1 = config_from_preset(  # cell 4
        p["preset"],
        datasets=(d,),
        val_dataset=d,
        query_mode=p["query_mode"],
        n_permutations=p["n_permutations"],
        epochs=_param(params, "epochs", name),
        **common,
    )
    recipes = [  # cell 9
        config_from_preset("paper", unit_repr="title", epochs=5, n_permutations=20, datasets=(d,), **common),
        config_from_preset("best", datasets=(d,), val_dataset=d, **common),
        config_from_preset("pointwise", datasets=(d,), val_dataset=d, **common),
    ]
    max_epochs = _param(params, "max_epochs", name)
    return [section_1] + [dataclasses.replace(c, epochs=min(c.epochs, max_epochs)) for c in recipes]


def _plan_train_checkpoints(name: str, *keys: str) -> Callable[[Mapping[str, Any]], list[TrainConfig]]:
    """Notebooks whose only training is ``train_checkpoints(params[key], ("best", "pointwise"), root,
    train_overrides)``, once per key (02 cell 6; 09 cells 4 and 20; 10 cell 6; 12 cell 4)."""

    def plan(params: Mapping[str, Any]) -> list[TrainConfig]:
        overrides = _overrides(params, name)
        return [c for key in keys for c in _per_dataset(_param(params, key, name), overrides)]

    plan.__doc__ = f"Notebook {name}: ``train_checkpoints`` over {', '.join(keys)}."
    return plan


def _plan_04(params: Mapping[str, Any]) -> list[TrainConfig]:
    name = "04_mc_budget_and_bounds"
    train_dataset = _param(params, "datasets", name)[0]
    # cell 6 (the second model, models/scp-<test>-best.safetensors, is committed, not trained)
    return [
        config_from_preset("best", datasets=(train_dataset,), val_dataset=train_dataset, **_overrides(params, name))
    ]


def _plan_06(params: Mapping[str, Any]) -> list[TrainConfig]:
    name = "06_embedder_ablation"
    preset, seed = _param(params, "preset", name), _param(params, "seed", name)
    overrides = {
        "seed": seed,
        **_overrides(params, name),
    }  # cell 6: train_with_embedder(..., seed=seed, **train_overrides)
    return [
        config_from_preset(preset, embedder=e, **overrides)  # as train_with_embedder builds it
        for e in _param(params, "embedders", name)
        if e != TFIDF and e not in HUB_EMBEDDERS and "/" not in e
    ]


def _plan_07(params: Mapping[str, Any]) -> list[TrainConfig]:
    name = "07_convex_deepsets"
    shrink = dict(
        max_train_examples=_param(params, "max_train_examples", name),
        max_val_examples=_param(params, "max_val_examples", name),
    )
    recipes = {  # cell 4
        "DeepSets": lambda d, s: config_from_preset("best", datasets=(d,), val_dataset=d, seed=s, **shrink),
        "ConvexDeepSets": lambda d, s: config_from_preset(
            "best", model="convex", skip=False, datasets=(d,), val_dataset=d, seed=s, **shrink
        ),
    }
    max_epochs = _param(params, "max_epochs", name)
    return [
        dataclasses.replace(make(d, s), epochs=min(make(d, s).epochs, max_epochs))
        for d in _param(params, "datasets", name)
        for make in recipes.values()
        for s in _param(params, "train_seeds", name)
    ]


def _variants_13(params: Mapping[str, Any]) -> list[str]:
    variants = _param(params, "variants", "13_interaction_aware")
    return list(ia.VARIANTS) if variants is None else list(variants)  # cell 4


def _plan_13(params: Mapping[str, Any], chosen: str | Sequence[str] | None = None) -> list[TrainConfig]:
    name = "13_interaction_aware"
    variants, seeds, overrides = _variants_13(params), _param(params, "seeds", name), _overrides(params, name)
    configs = [c for v in variants for s in seeds for c in ia.variant_configs(v, s, **overrides)]  # cell 4
    curve_seeds, sizes = _param(params, "curve_seeds", name), _param(params, "curve_sizes", name)
    curve_variants = variants if chosen is None else [chosen] if isinstance(chosen, str) else list(chosen)
    curve_models = []  # cell 20: (config, seeds, mixed seeds) of each curve, for each variant it may choose
    for v in curve_variants:
        set_cfg, control_cfg = ia.variant_configs(v, **overrides)
        curve_models += [(c, curve_seeds["set"], curve_seeds["mixed"]) for c in (set_cfg, control_cfg)]
    paper_cfg = ia.config_from_preset("paper", **{**_param(params, "paper_overrides", name), **overrides})
    curve_models.append((paper_cfg, curve_seeds["paper"], []))
    for config, curve_seed_list, mixed in curve_models:  # as interaction.curve_rows
        for seed in curve_seed_list:
            configs += ia.curve_configs(dataclasses.replace(config, seed=seed), sizes, seed in mixed).values()
    return configs


PLANS: dict[str, Callable[[Mapping[str, Any]], list[TrainConfig]]] = {
    "01_train_value_network": _plan_01,
    "02_reranking_auc": _plan_train_checkpoints("02_reranking_auc", "datasets"),
    "04_mc_budget_and_bounds": _plan_04,
    "06_embedder_ablation": _plan_06,
    "07_convex_deepsets": _plan_07,
    "09_compression_and_transfer": _plan_train_checkpoints(
        "09_compression_and_transfer", "train_datasets", "per_query_datasets"
    ),
    "10_downstream_qa": _plan_train_checkpoints("10_downstream_qa", "datasets"),
    "12_entropic_context_shaping": _plan_train_checkpoints("12_entropic_context_shaping", "datasets"),
    "13_interaction_aware": _plan_13,
}
"""Notebook name → its planner (the resolved parameters → the configs, in the notebook's order, not deduplicated)."""
NO_TRAINING = (
    "00_cooperative_games_tutorial",
    "03_niah",
    "05_shapley_vs_loo",
    "08_landscape_of_context",
    "11_maxshapley",
    "14_attribution_against_contextcite",
)
"""The notebooks that train nothing."""


def training_cost(config: TrainConfig) -> float:
    """A rough cost of training ``config``: units seen (training contexts × units per context, from
    :data:`TRAIN_SPLITS`, capped by ``max_train_examples``) × epochs × hidden width."""
    sizes = [TRAIN_SPLITS.get(d, TRAIN_SPLITS["hotpotqa"]) for d in config.datasets]
    n = sum(s[0] for s in sizes)
    units = sum(s[0] * s[1] for s in sizes) / n
    if config.max_train_examples is not None:
        n = min(n, config.max_train_examples)
    return float(n * units * config.epochs * config.hidden)


def stage_priority(config: TrainConfig) -> tuple[bool, float]:
    """The training stage's order, smallest first: the paper's 3.03M networks, then by :func:`training_cost`,
    most expensive first (so that the longest trainings never start last on a worker)."""
    return (not _is_paper(config), -training_cost(config))


def _is_paper(config: TrainConfig) -> bool:
    """The paper's 3.03M network: the architecture of preset "paper" (whatever else the notebook changed)."""
    return all(getattr(config, k) == getattr(PAPER, k) for k in ("model", "hidden", "latent"))


def trained_configs(
    name: str, params: Mapping[str, Any], *, chosen: str | Sequence[str] | None = None
) -> list[TrainConfig]:
    """Every config notebook ``name`` passes to :func:`scp.training.runs.train_or_load` with ``params``.

    Args:
        name: the notebook's file stem (``"02_reranking_auc"``).
        params: its resolved parameters (``scp.suite.sources.resolve_params(name, smoke)``: the YAML values over
            the parameters cell's defaults).
        chosen: notebook 13 only: the variant(s) whose learning curve to plan.  The notebook picks the variant of
            best mean validation AUC once its variant models are trained (:func:`chosen_variant`); ``None`` plans
            the curves of every variant it may pick (a superset: the notebook then surely only loads), ``()``
            none (the variant models and the paper network's curve only).

    Returns:
        The configs, one per :func:`~scp.training.runs.run_name`: the paper's 3.03M network first, then by
        :func:`training_cost`, most expensive first (ties by run name); ``[]`` for a notebook that trains nothing.

    Raises:
        InputError: an unknown notebook, a parameter the planner needs missing from ``params``, ``chosen`` for
            another notebook than 13, or a bad setting (as the notebook's own call would raise it).
    """
    if name not in PLANS and name not in NO_TRAINING:
        raise InputError(f"unknown notebook {name!r}; the notebooks are {', '.join(sorted([*PLANS, *NO_TRAINING]))}")
    if chosen is not None and name != "13_interaction_aware":
        raise InputError(f"chosen applies to 13_interaction_aware only, not to {name}")
    if name in NO_TRAINING:
        return []
    configs = _plan_13(params, chosen) if name == "13_interaction_aware" else PLANS[name](params)
    unique: dict[str, TrainConfig] = {}
    for c in configs:
        unique.setdefault(run_name(c), c)
    order = sorted(unique, key=lambda run: (*stage_priority(unique[run]), run))
    return [unique[run] for run in order]


def chosen_variant(params: Mapping[str, Any], root: str | Path) -> str | None:
    """The variant notebook 13 chooses with ``params`` (cell 12: the best mean validation AUC of its set models
    over ``seeds``, the first on a tie), read from the trained variant models under ``root``; ``None`` while one
    of them is not trained there."""
    from scp.models.factory import read_checkpoint

    variants, seeds = _variants_13(params), _param(params, "seeds", "13_interaction_aware")
    overrides = _overrides(params, "13_interaction_aware")
    val = {}
    for v in variants:
        paths = [Path(root) / run_name(ia.variant_configs(v, s, **overrides)[0]) / "best.safetensors" for s in seeds]
        if not all(p.is_file() for p in paths):
            return None
        val[v] = [read_checkpoint(p, ("val_metrics",))["val_metrics"]["auc"] for p in paths]
    return max(variants, key=lambda v: np.mean(val[v]))


def staged_configs(name: str, params: Mapping[str, Any], models_root: str | Path) -> list[TrainConfig]:
    """What the runner's training stage trains for ``name`` now, given the runs under ``models_root``: everything
    :func:`trained_configs` plans, and for notebook 13 the learning curve of the variant :func:`chosen_variant`
    picks once its variant models are there (none before: the stage plans again after each pass)."""
    if name != "13_interaction_aware":
        return trained_configs(name, params)
    chosen = chosen_variant(params, models_root)
    return trained_configs(name, params, chosen=() if chosen is None else chosen)
