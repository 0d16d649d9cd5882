"""Theory of the SCP paper as checkable code: sampling bounds, the core, supermodularity, Harsanyi dividends,
tight-set trees and block additivity.

Conventions.  Players are N = {0, …, n-1}; a coalition S is written as a sorted tuple of players or as the
bitmask Σ_{i∈S} 2^i.  A *table* is the 1-d array of all 2^n values v(S) indexed by bitmask (what
:meth:`scp.core.games.Game.table` returns).  Every function that needs the whole table accepts either a
:class:`~scp.core.games.Game` or such a table and refuses n above ``max_players`` (default :data:`MAX_PLAYERS`),
because it costs Θ(2^n) memory and time.  An *allocation* x ∈ R^n pays x(S) = Σ_{i∈S} x_i to a coalition.

Bad inputs raise :class:`ValueError` with a message naming the offending argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np

from scp.core.games import Game, real_values
from scp.errors import InputError

MAX_PLAYERS = 20
"""Default limit on n for everything that enumerates all 2^n coalitions."""

GameOrTable = Game | np.ndarray | Sequence[float]


# ----------------------------------------------------------------------------------------------------------
# input validation helpers


def as_table(game_or_table: GameOrTable, max_players: int = MAX_PLAYERS, what: str = "game") -> tuple[np.ndarray, int]:
    """Return (table of 2^n float64 values indexed by bitmask, n) from a Game or a 1-d table."""
    limit = _check_int(max_players, "max_players", minimum=1)
    if isinstance(game_or_table, Game):
        n = int(game_or_table.n_players)
        if n > limit:
            raise InputError(
                f"{what} has n = {n} players; enumerating 2^n coalitions is refused above max_players = {limit}"
            )
        table = real_values(game_or_table.table(), f"{what}.table()")
        if table.size != 2**n:
            raise InputError(f"{what}.table() returned {table.size} values; expected 2^{n} = {2**n}")
    else:
        try:
            raw = np.asarray(game_or_table)
        except (TypeError, ValueError) as exc:
            raise InputError(
                f"{what} must be a Game or a 1-d array of 2^n values; got {type(game_or_table).__name__}"
            ) from exc
        if raw.ndim != 1:
            raise InputError(f"{what} table must be 1-d (2^n values indexed by bitmask); got shape {raw.shape}")
        table = real_values(raw, f"{what} table")
        n = table.size.bit_length() - 1
        if table.size < 2 or 2**n != table.size:
            raise InputError(f"{what} table must have length 2^n with n >= 1; got length {table.size}")
        if n > limit:
            raise InputError(
                f"{what} table has n = {n} players; enumerating 2^n coalitions is refused above max_players = {limit}"
            )
    if not np.isfinite(table).all():
        raise InputError(f"{what} values must be finite")
    return table, n


def _check_int(value, name: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise InputError(f"{name} must be an integer; got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise InputError(f"{name} must be >= {minimum}; got {value}")
    return value


def _check_real(value, name: str, *, positive: bool = False, nonnegative: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InputError(f"{name} must be a real number; got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise InputError(f"{name} must be finite; got {value}")
    if positive and value <= 0:
        raise InputError(f"{name} must be > 0; got {value}")
    if nonnegative and value < 0:
        raise InputError(f"{name} must be >= 0; got {value}")
    return value


def _check_delta(delta) -> float:
    delta = _check_real(delta, "delta")
    if not 0.0 < delta < 1.0:
        raise InputError(f"delta (failure probability) must lie in (0, 1); got {delta}")
    return delta


def _check_allocation(allocation, n: int) -> np.ndarray:
    try:
        x = np.asarray(allocation, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"allocation must be a 1-d array of {n} numbers") from exc
    if x.shape != (n,):
        raise InputError(f"allocation must have shape ({n},) for an {n}-player game; got {x.shape}")
    if not np.isfinite(x).all():
        raise InputError("allocation must be finite")
    return x


def _masks(n: int) -> np.ndarray:
    return np.arange(2**n, dtype=np.int64)


def _players(mask: int) -> tuple[int, ...]:
    mask, out, i = int(mask), [], 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return tuple(out)


def _mask_of(players: Iterable[int], n_players: int, name: str = "set") -> int:
    mask = 0
    for p in players:
        if isinstance(p, bool) or not isinstance(p, Integral):
            raise InputError(f"{name} must contain integer player indices; got {p!r}")
        if not 0 <= int(p) < n_players:
            raise InputError(f"{name} contains player {p}, outside 0..{n_players - 1}")
        mask |= 1 << int(p)
    return mask


def _coalition_payoffs(x: np.ndarray, n: int) -> np.ndarray:
    """x(S) for every bitmask S, built in O(2^n) by doubling."""
    out = np.zeros(1, dtype=np.float64)
    for i in range(n):
        out = np.concatenate([out, out + x[i]])
    return out


# ----------------------------------------------------------------------------------------------------------
# 1-3. Monte-Carlo sampling bounds (Theorem 3.1, Theorem A.3)


def mc_error_bound(bound_B: float, n_players: int, n_permutations: int, delta: float, eps_approx: float = 0.0) -> float:
    """Theorem 3.1: B·sqrt(2 ln(2n/δ) / M) + 2·ε_approx.

    If the value network's game takes values in [0, B] (so every marginal contribution lies in [-B, B]) and
    M random permutations are used, then by Hoeffding's inequality for each player and a union bound over the
    n players, with probability ≥ 1 − δ, max_i |φ̂_i − φ_i| ≤ B·sqrt(2 ln(2n/δ)/M) + 2ε_approx, where
    ε_approx = sup_S |v̂(S) − v(S)| is the network's approximation error (it moves each marginal, hence each
    Shapley value, by at most 2ε_approx).
    """
    B = _check_real(bound_B, "bound_B", positive=True)
    n = _check_int(n_players, "n_players", minimum=1)
    M = _check_int(n_permutations, "n_permutations", minimum=1)
    d = _check_delta(delta)
    eps = _check_real(eps_approx, "eps_approx", nonnegative=True)
    return B * math.sqrt(2.0 * math.log(2.0 * n / d) / M) + 2.0 * eps


def sample_size(bound_B: float, n_players: int, target_error: float, delta: float, eps_approx: float = 0.0) -> int:
    """Permutations needed for max_i |φ̂_i − φ_i| ≤ target w.p. ≥ 1 − δ: M = ⌈2B² ln(2n/δ) / (target − 2ε)²⌉.

    This inverts :func:`mc_error_bound`: the result is the smallest M ≥ 1 with
    ``mc_error_bound(B, n, M, δ, ε) <= target_error`` (checked in floating point).  Requires target > 2ε_approx,
    since the approximation error alone already costs 2ε_approx.
    """
    B = _check_real(bound_B, "bound_B", positive=True)
    n = _check_int(n_players, "n_players", minimum=1)
    target = _check_real(target_error, "target_error", positive=True)
    d = _check_delta(delta)
    eps = _check_real(eps_approx, "eps_approx", nonnegative=True)
    if target <= 2.0 * eps:
        raise InputError(
            f"target_error = {target} must exceed 2·eps_approx = {2.0 * eps}: the value network's approximation "
            "error alone reaches that, no number of permutations can do better"
        )
    M = max(1, math.ceil(2.0 * B * B * math.log(2.0 * n / d) / (target - 2.0 * eps) ** 2))
    # make "smallest M with bound <= target" exact in floating point
    while mc_error_bound(B, n, M, d, eps) > target:
        M += 1
    while M > 1 and mc_error_bound(B, n, M - 1, d, eps) <= target:
        M -= 1
    return M


def topk_sample_size(bound_B: float, n_players: int, gap_K: float, delta: float, eps_approx: float = 0.0) -> int:
    """Theorem A.3: permutations that preserve the Top-K set w.p. ≥ 1 − δ: M = ⌈8B² ln(2n/δ) / (Δ_K − 4ε)²⌉.

    With Δ_K = φ_(K) − φ_(K+1) (see :func:`topk_gap`), if every estimate is within Δ_K/2 of its true value then
    no player outside the Top-K can overtake one inside (up to an exact tie at the midpoint).  The Monte-Carlo
    part must therefore be at most Δ_K/2 − 2ε = (Δ_K − 4ε)/2, which gives the formula; it equals
    ``sample_size(B, n, Δ_K/2, δ, ε)``.  Requires Δ_K > 4ε_approx.
    """
    gap = _check_real(gap_K, "gap_K", positive=True)
    eps = _check_real(eps_approx, "eps_approx", nonnegative=True)
    if gap <= 4.0 * eps:
        raise InputError(
            f"gap_K = {gap} must exceed 4·eps_approx = {4.0 * eps}: with that approximation error the Top-K set "
            "cannot be certified by any number of permutations"
        )
    return sample_size(bound_B, n_players, gap / 2.0, delta, eps)


def topk_gap(values, k: int) -> float:
    """Δ_K = φ_(K) − φ_(K+1): the gap between the K-th and (K+1)-th largest values (≥ 0)."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size < 2:
        raise InputError(f"values must be a 1-d array of at least 2 numbers; got shape {v.shape}")
    if not np.isfinite(v).all():
        raise InputError("values must be finite")
    k = _check_int(k, "k", minimum=1)
    if k >= v.size:
        raise InputError(f"k must satisfy 1 <= k < n = {v.size} (the (K+1)-th value must exist); got {k}")
    s = np.sort(v)[::-1]
    return float(s[k - 1] - s[k])


