"""Cooperative games: callables mapping a boolean coalition matrix (k × n) to k values.

A transferable-utility game on players N = {0..n-1} is a set function v: 2^N → R.  Following shapiq, a
:class:`Game` is evaluated on many coalitions at once: ``game(C)`` with ``C`` a boolean array of shape
(k, n) returns the k values v(C[0]), …, v(C[k-1]) as float64.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Sequence

import numpy as np

from scp.core.memory import check_memory
from scp.core.permutations import resolve_seed
from scp.core.selection import is_integer, is_real
from scp.errors import InputError, InputTypeError

COALITION_BYTES_PER_PLAYER = 17
"""Bytes :func:`all_coalitions` holds per player per coalition while it builds the matrix (two int64 work arrays
and the boolean result), plus 8 per coalition for the bitmasks."""


def as_coalitions(coalitions, n_players: int) -> np.ndarray:
    """Validate and return a (k, n) boolean coalition matrix (a single 1-d coalition becomes k = 1)."""
    C = np.asarray(coalitions)
    if C.ndim == 1:
        C = C[None, :]
    if C.ndim != 2 or C.shape[1] != n_players:
        raise InputError(f"coalitions must have shape (k, {n_players}); got {tuple(np.shape(coalitions))}")
    if C.dtype != bool:
        if not np.isin(C, (0, 1)).all():
            raise InputError("coalitions must be boolean (or 0/1) membership indicators")
        C = C.astype(bool)
    return C


def all_coalitions(n_players: int, start: int = 0, stop: int | None = None) -> np.ndarray:
    """All 2^n coalitions as a (2^n, n) boolean matrix; row m is the bitmask m (player i ↔ bit i).

    ``start`` / ``stop`` give only the rows start..stop − 1 (the bitmasks in that range), so the 2^n coalitions
    can be enumerated in batches without ever building the whole matrix; refused before any allocation when the
    rows need more memory than is available (:func:`scp.core.memory.check_memory`)."""
    stop = 2**n_players if stop is None else min(stop, 2**n_players)
    rows = max(stop - start, 0)
    check_memory(
        rows * (COALITION_BYTES_PER_PLAYER * n_players + 8),
        f"enumerating {rows:,} coalitions of n = {n_players} players",
        "enumerate fewer players, or estimate by sampling (scp.core.monte_carlo)",
    )
    masks = np.arange(start, stop, dtype=np.int64)
    return ((masks[:, None] >> np.arange(n_players)) & 1).astype(bool)


def real_values(values, what: str) -> np.ndarray:
    """``values`` as a 1-d float64 array, refusing complex, non-numeric (object, string) or other non-real dtypes.

    ``np.asarray(values, dtype=float64)`` would drop the imaginary part of complex values with only numpy's
    ComplexWarning (a game valued 1j·|S| would give Shapley values 0); ``what`` names the game in the message.
    Finiteness is checked where the values are used (:func:`evaluate_game`)."""
    raw = np.asarray(values)
    if raw.dtype.kind not in "biuf":
        kinds = {"c": "complex", "O": "non-numeric (object)", "U": "string", "S": "bytes"}
        kind = kinds.get(raw.dtype.kind, "non-real")
        hint = " (take .real if the imaginary parts are 0)" if raw.dtype.kind == "c" else ""
        raise InputError(
            f"{what} gave {kind} values (dtype {raw.dtype}){hint}; a game's values must be real numbers (int or float)"
        )
    return np.asarray(raw, dtype=np.float64).reshape(-1)  # no copy when the values are float64 already


def check_game(game) -> int:
    """The number of players of ``game``, after checking it is a game (a callable with ``n_players`` ≥ 1)."""
    if not callable(game):
        raise InputTypeError(
            f"a game must be callable on a (k × n) boolean coalition matrix; got {type(game).__name__}"
        )
    n = getattr(game, "n_players", None)
    if n is None:
        raise InputTypeError(
            f"{game_name(game)} has no n_players: wrap a plain function as scp.core.games.FunctionGame(fn, n_players)"
        )
    if not is_integer(n) or n < 1:
        raise InputError(
            f"{game_name(game)} has n_players = {n!r}: a game needs at least one player (an integer n ≥ 1)"
        )
    return int(n)


def game_name(game) -> str:
    """How messages name a game: its ``__name__``, else its class name."""
    return getattr(game, "__name__", None) or type(game).__name__


def evaluate_game(game, coalitions: np.ndarray) -> np.ndarray:
    """v of each row of ``coalitions`` as float64, refusing complex or non-numeric values (numpy would drop an
    imaginary part with only a warning) and NaN or ±inf values (they would poison every φ_i).  Every estimator
    values a user's game through this function."""
    values = real_values(game(coalitions), game_name(game))
    if values.shape[0] != coalitions.shape[0]:
        raise InputError(f"{game_name(game)} returned {values.shape[0]} values for {coalitions.shape[0]} coalitions")
    bad = ~np.isfinite(values)
    if bad.any():
        first = np.flatnonzero(bad)[0]
        raise InputError(
            f"{game_name(game)} returned non-finite values (NaN or inf) for {int(bad.sum())} of "
            f"{len(values)} coalitions (first: players {np.flatnonzero(coalitions[first]).tolist()} "
            f"-> {values[first]}); Shapley values of such a game are undefined"
        )
    return values


