"""Evaluation metrics: ranking quality per example, bootstrap aggregation, pruning cost and QA answers.

Per-example metrics that are undefined (no positive or no negative unit, no needles) return ``nan``;
:func:`aggregate` drops ``nan`` values and reports how many it dropped.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from scp.core.selection import keep_count
from scp.errors import InputError


def _scores_labels(scores: Sequence[float], labels: Sequence[int | bool]) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = np.asarray(labels).reshape(-1)
    if s.shape != y.shape:
        raise InputError(f"{s.size} scores but {y.size} labels")
    if not np.isin(y, (0, 1)).all():
        raise InputError("labels must be 0/1 or boolean")
    if np.isnan(s).any():
        raise InputError("scores contain NaN")
    return s, y.astype(bool)


def pairwise_auc(scores: Sequence[float], labels: Sequence[int | bool]) -> float:
    """P(s_pos > s_neg) + ½·P(s_pos = s_neg) over all (positive, negative) unit pairs (ROC AUC).

    Computed as the Mann–Whitney statistic with mid-ranks: (Σ_pos rank − P(P+1)/2) / (P·N).
    ``nan`` when there is no positive or no negative unit.
    """
    s, y = _scores_labels(scores, labels)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = rankdata(s)  # average ranks: ties count ½
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


@dataclass(frozen=True)
class Aggregate:
    """Mean of the finite per-example values with a percentile-bootstrap confidence interval."""

    mean: float
    ci_low: float
    ci_high: float
    n_used: int
    n_excluded: int


def aggregate(values: Sequence[float], n_boot: int = 1000, seed: int = 0, ci: float = 0.95) -> Aggregate:
    """Mean and percentile bootstrap CI (``n_boot`` resamples with replacement, generator seeded by ``seed``,
    quantiles (1 − ci)/2 and (1 + ci)/2 of the resampled means).  ``nan`` values are excluded and counted
    in ``n_excluded``; with no value left every statistic is ``nan``."""
    if not 0 < ci < 1:
        raise InputError(f"ci must be in (0, 1), got {ci}")
    if n_boot < 1:
        raise InputError(f"n_boot must be >= 1, got {n_boot}")
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if np.isinf(v).any():
        raise InputError("values contain ±inf")
    keep = ~np.isnan(v)
    v, excluded = v[keep], int((~keep).sum())
    if v.size == 0:
        return Aggregate(math.nan, math.nan, math.nan, 0, excluded)
    rng = np.random.default_rng(seed)
    chunk = max(1, 10_000_000 // v.size)  # bound the (resamples × n) index matrix in memory
    means = np.concatenate(
        [
            v[rng.integers(0, v.size, size=(min(chunk, n_boot - i), v.size))].mean(axis=1)
            for i in range(0, n_boot, chunk)
        ]
    )
    low, high = np.quantile(means, [(1 - ci) / 2, (1 + ci) / 2])
    return Aggregate(float(v.mean()), float(low), float(high), int(v.size), excluded)


def recall_at_keep(scores: Sequence[float], labels: Sequence[int | bool], keep_ratio: float) -> float:
    """Fraction of the positive units among the top k = ⌈keep_ratio·n⌉ units by score.

    Ties at the cut are broken at random, in expectation: if the k-th highest score t is shared by g units
    of which p are positive and r of the g fit in the top k, they contribute r·p/g positives.  ``nan``
    when there is no positive unit.  k is the count pruning keeps (:func:`scp.core.selection.keep_count`, so
    0.3·10 keeps 3), and 0 at keep_ratio = 0.
    """
    if not 0 <= keep_ratio <= 1:
        raise InputError(f"keep_ratio must be in [0, 1], got {keep_ratio}")
    s, y = _scores_labels(scores, labels)
    n_pos = int(y.sum())
    if n_pos == 0:
        return math.nan
    if keep_ratio == 0:
        return 0.0
    k = keep_count(s.size, keep_ratio)
    t = np.sort(s)[::-1][k - 1]
    above, tied = s > t, s == t
    expected = y[above].sum() + (k - above.sum()) * y[tied].sum() / tied.sum()
    return float(expected / n_pos)


def all_recall_at_keep(scores: Sequence[float], labels: Sequence[int | bool], keep_ratio: float) -> float:
    """Probability that every positive unit is among the top k = ⌈keep_ratio·n⌉ units (all-needle recall).

    Ties at the cut are broken at random, as in :func:`recall_at_keep`: if the k-th highest score t is shared
    by g units of which p are positive and r of the g fit in the top k, all p are kept with probability
    C(g − p, r − p) / C(g, r) = Π_{j<p} (r − j)/(g − j) (0 when r < p or a positive scores below t).

    Args:
        scores: one score per unit, higher = keep first.
        labels: 0/1 per unit (1 = needle / supporting unit).
        keep_ratio: fraction of the units kept, in [0, 1].

    Returns:
        A probability in [0, 1]; ``nan`` when there is no positive unit.
    """
    if not 0 <= keep_ratio <= 1:
        raise InputError(f"keep_ratio must be in [0, 1], got {keep_ratio}")
    s, y = _scores_labels(scores, labels)
    if not y.any():
        return math.nan
    if keep_ratio == 0:
        return 0.0
    k = keep_count(s.size, keep_ratio)
    t = np.sort(s)[::-1][k - 1]
    if (y & (s < t)).any():
        return 0.0
    tied, slots, p = int((s == t).sum()), k - int((s > t).sum()), int((y & (s == t)).sum())
    return float(np.prod([(slots - j) / (tied - j) for j in range(p)])) if slots >= p else 0.0


def compression(kept_tokens: int, total_tokens: int) -> float:
    """Fraction of tokens removed: 1 − kept/total (as ``PruneResult.compression_rate``); ``nan`` if total is 0."""
    return 1.0 - keep_rate(kept_tokens, total_tokens)


def keep_rate(kept: int, total: int) -> float:
    """kept / total (e.g. units kept out of the context's units); ``nan`` if total is 0."""
    if total < 0 or not 0 <= kept <= max(total, 0):
        raise InputError(f"need 0 <= kept <= total, got kept={kept}, total={total}")
    return kept / total if total else math.nan


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation, drop articles a/an/the, collapse whitespace."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def _golds(golds: str | Sequence[str]) -> list[str]:
    golds = [golds] if isinstance(golds, str) else list(golds)
    if not golds:
        raise InputError("at least one gold answer is needed")
    return golds


def exact_match(prediction: str, golds: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals some normalised gold answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in _golds(golds)))