# ----------------------------------------------------------------------------------------------------------
# 4. The core


@dataclass(frozen=True)
class CoreViolation:
    """How far an allocation x is from the core {x : x(N) = v(N), x(S) ≥ v(S) ∀S}.

    ``efficiency_gap`` = x(N) − v(N); ``violation`` = max over ∅ ≠ S ⊊ N of v(S) − x(S) (negative: every proper
    coalition gets strictly more than its worth; −inf when n = 1, which has no such S), attained at
    ``most_violated``.  ``in_core`` iff |efficiency_gap| ≤ tol and violation ≤ tol.
    """

    in_core: bool
    efficiency_gap: float
    most_violated: tuple[int, ...]
    violation: float


def core_violation(
    game_or_table: GameOrTable, allocation, tol: float = 1e-9, *, max_players: int = MAX_PLAYERS
) -> CoreViolation:
    """Efficiency gap and the most violated coalition constraint x(S) ≥ v(S) of ``allocation``."""
    table, n = as_table(game_or_table, max_players)
    x = _check_allocation(allocation, n)
    tol = _check_real(tol, "tol", nonnegative=True)
    excess = table - _coalition_payoffs(x, n)  # v(S) − x(S)
    gap = float(-excess[-1]) + 0.0  # + 0.0 turns −0.0 into 0.0
    if n == 1:
        most, viol = (), -math.inf
    else:
        proper = excess[1:-1]
        m = int(np.argmax(proper)) + 1
        most, viol = _players(m), float(excess[m])
    return CoreViolation(
        in_core=bool(abs(gap) <= tol and viol <= tol), efficiency_gap=gap, most_violated=most, violation=viol
    )


