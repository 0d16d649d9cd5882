"""A keep count chosen per query, against fixed keep ratios (for notebook 09, whose per-query sections join it with the
suite's next full regeneration, as every committed result comes from one run).

A fixed keep ratio r keeps ⌈r·n⌉ units of every context, however many its question needs.  Two criteria let each
query choose (:func:`scp.core.selection.select`):

- **threshold**: keep the units whose score is ≥ τ (at least the best one), τ the largest threshold whose mean
  recall of gold units on the validation split reaches a target R (:func:`scp.core.selection.calibrate_threshold`);
  any ranker can be calibrated so;
- **value fraction**: keep the shortest prefix S_k of the ranking whose network value reaches
  v(∅) + α·(v* − v(∅)), v* = max_k v(S_k) (:func:`scp.core.selection.value_prefix_count`); only a set value
  network plays such a game, so only ``scp`` and ``scp-loo`` have it.

:func:`evaluate_per_query_method` evaluates one method on the test split at the fixed ratios and at these criteria,
:func:`evaluate_datasets` every method on every dataset; :func:`per_query_rows` turns a record into one table row
per (mode, setting) with recall, token compression, keep rate and units kept per query, each with its 95% bootstrap
CI, and the spread of the kept counts; :func:`table_rows` adds, to each row, the recall its method's fixed ratios
reach at the same mean compression (linear interpolation along the sweep); :func:`recorded` gives the numbers a
notebook records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from scp.errors import InputError, ModelUnavailableError
from scp.pruning.evaluation import evaluate_per_query, make_ranker, unavailable

__all__ = [
    "MODES",
    "evaluate_datasets",
    "evaluate_per_query_method",
    "game_shape",
    "kept_counts",
    "kept_for",
    "per_query_rows",
    "recorded",
    "table_rows",
]

MODES = ("keep ratio", "threshold", "value fraction")
"""How a row of :func:`per_query_rows` chose its keep count: fixed ratio, calibrated threshold, value fraction."""


def evaluate_per_query_method(
    test: Sequence,
    validation: Sequence,
    method: str,
    checkpoints: Mapping | None = None,
    *,
    with_title: bool = True,
    keep_ratios: Sequence[float] = (0.5,),
    target_recalls: Sequence[float] = (),
    value_fractions: Sequence[float] = (),
    n_permutations: int = 50,
    seed: int = 0,
    n_boot: int = 1000,
    cache_dir=None,
) -> dict:
    """:func:`scp.pruning.evaluation.evaluate_per_query` of one registered method (``method`` set in the record),
    its thresholds calibrated on ``validation``; ``value_fractions`` apply to a set model only (pass ``()`` for
    the others).  A model that cannot be loaded here gives its ``n/a`` record."""

    def make():
        return make_ranker(method, checkpoints, cache_dir=cache_dir, n_permutations=n_permutations, seed=seed)

    try:
        result = evaluate_per_query(
            test,
            validation,
            make,
            with_title,
            keep_ratios,
            target_recalls=target_recalls,
            value_fractions=value_fractions,
            n_boot=n_boot,
            seed=seed,
        )
    except ModelUnavailableError as error:
        result = unavailable(method, error, with_title, test[0].dataset)
    result["method"] = method
    return result


def evaluate_datasets(
    datasets: Sequence[str],
    methods: Sequence[str],
    checkpoints: Mapping,
    *,
    keep_ratios: Sequence[float],
    target_recalls: Sequence[float],
    value_fractions: Sequence[float],
    max_test_examples: int | None = None,
    max_validation_examples: int | None = None,
    **options,
) -> tuple[dict[tuple[str, str], dict], dict[str, dict]]:
    """:func:`evaluate_per_query_method` of every method on every dataset's test split, thresholds calibrated on
    its validation split, value fractions for ``scp`` only; ``checkpoints`` is ``{(preset, dataset): path}``
    (:func:`scp.experiments.reranking.train_checkpoints`).  Returns ({(dataset, method): record}, {dataset:
    {"test": n, "validation": n}})."""
    from scp.data.datasets import load_dataset

    records, splits = {}, {}
    for d in datasets:
        test = load_dataset(d, split="test", limit=max_test_examples)
        validation = load_dataset(d, split="validation", limit=max_validation_examples)
        splits[d] = {"test": len(test), "validation": len(validation)}
        own = {p: path for (p, dataset), path in checkpoints.items() if dataset == d}
        for m in methods:
            fractions = value_fractions if m == "scp" else ()
            records[(d, m)] = evaluate_per_query_method(
                test,
                validation,
                m,
                own,
                keep_ratios=keep_ratios,
                target_recalls=target_recalls,
                value_fractions=fractions,
                **options,
            )
    return records, splits


def table_rows(
    records: Mapping[tuple[str, str], Mapping], keep_ratios: Sequence[float], value_fractions: Sequence[float]
) -> list[dict]:
    """:func:`per_query_rows` of every ``ok`` record of :func:`evaluate_datasets`, with ``dataset`` first and
    ``recall_fixed_same_compression``: the recall the method's own fixed ratios reach at the row's mean token
    compression, interpolated linearly along its sweep (``nan`` outside the compressions the sweep spans: no
    fixed ratio of the sweep removes that much, or that little)."""
    out = []
    for (d, m), result in records.items():
        if result["status"] != "ok":
            continue
        rows = per_query_rows(result, keep_ratios, value_fractions if m == "scp" else ())
        fixed = sorted((r["compression"], r["recall"]) for r in rows if r["mode"] == "keep ratio")
        xs, ys = np.array(fixed).T
        for row in rows:
            out.append(
                {
                    "dataset": d,
                    **row,
                    "recall_fixed_same_compression": float(
                        np.interp(row["compression"], xs, ys, left=np.nan, right=np.nan)
                    ),
                }
            )
    return out


def recorded(rows: Sequence[Mapping], records: Mapping[tuple[str, str], Mapping]) -> dict:
    """The numbers a notebook records: per (dataset, method, per-query mode) the settings and, per setting, recall
    with its CI, compression, mean and median units kept, the threshold, and the fixed-ratio recall at the same
    compression; per dataset, SCP's :func:`game_shape`."""
    out: dict = {}
    for row in rows:
        if row["mode"] == "keep ratio":
            continue
        entry = out.setdefault(f"per_query_{row['dataset']}_{row['method']}_{row['mode'].replace(' ', '_')}", {})
        for key in ("setting", "recall", "compression", "kept", "kept_median", "threshold"):
            entry.setdefault(key, []).append(row[key])
        entry.setdefault("recall_ci", []).append([row["recall_ci_low"], row["recall_ci_high"]])
        entry.setdefault("recall_fixed_same_compression", []).append(row["recall_fixed_same_compression"])
    for (d, m), result in records.items():
        if m == "scp" and result["status"] == "ok":
            out[f"game_shape_{d}"] = game_shape(result)
    return out


