"""Attribution judged by the reader itself (notebook 14): SCP, its pointwise control, ContextCite, leave-one-out on
the reader and the lexical baselines, every method's per-unit scores measured by one shared function.

For one example — question q, units U (n of them), gold answer a* — with the reader's f(S) = log P(a* | q, S) and
y(S) = f(S) − log(1 − e^{f(S)}) (the answer's logit-probability, the output ContextCite fits):

* **top-k drop** f(U) − f(U ∖ top_k(s)), k ∈ ``ks``: how much of the answer's probability the k best-scored units
  carry (ties broken by unit order);
* **LDS**, ContextCite's linear datamodeling score: the Spearman correlation, over m held-out ablations S_j (each unit
  kept with probability 1/2, :func:`heldout_masks`, drawn apart from ContextCite's own seeds), between the linear
  prediction Σ_{i∈S_j} s_i and y(S_j); the same ablations for every method; ``nan`` where the scores predict a
  constant (e.g. a Lasso that zeroed every weight);
* **AUC**: the pairwise AUC of s against the gold evidence labels.

:func:`judge` scores every context the methods need in one call of the reader's prefix-tree scorer
(:func:`scp.llm.readers.prefix_tree_logprob`: each shared token prefix runs once) and counts its reader calls (the
distinct contexts scored) apart from each method's own.  :func:`reader_loo` is leave-one-out on the reader,
s_i = f(U) − f(U ∖ {i}), n + 1 reader calls in one tree.  :func:`attribute` runs the reader's own methods on one
example (ContextCite at each ablation count from one run of the largest, leave-one-out on the reader) beside the
scores of methods that call no reader, and judges them all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scp.core.metrics import pairwise_auc
from scp.errors import InputError
from scp.llm.contextcite import context_cite
from scp.llm.readers import prefix_tree_logprob
from scp.pruning import methods
from scp.pruning.methods import Method

__all__ = [
    "Attributed",
    "Judged",
    "attribute",
    "contextcite_name",
    "heldout_masks",
    "judge",
    "logit_probability",
    "reader_loo",
]

CONTEXTCITE_ABLATIONS = (32, 64)
"""The ablation counts N of the ContextCite methods registered here (``contextcite-32``, ``contextcite-64``)."""


def contextcite_name(n_ablations: int) -> str:
    """The registry name of ContextCite with ``n_ablations`` reader calls (``"contextcite-32"``)."""
    return f"contextcite-{int(n_ablations)}"


for _n in CONTEXTCITE_ABLATIONS:
    methods.register(Method(contextcite_name(_n), f"ContextCite ({_n} ablations)", needs_reader=True))
del _n

KEEP_PROBABILITY = 0.5
HELDOUT_SEED_OFFSET = 1_000_003  # held-out ablations come from numpy's default_rng(seed + this), not ContextCite's


def heldout_masks(n: int, m: int, seed: int = 0) -> np.ndarray:
    """``m`` held-out ablations of ``n`` units, (m, n) bool, each unit kept with probability 1/2."""
    if n < 2 or m < 3:
        raise InputError(f"held-out ablations need n ≥ 2 units and m ≥ 3 masks, not n = {n}, m = {m}")
    return np.random.default_rng(seed + HELDOUT_SEED_OFFSET).random((m, n)) < KEEP_PROBABILITY


def logit_probability(logp: np.ndarray) -> np.ndarray:
    """y = log p − log(1 − p) from log p (ContextCite's output type)."""
    logp = np.minimum(np.asarray(logp, dtype=np.float64), -1e-12)
    return logp - np.log(-np.expm1(logp))


def _subset(units: Sequence[str], mask: Sequence[bool]) -> list[str]:
    return [u for u, keep in zip(units, mask) if keep]


def reader_loo(reader: Any, question: str, units: Sequence[str], answer: str) -> tuple[np.ndarray, int, float]:
    """Leave-one-out on the reader: s_i = f(U) − f(U ∖ {i}); returns the scores, the reader calls (n + 1) and the
    seconds."""
    n = len(units)
    if n < 2:
        raise InputError(f"leave-one-out needs at least 2 units, got {n}")
    contexts = [list(units), *([u for j, u in enumerate(units) if j != i] for i in range(n))]
    scored = prefix_tree_logprob(reader, [question] * (n + 1), contexts, [answer] * (n + 1))
    return scored.logp[0] - scored.logp[1:], n + 1, scored.seconds


@dataclass
class Judged:
    """What :func:`judge` measured for one example: per method its ``drop@k``, ``lds`` and ``auc``; f(U); the
    evaluation's reader calls (distinct contexts), tokens run and seconds."""

    rows: dict[str, dict[str, float]]
    full_logp: float
    reader_calls: int
    tokens_run: int | None
    seconds: float
    heldout_logit: np.ndarray = field(repr=False)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(spearmanr(a, b).statistic)


def judge(
    reader: Any,
    question: str,
    units: Sequence[str],
    answer: str,
    labels: Sequence[int],
    scores: Mapping[str, Sequence[float]],
    *,
    ks: Sequence[int] = (1, 3, 5),
    masks: np.ndarray,
) -> Judged:
    """Top-k drop, LDS on ``masks`` (from :func:`heldout_masks`) and AUC of every method's ``scores`` (name → one
    score per unit), all from one prefix-tree scoring of the contexts they need."""
    n = len(units)
    masks = np.asarray(masks, dtype=bool)
    if n < 2 or len(labels) != n:
        raise InputError(f"judge needs ≥ 2 units and one label per unit, got {n} units and {len(labels)} labels")
    if masks.ndim != 2 or masks.shape[1] != n or len(masks) < 3:
        raise InputError(f"masks must be (m ≥ 3, {n}) booleans, not shape {masks.shape}")
    if not ks or any(int(k) < 1 for k in ks):
        raise InputError(f"ks must be positive unit counts, not {list(ks)}")
    arrays: dict[str, np.ndarray] = {}
    for name, s in scores.items():
        a = np.asarray(s, dtype=np.float64).reshape(-1)
        if a.shape != (n,) or not np.isfinite(a).all():
            raise InputError(f"scores of {name!r} must be {n} finite numbers, got shape {a.shape} with non-finite ones")
        arrays[name] = a
    full = (True,) * n
    drops: dict[tuple[str, int], tuple[bool, ...]] = {}
    for name, a in arrays.items():
        order = np.argsort(-a, kind="stable")
        for k in ks:
            keep = np.ones(n, dtype=bool)
            keep[order[: min(int(k), n)]] = False
            drops[name, int(k)] = tuple(bool(x) for x in keep)
    needed = list(dict.fromkeys([full, *(tuple(bool(x) for x in m) for m in masks), *drops.values()]))
    scored = prefix_tree_logprob(
        reader, [question] * len(needed), [_subset(units, m) for m in needed], [answer] * len(needed)
    )
    f = dict(zip(needed, scored.logp))
    y_heldout = logit_probability(np.array([f[tuple(bool(x) for x in m)] for m in masks]))
    rows: dict[str, dict[str, float]] = {}
    for name, a in arrays.items():
        row = {f"drop@{k}": float(f[full] - f[drops[name, int(k)]]) for k in ks}
        row["lds"] = _spearman(masks.astype(np.float64) @ a, y_heldout)
        row["auc"] = pairwise_auc(a, labels)  # nan without a positive or a negative unit
        rows[name] = row
    return Judged(rows, float(f[full]), len(needed), scored.tokens_run, scored.seconds, y_heldout)


@dataclass
class Attributed:
    """One example attributed by every method: the shared judge's verdict and each method's cost, ``cost[name] =
    {"reader_calls": …, "seconds": …}`` (reader calls the method itself makes, 0 for a network or a lexical score)."""

    judged: Judged
    cost: dict[str, dict[str, float]]


def attribute(
    reader: Any,
    question: str,
    units: Sequence[str],
    answer: str,
    labels: Sequence[int],
    scores: Mapping[str, Sequence[float]],
    seconds: Mapping[str, float],
    *,
    ablations: Sequence[int] = CONTEXTCITE_ABLATIONS,
    n_heldout: int = 32,
    ks: Sequence[int] = (1, 3, 5),
    seed: int = 0,
) -> Attributed:
    """Attribute log P(``answer`` | ``question``, units) with the reader's own methods and judge every method.

    ContextCite (:func:`scp.llm.contextcite.context_cite`, the package itself) runs once with max(``ablations``)
    ablations; the Lasso refitted on its first N masks is ContextCite with N reader calls (its masks are seeded
    j = 0, 1, …, so these are the masks an N-ablation run draws), charged N/max of the run's seconds (its masks are
    scored one at a time, so its cost is linear in N).  Leave-one-out on the reader (:func:`reader_loo`) is ``"loo"``.
    ``scores`` and ``seconds`` (name → per-unit scores and the seconds they took) are the methods that call no
    reader.  :func:`judge` scores every method on ``n_heldout`` held-out ablations (:func:`heldout_masks` with
    ``seed``) and ``ks``."""
    missing = set(scores) ^ set(seconds)
    if missing:
        raise InputError(f"scores and seconds must name the same methods; only one names {sorted(missing)}")
    if not ablations or min(int(a) for a in ablations) < 2:
        raise InputError(f"ablations must be ablation counts >= 2, not {list(ablations)}")
    largest = max(int(a) for a in ablations)
    cost = {name: {"reader_calls": 0, "seconds": float(seconds[name])} for name in scores}
    run = context_cite(reader, question, units, answer, n_ablations=largest)
    every = dict(scores)
    for n_ablations in sorted({int(a) for a in ablations}):
        every[contextcite_name(n_ablations)] = run.attributions(n_ablations)
        cost[contextcite_name(n_ablations)] = {
            "reader_calls": n_ablations,
            "seconds": run.seconds * n_ablations / largest,
        }
    every["loo"], calls, loo_seconds = reader_loo(reader, question, units, answer)
    cost["loo"] = {"reader_calls": calls, "seconds": loo_seconds}
    masks = heldout_masks(len(units), n_heldout, seed)
    return Attributed(judge(reader, question, units, answer, labels, every, ks=ks, masks=masks), cost)
