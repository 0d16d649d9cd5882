"""Does the set structure earn its keep?  Set models against their matched pointwise controls, over seeds.

A variant is a set model v(S) (Deep Sets or context-conditioned, :mod:`scp.models.context_net`) and its matched
control: the same units, per-unit inputs and encoder, the same pairwise margin loss, but one score per unit and
no game.  Set-level supervision (:mod:`scp.data.coalition_targets`) is what only the set model can receive.
- :data:`VARIANTS` the grid; :func:`variant_configs` its two :class:`~scp.models.config.TrainConfig` per seed;
- :func:`example_records` per test example: pairwise AUC, recall at keep 0.5, and on a redundancy-augmented
  copy of the example (:func:`scp.data.synthetic.inject_redundancy`) the share of distinct supporting facts kept at
  keep 0.3 / 0.5 — by top-K score, and for set models also by greedy marginal value (:mod:`scp.core.greedy`);
- :func:`variant_rows` means over seeds with bootstrap CIs, and set − control paired differences on the
  per-example means over seeds (the CI resamples examples, keeping the pairing);
- :func:`table19_ranks` the paper's Table 19 case scored by exact Shapley, Monte Carlo and LOO;
- :func:`curve_configs` / :func:`curve_rows` the learning curve (the first n training contexts, all, all five
  datasets mixed), :func:`draw_learning_curve` its figure; :func:`transfer_row` a HotpotQA-trained pair scored
  on another dataset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from scp.core.enumeration import exact, leave_one_out
from scp.core.greedy import greedy_select
from scp.core.metrics import aggregate, paired_difference, pairwise_auc, recall_at_keep
from scp.core.monte_carlo import monte_carlo
from scp.core.selection import select
from scp.data.coalition_targets import coverage, fact_ids
from scp.data.features import STRUCTURAL, contexts_from_examples
from scp.data.synthetic import inject_redundancy
from scp.errors import InputError
from scp.models.config import POINTWISE, TrainConfig, config_from_preset
from scp.models.game import ValueNetGame
from scp.models.scoring import score_contexts

__all__ = [
    "ALL_DATASETS",
    "CONTEXT_FEATURES",
    "GAMES",
    "GAME_WEIGHT",
    "KEEP_RATIOS",
    "VARIANTS",
    "curve_configs",
    "curve_rows",
    "draw_learning_curve",
    "example_records",
    "redundant_split",
    "table19_ranks",
    "train_variants",
    "transfer_row",
    "variant_configs",
    "variant_rows",
]

CONTEXT_FEATURES = ("cos", "bm25z", *STRUCTURAL)
"""The shipped per-unit scalars plus every structural feature of :mod:`scp.data.features`."""
GAMES = ("coverage", "complement")
GAME_WEIGHT = 0.05
"""λ of the coalition loss in the "games" variants: the largest of 0.05 / 0.2 / 1 that left the validation AUC of
Deep Sets + structure within 0.005 of λ = 0 in a one-seed pre-study (0.2 cost 0.012, 1 cost 0.035); the "λ1"
variant keeps the strong setting in the table."""
ALL_DATASETS = ("hotpotqa", "2wiki", "musique", "msmarco", "fever")
KEEP_RATIOS = (0.1, 0.3, 0.5)
"""Keep ratios at which distinct supporting facts are counted on the redundancy-augmented split."""

VARIANTS: dict[str, tuple[dict, dict]] = {
    # name: (set model overrides of preset "best", control overrides of preset "pointwise")
    "deepsets": ({}, {}),
    "deepsets+structure": (dict(features=CONTEXT_FEATURES), dict(features=CONTEXT_FEATURES)),
    "deepsets+structure+games": (
        dict(features=CONTEXT_FEATURES, set_targets=GAMES, set_weight=GAME_WEIGHT),
        dict(features=CONTEXT_FEATURES),
    ),
    "deepsets+structure+games λ1": (
        dict(features=CONTEXT_FEATURES, set_targets=GAMES),
        dict(features=CONTEXT_FEATURES),
    ),
    "context": (dict(model="context"), dict(model="context-pointwise")),
    "context+structure": (
        dict(model="context", features=CONTEXT_FEATURES),
        dict(model="context-pointwise", features=CONTEXT_FEATURES),
    ),
    "context+structure+games": (
        dict(model="context", features=CONTEXT_FEATURES, set_targets=GAMES, set_weight=GAME_WEIGHT),
        dict(model="context-pointwise", features=CONTEXT_FEATURES),
    ),
    "context+structure+games, no Shapley loss": (
        dict(model="context", features=CONTEXT_FEATURES, set_targets=GAMES, shapley_weight=0.0),
        dict(model="context-pointwise", features=CONTEXT_FEATURES),
    ),
}
"""Each set model with its matched pointwise control (same inputs, encoder and margin loss)."""


def variant_configs(name: str, seed: int = 0, **overrides) -> tuple[TrainConfig, TrainConfig]:
    """(set model, matched control) configs of variant ``name`` for ``seed`` (``overrides`` go to both)."""
    if name not in VARIANTS:
        raise InputError(f"unknown variant {name!r}; choose one of {list(VARIANTS)}")
    set_over, control_over = VARIANTS[name]
    common = {"datasets": ("hotpotqa",), "val_dataset": "hotpotqa", "seed": seed}  # as notebook 02's models
    return (
        config_from_preset("best", **{**set_over, **common, **overrides}),
        config_from_preset("pointwise", **{**control_over, **common, **overrides}),
    )


def curve_configs(config: TrainConfig, sizes: Sequence[int], mixed: bool = True) -> dict[str, TrainConfig]:
    """``config`` trained on the first n HotpotQA training contexts for each n, on all of them ("all": ``config``
    itself), and on all five datasets mixed (validated on HotpotQA), keyed "n" / "all" / "mixed"."""
    out = {str(n): replace(config, max_train_examples=int(n)) for n in sizes} | {"all": config}
    if mixed:
        out["mixed"] = replace(config, datasets=ALL_DATASETS, val_dataset="hotpotqa")
    return out


def redundant_split(examples, n_copies: int = 1, n_stale: int = 1, seed: int = 0) -> list:
    """Redundancy-augmented copies (:func:`scp.data.synthetic.inject_redundancy`) of the examples with support."""
    return [inject_redundancy(ex, n_copies, n_stale, seed) for ex in examples if ex.n_positive]


def example_records(
    model,
    config: TrainConfig,
    examples,
    redundant,
    embedder,
    n_permutations: int = 50,
    keep_ratios: Sequence[float] = KEEP_RATIOS,
) -> list[dict]:
    """Per example: ``auc``, ``recall@0.5``, and on its redundancy-augmented copy ``red_auc`` and
    ``cover@r`` (distinct facts kept by top-K) / ``greedy_cover@r`` (set models: greedy marginal value), , and
    ``stale_above_evidence`` the share of supporting units the stale distractor outranks (when one was made)."""
    model.eval()
    by_source = {ex.meta["source_id"]: ex for ex in redundant}
    plain = contexts_from_examples(examples, embedder, config.features, config.with_title)
    extra_ex = [by_source[ex.id] for ex in examples if ex.id in by_source]
    augmented = dict(
        zip(
            [ex.meta["source_id"] for ex in extra_ex],
            zip(extra_ex, contexts_from_examples(extra_ex, embedder, config.features, config.with_title)),
        )
    )
    plain_scores = [r.values for r in score_contexts(model, plain, n_permutations=n_permutations)]
    aug_ids = list(augmented)
    aug_scores = dict(
        zip(
            aug_ids,
            [
                r.values
                for r in score_contexts(model, [augmented[i][1] for i in aug_ids], n_permutations=n_permutations)
            ],
        )
    )
    records = []
    for ex, scores in zip(examples, plain_scores):
        row = {
            "id": ex.id,
            "type": ex.meta.get("type"),
            "auc": pairwise_auc(scores, ex.labels),
            "recall@0.5": recall_at_keep(scores, ex.labels, 0.5) if ex.n_positive else float("nan"),
        }
        if ex.id in augmented:
            aug, ctx = augmented[ex.id]
            s = aug_scores[ex.id]
            facts = fact_ids(np.asarray(aug.labels), aug.meta)
            row["red_auc"] = pairwise_auc(s, aug.labels)
            stale = [i for i, j in enumerate(aug.meta["stale_of"]) if j >= 0]
            if stale:
                row["stale_above_evidence"] = float(
                    np.mean([s[stale[0]] > s[i] for i in range(aug.n_units) if aug.labels[i]])
                )
            for r in keep_ratios:
                kept = select(s, keep_ratio=r)[0]
                row[f"cover@{r}"] = float(coverage(_mask(kept, aug.n_units), facts)[0])
                if config.model not in POINTWISE:
                    chosen = greedy_select(model, ctx.units, ctx.query, ctx.extra, k=len(kept))
                    row[f"greedy_cover@{r}"] = float(coverage(_mask(chosen, aug.n_units), facts)[0])
        records.append(row)
    return records


def _mask(indices, n: int) -> np.ndarray:
    m = np.zeros((1, n), dtype=bool)
    m[0, list(indices)] = True
    return m


def _mean_over_seeds(runs: Sequence[Sequence[Mapping]], key: str) -> np.ndarray:
    """(examples,) mean over seeds of ``key`` (records of every seed are in the same example order)."""
    return np.nanmean(np.array([[r.get(key, np.nan) for r in records] for records in runs], dtype=float), 0)


def _summary(runs: Sequence[Sequence[Mapping]], key: str, subset: np.ndarray | None = None, n_boot: int = 1000) -> dict:
    values = _mean_over_seeds(runs, key)
    if subset is not None:
        values = values[subset]
    agg = aggregate(values, n_boot=n_boot, seed=0)
    per_seed = [
        float(np.nanmean([r.get(key, np.nan) for k, r in enumerate(records) if subset is None or subset[k]]))
        for records in runs
    ]
    return {"mean": agg.mean, "ci": [agg.ci_low, agg.ci_high], "per_seed": per_seed}


def _paired(
    a: Sequence[Sequence[Mapping]], b: Sequence[Sequence[Mapping]], key: str, subset: np.ndarray | None = None
) -> dict:
    x, y = _mean_over_seeds(a, key), _mean_over_seeds(b, key)
    if subset is not None:
        x, y = x[subset], y[subset]
    agg = paired_difference(x, y, n_boot=2000, seed=0)
    return {"mean": agg.mean, "ci": [agg.ci_low, agg.ci_high]}


def variant_rows(
    name: str,
    set_runs: Sequence[Sequence[Mapping]],
    control_runs: Sequence[Sequence[Mapping]],
    val_auc: Mapping[str, Sequence[float]],
) -> list[dict]:
    """Two table rows (set model, control) of one variant: test metrics as means over seeds with 95% CIs over
    examples, and the set − control paired differences on all / bridge questions and on coverage."""
    types = np.array([r["type"] for r in set_runs[0]])
    bridge, comparison = types == "bridge", types == "comparison"
    rows = []
    for kind, runs in (("set", set_runs), ("control", control_runs)):
        row = {
            "variant": name,
            "model": kind,
            "seeds": len(runs),
            "val_auc": float(np.mean(val_auc[kind])),
            "auc": _summary(runs, "auc"),
            "bridge_auc": _summary(runs, "auc", bridge),
            "comparison_auc": _summary(runs, "auc", comparison),
            "recall@0.5": _summary(runs, "recall@0.5"),
            "red_auc": _summary(runs, "red_auc"),
            "stale_above_evidence": _summary(runs, "stale_above_evidence"),
            **{f"cover@{r}": _summary(runs, f"cover@{r}") for r in KEEP_RATIOS},
        }
        if kind == "set":
            row.update({f"greedy_cover@{r}": _summary(runs, f"greedy_cover@{r}") for r in KEEP_RATIOS})
            row["diff_auc"] = _paired(set_runs, control_runs, "auc")
            row["diff_bridge_auc"] = _paired(set_runs, control_runs, "auc", bridge)
            row["diff_cover@0.5"] = _paired(set_runs, control_runs, "cover@0.5")
            row["diff_greedy_cover@0.5"] = {"mean": np.nan, "ci": [np.nan, np.nan]}
            if all("greedy_cover@0.5" in r for r in set_runs[0]):
                x, y = _mean_over_seeds(set_runs, "greedy_cover@0.5"), _mean_over_seeds(control_runs, "cover@0.5")
                agg = paired_difference(x, y, n_boot=2000, seed=0)
                row["diff_greedy_cover@0.5"] = {"mean": agg.mean, "ci": [agg.ci_low, agg.ci_high]}
        rows.append(row)
    return rows


def table19_ranks(model, config: TrainConfig, case, embedder, n_permutations: int = 1000, seed: int = 0) -> dict:
    """Scores of the Table 19 case by exact Shapley, Monte Carlo (M = ``n_permutations``) and LOO on ``model``
    (a set model), and whether every evidence sentence outranks the stale distractor and the noise."""
    ctx = contexts_from_examples([case], embedder, config.features, config.with_title)[0]
    game = ValueNetGame(model.eval(), ctx.units, ctx.query, ctx.extra, cache_psi=True)
    roles = case.meta["roles"]
    evidence = [i for i, r in enumerate(roles) if case.labels[i]]
    others = [i for i in range(case.n_units) if not case.labels[i]]
    out = {"ids": case.meta["ids"], "roles": roles}
    for method, result in (
        ("exact", exact(game)),
        ("monte_carlo", monte_carlo(game, n_permutations, seed=seed)),
        ("loo", leave_one_out(game)),
    ):
        v = np.asarray(result.values, dtype=float)
        out[method] = v.tolist()
        out[f"{method}_evidence_first"] = bool(v[evidence].min() > v[others].max())
    return out


def train_variants(variants: Sequence[str], seeds: Sequence[int], root, **overrides) -> dict:
    """{(variant, seed): ((set model, config, checkpoint), (control, config, checkpoint))}, each trained or
    reused through :func:`scp.training.runs.train_or_load` under ``root``."""
    from scp.models.factory import load_checkpoint
    from scp.training.runs import train_or_load

    return {
        (v, s): tuple(load_checkpoint(train_or_load(c, root)) for c in variant_configs(v, s, **overrides))
        for v in variants
        for s in seeds
    }


def curve_rows(
    models: Mapping[str, tuple[TrainConfig, Sequence[int], Sequence[int]]],
    sizes: Sequence[int],
    root,
    tests,
    embedder,
    n_permutations: int = 50,
) -> list[dict]:
    """One row per (model label, seed, training size): the test AUC of ``config`` trained on that many contexts
    (:func:`curve_configs`; ``models`` maps a label to (config, seeds, the seeds also trained on the five datasets
    mixed)), with the number of training contexts it saw."""
    from scp.models.factory import load_checkpoint
    from scp.training.runs import train_or_load

    rows = []
    for label, (config, seeds, mixed_seeds) in models.items():
        for seed in seeds:
            for size, c in curve_configs(replace(config, seed=seed), sizes, seed in mixed_seeds).items():
                model, c2, ckpt = load_checkpoint(train_or_load(c, root))
                records = example_records(model, c2, tests, [], embedder, n_permutations)
                rows.append(
                    {
                        "model": label,
                        "seed": seed,
                        "size": size,
                        "n_train": ckpt["n_train"],
                        "auc": float(np.nanmean([r["auc"] for r in records])),
                    }
                )
    return rows


def transfer_row(pairs: Sequence[tuple], examples, embedder, n_permutations: int = 50, n_boot: int = 1000) -> dict:
    """Set model against control on another dataset's examples: mean AUC of each (per-example mean over the
    seeds' ``(set, control)`` model pairs) and the paired difference with a bootstrap CI over examples."""
    runs = {
        k: [example_records(p[k][0], p[k][1], examples, [], embedder, n_permutations) for p in pairs] for k in (0, 1)
    }
    a, b = _mean_over_seeds(runs[0], "auc"), _mean_over_seeds(runs[1], "auc")
    diff = paired_difference(a, b, n_boot=n_boot, seed=0)
    return {
        "examples": len(examples),
        "set AUC": float(np.nanmean(a)),
        "control AUC": float(np.nanmean(b)),
        "diff": diff.mean,
        "diff ci": [diff.ci_low, diff.ci_high],
    }


