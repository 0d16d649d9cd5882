"""How good a Monte-Carlo Shapley estimate is for its budget: many independent estimates of one game, their
errors against the exact values, and how often they keep the exact Top-K set.

- :func:`repeated_monte_carlo` draws one estimate per seed, each equal to ``monte_carlo(game, M, seed=s)``; for a
  value-network game all of them come from one batched fast-path call (the context repeated once per seed),
  which is what makes hundreds of repeats per budget affordable on a CPU.
- :func:`topk_stability` is the fraction of estimates whose Top-K set is the exact one, the event that
  Theorem A.3 (:func:`scp.core.theory.topk_sample_size`) guarantees with probability ≥ 1 − δ.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from scp.core.fast_path import deepsets_shapley, has_fast_path
from scp.core.monte_carlo import monte_carlo
from scp.core.result import ShapleyResult
from scp.devices import eval_mode
from scp.errors import InputError

__all__ = ["max_abs_errors", "repeated_monte_carlo", "topk_set", "topk_stability"]


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
