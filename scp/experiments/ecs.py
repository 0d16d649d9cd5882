"""Entropic Context Shaping (ECS): greedy evidence selection scored by the reader LM itself (notebook 12).

ECS builds a context one sentence at a time.  Starting from C = ∅, each step scores every remaining candidate
u by how much adding it moves the reader, adds the best one, and repeats; the selection is the prefix of picks
whose score was above a threshold.  Two scores, in nats, with |u| the number of tokens of u and λ a length
penalty in nats per token:

* ``"utility"`` (needs the gold answer a*): U(u | C) = log P_{C∪u}(a*) − log P_C(a*) − λ|u|
  (:func:`scp.llm.readers.ecs_utility`); the selection keeps the picks with U > ``threshold`` (0 by default).
* ``"divergence"`` (ground-truth free): D(u | C) − λ|u| with D(u | C) = Σ_{t≤T} KL(P^{(t)}_{C∪u} ‖ P^{(t)}_C)
  along one trajectory y shared by every candidate and step (:func:`divergence_along`).  Our y is the reader's
  own greedy answer to the question under all the candidates (one generation per example), which is cheaper
  than the paper's trajectory per candidate (:func:`scp.llm.readers.trajectory_divergence`'s default, one generation
  per candidate and step) and uses no gold answer.  D ≥ 0, so the stopping threshold is a positive τ.

C ∪ u is C's sentences in pick order followed by u, so every step scores C and the C ∪ u as one batch sharing
C's token prefix (``reuse_prefix=True`` runs that prefix once per batch; :func:`scp.llm.readers.answer_logprob`).

Evidence selection is then scored against the gold supporting sentences by precision, recall and F1
(:func:`evidence_prf`); the baselines' per-sentence scores (TF-IDF cosine, BM25, SCP, the pointwise control: rankers
of :mod:`scp.pruning.methods`) come from :func:`scp.experiments.reranking.method_scores`, :func:`top_k` picks a
baseline's k best sentences among a candidate pool, :func:`matched_size_records` holds every baseline to the number
of sentences an ECS run selected, and :func:`selection_record` / :func:`summary_rows` turn selections into records
and table rows (with bootstrap CIs; paired differences through
:func:`scp.experiments.reranking.paired_rows`).  Importing this module registers the two ECS selections,
``ecs`` and ``ecs-free``, in :mod:`scp.pruning.methods` (their labels, colours and markers).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from scp.core.metrics import aggregate
from scp.data.text import is_blank
from scp.errors import InputError
from scp.io import jsonable
from scp.pruning import methods
from scp.pruning.methods import Method

__all__ = [
    "VARIANTS",
    "GreedyResult",
    "greedy",
    "ecs_select",
    "divergence_along",
    "top_k",
    "evidence_prf",
    "selection_record",
    "matched_size_records",
    "summary_rows",
]

VARIANTS = ("utility", "divergence")
"""Scores :func:`ecs_select` knows: U(u | C) with the gold answer, D(u | C) along the reader's own answer."""

methods.register(Method("ecs", "ECS (gold $a^*$)", needs_reader=True))
methods.register(
    Method(
        "ecs-free",
        "ECS (own answer $y$)",
        needs_reader=True,
        aliases=("ECS (trajectory divergence)",),
    )
)


# ---------------------------------------------------------------------------------------------- greedy


