"""Monte-Carlo Shapley values (the paper's Algorithm 1), for any game and for padded value-network batches.

φ_i = E_π[v(P_i^π ∪ {i}) − v(P_i^π)], P_i^π the players before i in a uniform random permutation π, so with M
permutations φ̂_i = (1/M)·Σ_m [v(P_i^{π_m} ∪ {i}) − v(P_i^{π_m})]: every permutation's n − 1 interior prefixes plus ∅
and N, M·(n − 1) + 2 coalition values.  A ``budget`` of B evaluations buys M = ⌊(B − 2)/(n − 1)⌋ permutations
(even with antithetic pairs; the position control variate's 2·n·P evaluations come off B first).

- :func:`monte_carlo` on one game: a :class:`scp.core.fast_path.FastPathGame` over a Deep Sets network takes the
  fast path (:mod:`scp.core.fast_path`); any other game values all prefix coalitions in one batched call.
- :func:`batched_monte_carlo` on a padded batch of value-network contexts (one fast-path call; what
  :func:`scp.models.scoring.score_contexts` uses), each context's permutations from its own seed.
- :func:`naive_monte_carlo` is Algorithm 1 as written, one game call per coalition (a benchmark reference).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from scp.core.fast_path import (
    POSITION_GRID,
    check_fast_options,
    check_fast_path_memory,
    deepsets_shapley,
    fast_path_monte_carlo,
    has_fast_path,
)
from scp.core.games import Game, check_game, evaluate_game
from scp.core.memory import check_memory
from scp.core.permutations import (
    PERMUTATION_BYTES,
    check_flag,
    check_permutation_count,
    check_permutations,
    resolve_seed,
    sample_permutations,
    std_errors,
)
from scp.core.result import ShapleyResult, check_budget, refuse_budget_below
from scp.devices import eval_mode, resolve_device
from scp.errors import InputError

__all__ = [
    "DEFAULT_PERMUTATIONS",
    "GENERIC_BYTES",
    "MC_PATHS",
    "batched_monte_carlo",
    "check_monte_carlo_memory",
    "monte_carlo",
    "naive_monte_carlo",
    "permutations_for_budget",
]

DEFAULT_PERMUTATIONS = 50
"""M when neither ``n_permutations`` nor ``budget`` is given (the paper's M = 50)."""
MC_PATHS = ("auto", "generic", "fast")
GENERIC_BYTES = 56
"""Bytes the generic path holds per player per permutation besides the permutations and the coalition matrices (2·n
bytes: the prefixes and their stacked copy): ranks, coalition values, prefix values and marginals, int64/float64.
What the game itself allocates to value the M·(n − 1) coalitions is not counted."""


def permutations_for_budget(
    budget: int, n: int, antithetic: bool = False, control_variate: str | None = None, method: str = "monte_carlo"
) -> int:
    """The most permutations M whose M·(n − 1) + 2 evaluations (+ 2·n·P with the position control variate) fit in
    ``budget``: M = ⌊(budget − 2 − extra)/(n − 1)⌋, rounded down to even with ``antithetic``.  With n = 1 every M
    gives φ = v(N) − v(∅) from 2 evaluations: M = 1 (2 with antithetic pairs).  A budget that buys fewer than
    one permutation (one pair) is refused, naming the need."""
    budget = check_budget(budget)
    extra = 2 * n * POSITION_GRID if control_variate == "position" else 0
    least = 2 if antithetic else 1
    need = least * (n - 1) + 2 + extra
    what = f"{'an antithetic pair' if antithetic else 'one permutation'}, {least}·(n − 1) + 2" + (
        f" + 2·n·{POSITION_GRID} (the position control variate)" if extra else ""
    )
    refuse_budget_below(budget, need, method, n, what)
    if n == 1:
        return least
    m = (budget - 2 - extra) // (n - 1)
    return m - m % 2 if antithetic else m


def _resolve_count(
    n: int, n_permutations: int | None, budget: int | None, antithetic: bool, control_variate: str | None
) -> int:
    if budget is not None and n_permutations is not None:
        raise InputError(
            f"give budget (evaluations) or n_permutations (M), not both; got budget={budget!r}, "
            f"n_permutations={n_permutations!r}"
        )
    if budget is not None:
        return permutations_for_budget(budget, n, antithetic, control_variate)
    m = DEFAULT_PERMUTATIONS if n_permutations is None else n_permutations
    check_permutation_count(m, antithetic)
    return m


def check_monte_carlo_memory(
    game: Game, n_permutations: int, path: str = "auto", device=None, method: str = "monte_carlo"
) -> None:
    """Refuse Monte Carlo with ``n_permutations`` on ``game`` before sampling when its arrays need more memory than
    is available: the fast path's (:func:`scp.core.fast_path.check_fast_path_memory`, on the network's device), or
    the generic path's M·n·(:data:`~scp.core.permutations.PERMUTATION_BYTES` + :data:`GENERIC_BYTES` + 2·n)
    bytes."""
    n = check_game(game)
    if path != "generic" and has_fast_path(game):
        where = resolve_device(device) if device is not None else next(game.net.parameters()).device
        check_fast_path_memory(1, n_permutations, n, where)
        return
    check_memory(
        int(n_permutations) * n * (PERMUTATION_BYTES + GENERIC_BYTES + 2 * n),
        f"{method} with M = {n_permutations:,} permutations of n = {n:,} players",
        "use fewer permutations (a smaller budget or n_permutations)",
    )


def monte_carlo(
    game: Game,
    n_permutations: int | None = None,
    antithetic: bool = False,
    seed: int | None = None,
    device: str | torch.device | None = None,
    path: str = "auto",
    permutations: np.ndarray | None = None,
    control_variate: str | None = None,
    prefix: str = "auto",
    *,
    budget: int | None = None,
) -> ShapleyResult:
    """Algorithm 1: φ̂_i = (1/M) Σ_m [v(P_i^{π_m} ∪ {i}) − v(P_i^{π_m})] over M uniform random permutations.

    M is ``n_permutations`` (default :data:`DEFAULT_PERMUTATIONS`) or what ``budget`` evaluations buy
    (:func:`permutations_for_budget`); not both.  ``path``: "auto" (the fast path for a game that has one,
    :func:`scp.core.fast_path.has_fast_path`; generic otherwise), "generic" (all prefix coalitions of all
    permutations in one batched game call; any game) or "fast".  Explicit ``permutations`` (M, n) override sampling,
    so both paths can be compared on the same draws.  ``control_variate="position"`` and ``prefix`` are options of
    the fast path (see :func:`scp.core.fast_path.first_layer_shapley`); ``device`` is where the fast path runs.
    """
    if path not in MC_PATHS:
        raise InputError(f"path must be 'auto', 'generic' or 'fast'; got {path!r}")
    check_fast_options(control_variate, prefix)
    check_flag(antithetic, "antithetic")
    seed = resolve_seed(seed)
    n = check_game(game)
    if permutations is None:
        m = _resolve_count(n, n_permutations, budget, antithetic, control_variate)
        check_monte_carlo_memory(game, m, path, device)
        permutations = sample_permutations(n, m, seed, antithetic)
    else:
        if budget is not None:
            raise InputError("give budget or explicit permutations, not both")
        permutations = check_permutations(permutations, n)
        check_permutation_count(permutations.shape[0], antithetic)
    fast = has_fast_path(game)
    if path == "fast" and not fast:
        raise InputError(
            "the fast path needs a game over a Deep Sets network (a ValueNetGame: first_layer_rows() "
            "and a network with rho_first_layer)"
        )
    if path != "generic" and fast:
        return fast_path_monte_carlo(game, permutations, antithetic, seed, device, control_variate, prefix)
    if control_variate is not None:
        raise InputError(
            f"control_variate={control_variate!r} needs the fast path (a ValueNetGame over a Deep Sets "
            "network); the generic path takes any game and supports none"
        )
    return _monte_carlo_generic(game, permutations, antithetic, seed)


def _monte_carlo_generic(game: Game, perms: np.ndarray, antithetic: bool, seed: int) -> ShapleyResult:
    m, n = perms.shape
    # prefix coalitions: row (k, t) holds the first t players of permutation k, t = 1..n-1 (∅ and N shared)
    ranks = np.argsort(perms, axis=1)  # position of each player in each permutation
    t = np.arange(1, n)
    interior = ranks[:, None, :] < t[None, :, None]  # (M, n-1, n)
    values = evaluate_game(game, np.vstack([np.zeros((1, n), bool), np.ones((1, n), bool), interior.reshape(-1, n)]))
    v_empty, v_grand = values[0], values[1]
    prefix = np.concatenate([np.full((m, 1), v_empty), values[2:].reshape(m, n - 1), np.full((m, 1), v_grand)], 1)
    marg_in_order = np.diff(prefix, axis=1)  # (M, n): marginal of the t-th player of each permutation
    marginals = np.take_along_axis(marg_in_order, ranks, axis=1)  # back to player order
    return ShapleyResult(
        values=marginals.mean(0),
        std_errors=std_errors(marginals, antithetic),
        n_evaluations=int(m * (n - 1) + 2),
        method="monte_carlo[generic]",
        seed=seed,
        n_permutations=m,
        metadata={"antithetic": antithetic},
    )


def batched_monte_carlo(
    net,
    units: torch.Tensor,
    query: torch.Tensor,
    mask: torch.Tensor | None = None,
    extra: torch.Tensor | None = None,
    *,
    seeds: Sequence[int],
    budget: int | None = None,
    n_permutations: int | None = None,
    antithetic: bool = False,
    control_variate: str | None = None,
    prefix: str = "auto",
    path: str = "auto",
    chunk_elements: int = 1 << 23,
) -> list[ShapleyResult]:
    """:func:`monte_carlo` for a padded batch of value-network contexts, without gradients: one result per context.

    Context i's permutations come from ``seeds[i]`` and its own length, so its result equals
    ``monte_carlo(game_i, M, seed=seeds[i])`` (up to float rounding) whatever the batch.  With a ``budget`` each
    context gets the M its length buys (contexts of equal M share one call); otherwise one
    :func:`scp.core.fast_path.deepsets_shapley` call with M = ``n_permutations`` (default
    :data:`DEFAULT_PERMUTATIONS`).  ``path`` must allow the fast path ("auto" or "fast")."""
    if path not in ("auto", "fast"):
        raise InputError(
            f"batched Monte Carlo runs the fast path; path={path!r} applies to one game "
            "(scp.core.estimators.estimate on a ValueNetGame)"
        )
    b, width = units.shape[:2]
    mask = torch.ones(b, width, dtype=torch.bool, device=units.device) if mask is None else mask.to(torch.bool)
    seeds = [resolve_seed(s) for s in seeds]
    if len(seeds) != b:
        raise InputError(f"got {len(seeds)} seeds for a batch of {b} contexts")
    n_units = mask.sum(1).tolist()
    counts = [_resolve_count(n, n_permutations, budget, antithetic, control_variate) for n in n_units]
    options = dict(antithetic=antithetic, control_variate=control_variate, prefix=prefix, chunk_elements=chunk_elements)
    out: list[ShapleyResult | None] = [None] * b
    with eval_mode(net), torch.no_grad():
        for m in dict.fromkeys(counts):  # one call per distinct M, in order of appearance
            rows = [i for i, c in enumerate(counts) if c == m]
            if len(rows) == b:
                res = deepsets_shapley(net, units, query, mask, extra, n_permutations=m, seed=seeds, **options)
            else:
                w = max(n_units[i] for i in rows)
                res = deepsets_shapley(
                    net,
                    units[rows, :w],
                    query[rows],
                    mask[rows, :w],
                    None if extra is None else extra[rows, :w],
                    n_permutations=m,
                    seed=[seeds[i] for i in rows],
                    **options,
                )
            for j, i in enumerate(rows):
                out[i] = res.result(j)
    return out


def naive_monte_carlo(
    game: Game, n_permutations: int | None = None, seed: int | None = None, *, budget: int | None = None
) -> ShapleyResult:
    """Algorithm 1 as written: one game call per prefix coalition, M·(n + 1) evaluations (a reference for
    benchmarks only; a ``budget`` buys M = ⌊budget/(n + 1)⌋)."""
    seed = resolve_seed(seed)
    n = check_game(game)
    if budget is not None:
        if n_permutations is not None:
            raise InputError("give budget (evaluations) or n_permutations (M), not both")
        refuse_budget_below(budget, n + 1, "naive_monte_carlo", n, "one permutation, n + 1")
        n_permutations = check_budget(budget) // (n + 1)
    n_permutations = DEFAULT_PERMUTATIONS if n_permutations is None else n_permutations
    perms = sample_permutations(n, n_permutations, seed)
    phi = np.zeros(n)
    for perm in perms:
        coalition = np.zeros((1, n), dtype=bool)
        previous = evaluate_game(game, coalition)[0]
        for player in perm:
            coalition[0, player] = True
            current = evaluate_game(game, coalition)[0]
            phi[player] += current - previous
            previous = current
    return ShapleyResult(
        values=phi / n_permutations,
        n_evaluations=n_permutations * (n + 1),
        method="monte_carlo[naive]",
        seed=seed,
        n_permutations=n_permutations,
    )