def in_core(game_or_table: GameOrTable, allocation, tol: float = 1e-9, *, max_players: int = MAX_PLAYERS) -> bool:
    """x ∈ core(v): x(N) = v(N) and x(S) ≥ v(S) for every coalition S (up to ``tol``)."""
    return core_violation(game_or_table, allocation, tol, max_players=max_players).in_core


def in_epsilon_core(
    game_or_table: GameOrTable, allocation, eps: float, tol: float = 1e-9, *, max_players: int = MAX_PLAYERS
) -> bool:
    """x ∈ ε-core(v): x(N) = v(N) and x(S) ≥ v(S) − ε for every ∅ ≠ S ⊊ N (up to ``tol``; ε may be negative)."""
    eps = _check_real(eps, "eps")
    res = core_violation(game_or_table, allocation, tol, max_players=max_players)
    return bool(abs(res.efficiency_gap) <= tol and res.violation <= eps + tol)


@dataclass(frozen=True, eq=False)
class LeastCore:
    """The least core: the smallest ε for which the ε-core is non-empty, and one allocation in it.

    The core is non-empty iff ε ≤ 0 (``core_nonempty``, judged with the tolerance given to :func:`least_core`).
    ε is −inf for a 1-player game, which has no proper coalitions to constrain.
    """

    epsilon: float
    allocation: np.ndarray
    core_nonempty: bool