@dataclasses.dataclass(frozen=True)
class GreedyResult:
    """One greedy ECS run over a list of candidates.

    Attributes:
        variant: ``"utility"``, ``"divergence"`` or ``"custom"`` (a score function given to :func:`greedy`).
        order: candidate indices in pick order (``k_max`` of them, fewer when candidates ran out or the run
            stopped early).
        best: the score of each pick, i.e. the step's maximum over the remaining candidates (nats).
        scores: per step, the score of every candidate (``nan`` for those already picked), shape
            (steps, n_candidates).
        threshold: the stopping threshold: :attr:`selected` keeps the picks up to the first with best ≤ it.
        n_lm_calls: sequences the LM ran (scored contexts, plus one per generated answer).
        n_lm_tokens: tokens of those sequences (prompt + answer; a shared prefix counts once per sequence,
            so this is the cost without prefix caching).
        seconds: wall time of the run, generation included.
        trajectory: the answer y the divergence was taken along (``None`` for the other variants).
    """

    variant: str
    order: tuple[int, ...]
    best: tuple[float, ...]
    scores: np.ndarray
    threshold: float
    n_lm_calls: int = 0
    n_lm_tokens: int = 0
    seconds: float = 0.0
    trajectory: str | None = None

    @property
    def selected(self) -> tuple[int, ...]:
        """ECS's own selection: the picks before the first whose score is ≤ :attr:`threshold`."""
        return self.selected_at(self.threshold)

    def selected_at(self, threshold: float) -> tuple[int, ...]:
        """The picks before the first whose score is ≤ ``threshold`` (the stopping rule at another
        threshold; the picks themselves do not depend on it)."""
        k = next((i for i, b in enumerate(self.best) if not b > threshold), len(self.best))
        return self.order[:k]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (scores as nested lists, ``nan`` for picked candidates) plus ``selected``."""
        return {
            **jsonable({f.name: getattr(self, f.name) for f in dataclasses.fields(self)}),
            "selected": list(self.selected),
        }


def greedy(
    score: Callable[[list[int], list[int]], Sequence[float]],
    n_candidates: int,
    k_max: int,
    threshold: float = 0.0,
    stop_early: bool = False,
) -> tuple[list[int], list[float], np.ndarray]:
    """Greedy forward selection: at each step add the remaining candidate with the highest score.

    Args:
        score: ``score(chosen, remaining)`` → one float per index in ``remaining`` (in that order), the gain of
            adding it to the candidates in ``chosen`` (pick order).
        n_candidates: the candidates are ``0 .. n_candidates − 1``.
        k_max: the most steps.
        threshold: with ``stop_early``, the run stops after a step whose best score is ≤ ``threshold``.
        stop_early: stop at the threshold instead of always running ``k_max`` steps.

    Returns:
        ``(order, best, scores)``: picks in order, each pick's score, and the (steps, n_candidates) score table
        (``nan`` for candidates already picked).  Ties go to the lowest candidate index.

    Raises:
        ValueError: for ``k_max < 1`` or a score function that returns the wrong number of values or ``nan``.
    """
    if k_max < 1:
        raise InputError(f"k_max must be >= 1, got {k_max}")
    remaining, order, best, table = list(range(int(n_candidates))), [], [], []
    for _ in range(min(int(k_max), int(n_candidates))):
        s = np.asarray(score(list(order), list(remaining)), dtype=np.float64).reshape(-1)
        if s.shape != (len(remaining),):
            raise InputError(f"the score function returned {s.size} values for {len(remaining)} candidates")
        if np.isnan(s).any():
            raise InputError("the score function returned nan")
        row = np.full(int(n_candidates), np.nan)
        row[remaining] = s
        j = int(np.argmax(s))  # the first maximum: remaining is sorted, so the lowest index wins ties
        order.append(remaining.pop(j))
        best.append(float(s[j]))
        table.append(row)
        if stop_early and not s[j] > threshold:
            break
    return order, best, np.array(table).reshape(len(table), int(n_candidates))


def divergence_along(
    lm, question: str, context: Sequence[str], updates: Sequence[str], trajectory: str, *, reuse_prefix: bool = True
) -> np.ndarray:
    """D(u | C) = Σ_{t≤T} KL(P^{(t)}_{C∪u} ‖ P^{(t)}_C) for each update u, all along one trajectory y.

    The same quantity as :func:`scp.llm.readers.trajectory_divergence` with ``trajectories=[y] * len(updates)``, but
    C is scored once instead of once per update: |updates| + 1 sequences in one batched call sharing C's prefix.

    Args:
        lm: a :class:`scp.llm.readers.LocalReader`.
        question: the question q.
        context: C, a list of sentences (may be empty).
        updates: the candidate sentences u.
        trajectory: y, the answer text the distributions are taken along; an empty y gives D = 0.
        reuse_prefix: run C's shared token prefix once per batch.

    Returns:
        float64 array, one D (nats, ≥ 0 up to rounding) per update.
    """
    import torch

    from scp.llm.readers import token_distributions

    base, ups = list(context), list(updates)
    if not trajectory or is_blank(trajectory):
        return np.zeros(len(ups))
    contexts = [base] + [base + [u] for u in ups]
    dists = token_distributions(
        lm,
        [question] * len(contexts),
        contexts,
        [trajectory] * len(contexts),
        reuse_prefix=reuse_prefix,
        allow_empty_context=True,
    )
    q = torch.from_numpy(dists[0])
    out = np.zeros(len(ups))
    for k in range(len(ups)):
        p = torch.from_numpy(dists[k + 1])
        out[k] = float((p.exp() * (p - q)).sum())
    return out


def ecs_select(
    lm,
    question: str,
    candidates: Sequence[str],
    variant: str = "utility",
    *,
    answer: str | None = None,
    trajectory: str | None = None,
    k_max: int = 4,
    lam: float = 0.0,
    threshold: float = 0.0,
    stop_early: bool = False,
    reuse_prefix: bool = True,
) -> GreedyResult:
    """Greedy ECS selection of evidence sentences among ``candidates`` (see the module docstring).

    Args:
        lm: a :class:`scp.llm.readers.LocalReader`.
        question: the question q.
        candidates: the candidate sentences ("Title: sentence" units in the notebook).
        variant: ``"utility"`` (U, needs ``answer``) or ``"divergence"`` (D − λ|u| along ``trajectory``).
        answer: a*, the gold answer (``"utility"`` only).
        trajectory: y (``"divergence"`` only); ``None`` generates the reader's greedy answer to ``question``
            under all the candidates (one generation, counted in the cost).
        k_max: the most greedy steps.
        lam: λ, nats per token of u, subtracted from every score.
        threshold: the stopping threshold of :attr:`GreedyResult.selected` (0 for U; a τ > 0 for D).
        stop_early: stop the run at the threshold (else all ``k_max`` steps run, which the fixed-k view needs).
        reuse_prefix: prefix caching on (same values up to float rounding; off only to measure the speed-up).

    Returns:
        A :class:`GreedyResult`.
    """
    from scp.llm.readers import ecs_utility

    if variant not in VARIANTS:
        raise InputError(f"unknown variant {variant!r}; choose one of {VARIANTS}")
    texts = list(candidates)
    if not texts:
        raise InputError("no candidates to select from")
    t0, calls, tokens = time.perf_counter(), 0, 0
    if variant == "utility":
        if not answer or is_blank(answer):
            raise InputError("the 'utility' variant needs the gold answer (answer=...)")
        target = answer
    else:
        if trajectory is None:
            [reply] = lm.answer([question], [texts])
            trajectory = reply.text
            calls, tokens = 1, len(lm.prompt_ids(question, texts)) + int(reply.tokens or 0)
        target = trajectory
    sizes = np.array([len(lm.answer_ids(u)) for u in texts], dtype=np.float64)
    n_target = len(lm.answer_ids(target)) if not is_blank(target) else 0

    def score(chosen: list[int], remaining: list[int]) -> np.ndarray:
        nonlocal calls, tokens
        base, ups = [texts[i] for i in chosen], [texts[i] for i in remaining]
        calls += len(ups) + 1
        tokens += sum(len(lm.prompt_ids(question, c)) + n_target for c in [base] + [base + [u] for u in ups])
        if variant == "utility":
            return ecs_utility(lm, question, base, ups, target, lam=lam, reuse_prefix=reuse_prefix)
        return divergence_along(lm, question, base, ups, target, reuse_prefix=reuse_prefix) - lam * sizes[remaining]

    order, best, table = greedy(score, len(texts), k_max, threshold, stop_early)
    return GreedyResult(
        variant,
        tuple(order),
        tuple(best),
        table,
        float(threshold),
        calls,
        tokens,
        time.perf_counter() - t0,
        trajectory if variant == "divergence" else None,
    )


# ---------------------------------------------------------------------------------------------- baselines


def top_k(scores: Sequence[float], k: int, among: Sequence[int] | None = None) -> list[int]:
    """The ``k`` highest-scoring indices, best first, restricted to ``among`` (ties to the lower index).

    Args:
        scores: one score per unit.
        k: how many (capped at the number available; 0 gives ``[]``).
        among: the allowed unit indices (``None``: all).

    Returns:
        Unit indices in rank order.
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    idx = np.arange(s.size) if among is None else np.asarray(sorted(set(int(i) for i in among)), dtype=int)
    if k < 0:
        raise InputError(f"k must be >= 0, got {k}")
    ranked = idx[np.argsort(-s[idx], kind="stable")]
    return [int(i) for i in ranked[:k]]


