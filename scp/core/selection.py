"""Which units to keep, from per-unit scores: top-K, keep ratio, average threshold or token budget.

The one keep-count rule of the package lives here (:func:`keep_count`); kept units stay in their original order."""

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


def check_criterion(*, top_k=None, keep_ratio=None, threshold=None, token_budget=None) -> str:
    """Validate that exactly one pruning criterion is given, with a valid value; returns its description.

    Cheap, so callers run it before any expensive ranking.
    """
    given = {
        k: v
        for k, v in dict(top_k=top_k, keep_ratio=keep_ratio, threshold=threshold, token_budget=token_budget).items()
        if v is not None
    }
    if len(given) != 1:
        raise InputError(
            f"give exactly one of top_k, keep_ratio, threshold, token_budget; got {sorted(given) or 'none'}"
        )
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
) -> tuple[np.ndarray, str]:
    """Indices to keep (sorted) under exactly one criterion, and the criterion's description.

    - ``top_k``: the k highest scores;  ``keep_ratio``: the ceil(r·n) highest (at least one);
    - ``threshold="mean"``: φ_i ≥ mean(φ) (the paper's Algorithm 3), or a number: φ_i ≥ that number;
    - ``token_budget`` (needs ``token_counts``): greedily by decreasing score, keep each unit that still fits
      (a budget below every unit's length keeps nothing, with a warning).
    Ties are broken by original position (earlier first).
    """
    desc = check_criterion(top_k=top_k, keep_ratio=keep_ratio, threshold=threshold, token_budget=token_budget)
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
