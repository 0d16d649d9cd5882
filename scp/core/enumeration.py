"""Estimators that value a fixed set of coalitions: exact Shapley values (all 2^n) and leave-one-out (n + 1).

φ_i(v) = Σ_{S ⊆ N∖{i}} |S|!(n−|S|−1)!/n! · (v(S∪{i}) − v(S)).  :func:`exact` enumerates all 2^n coalitions (in
batches, never the whole matrix at once) and applies these weights (:func:`shapley_from_table`), O(n·2^n)
arithmetic; it is refused above ``max_players`` (:data:`DEFAULT_EXACT_LIMIT`), above :data:`EXACT_MAX_BYTES` of
memory, and when a probe of the game's evaluation rate says it would take more than ``max_seconds``.
:func:`leave_one_out` is φ_i^LOO = v(N) − v(N∖{i}): not a Shapley estimator, it fails on redundancy (two copies of a
needed sentence each get ≈ 0).  Both are deterministic: ``seed`` is accepted (every estimator takes the same
arguments, :func:`scp.core.estimators.estimate`) and unused; a ``budget`` below what they need is refused.
"""

from __future__ import annotations

import math
import time

import numpy as np

from scp.core.games import Game, all_coalitions, check_game, evaluate_game, real_values
from scp.core.memory import check_memory
from scp.core.result import ShapleyResult, refuse_budget_below
from scp.core.selection import is_integer, is_real
from scp.errors import InputError

__all__ = [
    "DEFAULT_EXACT_LIMIT",
    "EXACT_BYTES_PER_COALITION",
    "EXACT_MAX_BYTES",
    "EXACT_MAX_SECONDS",
    "check_exact_players",
    "exact",
    "leave_one_out",
    "shapley_from_table",
]

DEFAULT_EXACT_LIMIT = 16
"""The default ``max_players`` of :func:`exact`: a guard against asking for 2^n evaluations by accident.  Above it
exact is refused unless the caller raises ``max_players`` (the pruner's ``estimator_options=dict(max_players=…)``);
raising it never lifts :data:`EXACT_MAX_BYTES` or the ``max_seconds`` probe."""
EXACT_BYTES_PER_COALITION = 24
"""Memory :func:`exact` holds per coalition: the float64 table (8 bytes), the coalition sizes (1) and the work
arrays of :func:`shapley_from_table` (8), rounded up."""
EXACT_MAX_BYTES = 4 << 30
"""The most memory :func:`exact` may take (4 GiB: n ≤ 27 players); a larger game is refused before any evaluation."""
EXACT_MAX_SECONDS = 600.0
"""The default ``max_seconds`` of :func:`exact`: refused when the game's measured rate says enumerating every
coalition takes longer."""
EXACT_PROBE_SECONDS = 0.1  # a probe chunk must take this long before its timing may refuse the run


def exact(
    game: Game,
    max_players: int = DEFAULT_EXACT_LIMIT,
    batch_size: int = 1 << 14,
    max_seconds: float | None = EXACT_MAX_SECONDS,
    *,
    budget: int | None = None,
    seed: int | None = None,
) -> ShapleyResult:
    """Exact Shapley values by enumerating all 2^n coalitions in batches of ``batch_size``.

    Refused, with the number of coalitions, the memory, the expected time and the alternatives: above
    ``max_players`` (default :data:`DEFAULT_EXACT_LIMIT` = 16; raise it to go further), above
    :data:`EXACT_MAX_BYTES` of memory (before any evaluation), and when the game's evaluation rate, measured on a
    few coalitions first (:func:`_probe_exact`, only when 2^n > ``batch_size``), says the whole enumeration would
    take more than ``max_seconds`` (``None``: no time limit, no probe).  ``n_evaluations`` counts the 2^n values of
    the table, not the probe's; a ``budget`` below 2^n is refused.  ``seed`` is unused (deterministic)."""
    n = check_game(game)
    total = 2**n
    refuse_budget_below(budget, total, "exact", n, "2^n")
    check_exact_players(n, max_players)
    memory = f"about {_gib(EXACT_BYTES_PER_COALITION * total)} of memory"
    if EXACT_BYTES_PER_COALITION * total > EXACT_MAX_BYTES:
        raise InputError(
            f"exact Shapley on n = {n} players enumerates 2^{n} = {total:,} coalitions and needs {memory},"
            f" more than the {_gib(EXACT_MAX_BYTES)} exact allows (scp.core.enumeration.EXACT_MAX_BYTES); "
            f"{_exact_alternatives(n)}"
        )
    check_memory(EXACT_BYTES_PER_COALITION * total, f"exact Shapley on n = {n} players", _exact_alternatives(n))
    if not is_integer(batch_size) or batch_size < 1:
        raise InputError(f"batch_size must be an integer ≥ 1; got {batch_size!r}")
    if max_seconds is not None and not (is_real(max_seconds) and max_seconds > 0):
        raise InputError(f"max_seconds must be a number > 0 or None; got {max_seconds!r}")
    if max_seconds is not None and total > batch_size:  # one call only: nothing to extrapolate
        _probe_exact(game, n, batch_size, max_seconds, memory)
    table = np.empty(total)
    for s in range(0, total, batch_size):  # the matrix of all coalitions is never built: one batch at a time
        table[s : s + batch_size] = evaluate_game(game, all_coalitions(n, s, s + batch_size))
    return ShapleyResult(values=shapley_from_table(table), n_evaluations=total, method="exact", std_errors=np.zeros(n))