# ---------------------------------------------------------------------------------------------- metrics


def evidence_prf(selected: Sequence[int], labels: Sequence[int]) -> tuple[float, float, float]:
    """Precision, recall and F1 of a selected set of units against the gold supporting units.

    P = |S ∩ G| / |S| (0 for an empty selection), R = |S ∩ G| / |G| (``nan`` when there is no gold unit),
    F1 = 2PR / (P + R) (0 when P + R = 0).

    Args:
        selected: indices of the selected units (duplicates count once).
        labels: 0/1 per unit, 1 = supporting.

    Returns:
        ``(precision, recall, f1)``.
    """
    y = np.asarray(labels, dtype=int).reshape(-1)
    s = set(int(i) for i in selected)
    if any(i < 0 or i >= y.size for i in s):
        raise InputError(f"selected indices out of range for {y.size} units: {sorted(s)}")
    gold = int(y.sum())
    hits = sum(int(y[i]) for i in s)
    precision = hits / len(s) if s else 0.0
    recall = hits / gold if gold else math.nan
    if math.isnan(recall):
        return precision, recall, math.nan
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return precision, recall, f1


def selection_record(method: str, selections: Sequence[Sequence[int]], examples: Sequence) -> dict:
    """An evaluation record of selections (one per example), in the form :func:`scp.experiments.reranking.paired_rows`
    takes: ``{"method", "status": "ok", "per_example": [{"id", "k", "precision", "recall", "f1"}, …]}``.

    Args:
        method: the method's name.
        selections: selected unit indices, one list per example (indices into that example's units).
        examples: the examples, in the same order (their ``labels`` are the gold supporting units).

    Returns:
        The record.
    """
    if len(selections) != len(examples):
        raise InputError(f"{len(selections)} selections for {len(examples)} examples")
    rows = []
    for sel, ex in zip(selections, examples):
        p, r, f = evidence_prf(sel, ex.labels)
        rows.append({"id": ex.id, "k": len(set(sel)), "precision": p, "recall": r, "f1": f})
    return {"method": method, "status": "ok", "per_example": rows}