def least_core(game_or_table: GameOrTable, tol: float = 1e-9, *, max_players: int = MAX_PLAYERS) -> LeastCore:
    """Solve the LP  min ε  s.t.  x(S) ≥ v(S) − ε  (∅ ≠ S ⊊ N),  x(N) = v(N)  with HiGHS.

    The optimal ε* is unique; the least-core allocation need not be (a vertex of the optimal face is returned).
    """
    from scipy import sparse
    from scipy.optimize import linprog

    table, n = as_table(game_or_table, max_players)
    tol = _check_real(tol, "tol", nonnegative=True)
    if n == 1:
        return LeastCore(epsilon=-math.inf, allocation=np.array([table[1]]), core_nonempty=True)
    proper = _masks(n)[1:-1]
    bits = ((proper[:, None] >> np.arange(n)) & 1).astype(bool)  # (2^n − 2, n)
    rows, cols = np.nonzero(bits)
    m = proper.size
    # −x(S) − ε ≤ −v(S)
    A_x = sparse.csr_matrix((-np.ones(rows.size), (rows, cols)), shape=(m, n))
    A_ub = sparse.hstack([A_x, sparse.csr_matrix(-np.ones((m, 1)))], format="csr")
    b_ub = -table[1:-1]
    A_eq = np.concatenate([np.ones(n), [0.0]])[None, :]
    b_eq = np.array([table[-1]])
    c = np.zeros(n + 1)
    c[-1] = 1.0
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=[(None, None)] * (n + 1), method="highs")
    if res.status != 0:  # the LP is always feasible and bounded (ε ≥ max_S v(S) − x(S) is finite); be loud anyway
        raise RuntimeError(f"least-core LP failed: {res.message}")
    eps = float(res.x[-1])
    return LeastCore(epsilon=eps, allocation=np.asarray(res.x[:n], dtype=np.float64), core_nonempty=bool(eps <= tol))


def core_is_nonempty(game_or_table: GameOrTable, tol: float = 1e-9, *, max_players: int = MAX_PLAYERS) -> bool:
    """Whether the core is non-empty (least-core ε ≤ tol).  By Bondareva–Shapley iff the game is balanced;
    always true for supermodular games, whose core contains the Shapley value."""
    return least_core(game_or_table, tol, max_players=max_players).core_nonempty


# ----------------------------------------------------------------------------------------------------------
# 5. Supermodularity


@dataclass(frozen=True)
class SupermodularityCheck:
    """Result of :func:`check_supermodular`.

    ``violating_pair`` = (S, T) with v(S∪T) + v(S∩T) < v(S) + v(T) − tol (None if supermodular);
    ``violation`` = v(S) + v(T) − v(S∪T) − v(S∩T) for that pair (the largest local shortfall; 0.0 if none).
    """

    is_supermodular: bool
    violating_pair: tuple[tuple[int, ...], tuple[int, ...]] | None
    violation: float