class Game(abc.ABC):
    """A TU game.  Subclasses implement :meth:`value` on a validated boolean matrix."""

    n_players: int

    def __call__(self, coalitions) -> np.ndarray:
        C = as_coalitions(coalitions, self.n_players)
        values = real_values(self.value(C), f"{type(self).__name__}.value")
        if values.shape[0] != C.shape[0]:
            raise RuntimeError(
                f"{type(self).__name__}.value returned {values.shape[0]} values for {C.shape[0]} coalitions"
            )
        return values

    @abc.abstractmethod
    def value(self, coalitions: np.ndarray) -> np.ndarray:
        """Values of the rows of a (k, n) boolean matrix."""

    @property
    def empty_value(self) -> float:
        return float(self(np.zeros((1, self.n_players), dtype=bool))[0])

    @property
    def grand_value(self) -> float:
        return float(self(np.ones((1, self.n_players), dtype=bool))[0])

    def table(self) -> np.ndarray:
        """All 2^n values indexed by bitmask (player i ↔ bit i).  Only for small n."""
        _check_small(self.n_players, "table()")
        return self(all_coalitions(self.n_players))


def _finite_reals(values, what: str) -> np.ndarray:
    """``values`` as a 1-d float64 array of finite real numbers (no strings, complex numbers, NaN or inf)."""
    raw = np.asarray(values)
    if raw.dtype.kind not in "biuf" or raw.ndim != 1:
        raise InputError(
            f"{what} must be a 1-d sequence of real numbers; got {type(values).__name__} of dtype {raw.dtype} "
            f"and shape {raw.shape}"
        )
    out = raw.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        raise InputError(f"{what} must be finite; got {out[bad[0]]} at index {bad[0]}")
    return out


def _integers(values, what: str, items: str = "player indices") -> np.ndarray:
    """``values`` as a 1-d int64 array of integers (0.5 is no player index; NaN no token count)."""
    raw = np.asarray(values)
    if raw.ndim != 1 or (raw.size and raw.dtype.kind not in "iu"):
        raise InputError(f"{what} must be a 1-d sequence of integer {items}; got {np.ravel(raw)[:5].tolist()!r}")
    return raw.astype(np.int64)


def _check_small(n: int, what: str, limit: int = 24) -> None:
    if n > limit:
        raise InputError(f"{what} enumerates 2^n coalitions; n = {n} exceeds the limit {limit}")


class FunctionGame(Game):
    """Wrap any callable ``f(C) -> values`` on (k, n) boolean matrices as a game."""

    def __init__(self, fn: Callable[[np.ndarray], np.ndarray], n_players: int):
        _check_n(n_players)
        self.fn, self.n_players = fn, n_players

    def value(self, coalitions):
        return self.fn(coalitions)


class TableGame(Game):
    """An explicit game given by its 2^n values, indexed by bitmask (player i ↔ bit i)."""

    def __init__(self, values: Sequence[float] | np.ndarray):
        values = _finite_reals(np.ravel(values), "a table game's values")
        n = int(np.log2(values.size)) if values.size else -1
        if values.size == 0 or 2**n != values.size:
            raise InputError(f"a table game needs 2^n values; got {values.size}")
        _check_n(n)
        self.values, self.n_players = values, n

    @classmethod
    def from_game(cls, game: Game) -> TableGame:
        return cls(game.table())

    @classmethod
    def random(cls, n_players: int, seed: int = 0, bound: float = 1.0, normalize: bool = False) -> TableGame:
        """Uniform values in [0, bound]; with ``normalize`` v(∅) = 0.  Refused before drawing when the 2^n float64
        values need more memory than is available (:func:`scp.core.memory.check_memory`)."""
        _check_n(n_players)
        if not (is_real(bound) and math.isfinite(bound) and bound > 0):
            raise InputError(f"bound must be a finite number > 0; got {bound!r}")
        check_memory(
            8 * 2**n_players,
            f"TableGame.random({n_players}) holds 2^{n_players} = {2**n_players:,} values and",
            "use fewer players, or a game that computes its values (FunctionGame)",
        )
        rng = np.random.default_rng(resolve_seed(seed))
        values = rng.uniform(0.0, bound, size=2**n_players)
        if normalize:
            values[0] = 0.0
        return cls(values)

    def value(self, coalitions):
        masks = coalitions.astype(np.int64) @ (np.int64(1) << np.arange(self.n_players, dtype=np.int64))
        return self.values[masks]


class AdditiveGame(Game):
    """v(S) = Σ_{i∈S} w_i.  Shapley value φ_i = w_i."""

    def __init__(self, weights: Sequence[float]):
        self.weights = _finite_reals(weights, "an additive game's weights")
        _check_n(self.weights.size)
        self.n_players = self.weights.size

    def value(self, coalitions):
        return coalitions.astype(np.float64) @ self.weights