def matched_size_records(
    variant: str,
    results: Sequence[GreedyResult],
    pools: Sequence[Sequence[int]],
    baseline_scores: Mapping[str, Sequence[Sequence[float]]],
    examples: Sequence,
) -> dict[str, dict]:
    """Evidence-selection records at matched size: an ECS variant's own selections, and every baseline keeping
    as many pool units as that variant selected, example by example.

    For example e with pool ``pools[e]`` (unit indices, in the order the candidates were given to
    :func:`ecs_select`), the variant's selection is ``results[e].selected`` mapped from candidate positions to
    unit indices, and a baseline's is :func:`top_k` of its scores with k = ``len(results[e].selected)``,
    restricted to that pool.  The size is matched per example, not on average: precision and recall trade off
    with the number kept, so this is the comparison that is fair to both.

    Args:
        variant: the name of the ECS variant (the key and ``"method"`` of its record).
        results: the variant's greedy runs, one :class:`GreedyResult` per example.
        pools: per example, the unit indices of its candidates (candidate position → unit index).
        baseline_scores: baseline name → one score per unit of every example (all units, not only the pool's).
        examples: the examples, in the same order (their ``labels`` are the gold supporting units).

    Returns:
        ``{variant: record, baseline: record, …}``, the variant first and then the baselines in the order of
        ``baseline_scores``, each record from :func:`selection_record`.

    Raises:
        ValueError: when ``results``, ``pools``, ``examples`` or a baseline's scores differ in length, or when
            the baselines include the variant's own name.
    """
    n = len(examples)
    lengths = {"results": len(results), "pools": len(pools)} | {m: len(s) for m, s in baseline_scores.items()}
    wrong = {k: v for k, v in lengths.items() if v != n}
    if wrong:
        raise InputError(f"{n} examples but {', '.join(f'{v} {k}' for k, v in wrong.items())}")
    if variant in baseline_scores:
        raise InputError(f"the baselines include the variant {variant!r} itself")
    ks = [len(r.selected) for r in results]
    chosen = [[int(pool[i]) for i in r.selected] for r, pool in zip(results, pools)]
    out = {variant: selection_record(variant, chosen, examples)}
    for method, scores in baseline_scores.items():
        chosen = [top_k(s, k, among=pool) for s, k, pool in zip(scores, ks, pools)]
        out[method] = selection_record(method, chosen, examples)
    return out


def summary_rows(records: Sequence[Mapping], n_boot: int = 1000, seed: int = 0) -> list[dict]:
    """One table row per record: mean selection size and mean precision, recall and F1 over examples, each
    with a percentile-bootstrap 95% CI (:func:`scp.core.metrics.aggregate`).

    Args:
        records: from :func:`selection_record`.
        n_boot, seed: bootstrap of the CIs.

    Returns:
        Rows ``{"method", "n", "k_mean", "precision", "precision_ci_low", "precision_ci_high", "recall", …,
        "f1", "f1_ci_low", "f1_ci_high"}``.
    """
    out = []
    for rec in records:
        per = rec["per_example"]
        row = {"method": rec["method"], "n": len(per), "k_mean": float(np.mean([r["k"] for r in per]))}
        for metric in ("precision", "recall", "f1"):
            a = aggregate([r[metric] for r in per], n_boot=n_boot, seed=seed)
            row.update({metric: a.mean, f"{metric}_ci_low": a.ci_low, f"{metric}_ci_high": a.ci_high})
        out.append(row)
    return out