def check_supermodular(
    game_or_table: GameOrTable, tol: float = 1e-9, *, max_players: int = MAX_PLAYERS
) -> SupermodularityCheck:
    """Check v(S∪T) + v(S∩T) ≥ v(S) + v(T) for all S, T via the equivalent local condition.

    v is supermodular iff every second difference v(S+i+j) − v(S+i) − v(S+j) + v(S) ≥ 0 for i ≠ j ∉ S
    (telescoping sums of local conditions give the global one).  All n(n−1)/2 · 2^(n−2) of them are checked
    with numpy; the worst one, (S+i, S+j), is reported.
    """
    table, n = as_table(game_or_table, max_players)
    tol = _check_real(tol, "tol", nonnegative=True)
    masks = _masks(n)
    worst, where = 0.0, None
    for i in range(n):
        bi = 1 << i
        for j in range(i + 1, n):
            bj = 1 << j
            base = masks[(masks & (bi | bj)) == 0]
            second = table[base | bi | bj] - table[base | bi] - table[base | bj] + table[base]
            k = int(np.argmin(second))
            if second[k] < worst:
                worst, where = float(second[k]), (int(base[k]), bi, bj)
    if where is None or -worst <= tol:
        return SupermodularityCheck(True, None, max(0.0, -worst))
    s, bi, bj = where
    return SupermodularityCheck(False, (_players(s | bi), _players(s | bj)), -worst)


@dataclass(frozen=True)
class SupermodularityRate:
    """Result of :func:`supermodularity_violation_rate`: ``n_violations`` of ``n_samples`` sampled local
    inequalities failed (``rate`` = their fraction); ``max_violation`` is the largest shortfall seen (≥ 0)."""

    rate: float
    n_violations: int
    n_samples: int
    max_violation: float


def supermodularity_violation_rate(
    value_fn: Callable[[np.ndarray], np.ndarray],
    n_players: int,
    n_samples: int,
    seed: int | None = 0,
    tol: float = 1e-9,
) -> SupermodularityRate:
    """Estimate how often v(S+i+j) − v(S+i) − v(S+j) + v(S) < −tol for large n, where tables are out of reach.

    Each sample draws a uniformly random ordered pair i ≠ j, a size s uniform on {0, …, n−2}, and S uniform
    among the size-s subsets of N∖{i, j}.  All 4·n_samples coalitions go to ``value_fn`` (a Game or any callable
    on (k, n) boolean matrices, numpy or torch output) in one batched call.  Used to compare a supermodular
    (ConvexDeepSets) network with an unconstrained one; for float32 networks pass a tol at float32 resolution.
    """
    if not callable(value_fn):
        raise InputError(
            f"value_fn must be callable on a (k, n) boolean coalition matrix; got {type(value_fn).__name__}"
        )
    n = _check_int(n_players, "n_players", minimum=2)
    k = _check_int(n_samples, "n_samples", minimum=1)
    tol = _check_real(tol, "tol", nonnegative=True)
    if isinstance(value_fn, Game) and value_fn.n_players != n:
        raise InputError(f"n_players = {n} but the game has {value_fn.n_players} players")
    rng = np.random.default_rng(seed)
    perm = np.argsort(rng.random((k, n)), axis=1)  # a random order of the players per sample
    pos = np.argsort(perm, axis=1)  # pos[r, p] = position of player p in that order
    sizes = rng.integers(0, n - 1, size=k)  # uniform on 0..n−2
    S = (pos >= 2) & (pos < 2 + sizes[:, None])
    rows = np.arange(k)
    Si, Sj = S.copy(), S.copy()
    Si[rows, perm[:, 0]] = True
    Sj[rows, perm[:, 1]] = True
    Sij = Si | Sj
    out = value_fn(np.concatenate([Sij, Si, Sj, S]))
    if hasattr(out, "detach"):  # torch tensor
        out = out.detach().cpu().numpy()
    vals = np.asarray(out, dtype=np.float64).reshape(-1)
    if vals.size != 4 * k:
        raise InputError(f"value_fn returned {vals.size} values for {4 * k} coalitions")
    if not np.isfinite(vals).all():
        raise InputError("value_fn returned non-finite values")
    second = vals[:k] - vals[k : 2 * k] - vals[2 * k : 3 * k] + vals[3 * k :]
    bad = int(np.count_nonzero(second < -tol))
    return SupermodularityRate(
        rate=bad / k, n_violations=bad, n_samples=k, max_violation=float(max(0.0, -second.min()))
    )