def f1(prediction: str, golds: str | Sequence[str]) -> float:
    """SQuAD token F1 (bag of normalised tokens, 2PR/(P+R)), max over gold answers; two empty answers
    score 1, one empty answer scores 0."""
    pred = normalize_answer(prediction).split()
    best = 0.0
    for gold in _golds(golds):
        ref = normalize_answer(gold).split()
        if not pred or not ref:
            best = max(best, float(pred == ref))
            continue
        common = sum((Counter(pred) & Counter(ref)).values())
        if common:
            precision, recall = common / len(pred), common / len(ref)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def _top_k(scores: np.ndarray, k: int) -> set[int]:
    return set(np.argsort(-scores, kind="stable")[:k].tolist())


def jaccard_at_k(a_scores: Sequence[float], b_scores: Sequence[float], k: int) -> float:
    """|A ∩ B| / |A ∪ B| for the top-k index sets of two score vectors over the same units (k is capped at
    n; ties are broken towards the lower index)."""
    a = np.asarray(a_scores, dtype=np.float64).reshape(-1)
    b = np.asarray(b_scores, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        raise InputError(f"score vectors differ in length: {a.size} vs {b.size}")
    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")
    if a.size == 0:
        return math.nan
    top_a, top_b = _top_k(a, k), _top_k(b, k)
    return len(top_a & top_b) / len(top_a | top_b)


def kendall_tau_b(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's τ_b = (C − D) / √((n₀ − n₁)(n₀ − n₂)): C/D concordant/discordant pairs, n₀ = n(n−1)/2,
    n₁/n₂ pairs tied in a/b.  ``nan`` for n < 2 or a constant vector.  O(n²) time, O(n) memory."""
    x = np.asarray(a, dtype=np.float64).reshape(-1)
    y = np.asarray(b, dtype=np.float64).reshape(-1)
    if x.shape != y.shape:
        raise InputError(f"vectors differ in length: {x.size} vs {y.size}")
    if np.isnan(x).any() or np.isnan(y).any():
        raise InputError("inputs contain NaN")
    s = untied_x = untied_y = 0
    for i in range(x.size - 1):
        dx, dy = np.sign(x[i + 1 :] - x[i]), np.sign(y[i + 1 :] - y[i])
        s += int((dx * dy).sum())
        untied_x += int(np.count_nonzero(dx))
        untied_y += int(np.count_nonzero(dy))
    if untied_x == 0 or untied_y == 0:
        return math.nan
    return s / math.sqrt(untied_x * untied_y)


@dataclass(frozen=True)
class SeedAggregate:
    """A per-example score measured once per training seed on the same examples, summarised over both.

    ``mean`` = (1/S) Σ_s mean_k x_{s,k}; ``per_seed`` the S per-seed means and ``sd_seeds`` their standard deviation
    (ddof 1); ``ci_seeds`` a Student-t interval over the S per-seed means (S − 1 degrees of freedom: how far
    retraining moves the result); ``ci_examples`` a percentile bootstrap over examples of the seed-averaged
    per-example values x̄_k = (1/S) Σ_s x_{s,k} (how far other test examples move it)."""

    mean: float
    per_seed: tuple[float, ...]
    sd_seeds: float
    ci_seeds: tuple[float, float]
    ci_examples: tuple[float, float]
    n_seeds: int
    n_used: int
    n_excluded: int


def over_seeds(
    per_seed: Sequence[Sequence[float]], n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> SeedAggregate:
    """:class:`SeedAggregate` of ``per_seed[s][k]`` (seed s, example k; every seed on the same examples, in the
    same order).  An example that is ``nan`` for any seed (no positive unit, say) is excluded and counted.

    Raises:
        InputError: fewer than 2 seeds, seeds of different lengths, or a bad ``ci``/``n_boot``.
    """
    from scipy.stats import t as student_t

    x = np.asarray(per_seed, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise InputError(f"over_seeds needs ≥ 2 seeds of per-example values (a seeds × examples array), got {x.shape}")
    keep = ~np.isnan(x).any(axis=0)
    by_example = aggregate(x[:, keep].mean(axis=0), n_boot=n_boot, seed=seed, ci=ci)
    means = x[:, keep].mean(axis=1)
    n = means.size
    sd = float(means.std(ddof=1))
    half = float(student_t.ppf((1 + ci) / 2, n - 1) * sd / math.sqrt(n))
    center = float(means.mean())
    return SeedAggregate(
        mean=center,
        per_seed=tuple(float(m) for m in means),
        sd_seeds=sd,
        ci_seeds=(center - half, center + half),
        ci_examples=(by_example.ci_low, by_example.ci_high),
        n_seeds=n,
        n_used=int(keep.sum()),
        n_excluded=int((~keep).sum()),
    )


def paired_difference(
    a: Sequence[float], b: Sequence[float], n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> Aggregate:
    """Mean of the per-example differences a_k − b_k with a percentile-bootstrap CI (:func:`aggregate`).

    Both methods are scored on the same examples, so resampling examples (not the two means separately)
    keeps the pairing and gives the narrower, correct interval for "is A better than B on this data".

    Args:
        a, b: per-example values of two methods, in the same example order (e.g. pairwise AUCs).
        n_boot, seed, ci: as in :func:`aggregate`.

    Returns:
        :class:`Aggregate` of the differences; pairs where either value is ``nan`` are excluded and counted.

    Raises:
        ValueError: when ``a`` and ``b`` differ in length.
    """
    x = np.asarray(a, dtype=np.float64).reshape(-1)
    y = np.asarray(b, dtype=np.float64).reshape(-1)
    if x.shape != y.shape:
        raise InputError(f"paired values differ in length: {x.size} vs {y.size}")
    return aggregate(x - y, n_boot=n_boot, seed=seed, ci=ci)
