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
  depth, …).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from scp.core.metrics import aggregate, all_recall_at_keep, pairwise_auc, recall_at_keep
from scp.data.datasets import Example
from scp.data.text import is_blank
from scp.errors import InputError, InputTypeError

__all__ = ["distractor_pool", "needle_rows", "niah_seed", "summarize_by_group"]

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


def summarize_by_group(
    rows: Sequence[dict], by: Sequence[str], columns: Sequence[str], n_boot: int = 1000, seed: int = 0
) -> list[dict]:
    """Mean and percentile-bootstrap 95% CI (:func:`scp.core.metrics.aggregate`) of ``columns`` per group.

    Args:
        rows: e.g. :func:`needle_rows` output (one row per context and method).
        by: the keys that define a group, e.g. ``("method", "n_units")``; groups keep first-seen order.
        columns: numeric columns to summarise.
        n_boot, seed: bootstrap resamples and their seed.

    Returns:
        One row per group: the ``by`` values, ``n`` (rows in the group) and, per column c, ``c``,
        ``c_ci_low`` and ``c_ci_high``.
    """
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in by), []).append(row)
    out = []
    for key, members in groups.items():
        summary = dict(zip(by, key), n=len(members))
        for c in columns:
            agg = aggregate([m[c] for m in members], n_boot=n_boot, seed=seed)
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
