"""Shapley values in closed form for max games: no sampling, no enumeration.

For v(S) = max_{i∈S} r_i (v(∅) = 0), sorting r ascending with r_(0) = 0 writes v as a sum of union games,
v = Σ_j (r_(j) − r_(j−1))·[S meets T_j] with T_j the players of rank ≥ j, and each union game splits its increment
equally over its |T_j| players: O(m log m).  MaxShapley's utility U(S) = Σ_j w_j max_{i∈S} r_ij is linear in such
games, so its values are the weighted sum of theirs.
"""

from __future__ import annotations

import numpy as np

from scp.errors import InputError

__all__ = ["max_game_shapley", "max_shapley"]


def max_game_shapley(scores) -> np.ndarray:
    """Exact Shapley values of v(S) = max_{i∈S} r_i (v(∅) = 0) in O(m log m).

    With r sorted ascending, r_(0) = 0: v = Σ_j (r_(j) − r_(j−1))·[S meets T_j], T_j the players of rank ≥ j,
    and each union game splits its increment equally over |T_j| = m − j + 1 players, so
    φ_(k) = Σ_{j≤k} (r_(j) − r_(j−1)) / (m − j + 1): one sort and one cumulative sum.
    """
    r = np.asarray(scores, dtype=np.float64).reshape(-1)
    if r.size == 0:
        raise InputError("a max game needs at least one player")
    if not np.isfinite(r).all():
        raise InputError("max-game scores must be finite")
    order = np.argsort(r, kind="stable")
    sorted_r = r[order]
    increments = np.diff(sorted_r, prepend=0.0) / (r.size - np.arange(r.size))
    phi = np.empty_like(r)
    phi[order] = np.cumsum(increments)
    return phi


def max_shapley(relevance, weights=None) -> np.ndarray:
    """MaxShapley: exact Shapley values of U(S) = Σ_j w_j max_{i∈S} r_ij, i.e. Σ_j w_j · φ(max game of column j)."""
    r = np.asarray(relevance, dtype=np.float64)
    if r.ndim == 1:
        r = r[:, None]
    if r.ndim != 2:
        raise InputError(f"relevance must be (n_players, n_aspects); got shape {r.shape}")
    w = np.ones(r.shape[1]) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (r.shape[1],):
        raise InputError(f"weights must have shape ({r.shape[1]},); got {w.shape}")
    return np.stack([max_game_shapley(r[:, j]) for j in range(r.shape[1])], axis=1) @ w
