"""Downstream question answering: what a reader answers from a pruned context (paper Table 4, Table 12,
Fig. 3b/c; notebook 10).

A *condition* is one way of building the context a reader sees for an example: the whole context
(``"full"``), no context at all (``"closed-book"``, the prompt's :data:`scp.llm.readers.EMPTY_CONTEXT`), or the top
⌈r·n⌉ units of a ranking method at keep ratio r, kept in their original order (:func:`kept_units`).  For every
(example, condition) :func:`read_conditions` asks the reader for a greedy answer (EM and F1 against the gold
answers, :mod:`scp.core.metrics`) and scores the gold answer by teacher forcing, log P(a* | q, C)
(:func:`scp.llm.readers.answer_logprob`), which is far less noisy than EM for a small reader.

- :func:`scp.experiments.reranking.method_scores` ranks every example's units with one ranker of
  :mod:`scp.pruning.methods` (the per-dataset SCP network, its pointwise control, LOO on the same network, BM25,
  MiniLM cosine, random); :func:`build_conditions` turns those scores into contexts; :func:`read_conditions` runs
  the reader (one batched call per dataset, so prompts of similar length share a batch) and returns one row per
  (example, condition).  The two reference conditions are no methods: figures draw them as the elements
  ``"full context"`` and ``"closed book"`` of :func:`scp.suite.plot.color`.
- :func:`paired_table` compares conditions pairwise over the same examples (mean difference with a paired
  bootstrap CI, :func:`scp.core.metrics.paired_difference`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from scp.core.metrics import aggregate, exact_match, f1, paired_difference
from scp.core.selection import select
from scp.errors import InputError
from scp.pruning.result import regex_tokens

FULL, CLOSED_BOOK = "full", "closed-book"
"""Names of the two reference conditions: the whole context, and no context."""

__all__ = [
    "FULL",
    "CLOSED_BOOK",
    "Condition",
    "kept_units",
    "build_conditions",
    "read_conditions",
    "summary_table",
    "paired_table",
]


@dataclass(frozen=True)
class Condition:
    """The context one example is read with: ``method`` (a ranking method, :data:`FULL` or
    :data:`CLOSED_BOOK`), its ``keep_ratio`` (1.0 for the full context, 0.0 for none) and the kept ``units``
    (texts in their original order; empty for closed-book)."""

    example: int
    method: str
    keep_ratio: float
    units: tuple[str, ...]


def kept_units(units: Sequence[str], scores: Sequence[float], keep_ratio: float) -> tuple[str, ...]:
    """The top ⌈r·n⌉ units by score (ties towards the earlier unit, :func:`scp.core.selection.select`), in their
    original order."""
    if len(units) != len(scores):
        raise InputError(f"{len(units)} units but {len(scores)} scores")
    if not 0 < keep_ratio <= 1:
        raise InputError(f"keep_ratio must lie in (0, 1], got {keep_ratio}")
    keep, _ = select(scores, keep_ratio=keep_ratio)
    return tuple(units[i] for i in keep)


def build_conditions(
    examples: Sequence,
    scores: Mapping[str, Sequence[np.ndarray]],
    keep_ratios: Mapping[str, Sequence[float]],
    *,
    with_title: bool = True,
    full: bool = True,
    closed_book: bool = True,
) -> list[Condition]:
    """Every (example, condition): the full context and closed-book (when asked), then for each method of
    ``scores`` the contexts at each of its ``keep_ratios[method]``."""
    missing = sorted(set(keep_ratios) - set(scores))
    if missing:
        raise InputError(f"keep ratios given for methods without scores: {missing}")
    out: list[Condition] = []
    for k, ex in enumerate(examples):
        units = tuple(ex.unit_texts(with_title=with_title))
        if full:
            out.append(Condition(k, FULL, 1.0, units))
        if closed_book:
            out.append(Condition(k, CLOSED_BOOK, 0.0, ()))
        for method, ratios in keep_ratios.items():
            if len(scores[method]) != len(examples):
                raise InputError(f"{method}: {len(scores[method])} score vectors for {len(examples)} examples")
            for r in ratios:
                out.append(Condition(k, method, float(r), kept_units(units, scores[method][k], r)))
    return out


def read_conditions(lm, examples: Sequence, conditions: Sequence[Condition]) -> list[dict]:
    """Answer and score every condition with the local reader ``lm`` (:class:`scp.llm.readers.LocalReader`).

    One row per condition: dataset, example id, question type, method, keep ratio, units kept, context tokens
    (regex words), the reader's ``answer``, ``em`` and ``f1`` against all gold answers, ``logprob`` =
    log P(a* | q, C) of the first gold answer, ``logprob_per_token`` (divided by its T tokens), and
    ``lm_seconds`` (this condition's share of the batch's time).  Both come from one prefill of each prompt
    (:func:`scp.llm.readers.answer_and_logprob`)."""
    from scp.llm.readers import answer_and_logprob

    if not conditions:
        raise InputError("no conditions to read")
    questions = [examples[c.example].query for c in conditions]
    golds = [examples[c.example].answers[0] for c in conditions]
    answers, logprobs = answer_and_logprob(
        lm, questions, [list(c.units) for c in conditions], golds, allow_empty_context=True
    )
    rows = []
    for c, a, lp, gold in zip(conditions, answers, logprobs, golds):
        ex = examples[c.example]
        rows.append(
            {
                "dataset": ex.dataset,
                "id": ex.id,
                "type": ex.meta.get("type") or ex.meta.get("hop_type"),
                "method": c.method,
                "keep_ratio": c.keep_ratio,
                "n_units": ex.n_units,
                "n_kept": len(c.units),
                "context_tokens": sum(len(regex_tokens(u)) for u in c.units),
                "answer": a.text,
                "gold": gold,
                "em": exact_match(a.text, ex.answers),
                "f1": f1(a.text, ex.answers),
                "logprob": float(lp),
                "logprob_per_token": float(lp) / max(1, len(lm.answer_ids(gold))),
                "lm_seconds": a.seconds,
            }
        )
    return rows


def _key(row: Mapping) -> tuple[str, float]:
    return row["method"], float(row["keep_ratio"])


def summary_table(
    rows: Sequence[Mapping], metrics: Sequence[str] = ("em", "f1", "logprob"), *, n_boot: int = 1000, seed: int = 0
) -> list[dict]:
    """Mean of each metric per (dataset, method, keep ratio) with a 95% bootstrap CI over examples."""
    groups: dict[tuple, list[Mapping]] = {}
    for row in rows:
        groups.setdefault((row["dataset"], *_key(row)), []).append(row)
    out = []
    for (dataset, method, ratio), subset in groups.items():
        entry = {
            "dataset": dataset,
            "method": method,
            "keep_ratio": ratio,
            "n_examples": len(subset),
            "context_tokens": float(np.mean([r["context_tokens"] for r in subset])),
            "lm_seconds": float(np.mean([r["lm_seconds"] for r in subset])),
        }
        for m in metrics:
            agg = aggregate([r[m] for r in subset], n_boot=n_boot, seed=seed)
            entry.update({m: agg.mean, f"{m}_ci_low": agg.ci_low, f"{m}_ci_high": agg.ci_high})
        out.append(entry)
    return out


def paired_table(
    rows: Sequence[Mapping],
    pairs: Sequence[tuple[tuple[str, float], tuple[str, float]]],
    metrics: Sequence[str] = ("em", "f1", "logprob"),
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> list[dict]:
    """For each dataset, pair ``(a, b)`` of (method, keep ratio) conditions and metric: the mean per-example
    difference a − b over the examples both were read on, with a paired bootstrap 95% CI and
    :func:`scp.experiments.reranking.verdict` ("A above B", "A below B", or "tie" when the CI holds 0)."""
    from scp.experiments.reranking import verdict

    by: dict[tuple, dict[str, Mapping]] = {}
    for row in rows:
        by.setdefault((row["dataset"], *_key(row)), {})[row["id"]] = row
    out = []
    for dataset in dict.fromkeys(row["dataset"] for row in rows):
        for a, b in pairs:
            ra, rb = by.get((dataset, a[0], float(a[1])), {}), by.get((dataset, b[0], float(b[1])), {})
            ids = [i for i in ra if i in rb]
            if not ids:
                raise InputError(f"{dataset}: no example was read under both {a} and {b}")
            for m in metrics:
                agg = paired_difference([ra[i][m] for i in ids], [rb[i][m] for i in ids], n_boot=n_boot, seed=seed)
                out.append(
                    {
                        "dataset": dataset,
                        "a": f"{a[0]}@{a[1]:g}",
                        "b": f"{b[0]}@{b[1]:g}",
                        "metric": m,
                        "difference": agg.mean,
                        "ci_low": agg.ci_low,
                        "ci_high": agg.ci_high,
                        "n_examples": len(ids),
                        "verdict": verdict(agg.ci_low, agg.ci_high),
                    }
                )
    return out
