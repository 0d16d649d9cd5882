"""Needle-in-a-haystack evaluation of rankers: real-sentence haystacks, per-context needle metrics.

:func:`scp.data.synthetic.make_niah` hides needles ("The special magic number for <key> is <value>.") in a
haystack; here the haystack is real text and every ranker is scored the same way:

- :func:`distractor_pool` gives the label-0 units of labelled examples (e.g. HotpotQA distractors, as
  "Title: sentence" units), in their original order, to pass as ``haystack=`` (a list gives contiguous
  windows of real paragraphs);
- :func:`needle_rows` turns each context's scores into one row: where the needles were, their ranks, the
  needle AUC, and at each keep ratio r the needle recall (:func:`scp.core.metrics.recall_at_keep`) and the
  all-needle recall (:func:`scp.core.metrics.all_recall_at_keep`);
- :func:`summarize_by_group` gives the mean and bootstrap CI of those columns per group (method, length,
  depth, …); with ``cluster=`` the CI is a cluster (block) bootstrap (:func:`cluster_bootstrap`), which resamples
  whole haystacks, so that the depths of one haystack, which share its sentences, count as one draw.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from scp.core.metrics import Aggregate, aggregate, all_recall_at_keep, pairwise_auc, recall_at_keep
from scp.data.datasets import Example
from scp.data.text import is_blank
from scp.errors import InputError, InputTypeError

__all__ = ["cluster_bootstrap", "distractor_pool", "needle_rows", "niah_seed", "summarize_by_group"]

_SEED = re.compile(r"-s(\d+)$")


def distractor_pool(examples: Sequence[Example], with_title: bool = True) -> list[str]:
    """The label-0 units of ``examples`` in their original order (duplicates removed).

    Args:
        examples: labelled examples (e.g. a test split of HotpotQA).
        with_title: units as "Title: sentence" (:meth:`scp.data.datasets.Example.unit_texts`).

    Returns:
        The distractor texts, ready for ``scp.data.synthetic.make_niah(..., haystack=pool)``.
    """
    texts = (u for ex in examples for u, y in zip(ex.unit_texts(with_title=with_title), ex.labels) if y == 0)
    return list(dict.fromkeys(texts))


def niah_seed(example: Example) -> int:
    """The seed a :func:`scp.data.synthetic.make_niah` example was drawn with (read from its id)."""
    m = _SEED.search(example.id)
    if m is None:
        raise InputError(f"{example.id!r} is not a make_niah id (…-s<seed>)")
    return int(m.group(1))


def needle_rows(
    examples: Sequence[Example], scores: Sequence[Sequence[float]], keep_ratios: Sequence[float], method: str
) -> list[dict]:
    """One row per needle-in-a-haystack context: its layout and how well ``scores`` keep its needles.

    Args:
        examples: :func:`scp.data.synthetic.make_niah` examples.
        scores: one score array per example (higher = keep first), e.g. from ``ranker.score_many``.
        keep_ratios: keep ratios r at which recall is measured (k = ⌈r·n⌉ units kept).
        method: the ranker's name, copied into every row.

    Returns:
        Rows with ``method, n_units, depth, n_needles, seed, needle_ranks`` (0 = ranked first, ties count
        in the needle's favour), ``auc`` (needles vs haystack), ``needle_score`` (mean score of the needles),
        ``top_haystack_score`` (highest score of a haystack unit) and, per r, ``recall@r`` and ``all_recall@r``.
    """
    if len(examples) != len(scores):
        raise InputError(f"{len(examples)} examples but {len(scores)} score arrays")
    rows = []
    for ex, s in zip(examples, scores):
        s = np.asarray(s, dtype=np.float64)
        if s.shape != (ex.n_units,):
            raise InputError(f"{ex.id}: {s.size} scores for {ex.n_units} units")
        needles = list(ex.meta["needle_indices"])
        row = {
            "method": method,
            "n_units": ex.n_units,
            "depth": ex.meta["depth"],
            "n_needles": len(needles),
            "seed": niah_seed(ex),
            "needle_ranks": [int((s > s[i]).sum()) for i in needles],
            "auc": pairwise_auc(s, ex.labels),
            "needle_score": float(s[needles].mean()),
            "top_haystack_score": float(np.delete(s, needles).max()) if ex.n_units > len(needles) else None,
        }
        for r in keep_ratios:
            row[f"recall@{r}"] = recall_at_keep(s, ex.labels, r)
            row[f"all_recall@{r}"] = all_recall_at_keep(s, ex.labels, r)
        rows.append(row)
    return rows


def cluster_bootstrap(
    values: Sequence[float], clusters: Sequence, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> Aggregate:
    """Mean and percentile-bootstrap CI of the mean of ``values`` that come in clusters (a block bootstrap).

    Each of the ``n_boot`` resamples draws as many clusters as there are, with replacement, and keeps every value
    of each cluster drawn; its statistic is the mean of the values kept (the drawn clusters' sums over their
    sizes).  Values of one cluster that are correlated (one haystack at several depths) thus move together, and
    the interval reflects the number of clusters, not of values.  With one value per cluster this is the plain
    bootstrap of :func:`scp.core.metrics.aggregate` (same seed, same resamples, the same numbers).

    Args:
        values: one number per cell; ``nan`` is excluded and counted in ``n_excluded`` (a cluster with no value
            left is dropped).
        clusters: one hashable cluster label per value (e.g. the haystack's seed); clusters are numbered in the
            order they first appear.
        n_boot, seed: bootstrap resamples and the seed of their generator.
        ci: the confidence level; the bounds are the (1 − ci)/2 and (1 + ci)/2 quantiles of the resampled means.

    Returns:
        :class:`scp.core.metrics.Aggregate`: the mean of all values, the interval, ``n_used`` values and
        ``n_excluded`` nan values.
    """
    if not 0 < ci < 1:
        raise InputError(f"ci must be in (0, 1), got {ci}")
    if n_boot < 1:
        raise InputError(f"n_boot must be >= 1, got {n_boot}")
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    labels = list(clusters)
    if len(labels) != v.size:
        raise InputError(f"{v.size} values but {len(labels)} cluster labels")
    if np.isinf(v).any():
        raise InputError("values contain ±inf")
    keep = ~np.isnan(v)
    excluded = int((~keep).sum())
    if not keep.any():
        return Aggregate(math.nan, math.nan, math.nan, 0, excluded)
    index: dict = {}
    ids = np.array([index.setdefault(c, len(index)) for c, k in zip(labels, keep) if k])
    v = v[keep]
    sums = np.bincount(ids, weights=v, minlength=len(index))
    sizes = np.bincount(ids, minlength=len(index)).astype(np.float64)
    k = sums.size
    rng = np.random.default_rng(seed)
    chunk = max(1, 10_000_000 // k)  # the chunks of scp.core.metrics.aggregate: the same draws for k = n
    means = np.concatenate(
        [
            sums[draw].sum(axis=1) / sizes[draw].sum(axis=1)
            for draw in (rng.integers(0, k, size=(min(chunk, n_boot - i), k)) for i in range(0, n_boot, chunk))
        ]
    )
    low, high = np.quantile(means, [(1 - ci) / 2, (1 + ci) / 2])
    return Aggregate(float(v.mean()), float(low), float(high), int(v.size), excluded)


def summarize_by_group(
    rows: Sequence[dict],
    by: Sequence[str],
    columns: Sequence[str],
    n_boot: int = 1000,
    seed: int = 0,
    cluster: str | None = None,
) -> list[dict]:
    """Mean and percentile-bootstrap 95% CI of ``columns`` per group.

    Args:
        rows: e.g. :func:`needle_rows` output (one row per context and method).
        by: the keys that define a group, e.g. ``("method", "n_units")``; groups keep first-seen order.
        columns: numeric columns to summarise.
        n_boot, seed: bootstrap resamples and their seed.
        cluster: ``None``: every row is resampled on its own (:func:`scp.core.metrics.aggregate`); a key such as
            ``"seed"`` (the haystack): the rows of a group that share its value are resampled together
            (:func:`cluster_bootstrap`), which is the same as the plain bootstrap where each value holds one row.

    Returns:
        One row per group: the ``by`` values, ``n`` (rows in the group), with ``cluster`` also ``n_clusters``
        (its distinct values in the group), and, per column c, ``c``, ``c_ci_low`` and ``c_ci_high``.
    """
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in by), []).append(row)
    out = []
    for key, members in groups.items():
        summary = dict(zip(by, key), n=len(members))
        if cluster is not None:
            summary["n_clusters"] = len({m[cluster] for m in members})
        for c in columns:
            values = [m[c] for m in members]
            if cluster is None:
                agg = aggregate(values, n_boot=n_boot, seed=seed)
            else:
                agg = cluster_bootstrap(values, [m[cluster] for m in members], n_boot=n_boot, seed=seed)
            summary.update({c: agg.mean, f"{c}_ci_low": agg.ci_low, f"{c}_ci_high": agg.ci_high})
        out.append(summary)
    return out


def needle_recall(kept_text: str, needles: Sequence[str]) -> float:
    """Fraction of needle values found in ``kept_text``: case-insensitive, whole-token match (a needle
    must not be flanked by word characters, so "12" is not found in "123").  ``nan`` for no needles."""
    if isinstance(needles, str):
        raise InputTypeError("needles must be a sequence of strings, not a single string")
    if not needles:
        return math.nan
    if any(is_blank(n) for n in needles):
        raise InputError("needles must be non-empty strings")
    found = [
        re.search(rf"(?<!\w){re.escape(n.strip())}(?!\w)", kept_text, flags=re.IGNORECASE) is not None for n in needles
    ]
    return sum(found) / len(found)