# ----------------------------------------------------------------------------------------------------------
# 6. Harsanyi dividends (Möbius transform)


def harsanyi_dividends(game_or_table: GameOrTable, *, max_players: int = MAX_PLAYERS) -> np.ndarray:
    """Harsanyi dividends d(T) = Σ_{S⊆T} (−1)^{|T|−|S|} v(S), indexed by bitmask, so v(S) = Σ_{T⊆S} d(T).

    Fast Möbius transform in O(n·2^n): for each bit i, d[S + i] −= d[S] over all S ∌ i (d(∅) = v(∅)).
    The Shapley value is φ_i = Σ_{T∋i} d(T)/|T|.
    """
    table, n = as_table(game_or_table, max_players)
    d = table.copy()
    for i in range(n):
        view = d.reshape(2 ** (n - 1 - i), 2, 2**i)  # middle axis = bit i
        view[:, 1, :] -= view[:, 0, :]
    return d


def from_dividends(dividends, *, max_players: int = MAX_PLAYERS) -> np.ndarray:
    """Inverse of :func:`harsanyi_dividends` (zeta transform): v(S) = Σ_{T⊆S} d(T), in O(n·2^n)."""
    d, n = as_table(dividends, max_players, what="dividends")
    v = d.copy()
    for i in range(n):
        view = v.reshape(2 ** (n - 1 - i), 2, 2**i)
        view[:, 1, :] += view[:, 0, :]
    return v


# ----------------------------------------------------------------------------------------------------------
# 7-8. Tight sets, uncrossing, context trees


def _tight_masks(table: np.ndarray, n: int, x: np.ndarray, tol: float) -> np.ndarray:
    excess = np.abs(table - _coalition_payoffs(x, n))
    excess[0] = np.inf  # the empty set is never reported
    return np.nonzero(excess <= tol)[0]


def tight_sets(
    game_or_table: GameOrTable, allocation, tol: float = 1e-9, *, max_players: int = MAX_PLAYERS
) -> list[tuple[int, ...]]:
    """All non-empty coalitions S with |x(S) − v(S)| ≤ tol, in increasing bitmask order (N included if x is
    efficient).  For a core allocation these are the coalitions that are paid exactly their worth."""
    table, n = as_table(game_or_table, max_players)
    x = _check_allocation(allocation, n)
    tol = _check_real(tol, "tol", nonnegative=True)
    return [_players(m) for m in _tight_masks(table, n, x, tol)]


def _crosses(a: int, b: int) -> bool:
    inter = a & b
    return inter != 0 and inter != a and inter != b


def _laminar_masks(masks: Iterable[int]) -> list[int]:
    unique = sorted(set(masks), key=lambda m: (-m.bit_count(), _players(m)))
    chosen: list[int] = []
    for m in unique:
        if not any(_crosses(m, c) for c in chosen):
            chosen.append(m)
    return chosen