def check_exact_players(n: int, max_players: int = DEFAULT_EXACT_LIMIT) -> None:
    """Refuse exact Shapley on n players above ``max_players`` (an integer ≥ 1), before anything is computed."""
    if not is_integer(max_players) or max_players < 1:
        raise InputError(f"max_players must be an integer ≥ 1; got {max_players!r}")
    if n > max_players:
        raise InputError(
            f"exact Shapley needs 2^n = 2^{n} = {2**n:,} evaluations (about "
            f"{_gib(EXACT_BYTES_PER_COALITION * 2**n)} of memory); n = {n} exceeds max_players = {max_players} "
            "(raise max_players or use monte_carlo)"
        )


def _probe_exact(game, n: int, batch_size: int, max_seconds: float, memory: str) -> None:
    """Refuse exact Shapley when the game's measured rate says 2^n coalitions take more than ``max_seconds``.

    Values the first 1, 4, 16, … coalitions (discarded: the enumeration itself then runs in the usual batches, so its
    values do not depend on the probe) until a chunk takes :data:`EXACT_PROBE_SECONDS` or reaches ``batch_size``,
    and fits seconds = overhead + k·per_coalition on the last two chunks."""
    total, size, timings = 2**n, 1, []
    while True:
        k = min(size, batch_size)
        t = time.perf_counter()
        evaluate_game(game, all_coalitions(n, 0, k))
        timings.append((k, time.perf_counter() - t))
        if len(timings) >= 2 and (timings[-1][1] >= EXACT_PROBE_SECONDS or k == batch_size):
            break
        size *= 4
    expected = _expected_seconds(timings, total, batch_size)
    if expected > max_seconds:
        raise InputError(
            f"exact Shapley on n = {n} players enumerates 2^{n} = {total:,} coalitions: at this game's measured rate "
            f"(about {total / expected:,.0f} coalitions/s in calls of {batch_size:,}, probed on "
            f"{sum(k for k, _ in timings):,} coalitions) that takes about {_duration(expected)}, more than "
            f"max_seconds = {max_seconds:g} ({memory}); {_exact_alternatives(n)}, or raise max_seconds "
            "(None: no time limit)"
        )


def _expected_seconds(timings: list[tuple[int, float]], total: int, batch_size: int) -> float:
    """Time for ``total`` coalitions in calls of ``batch_size``, from the last two (coalitions, seconds) probes
    fitted as seconds = overhead + k·per_coalition."""
    (k1, t1), (k2, t2) = timings[-2:]
    per = max((t2 - t1) / (k2 - k1), 0.0) if k2 != k1 else t2 / k2
    overhead = max(t2 - per * k2, 0.0)
    return -(-total // batch_size) * overhead + total * per


def _exact_alternatives(n: int) -> str:
    return (
        f"use monte_carlo(game, n_permutations=M) instead (M·(n − 1) + 2 evaluations: {200 * (n - 1) + 2:,} for "
        "M = 200; a ValueNetGame over a Deep Sets network takes its fast path, ψ once per unit)"
    )


def _gib(n_bytes: int) -> str:
    return f"{n_bytes / 2**30:,.1f} GiB" if n_bytes >= 2**27 else f"{n_bytes / 2**20:,.0f} MiB"


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:.0f} s"


def shapley_from_table(table: np.ndarray) -> np.ndarray:
    """φ from all 2^n values indexed by bitmask: φ_i = Σ_{S∌i} w(|S|)(v(S+i) − v(S)), w(s) = 1/(n·C(n−1, s)).

    Works on views: for player i the table reshaped (2^(n−i−1), 2, 2^i) holds v(S) at [:, 0, :] and v(S + i) at
    [:, 1, :], so memory stays near 17 bytes per coalition (the table, uint8 sizes, one difference)."""
    table = real_values(table, "shapley_from_table: the table")
    n = int(round(math.log2(table.size))) if table.size else -1
    if n < 1 or 2**n != table.size:
        raise InputError(f"a Shapley table needs 2^n ≥ 2 values (indexed by bitmask); got {table.size}")
    sizes = np.zeros(1, dtype=np.uint8)
    for _ in range(n):  # popcount of every bitmask: bit i adds 1 to the upper half of the first 2^(i+1) masks
        sizes = np.concatenate([sizes, sizes + 1])
    weights = np.array([1.0 / (n * math.comb(n - 1, s)) for s in range(n)])
    phi = np.empty(n)
    for i in range(n):
        v = table.reshape(-1, 2, 2**i)
        without_sizes = sizes.reshape(-1, 2, 2**i)[:, 0, :]
        phi[i] = weights[without_sizes].reshape(-1) @ (v[:, 1, :] - v[:, 0, :]).reshape(-1)
    return phi


# --------------------------------------------------------------------------------------------- leave-one-out


def leave_one_out(game: Game, *, budget: int | None = None, seed: int | None = None) -> ShapleyResult:
    """φ_i^LOO = v(N) − v(N∖{i}): n + 1 evaluations (a ``budget`` below that is refused; ``seed`` is unused)."""
    n = check_game(game)
    refuse_budget_below(budget, n + 1, "leave_one_out", n, "n + 1")
    coalitions = np.vstack([np.ones((1, n), dtype=bool), ~np.eye(n, dtype=bool)])
    values = evaluate_game(game, coalitions)
    return ShapleyResult(values=values[0] - values[1:], n_evaluations=n + 1, method="leave_one_out")
