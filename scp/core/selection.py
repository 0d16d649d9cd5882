"""Which units to keep, from per-unit scores: top-K, keep ratio, a threshold, a token budget, or a share of the value.

The one keep-count rule of the package lives here (:func:`keep_count`); kept units stay in their original order.
Two criteria choose how many units each query keeps: a threshold τ on the scores (calibrated on labelled contexts to
a target recall by :func:`calibrate_threshold`), and ``value_fraction`` α, the shortest prefix of the ranking whose
game value reaches v(∅) + α·(v* − v(∅)), v* the best prefix value, v(N) for a monotone game
(:func:`value_prefix_count`)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from scp.errors import InputError, warn_user


def is_real(value) -> bool:
    """A real number, Python or NumPy (``np.float32(0.5)``, ``np.int64(3)``), but not a bool (NaN is a real)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def is_integer(value) -> bool:
    """An integer, Python or NumPy (``np.int64(3)``), but not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


CRITERIA = ("top_k", "keep_ratio", "threshold", "token_budget", "value_fraction")


def check_criterion(*, top_k=None, keep_ratio=None, threshold=None, token_budget=None, value_fraction=None) -> str:
    """Validate that exactly one pruning criterion is given, with a valid value; returns its description.

    Cheap, so callers run it before any expensive ranking.
    """
    given = {
        k: v
        for k, v in dict(
            top_k=top_k,
            keep_ratio=keep_ratio,
            threshold=threshold,
            token_budget=token_budget,
            value_fraction=value_fraction,
        ).items()
        if v is not None
    }
    if len(given) != 1:
        raise InputError(f"give exactly one of {', '.join(CRITERIA)}; got {sorted(given) or 'none'}")
    ((name, value),) = given.items()
    is_int = is_integer(value)
    if name == "top_k" and not (is_int and value >= 1):
        raise InputError(f"top_k must be an integer ≥ 1; got {value!r}")
    if name == "keep_ratio" and not (is_real(value) and 0 < value <= 1):  # NaN fails the comparison
        raise InputError(f"keep_ratio must be a number in (0, 1]; got {value!r} ({type(value).__name__})")
    if name == "threshold" and not (
        (isinstance(value, str) and value == "mean") or (is_real(value) and math.isfinite(value))
    ):
        raise InputError(f"threshold must be 'mean' or a finite number; got {value!r}")
    if name == "token_budget" and not (is_int and value >= 0):
        raise InputError(f"token_budget must be a non-negative integer; got {value!r} ({type(value).__name__})")
    if name == "value_fraction" and not (is_real(value) and 0 < value <= 1):
        raise InputError(
            f"value_fraction must be a number in (0, 1] (the share of the best prefix's gain over v(∅) to reach); "
            f"got {value!r} "
            f"({type(value).__name__})"
        )
    if isinstance(value, np.generic):  # described by the Python number it is: np.float32(0.1) is 0.10000000149…,
        value = value.item()  # which keeps more units than 0.1 and must not read "keep_ratio=0.1"
    return f"{name}={value}"


def select(
    scores: Sequence[float],
    *,
    top_k: int | None = None,
    keep_ratio: float | None = None,
    threshold: str | float | None = None,
    token_counts: Sequence[int] | None = None,
    token_budget: int | None = None,
    value_fraction: float | None = None,
    prefix_values: Sequence[float] | None = None,
) -> tuple[np.ndarray, str]:
    """Indices to keep (sorted) under exactly one criterion, and the criterion's description.

    - ``top_k``: the k highest scores;  ``keep_ratio``: the ceil(r·n) highest (at least one);
    - ``threshold="mean"``: φ_i ≥ mean(φ) (the paper's Algorithm 3), or a number τ: φ_i ≥ τ, and at least the
      best unit when no score reaches τ (a query always keeps something, as with a keep ratio);
    - ``token_budget`` (needs ``token_counts``): greedily by decreasing score, keep each unit that still fits
      (a budget below every unit's length keeps nothing, with a warning);
    - ``value_fraction`` α (needs ``prefix_values``, v(S_k) of the top-k prefixes S_k of this ranking for
      k = 0…n): the shortest prefix with v(S_k) ≥ v(∅) + α·(v* − v(∅)), v* = max_k v(S_k) (v(N) when the game
      is monotone along the ranking), k ≥ 1 (:func:`value_prefix_count`).
    Ties are broken by original position (earlier first).
    """
    desc = check_criterion(
        top_k=top_k,
        keep_ratio=keep_ratio,
        threshold=threshold,
        token_budget=token_budget,
        value_fraction=value_fraction,
    )
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    n = s.size
    if n == 0:
        raise InputError("empty context: nothing to prune")
    if not np.isfinite(s).all():
        raise InputError("scores contain NaN or inf")
    order = np.argsort(-s, kind="stable")
    if top_k is not None:
        keep = order[: min(top_k, n)]
    elif keep_ratio is not None:
        keep = order[: keep_count(n, keep_ratio)]
    elif threshold is not None:
        keep = np.flatnonzero(s >= (s.mean() if threshold == "mean" else float(threshold)) - 1e-12)
        if keep.size == 0:  # no score reaches τ: the best unit alone
            keep = order[:1]
    elif value_fraction is not None:
        if prefix_values is None:
            raise InputError(
                "value_fraction needs the game's values of the ranking's prefixes (prefix_values, n + 1 numbers); "
                "only a ranker with a game, a set value network, has them"
            )
        keep = order[: value_prefix_count(prefix_values, value_fraction)]
    else:
        if token_counts is None or len(token_counts) != n:
            raise InputError("token_budget needs one token count per unit")
        counts, used, chosen = np.asarray(token_counts), 0, []
        for i in order:
            if used + counts[i] <= token_budget:
                chosen.append(i)
                used += counts[i]
        keep = np.asarray(chosen, dtype=np.int64)
        if not chosen:
            warn_user(
                f"token_budget={token_budget} keeps no unit: the shortest of the {n} units has "
                f"{int(counts.min())} tokens, so the pruned text is empty"
            )
    return np.sort(keep), desc


def keep_count(n: int, keep_ratio: float) -> int:
    """The one keep-count rule: K = max(1, ⌈r·n⌉) units for a keep ratio r ∈ (0, 1], in float64 (as a criterion's
    description reads) with a 1e-9 allowance, so 0.3·10 keeps 3 where float arithmetic gives 3.0000000000000004."""
    if not is_real(keep_ratio) or not 0 < keep_ratio <= 1:  # NumPy scalars are numbers too; NaN fails
        raise InputError(f"keep_ratio must be a number in (0, 1]; got {keep_ratio!r}")
    return max(1, math.ceil(float(keep_ratio) * n - 1e-9))


def value_prefix_count(prefix_values: Sequence[float], fraction: float) -> int:
    """The keep count of the value-fraction criterion: the smallest k ≥ 1 with
    v(S_k) ≥ v(∅) + α·(v* − v(∅)), v* = max_k v(S_k), where ``prefix_values`` = (v(S_0) = v(∅), v(S_1), …,
    v(S_n) = v(N)) are the game's values of the ranking's top-k prefixes.

    For a game monotone along the ranking v* = v(N), and α is the share of the value the whole context adds that
    the kept units must recover (Σ_i φ_i = v(N) − v(∅) by efficiency).  A learned game need not be monotone: a
    value network can score a context lower once distractors join the evidence (v(N) < v(∅) happens), and against
    v(N) a single unit would always suffice; the peak of the curve is what the ranking can reach.  When no prefix
    is worth more than v(∅), one unit is kept.
    """
    v = np.asarray(prefix_values, dtype=np.float64).reshape(-1)
    if v.size < 2:
        raise InputError(f"prefix_values must hold v(∅), …, v(N): n + 1 ≥ 2 numbers; got {v.size}")
    if not np.isfinite(v).all():
        raise InputError("prefix_values contain NaN or inf")
    if not (is_real(fraction) and 0 < fraction <= 1):
        raise InputError(f"value_fraction must be a number in (0, 1]; got {fraction!r}")
    peak = v[1:].max()
    if peak <= v[0]:
        return 1
    target = v[0] + float(fraction) * (peak - v[0])
    return int(np.flatnonzero(v[1:] >= target - 1e-12 * max(1.0, abs(target)))[0]) + 1


def calibrate_threshold(
    scores: Sequence[Sequence[float]], labels: Sequence[Sequence[int]], target_recall: float
) -> float:
    """The largest threshold τ whose mean recall over labelled contexts reaches ``target_recall``.

    Recall of one context under τ is |{i ∈ gold : φ_i ≥ τ}| / |gold|, with the best unit kept alone when no score
    reaches τ (:func:`select`); it is averaged over the contexts with at least one gold unit (the others are
    ignored).  Mean recall falls as τ grows, so the largest τ reaching the target keeps the fewest units; the
    candidates are the scores themselves.  Calibrate on validation contexts, apply to test ones.
    """
    if not (is_real(target_recall) and 0 < target_recall <= 1):
        raise InputError(f"target_recall must be a number in (0, 1]; got {target_recall!r}")
    if len(scores) != len(labels):
        raise InputError(f"got {len(scores)} score vectors for {len(labels)} label vectors")
    pairs = []
    for i, (s, y) in enumerate(zip(scores, labels)):
        s, y = np.asarray(s, dtype=np.float64).reshape(-1), np.asarray(y).reshape(-1) > 0
        if s.size != y.size:
            raise InputError(f"context {i}: {s.size} scores for {y.size} labels")
        if not np.isfinite(s).all():
            raise InputError(f"context {i}: scores contain NaN or inf")
        if y.any():
            pairs.append((s, y))
    if not pairs:
        raise InputError("no context with a gold unit to calibrate a threshold on")
    candidates = np.unique(np.concatenate([s for s, _ in pairs]))[::-1]  # decreasing τ: recall grows
    recall = np.zeros(candidates.size)
    for s, y in pairs:
        gold = np.sort(s[y])
        # |{gold ≥ τ}| for every candidate τ, with the same 1e-12 allowance as select
        counts = gold.size - np.searchsorted(gold, candidates - 1e-12, side="left")
        floor = float(y[int(np.argmax(s))])  # τ above every score: the best unit alone
        recall += np.where(candidates > s.max() + 1e-12, floor, counts) / gold.size
    recall /= len(pairs)
    reached = np.flatnonzero(recall >= target_recall - 1e-12)
    if not reached.size:  # cannot happen: τ = the smallest score keeps everything, recall 1
        raise InputError(f"no threshold reaches recall {target_recall}")
    return float(candidates[reached[0]])