def laminar_family(sets: Iterable[Iterable[int]], n_players: int) -> list[tuple[int, ...]]:
    """A maximal laminar subfamily of ``sets`` by greedy uncrossing (paper, Appendix A.3).

    Two sets cross if they intersect and neither contains the other; a family is laminar if no two members
    cross.  Sets are deduplicated and visited larger first (ties: lexicographically smaller sorted tuple
    first); a set is kept iff it crosses none kept so far.  Every rejected set crosses a kept one, so the
    result is maximal.  Returned as sorted tuples in that visiting order.  (For a supermodular game with
    v(∅) = 0 and a core allocation the tight sets are closed under ∩ and ∪ — x(S∪T) + x(S∩T) = x(S) + x(T) =
    v(S) + v(T) ≤ v(S∪T) + v(S∩T) ≤ x(S∪T) + x(S∩T) — so crossing pairs can always be uncrossed within them.)
    """
    n = _check_int(n_players, "n_players", minimum=1)
    if isinstance(sets, (str, bytes)):
        raise InputError("sets must be an iterable of player collections")
    masks = []
    for s in sets:
        if isinstance(s, (str, bytes)) or not isinstance(s, Iterable):
            raise InputError(f"each set must be an iterable of player indices; got {s!r}")
        m = _mask_of(s, n)
        if m == 0:
            raise InputError("sets must be non-empty")
        masks.append(m)
    return [_players(m) for m in _laminar_masks(masks)]


@dataclass(eq=False)
class ContextNode:
    """A node of a context tree: a group of players (sentences) and its maximal proper sub-groups.

    ``tight`` says whether the group is paid exactly its worth, x(S) = v(S) (the root N is always present and is
    tight iff the allocation is efficient).
    """

    players: frozenset[int]
    children: list[ContextNode] = field(default_factory=list)
    tight: bool = True

    def iter_nodes(self):
        """Pre-order traversal."""
        yield self
        for c in self.children:
            yield from c.iter_nodes()

    def parents(self) -> dict[frozenset[int], frozenset[int] | None]:
        """Map each node's player set to its parent's player set (None for the root)."""
        out: dict[frozenset[int], frozenset[int] | None] = {self.players: None}
        stack = [self]
        while stack:
            node = stack.pop()
            for c in node.children:
                out[c.players] = node.players
                stack.append(c)
        return out


def context_tree(
    game_or_table: GameOrTable, allocation, tol: float = 1e-9, *, max_players: int = MAX_PLAYERS
) -> ContextNode:
    """Tree of nested "exactly paid" groups of sentences from the tight sets of ``allocation``.

    A tight set S (x(S) = v(S)) is a self-sufficient sub-context: under a core allocation its sentences earn
    exactly what they can produce on their own, with no surplus owed to or from the rest of the context.  The
    tight sets are reduced to a laminar family (:func:`laminar_family`), which is a forest under inclusion;
    rooting it at N, each set's parent is the smallest set of the family strictly containing it.  Children are
    ordered by their sorted player tuples.
    """
    table, n = as_table(game_or_table, max_players)
    x = _check_allocation(allocation, n)
    tol = _check_real(tol, "tol", nonnegative=True)
    full = (1 << n) - 1
    tight = _tight_masks(table, n, x, tol)
    family = _laminar_masks(int(m) for m in tight)
    root = ContextNode(frozenset(range(n)), [], tight=bool(full in family))
    nodes = {full: root}
    placed = [full]  # sets already in the tree, in non-increasing size order
    for m in family:  # family is sorted by non-increasing size
        if m == full:
            continue
        parent = min((p for p in placed if p & m == m and p != m), key=lambda p: p.bit_count())
        node = ContextNode(frozenset(_players(m)), [], tight=True)
        nodes[m] = node
        nodes[parent].children.append(node)
        placed.append(m)
    for node in nodes.values():
        node.children.sort(key=lambda c: tuple(sorted(c.players)))
    return root


# ----------------------------------------------------------------------------------------------------------
# 9. Block additivity (Appendix D.7)