class UnanimityGame(Game):
    """u_T(S) = 1 if T ⊆ S else 0.  Shapley value 1/|T| on T, 0 elsewhere; Harsanyi dividend 1 on T only."""

    def __init__(self, n_players: int, carrier: Sequence[int]):
        _check_n(n_players)
        self.n_players, self.carrier = n_players, np.unique(_integers(list(carrier), "carrier"))
        if self.carrier.size == 0 or self.carrier.min() < 0 or self.carrier.max() >= n_players:
            raise InputError(f"carrier must be a non-empty subset of 0..{n_players - 1}")

    def value(self, coalitions):
        return coalitions[:, self.carrier].all(axis=1).astype(np.float64)


class GloveGame(Game):
    """Left/right glove market: v(S) = min(|S ∩ L|, |S ∩ R|) pairs of gloves."""

    def __init__(self, left: Sequence[int], right: Sequence[int]):
        self.left, self.right = _integers(left, "left"), _integers(right, "right")
        players = np.concatenate([self.left, self.right])
        if len(set(players.tolist())) != players.size or sorted(players.tolist()) != list(range(players.size)):
            raise InputError("left and right must partition the players 0..n-1")
        self.n_players = players.size
        _check_n(self.n_players)

    def value(self, coalitions):
        return np.minimum(coalitions[:, self.left].sum(1), coalitions[:, self.right].sum(1)).astype(np.float64)


class MajorityGame(Game):
    """Weighted majority (voting) game: v(S) = 1 if Σ_{i∈S} w_i ≥ quota else 0."""

    def __init__(self, weights: Sequence[float], quota: float):
        if not (is_real(quota) and math.isfinite(quota)):
            raise InputError(f"quota must be a finite number; got {quota!r}")
        self.weights, self.quota = _finite_reals(weights, "a majority game's weights"), float(quota)
        _check_n(self.weights.size)
        self.n_players = self.weights.size

    def value(self, coalitions):
        return (coalitions.astype(np.float64) @ self.weights >= self.quota).astype(np.float64)


class MaxSumGame(Game):
    """MaxShapley's game: U(S) = Σ_j w_j max_{i∈S} r_ij, with max over ∅ equal to 0.

    ``relevance`` is (n players × m aspects); ``weights`` (m,) defaults to ones.
    """

    def __init__(self, relevance, weights=None):
        r = np.asarray(relevance, dtype=np.float64)
        if r.ndim == 1:
            r = r[:, None]
        if r.ndim != 2 or r.shape[0] == 0:
            raise InputError(f"relevance must be (n_players, n_aspects); got shape {np.shape(relevance)}")
        if not np.isfinite(r).all():
            raise InputError("relevance scores must be finite")
        w = np.ones(r.shape[1]) if weights is None else _finite_reals(weights, "weights")
        if w.shape != (r.shape[1],):
            raise InputError(f"weights must have shape ({r.shape[1]},); got {w.shape}")
        self.relevance, self.weights, self.n_players = r, w, r.shape[0]

    def value(self, coalitions):
        masked = np.where(coalitions[:, :, None], self.relevance[None], -np.inf)  # (k, n, m)
        best = masked.max(axis=1)
        best[~np.isfinite(best)] = 0.0
        return best @ self.weights


def _check_n(n: int) -> None:
    if not is_integer(n) or n < 1:
        raise InputError(f"a game needs at least one player (an integer n ≥ 1); got n = {n!r}")


class LookupGame(TableGame):
    """A table game (:class:`TableGame`) that remembers which coalitions were asked for, to price an estimator
    whose every coalition is a costly evaluation (an LM call) that a real run would cache.

    ``tokens`` gives the cost of each coalition, indexed by bitmask like ``values`` (LM tokens in notebook 11;
    default 0); ``n_coalitions`` is the number of distinct coalitions queried so far and ``n_tokens`` their cost,
    so a repeated coalition costs nothing.
    """

    def __init__(self, values, tokens=None):
        super().__init__(values)
        size = self.values.size
        self.tokens = np.zeros(size, dtype=np.int64) if tokens is None else _integers(tokens, "tokens", "counts")
        if self.tokens.shape != self.values.shape or (self.tokens < 0).any():
            raise InputError(
                f"tokens must hold one count ≥ 0 per coalition ({self.values.size}); got {self.tokens.size} "
                f"with minimum {self.tokens.min(initial=0)}"
            )
        self.seen = np.zeros(self.values.size, dtype=bool)

    def value(self, coalitions):
        masks = coalitions.astype(np.int64) @ (np.int64(1) << np.arange(self.n_players, dtype=np.int64))
        self.seen[masks] = True
        return self.values[masks]

    @property
    def n_coalitions(self) -> int:
        return int(self.seen.sum())

    @property
    def n_tokens(self) -> int:
        return int(self.tokens[self.seen].sum())
