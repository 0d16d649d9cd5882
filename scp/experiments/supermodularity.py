"""Supermodularity of trained value networks, measured on real contexts (the paper's Table 22).

On one context a set value network plays the game v(S) = B·σ(g(S)), with the logit game
g(S) = ρ(base + Σ_{c∈S} ψ(x_c)).  A game is supermodular (convex) when every second difference

    Δ_ij v(S) = v(S ∪ {i, j}) − v(S ∪ {i}) − v(S ∪ {j}) + v(S) ≥ 0,   i ≠ j ∉ S,

i.e. a unit adds at least as much to a larger coalition.  :class:`scp.models.value_net.ConvexDeepSets` makes g
supermodular by construction (ψ ≥ 0, ρ convex and non-decreasing), so its logit game can only fail by rounding;
the bounded game v = B·σ(g) is supermodular only where g ≤ 0 (σ is convex there) and may fail above.  An
unconstrained :class:`scp.models.value_net.DeepSetsValue` has no such guarantee for either game.

- :func:`float64_network`: a float64, eval-mode copy of a network, optionally returning the logit g.
- :func:`context_game`: the game (bounded or logit) of a network on one :class:`scp.data.features.Context`.
- :func:`violation_rates`: sampled second differences on each context
  (:func:`scp.core.theory.supermodularity_violation_rate`), both games, one row per (context, game).
- :func:`summarize_rates`: per game, the pooled violation rate, the mean rate over contexts with a bootstrap CI,
  and the largest violation; :func:`rates_over_seeds` the same for one network trained with several seeds.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from scp.core.metrics import aggregate, over_seeds
from scp.core.permutations import derive_seed
from scp.core.theory import supermodularity_violation_rate
from scp.errors import InputError
from scp.models.game import ValueNetGame

GAMES = ("logit", "bounded")
"""The two games of a network on a context: the logit g(S) and the bounded v(S) = B·σ(g(S))."""

__all__ = ["GAMES", "context_game", "float64_network", "rates_over_seeds", "summarize_rates", "violation_rates"]


def _identity(logits):
    return logits


def float64_network(net, logit: bool = False):
    """A float64 copy of a set value network in eval mode (the original is left unchanged).

    Args:
        net: a :class:`scp.models.value_net.SetValueNet` (DeepSetsValue or ConvexDeepSets).
        logit: return the logit g(S) instead of the bounded value: the copy's squash (B·σ or the clip) is the
            identity, so a skip path, if any, stays in the logit.

    Returns:
        The copy.
    """
    from scp.models.pointwise import PointwiseScorer

    if isinstance(net, PointwiseScorer) or not hasattr(net, "rho_first_layer"):
        raise InputError(f"{type(net).__name__} is not a set value network (the pointwise control plays no game)")
    out = copy.deepcopy(net).double().eval()
    if logit:
        out.squash = _identity  # an instance attribute shadows SetValueNet.squash
    return out


def context_game(net, context, logit: bool = False) -> ValueNetGame:
    """The game of ``net`` on one context, in float64, ψ computed once per unit.

    Args:
        net: a set value network (see :func:`float64_network`).
        context: a :class:`scp.data.features.Context` built with the network's features.
        logit: the logit game g instead of v = B·σ(g).

    Returns:
        A :class:`scp.models.game.ValueNetGame` with one player per unit of the context.
    """
    f64 = float64_network(net, logit)
    extra = context.extra
    return ValueNetGame(f64, context.units, context.query, extra, cache_psi=True)


def violation_rates(
    net, contexts: Sequence, n_samples: int = 1000, seed: int = 0, tol: float = 1e-9
) -> list[dict[str, Any]]:
    """Sampled supermodularity violations of ``net``'s games on each context.

    Each context draws ``n_samples`` triples (S, i, j) (a random ordered pair i ≠ j, |S| uniform on 0..n−2, S
    uniform of that size among the other units) with a seed derived from ``seed`` and the context's text, the
    same triples for both games, and counts Δ_ij(S) < −tol in float64.

    Args:
        net: a set value network.
        contexts: :class:`scp.data.features.Context` objects with at least 2 units each.
        n_samples: triples per context.
        seed: base seed.
        tol: violations smaller than this are rounding (float64 values of order 1 are exact to ~1e-15).

    Returns:
        One row per (context, game): ``{"context", "n_units", "game", "rate", "n_violations", "n_samples",
        "max_violation", "value_min", "value_max", "logit_grand"}``; ``value_min``/``value_max`` range over the
        coalitions sampled and ``logit_grand`` is g(N) (v is guaranteed supermodular where g ≤ 0).
    """
    rows = []
    for ctx in contexts:
        if ctx.n_units < 2:
            raise InputError(f"context {ctx.id!r} has {ctx.n_units} unit; a second difference needs 2")
        ctx_seed = derive_seed(seed, ctx.key or ctx.id)
        logit_grand = float(context_game(net, ctx, logit=True).grand_value)
        for game_name in GAMES:
            game, seen = context_game(net, ctx, logit=game_name == "logit"), []

            def value_fn(C, game=game, seen=seen):
                seen.append(game(C))
                return seen[-1]

            r = supermodularity_violation_rate(value_fn, ctx.n_units, n_samples, seed=ctx_seed, tol=tol)
            values = np.concatenate(seen)
            rows.append(
                {
                    "context": ctx.id,
                    "n_units": ctx.n_units,
                    "game": game_name,
                    "rate": r.rate,
                    "n_violations": r.n_violations,
                    "n_samples": r.n_samples,
                    "max_violation": r.max_violation,
                    "value_min": float(values.min()),
                    "value_max": float(values.max()),
                    "logit_grand": logit_grand,
                }
            )
    return rows


def summarize_rates(rows: Sequence[dict], n_boot: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """Per game, the violations of :func:`violation_rates` over all contexts.

    Args:
        rows: rows of :func:`violation_rates` (of one network).
        n_boot: bootstrap resamples of the CI over contexts.
        seed: seed of the bootstrap.

    Returns:
        One row per game present, in the order of :data:`GAMES`: ``{"game", "n_contexts", "n_samples",
        "n_violations", "rate" (pooled: violations / samples), "rate_mean", "rate_ci_low", "rate_ci_high"
        (mean of the per-context rates with its bootstrap CI), "max_violation", "share_logit_grand_le_0"}``.
    """
    out = []
    for game in GAMES:
        sub = [r for r in rows if r["game"] == game]
        if not sub:
            continue
        agg = aggregate([r["rate"] for r in sub], n_boot=n_boot, seed=seed)
        n_samples, n_bad = sum(r["n_samples"] for r in sub), sum(r["n_violations"] for r in sub)
        out.append(
            {
                "game": game,
                "n_contexts": len(sub),
                "n_samples": n_samples,
                "n_violations": n_bad,
                "rate": n_bad / n_samples,
                "rate_mean": agg.mean,
                "rate_ci_low": agg.ci_low,
                "rate_ci_high": agg.ci_high,
                "max_violation": max(r["max_violation"] for r in sub),
                "share_logit_grand_le_0": float(np.mean([r["logit_grand"] <= 0 for r in sub])),
            }
        )
    return out


def rates_over_seeds(rows: Sequence[dict], n_boot: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """Per game, the violations of one network trained with several seeds, on the same contexts.

    Args:
        rows: rows of :func:`violation_rates`, each with a ``train_seed`` key (every seed on the same contexts).
        n_boot, seed: bootstrap resamples and their seed.

    Returns:
        One row per game: ``rate`` (pooled over every seed's triples), ``rate_min``/``rate_max`` (the rates pooled
        per seed); ``rate_mean`` the mean per-context rate over seeds and contexts with
        ``rate_ci_low``/``rate_ci_high`` (bootstrap over contexts of the seed-averaged rates) and
        ``rate_ci_seeds_low``/``_high`` (Student t over the per-seed means, :func:`scp.core.metrics.over_seeds`);
        ``n_seeds``, ``n_contexts``, ``n_samples``, ``n_violations``, ``max_violation``,
        ``share_logit_grand_le_0`` (over seeds and contexts).
    """
    seeds = sorted({r["train_seed"] for r in rows})
    out = []
    for game in GAMES:
        by_seed = {s: [r for r in rows if r["game"] == game and r["train_seed"] == s] for s in seeds}
        if not any(by_seed.values()):
            continue
        contexts = [[r["context"] for r in by_seed[s]] for s in seeds]
        if any(c != contexts[0] for c in contexts):
            raise InputError(f"the seeds' {game} rows are not on the same contexts in the same order")
        agg = over_seeds([[r["rate"] for r in by_seed[s]] for s in seeds], n_boot=n_boot, seed=seed)
        pooled = [sum(r["n_violations"] for r in by_seed[s]) / sum(r["n_samples"] for r in by_seed[s]) for s in seeds]
        every = [r for s in seeds for r in by_seed[s]]
        n_samples, n_bad = sum(r["n_samples"] for r in every), sum(r["n_violations"] for r in every)
        out.append(
            {
                "game": game,
                "n_seeds": len(seeds),
                "n_contexts": len(contexts[0]),
                "n_samples": n_samples,
                "n_violations": n_bad,
                "rate": n_bad / n_samples,
                "rate_min": min(pooled),
                "rate_max": max(pooled),
                "rate_mean": agg.mean,
                "rate_ci_low": agg.ci_examples[0],
                "rate_ci_high": agg.ci_examples[1],
                "rate_ci_seeds_low": agg.ci_seeds[0],
                "rate_ci_seeds_high": agg.ci_seeds[1],
                "max_violation": max(r["max_violation"] for r in every),
                "share_logit_grand_le_0": float(np.mean([r["logit_grand"] <= 0 for r in every])),
            }
        )
    return out