def _check_partition(blocks, n: int) -> list[int]:
    if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Iterable):
        raise InputError("blocks must be an iterable of player collections")
    masks, seen = [], 0
    for b in blocks:
        if isinstance(b, (str, bytes)) or not isinstance(b, Iterable):
            raise InputError(f"each block must be an iterable of player indices; got {b!r}")
        b = list(b)
        m = _mask_of(b, n, "block")
        if m == 0:
            raise InputError("blocks must be non-empty")
        if len(b) != m.bit_count():
            raise InputError(f"block {b} repeats a player")
        if m & seen:
            raise InputError(f"blocks must be disjoint; players {_players(m & seen)} appear in two blocks")
        seen |= m
        masks.append(m)
    if seen != (1 << n) - 1:
        raise InputError(f"blocks must cover all players 0..{n - 1}; missing {_players(((1 << n) - 1) & ~seen)}")
    return masks


def is_block_additive(game_or_table: GameOrTable, blocks, tol: float = 1e-9, *, max_players: int = MAX_PLAYERS) -> bool:
    """Whether v(S) = Σ_b v(S ∩ B_b) − (m − 1)·v(∅) for all S, for the partition B_1, …, B_m of N.

    The v(∅) correction makes the condition invariant to adding a constant to v; with v(∅) = 0 it reads
    v(S) = Σ_b v(S ∩ B_b).  Equivalently every non-zero Harsanyi dividend d(T), T ≠ ∅, has T inside one block:
    then v(S) = d(∅) + Σ_b Σ_{∅≠T⊆S∩B_b} d(T) = d(∅) + Σ_b (v(S∩B_b) − d(∅)).
    """
    table, n = as_table(game_or_table, max_players)
    bmasks = _check_partition(blocks, n)
    tol = _check_real(tol, "tol", nonnegative=True)
    masks = _masks(n)
    recon = sum(table[masks & b] for b in bmasks) - (len(bmasks) - 1) * table[0]
    return bool(np.max(np.abs(recon - table)) <= tol)


def finest_blocks(
    game_or_table: GameOrTable, tol: float = 1e-9, *, max_players: int = MAX_PLAYERS
) -> list[tuple[int, ...]]:
    """The finest partition of N across which the game is additive (see :func:`is_block_additive`).

    Blocks are the connected components of the interaction graph, i ~ j iff some dividend d(T) with
    {i, j} ⊆ T has |d(T)| > tol.  Forest decomposition: since φ_i = Σ_{T∋i} d(T)/|T| and every such T lies in
    i's block B, the Shapley value of i equals that of the subgame v|_B — Shapley values are computed per block
    independently (2^|B| coalitions per block instead of 2^n).  Blocks are sorted by their smallest player.
    """
    from scipy.sparse.csgraph import connected_components

    d = harsanyi_dividends(game_or_table, max_players=max_players)
    tol = _check_real(tol, "tol", nonnegative=True)
    n = d.size.bit_length() - 1
    nz = np.nonzero(np.abs(d) > tol)[0]
    bits = ((nz[:, None] >> np.arange(n)) & 1).astype(np.float64)
    bits = bits[bits.sum(axis=1) >= 2]
    adjacency = (bits.T @ bits) > 0
    _, labels = connected_components(adjacency, directed=False)
    groups: dict[int, list[int]] = {}
    for p, lab in enumerate(labels):
        groups.setdefault(int(lab), []).append(p)
    return sorted((tuple(g) for g in groups.values()), key=lambda g: g[0])


__all__ = [
    "MAX_PLAYERS",
    "ContextNode",
    "CoreViolation",
    "LeastCore",
    "SupermodularityCheck",
    "SupermodularityRate",
    "check_supermodular",
    "context_tree",
    "core_is_nonempty",
    "core_violation",
    "finest_blocks",
    "from_dividends",
    "harsanyi_dividends",
    "in_core",
    "in_epsilon_core",
    "is_block_additive",
    "laminar_family",
    "least_core",
    "mc_error_bound",
    "sample_size",
    "supermodularity_violation_rate",
    "tight_sets",
    "topk_gap",
    "topk_sample_size",
]
