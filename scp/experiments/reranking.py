"""Comparing rankers on the test split of a dataset, the way the paper's Table 3 does (notebooks 02 and 09).

- :func:`load_test_split` loads every test example of a dataset (MuSiQue at either granularity).
- :func:`per_dataset_config` is the suite's per-dataset model: ``config_from_preset(preset, datasets=(d,),
  val_dataset=d)``; :func:`train_checkpoints` trains (or reuses, through :func:`scp.training.runs.train_or_load`) one
  per
  dataset and preset, so notebooks that ask for the same model share it.
- :func:`evaluate_method` scores one ranker of the method registry (:mod:`scp.pruning.methods`) by name: ``scp``
  (Monte-Carlo Shapley values of the ``best`` network), ``scp-loo`` (the same network scored by leave-one-out),
  ``pointwise`` (the matched control), and the baselines of :mod:`scp.pruning.rankers`; :data:`COMPARED_METHODS` are
  the ones notebook 02 compares.  A model that cannot be loaded here (offline) gives an ``n/a`` record with the
  reason (:func:`scp.pruning.evaluation.unavailable`), never a silent skip.  :func:`method_scores` gives a method's
  per-unit scores of every example (notebooks 10 and 12).
- :func:`summary_row`, :func:`metric_matrix` and :func:`paired_rows` turn those records into table rows, (keep
  ratio × example) arrays for bands, and paired per-example differences with bootstrap CIs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from scp.core.metrics import paired_difference
from scp.errors import InputError, ModelUnavailableError
from scp.models.config import TrainConfig, config_from_preset
from scp.pruning.evaluation import evaluate, make_ranker, unavailable
from scp.training.runs import train_or_load

COMPARED_METHODS = (
    "scp",
    "scp-loo",
    "pointwise",
    "random",
    "bm25",
    "cosine",
    "cross-encoder",
    "llmlingua2",
    "provence",
)
"""The rankers notebook 02 compares (names of :mod:`scp.pruning.methods`), in the order its tables list them."""

DATASET_NAMES = {
    "hotpotqa": "HotpotQA",
    "2wiki": "2Wiki",
    "musique": "MuSiQue",
    "msmarco": "MS MARCO",
    "fever": "FEVER",
}
"""Display name of each dataset in figures."""

__all__ = [
    "COMPARED_METHODS",
    "DATASET_NAMES",
    "ci_text",
    "evaluate_method",
    "keep_ratio_rows",
    "load_test_split",
    "method_scores",
    "metric_matrix",
    "paired_rows",
    "per_dataset_config",
    "summary_row",
    "train_checkpoints",
    "verdict",
]


def load_test_split(dataset: str, granularity: str | None = None, limit: int | None = None) -> list:
    """Every example of ``dataset``'s test split (:func:`scp.data.datasets.split_of`), in file order.

    Args:
        dataset: a name known to :func:`scp.data.datasets.load_dataset`.
        granularity: ``"sentence"`` or ``"paragraph"`` for MuSiQue (``None``: the loader's default); must be
            ``None`` for the other datasets.
        limit: keep the first ``limit`` test examples (``None``: all of them).

    Returns:
        A list of :class:`scp.data.datasets.Example`.
    """
    from scp.data.datasets import load_dataset

    kwargs = {} if granularity is None else {"granularity": granularity}
    return load_dataset(dataset, split="test", limit=limit, **kwargs)


def per_dataset_config(preset: str, dataset: str, **overrides) -> TrainConfig:
    """The suite's per-dataset model: ``config_from_preset(preset, datasets=(dataset,), val_dataset=dataset)``.

    Args:
        preset: ``"best"`` (the set model) or ``"pointwise"`` (the control), see :data:`scp.models.config.PRESETS`.
        dataset: the one training (and validation) dataset.
        **overrides: further :class:`scp.models.config.TrainConfig` fields (smoke runs shrink training here).

    Returns:
        The :class:`scp.models.config.TrainConfig`; equal configs share one trained model under :func:`train_or_load`.
    """
    return config_from_preset(preset, datasets=(dataset,), val_dataset=dataset, **overrides)


def train_checkpoints(
    datasets: Iterable[str], presets: Iterable[str], root, overrides: Mapping | None = None, cache_dir=None
) -> dict[tuple[str, str], Path]:
    """Train, or reuse when already trained, one model per (preset, dataset) with :func:`per_dataset_config`.

    Args:
        datasets: training datasets.
        presets: presets, e.g. ``("best", "pointwise")``.
        root: the folder of trained runs (``run.out_dir / "runs" / "models"`` in the notebooks).
        overrides: :class:`scp.models.config.TrainConfig` overrides applied to every model.
        cache_dir: embedding cache (``None``: ``$SCP_CACHE_DIR``).

    Returns:
        ``{(preset, dataset): path of best.safetensors}``.
    """
    return {
        (p, d): train_or_load(per_dataset_config(p, d, **dict(overrides or {})), root, cache_dir=cache_dir)
        for d in datasets
        for p in presets
    }


def method_scores(
    examples: Sequence,
    method: str,
    checkpoints: Mapping[str, str | Path] | None = None,
    *,
    with_title: bool = True,
    n_permutations: int = 50,
    seed: int = 0,
    cache_dir=None,
) -> list[np.ndarray]:
    """Per-unit scores (higher = more relevant) of one ranker of :mod:`scp.pruning.methods` for every example.

    Args:
        examples: :class:`scp.data.datasets.Example` objects.
        method: a ranker's name (:func:`scp.pruning.methods.names` with ``rankers=True``).
        checkpoints: ``{"best": path, "pointwise": path}``; a method that scores with a trained network uses the
            one of its preset (``scp`` and ``scp-loo``: ``best``; ``pointwise``: ``pointwise``).
        with_title: score "Title: unit" texts.
        n_permutations: M of the Monte-Carlo Shapley estimate (``scp``).
        seed: seeds the random ranker and the permutations.
        cache_dir: embedding cache (``None``: ``$SCP_CACHE_DIR``).

    Returns:
        One float64 array per example, one score per unit.  A model that cannot be loaded here raises
        :class:`scp.errors.ModelUnavailableError`.
    """
    if not examples:
        raise InputError("no examples to score")
    ranker = make_ranker(method, checkpoints, cache_dir=cache_dir, n_permutations=n_permutations, seed=seed)
    return ranker.score_many([ex.query for ex in examples], [ex.unit_texts(with_title=with_title) for ex in examples])


def evaluate_method(
    examples: Sequence,
    method: str,
    checkpoints: Mapping[str, str | Path] | None = None,
    with_title: bool = True,
    keep_ratios: Sequence[float] = (0.5,),
    n_permutations: int = 50,
    seed: int = 0,
    n_boot: int = 1000,
    cache_dir=None,
) -> dict:
    """:func:`scp.pruning.evaluation.evaluate` of one method on ``examples``, or its ``n/a`` record.

    Args:
        examples: labelled examples (one dataset).
        method: a ranker's name (:func:`scp.pruning.methods.names` with ``rankers=True``).
        checkpoints: ``{"best": path, "pointwise": path}``; ``scp`` and ``scp-loo`` use ``best``, ``pointwise`` uses
            ``pointwise`` (each method's :attr:`scp.pruning.methods.Method.preset`).
        with_title: score "Title: unit" texts (units without a title stay bare).
        keep_ratios: keep ratios r of R@r, keep rate and token compression.
        n_permutations: M of the Monte-Carlo Shapley estimate (``scp``).
        seed: seeds the random ranker, the permutations and the bootstrap.
        n_boot: bootstrap resamples of every CI.
        cache_dir: embedding cache (``None``: ``$SCP_CACHE_DIR``).

    Returns:
        The evaluation record with ``method`` set to ``method``; ``status`` is ``"ok"``, or ``"n/a"`` with a
        ``reason`` when the model raised :class:`scp.errors.ModelUnavailableError`.
    """
    if not examples:
        raise InputError("no examples to evaluate")
    try:
        ranker = make_ranker(method, checkpoints, cache_dir=cache_dir, n_permutations=n_permutations, seed=seed)
        result = evaluate(examples, ranker, with_title, keep_ratios, n_boot=n_boot, seed=seed)
    except ModelUnavailableError as error:
        result = unavailable(method, error, with_title, examples[0].dataset)
    result["method"] = method
    return result


def summary_row(result: Mapping, keep_ratio: float = 0.5) -> dict:
    """One flat table row of an evaluation record: AUC with its CI and R@r, compression@r at ``keep_ratio``.

    Args:
        result: a record of :func:`evaluate_method` (or :func:`scp.pruning.evaluation.evaluate`).
        keep_ratio: the r of the ``recall`` and ``compression`` columns (must be one the record was made with).

    Returns:
        ``{"method", "status", "reason", "n_test", "n_used", "n_excluded", "auc", "auc_ci_low", "auc_ci_high",
        "recall", "recall_ci_low", "recall_ci_high", "compression"}``; metric columns are ``None`` for ``n/a``.
    """
    row = {"method": result["method"], "status": result["status"], "reason": result.get("reason", "")}
    keys = (
        "n_test",
        "n_used",
        "n_excluded",
        "auc",
        "auc_ci_low",
        "auc_ci_high",
        "recall",
        "recall_ci_low",
        "recall_ci_high",
        "compression",
    )
    if result["status"] != "ok":
        return {**row, **dict.fromkeys(keys)}
    auc, recall = result["auc"], result[f"recall@{keep_ratio}"]
    return {
        **row,
        "n_test": result["n_examples"],
        "n_used": auc["n_used"],
        "n_excluded": auc["n_excluded"],
        "auc": auc["mean"],
        "auc_ci_low": auc["ci"][0],
        "auc_ci_high": auc["ci"][1],
        "recall": recall["mean"],
        "recall_ci_low": recall["ci"][0],
        "recall_ci_high": recall["ci"][1],
        "compression": result[f"compression@{keep_ratio}"]["mean"],
    }


def keep_ratio_rows(result: Mapping, keep_ratios: Sequence[float]) -> list[dict]:
    """One row per keep ratio r of an ``ok`` record: R@r, keep rate and token compression, each with its CI.

    Args:
        result: an ``ok`` record of :func:`evaluate_method` made with (at least) ``keep_ratios``.
        keep_ratios: the r values.

    Returns:
        Rows ``{"method", "keep_ratio", "auc", "auc_ci_low", "auc_ci_high", "recall", "recall_ci_low",
        "recall_ci_high", "keep_rate", …, "compression", …}``; the AUC (which no keep ratio changes) repeats on
        every row as a reference.
    """
    auc = result["auc"]
    rows = []
    for r in keep_ratios:
        row = {
            "method": result["method"],
            "keep_ratio": r,
            "auc": auc["mean"],
            "auc_ci_low": auc["ci"][0],
            "auc_ci_high": auc["ci"][1],
        }
        for metric in ("recall", "keep_rate", "compression"):
            m = result[f"{metric}@{r}"]
            row.update({metric: m["mean"], f"{metric}_ci_low": m["ci"][0], f"{metric}_ci_high": m["ci"][1]})
        rows.append(row)
    return rows


def metric_matrix(result: Mapping, metric: str, keep_ratios: Sequence[float]) -> np.ndarray:
    """Per-example values of ``metric@r`` for every r, as a (len(keep_ratios), n_examples) array.

    Args:
        result: an ``ok`` record of :func:`evaluate_method`.
        metric: ``"recall"``, ``"keep_rate"`` or ``"compression"``.
        keep_ratios: the r values, each one the record was made with.

    Returns:
        float array, ``nan`` where the metric is undefined (an example with no positive unit has no recall);
        the input :func:`scp.suite.plot.band` takes.
    """
    rows = result["per_example"]
    return np.array([[row[f"{metric}@{r}"] for row in rows] for r in keep_ratios], dtype=np.float64)


def paired_rows(
    results: Mapping[str, Mapping],
    pairs: Iterable[tuple[str, str]],
    metric: str = "auc",
    n_boot: int = 1000,
    seed: int = 0,
) -> list[dict]:
    """Paired differences A − B of a per-example metric on the same examples
    (:func:`scp.core.metrics.paired_difference`).

    Args:
        results: ``{method: record}`` of one dataset, from :func:`evaluate_method`.
        pairs: ``(A, B)`` method pairs; a pair with an ``n/a`` side gives a row with ``status`` ``"n/a"``.
        metric: a per-example key of the records (``"auc"``, ``"recall@0.5"``, …).
        n_boot, seed: bootstrap of the CI.

    Returns:
        Rows ``{"a", "b", "metric", "status", "difference", "ci_low", "ci_high", "n_used", "verdict"}``.

    Raises:
        ValueError: when the two records were made on different examples.
    """
    rows = []
    for a, b in pairs:
        ra, rb = results[a], results[b]
        row = {"a": a, "b": b, "metric": metric}
        if ra["status"] != "ok" or rb["status"] != "ok":
            rows.append(
                {
                    **row,
                    "status": "n/a",
                    "difference": None,
                    "ci_low": None,
                    "ci_high": None,
                    "n_used": None,
                    "verdict": "n/a",
                }
            )
            continue
        if [r["id"] for r in ra["per_example"]] != [r["id"] for r in rb["per_example"]]:
            raise InputError(f"{a} and {b} were evaluated on different examples")
        d = paired_difference(
            [r[metric] for r in ra["per_example"]], [r[metric] for r in rb["per_example"]], n_boot=n_boot, seed=seed
        )
        rows.append(
            {
                **row,
                "status": "ok",
                "difference": d.mean,
                "ci_low": d.ci_low,
                "ci_high": d.ci_high,
                "n_used": d.n_used,
                "verdict": verdict(d.ci_low, d.ci_high),
            }
        )
    return rows


def verdict(ci_low: float | None, ci_high: float | None) -> str:
    """``"A above B"`` when a difference's CI lies above 0, ``"A below B"`` below 0, ``"tie"`` when it holds 0."""
    if ci_low is None or ci_high is None or np.isnan(ci_low) or np.isnan(ci_high):
        return "n/a"
    return "A above B" if ci_low > 0 else "A below B" if ci_high < 0 else "tie"


def ci_text(mean: float | None, low: float | None, high: float | None, signed: bool = False) -> str:
    """``"0.905 [0.883, 0.926]"`` (``signed``: ``"+0.036 [+0.018, +0.053]"``) for tables; ``"n/a"`` for ``None``."""
    if mean is None or low is None or high is None:
        return "n/a"
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(mean)} [{f.format(low)}, {f.format(high)}]"
