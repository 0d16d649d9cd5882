"""How good a Monte-Carlo Shapley estimate is for its budget: many independent estimates of one game, their
errors against the exact values, and how often they keep the exact Top-K set.

- :func:`repeated_monte_carlo` draws one estimate per seed, each equal to ``monte_carlo(game, M, seed=s)``; for a
  value-network game all of them come from one batched fast-path call (the context repeated once per seed),
  which is what makes hundreds of repeats per budget affordable on a CPU.
- :func:`topk_stability` is the fraction of estimates whose Top-K set is the exact one, the event that
  Theorem A.3 (:func:`scp.core.theory.topk_sample_size`) guarantees with probability ≥ 1 − δ.
- :func:`error_bound_rows` tabulates the measured errors of many games against the Theorem 3.1 bound per budget,
  :func:`topk_rows` each game's Top-K stability against the Theorem A.3 sample size, and
  :func:`topk_theorem_violations` counts the cases in which that guarantee was tested and failed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from scp.core import theory
from scp.core.fast_path import deepsets_shapley, has_fast_path
from scp.core.monte_carlo import monte_carlo
from scp.core.result import ShapleyResult
from scp.devices import eval_mode
from scp.errors import InputError

__all__ = [
    "error_bound_rows",
    "max_abs_errors",
    "repeated_monte_carlo",
    "topk_rows",
    "topk_set",
    "topk_stability",
    "topk_theorem_violations",
]


def repeated_monte_carlo(game, n_permutations: int, seeds: Sequence[int]) -> list[ShapleyResult]:
    """Independent Monte-Carlo estimates of ``game``'s Shapley values, one per seed.

    Args:
        game: any game; one with the fast path (:func:`scp.core.fast_path.has_fast_path`, e.g. a
            :class:`~scp.models.game.ValueNetGame` over a Deep Sets network) takes one batched call.
        n_permutations: M, permutations per estimate.
        seeds: one seed per estimate.

    Returns:
        ``[monte_carlo(game, n_permutations, seed=s) for s in seeds]`` (equal up to float rounding), each with
        ``n_evaluations`` = M·(n − 1) + 2.
    """
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise InputError("give at least one seed")
    if not has_fast_path(game):
        return [monte_carlo(game, n_permutations, seed=s) for s in seeds]
    net, r = game.net, len(seeds)
    with eval_mode(net), torch.no_grad():
        extra = None if game.extra is None else game.extra[None].expand(r, -1, -1)
        batch = deepsets_shapley(
            net,
            game.units[None].expand(r, -1, -1),
            game.query[None].expand(r, -1),
            extra=extra,
            n_permutations=n_permutations,
            seed=seeds,
        )
    return [batch.result(i) for i in range(r)]


def max_abs_errors(estimates: Sequence[ShapleyResult], exact_values) -> np.ndarray:
    """max_i |φ̂_i − φ_i| of each estimate (an array as long as ``estimates``)."""
    phi = np.asarray(exact_values, dtype=np.float64)
    return np.array([float(np.abs(np.asarray(e.values) - phi).max()) for e in estimates])


def topk_set(values, k: int) -> frozenset[int]:
    """The indices of the ``k`` largest values (ties broken towards the lower index)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if not 1 <= k <= v.size:
        raise InputError(f"k must satisfy 1 <= k <= n = {v.size}; got {k}")
    return frozenset(np.argsort(-v, kind="stable")[:k].tolist())


def topk_stability(estimates: Sequence[ShapleyResult], exact_values, k: int) -> float:
    """Fraction of ``estimates`` whose Top-K set equals the Top-K set of ``exact_values``."""
    if not estimates:
        raise InputError("no estimates")
    truth = topk_set(exact_values, k)
    return float(np.mean([topk_set(e.values, k) == truth for e in estimates]))