def _seeds_text(n: int) -> str:
    return "one seed" if n == 1 else f"mean ± sd over {n} seeds"


def draw_learning_curve(ax, rows: Sequence[Mapping], styles: Mapping[str, tuple[str, str, str]]) -> None:
    """The learning-curve figure from :func:`curve_rows`'s rows: test AUC against training contexts (log x).

    For each model label of ``styles`` (label → (colour, line style, marker), as :func:`scp.suite.plot.style_of`
    gives them), the mean AUC over seeds at each HotpotQA
    training size, joined in order of the number of training contexts.  A size with several seeds gets ±1 sd
    error bars over them; a size with one seed is a point without error bars (an sd of one value is no spread),
    and the legend entry says "one seed".  The "mixed" size (all five datasets) is no point of that line: it is
    drawn apart, an open marker of the same colour at its number of training contexts, with its own legend entry;
    where several labels have one, their markers are dodged sideways by factors 10^(±0.025 j) (about ±6 % on the
    log axis) so that none hides another.  Labels without rows are skipped.  The x axis is logarithmic, with
    plain numbers as tick labels.
    """
    import pandas as pd
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    df = pd.DataFrame(list(rows))
    with_mixed = [label for label in styles if len(df) and ((df["model"] == label) & (df["size"] == "mixed")).any()]
    dodge = {label: 10 ** (0.025 * (2 * j - len(with_mixed) + 1)) for j, label in enumerate(with_mixed)}
    for label, (colour, ls, marker) in styles.items():
        sub = df[df["model"] == label] if len(df) else df
        if sub.empty:
            continue
        line = sub[sub["size"] != "mixed"].groupby("size", sort=False)
        stats = pd.DataFrame(
            {"x": line.n_train.mean(), "y": line.auc.mean(), "sd": line.auc.std(), "n": line.auc.size()}
        ).sort_values("x")
        if len(stats):
            many = stats.n > 1
            text = _seeds_text(int(stats.n.max())) if stats.n.nunique() == 1 else "± sd where several seeds"
            ax.plot(stats.x, stats.y, ls=ls, marker=marker, color=colour, label=f"{label}, {text}")
            if many.any():
                ax.errorbar(stats.x[many], stats.y[many], yerr=stats.sd[many], fmt="none", ecolor=colour, capsize=2)
        mixed = sub[sub["size"] == "mixed"]
        if len(mixed):
            ax.errorbar(
                mixed.n_train.mean() * dodge[label],
                mixed.auc.mean(),
                yerr=mixed.auc.std() if len(mixed) > 1 else None,
                fmt=marker,
                mfc="white",
                mec=colour,
                ecolor=colour,
                capsize=2,
                ls="none",
                label=f"{label}, five datasets mixed ({_seeds_text(len(mixed))})",
            )
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