def kept_counts(result: Mapping, key: str) -> np.ndarray:
    """Units kept per test context under criterion ``key`` of a record: a keep ratio (``0.5``: ⌈r·n⌉) or a
    per-query criterion's name (``"threshold=0.01"``, ``"value_fraction=0.9"``)."""
    rows = result["per_example"]
    if f"kept@{key}" in rows[0]:
        return np.array([row[f"kept@{key}"] for row in rows], dtype=np.int64)
    return np.array([round(row[f"keep_rate@{key}"] * row["n_units"]) for row in rows], dtype=np.int64)


def kept_for(result: Mapping, mode: str, setting: float) -> np.ndarray:
    """:func:`kept_counts` of one row of :func:`per_query_rows`: a ``mode`` of :data:`MODES` and its ``setting``
    (r, the target recall R, or α)."""
    if mode == "keep ratio":
        return kept_counts(result, setting)
    if mode == "threshold":
        (c,) = [c for c in result["calibration"] if c["target_recall"] == setting]
        return kept_counts(result, c["criterion"])
    if mode == "value fraction":
        return kept_counts(result, f"value_fraction={setting}")
    raise InputError(f"mode must be one of {MODES}; got {mode!r}")


def game_shape(result: Mapping) -> dict:
    """How the network's game runs along the ranking, over the test contexts of a record made with a value
    fraction: the share whose v(N) is below v(∅) (the whole context worth less than none), the share whose best
    prefix beats v(N) by more than 0.01, and the median size k* of the best prefix and of the context."""
    rows = result["per_example"]
    if "v_peak" not in rows[0]:
        raise InputError("the record holds no game values: evaluate it with a value fraction")
    empty, peak, grand = (np.array([r[k] for r in rows]) for k in ("v_empty", "v_peak", "v_grand"))
    return {
        "share_grand_below_empty": float(np.mean(grand < empty)),
        "share_peak_above_grand": float(np.mean(peak > grand + 0.01)),
        "median_peak_at": float(np.median([r["peak_at"] for r in rows])),
        "median_units": float(np.median([r["n_units"] for r in rows])),
        "mean_v_empty": float(empty.mean()),
        "mean_v_peak": float(peak.mean()),
        "mean_v_grand": float(grand.mean()),
    }


def _summary(result: Mapping, key: str) -> dict:
    row = {}
    for metric in ("recall", "compression", "keep_rate"):
        m = result[f"{metric}@{key}"]
        row.update({metric: m["mean"], f"{metric}_ci_low": m["ci"][0], f"{metric}_ci_high": m["ci"][1]})
    kept = kept_counts(result, key)
    if f"kept@{key}" in result:
        m = result[f"kept@{key}"]
        row.update(kept=m["mean"], kept_ci_low=m["ci"][0], kept_ci_high=m["ci"][1])
    else:  # a fixed ratio: the count follows n, no CI of its own is recorded
        row.update(kept=float(kept.mean()), kept_ci_low=float("nan"), kept_ci_high=float("nan"))
    q10, q50, q90 = np.quantile(kept, [0.1, 0.5, 0.9])
    row.update(kept_p10=float(q10), kept_median=float(q50), kept_p90=float(q90), kept_min=int(kept.min()))
    row.update(kept_max=int(kept.max()), n_test=len(kept))
    return row


def per_query_rows(result: Mapping, keep_ratios: Sequence[float], value_fractions: Sequence[float] = ()) -> list[dict]:
    """One row per fixed keep ratio, calibrated threshold and value fraction of an ``ok`` record of
    :func:`evaluate_per_query_method`: ``{"method", "mode", "setting", "criterion", "threshold", "recall", …,
    "compression", …, "keep_rate", …, "kept", …, "kept_p10", "kept_median", "kept_p90", "kept_min", "kept_max",
    "n_test"}``; ``setting`` is r, the target recall R, or α."""
    rows = []
    for r in keep_ratios:
        rows.append(
            dict(method=result["method"], mode="keep ratio", setting=r, criterion=f"keep_ratio={r}", threshold=None)
            | _summary(result, r)
        )
    for c in result.get("calibration", []):
        rows.append(
            dict(
                method=result["method"],
                mode="threshold",
                setting=c["target_recall"],
                criterion=c["criterion"],
                threshold=c["threshold"],
            )
            | _summary(result, c["criterion"])
        )
    for a in value_fractions:
        name = f"value_fraction={a}"
        rows.append(
            dict(method=result["method"], mode="value fraction", setting=a, criterion=name, threshold=None)
            | _summary(result, name)
        )
    return rows