def error_bound_rows(
    errors, budgets: Sequence[int], n_players: int, delta: float, ranges: Sequence[float]
) -> list[dict]:
    """Measured Monte-Carlo errors of several games against the Theorem 3.1 bound, one row per budget M.

    Theorem 3.1 (:func:`scp.core.theory.mc_error_bound`): if v takes values in [0, B], then with probability
    ≥ 1 − δ every player's error is at most b_B(M) = B·sqrt(2 ln(2n/δ)/M).  The same proof holds with B replaced
    by a game's range R_g = max_S v(S) − min_S v(S).  With e_{g,r}(M) = max_i |φ̂_i − φ_i| of repeat r of game g,
    the row of budget M holds ``M``, ``n_evaluations`` = M·(n − 1) + 2, ``mean_error`` and ``p95_error`` (the mean
    and 95th percentile of e over all games and repeats), ``bound_B1`` = b_1(M), ``bound_range`` = the mean over
    games of b_{R_g}(M), ``inside_B1`` = the fraction of e ≤ b_1(M) and ``inside_range`` = the fraction of
    e_{g,r} ≤ b_{R_g}(M).

    Args:
        errors: (games, budgets, repeats) array of the errors e_{g,r}(M) (e.g. :func:`max_abs_errors` per game
            and budget).
        budgets: the k budgets M, in the order of the array's second axis.
        n_players: n, players of every game.
        delta: the failure probability δ.
        ranges: R_g of each game.

    Returns:
        One dict per budget, in the order of ``budgets``.
    """
    e3 = np.asarray(errors, dtype=np.float64)
    if e3.ndim != 3 or e3.shape[:2] != (len(ranges), len(budgets)):
        raise InputError(
            f"errors must have shape (games, budgets, repeats) = ({len(ranges)}, {len(budgets)}, r); got {e3.shape}"
        )
    rows = []
    for j, M in enumerate(budgets):
        per_game = e3[:, j, :]
        e, b1 = per_game.reshape(-1), theory.mc_error_bound(1.0, n_players, M, delta)
        br = [theory.mc_error_bound(R, n_players, M, delta) for R in ranges]
        rows.append(
            dict(
                M=M,
                n_evaluations=M * (n_players - 1) + 2,
                mean_error=e.mean(),
                p95_error=np.quantile(e, 0.95),
                bound_B1=b1,
                bound_range=np.mean(br),
                inside_B1=(e <= b1).mean(),
                inside_range=np.mean([x <= b for x, b in zip(per_game, br)]),
            )
        )
    return rows


def topk_rows(exact_values: Sequence, stability, budgets: Sequence[int], k: int, delta: float) -> list[dict]:
    """Each game's measured Top-K stability against the sample size of Theorem A.3, one row per game.

    With Δ_K = φ_(K) − φ_(K+1) the gap between the K-th and (K+1)-th exact values
    (:func:`scp.core.theory.topk_gap`), Theorem A.3 says M ≥ 8B² ln(2n/δ)/Δ_K² permutations keep the exact Top-K
    set with probability ≥ 1 − δ (:func:`scp.core.theory.topk_sample_size`, B = 1, the bound of the value
    networks' outputs).  A game's row holds ``game`` (its index), ``gap`` = Δ_K, ``m_theorem`` = that M (∞ when
    Δ_K = 0), ``m_measured`` = the smallest budget M of the sweep with stability s(M) ≥ 1 − δ (``nan`` when none
    reaches it), and ``stability_M<M>`` = s(M) for every budget.

    Args:
        exact_values: the exact Shapley values φ of each game (n each).
        stability: (games, budgets) Top-K stabilities s(M) (e.g. :func:`topk_stability`).
        budgets: the budgets M, increasing, in the order of ``stability``'s columns.
        k: K.
        delta: δ.
    """
    if len(stability) != len(exact_values) or any(len(s) != len(budgets) for s in stability):
        raise InputError(f"need one stability per game ({len(exact_values)}) and budget ({len(budgets)})")
    rows = []
    for g, (phi, curve) in enumerate(zip(exact_values, stability)):
        gap = theory.topk_gap(phi, k)
        needed = theory.topk_sample_size(1.0, len(phi), gap, delta) if gap > 0 else np.inf
        reached = [M for M, s in zip(budgets, curve) if s >= 1 - delta]
        rows.append(
            dict(
                game=g,
                gap=gap,
                m_theorem=needed,
                m_measured=reached[0] if reached else np.nan,
                **{f"stability_M{M}": s for M, s in zip(budgets, curve)},
            )
        )
    return rows


def topk_theorem_violations(rows: Sequence[dict], budgets: Sequence[int], delta: float) -> int:
    """Cases where Theorem A.3's guarantee was put to the test and failed: the number of (game, M) pairs with
    M ≥ ``m_theorem`` (the theorem promises stability ≥ 1 − δ) and measured ``stability_M<M>`` < 1 − δ
    (``rows`` of :func:`topk_rows`)."""
    return int(sum(r[f"stability_M{M}"] < 1 - delta and r["m_theorem"] <= M for r in rows for M in budgets))
