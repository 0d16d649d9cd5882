"""Shapley estimators with one interface: ``estimate(game, method, **kw) -> ShapleyResult``.

φ_i(v) = Σ_{S ⊆ N∖{i}} |S|!(n−|S|−1)!/n! · (v(S∪{i}) − v(S)) = E_π[v(P_i^π ∪ {i}) − v(P_i^π)],
P_i^π the players before i in a uniform random permutation π.

- :func:`exact` enumerates all 2^n coalitions (batched), O(n·2^n) arithmetic; refused above ``max_players``
  (:data:`DEFAULT_EXACT_LIMIT`), above :data:`EXACT_MAX_BYTES` of memory, and when a probe of the game's evaluation
  rate says it would take more than ``max_seconds``.
- :func:`monte_carlo` is the paper's Algorithm 1: M permutations, every prefix coalition evaluated in one
  batched call, each player credited its marginal.  A value-network game takes the Deep Sets fast path
  (:func:`deepsets_shapley`, :func:`first_layer_shapley`): ψ once per unit, ρ's first linear layer applied
  before the prefix sums (a 0/1-matrix product for short contexts, gather + blocked cumulative sum for long
  ones), one batched ρ call for all M·(n+1) prefixes of many contexts; differentiable in the network's
  parameters.  Options: antithetic pairs, and the unbiased position control variate (``control_variate=
  "position"``).  :mod:`scp.core.adaptive` chooses M in rounds until the Top-K set is certified.
- :func:`leave_one_out` is v(N) − v(N∖{i}) (n + 1 evaluations); it is not a Shapley estimator and fails on
  redundancy (two copies of a needed sentence each get ≈ 0).
- :func:`max_game_shapley` / :func:`max_shapley` are closed forms for max games in O(m log m).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from scp.core.games import Game, all_coalitions, real_values
from scp.devices import resolve_device
from scp.errors import InputError, InputTypeError
from scp.models.game import ValueNetGame

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
CONTROL_VARIATES = (None, "position")
POSITION_GRID = 8  # positions at which the position control variate is evaluated (see _position_table)
PREFIX_PATHS = ("auto", "gemm", "cumsum")
CUMSUM_MIN_UNITS = 192
"""From this many units (the padded width) on, "auto" computes prefix sums by gather + cumsum instead of the
0/1-matrix product; measured by ``python -m scp.bench prefix`` (see BENCHMARKS.md: on one CPU thread the two paths
tie near n = 128–192 and gather + cumsum wins from 192 on for both the shipped and the paper-sized network)."""


@dataclass
class ShapleyResult:
    """Estimated Shapley values of one game, with the budget spent and how they were obtained.

    ``n_evaluations`` is the budget in one convention for every estimator: the number of coalition values
    v(S) actually computed for this game (a coalition valued twice counts twice; ∅ and N count once each).
    Exact: 2^n.  Leave-one-out: n + 1.  Monte Carlo with M permutations, on either path: M·(n − 1) + 2 (every
    permutation's n − 1 interior prefixes, plus ∅ and N shared by all).  ``seed`` is the seed the permutations
    were drawn from (for a context scored through :func:`derive_seed`, the derived one).
    """

    values: np.ndarray
    n_evaluations: int
    method: str
    std_errors: np.ndarray | None = None
    seed: int | None = None
    n_permutations: int | None = None
    metadata: dict = field(default_factory=dict)

    @property
    def n_players(self) -> int:
        return self.values.shape[0]

    def ranking(self) -> np.ndarray:
        """Players by decreasing value (ties by index)."""
        return np.argsort(-self.values, kind="stable")


@dataclass
class BatchShapley:
    """Monte-Carlo Shapley values of a padded batch of value-network contexts (torch, differentiable)."""

    values: torch.Tensor  # (b, n); 0 on padded units
    std_errors: torch.Tensor  # (b, n), detached; nan where not defined
    n_units: torch.Tensor  # (b,)
    n_permutations: int
    antithetic: bool
    seeds: tuple[int, ...]  # the seed each context's permutations were drawn from
    grand_values: torch.Tensor  # v(N) per context
    empty_values: torch.Tensor  # v(∅) per context
    control_variate: str | None = None
    prefix: str = "gemm"  # how the prefix sums were computed ("gemm" or "cumsum")
    extra_evaluations: torch.Tensor | int = 0  # ρ evaluations of the control variate per context (2·n_b·POSITION_GRID)

    @property
    def n_evaluations(self) -> torch.Tensor:
        """Network evaluations per context (see :class:`ShapleyResult`): M·(n_b − 1) + 2, plus
        2·n_b·POSITION_GRID ρ evaluations at mean-field points with the position control variate."""
        return self.n_permutations * (self.n_units - 1) + 2 + self.extra_evaluations

    def result(self, i: int) -> ShapleyResult:
        n = int(self.n_units[i])
        return ShapleyResult(
            values=self.values[i, :n].detach().double().cpu().numpy(),
            std_errors=self.std_errors[i, :n].double().cpu().numpy(),
            n_evaluations=int(self.n_evaluations[i]), method="monte_carlo[deepsets-fast]", seed=self.seeds[i],
            n_permutations=self.n_permutations,
            metadata={"antithetic": self.antithetic, "v_grand": float(self.grand_values[i]),
                      "v_empty": float(self.empty_values[i]), "control_variate": self.control_variate,
                      "prefix": self.prefix})


def resolve_seed(seed: int | None) -> int:
    """The given seed, or a fresh one drawn from OS entropy (recorded in results so runs can be repeated)."""
    if seed is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer or None; got {seed!r}")
    return int(seed)


def derive_seed(seed: int, key: str) -> int:
    """A per-context seed from a run seed and a key naming the context (e.g. a hash of its text).

    Drawing each context's permutations from its own seed makes its Shapley estimate independent of which
    other contexts share its batch, of their order, and of the padding width.
    """
    digest = hashlib.sha256(f"{resolve_seed(seed)}\0{key}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "little") % (2**63)


def _check_permutation_count(n_permutations: int, antithetic: bool) -> None:
    if not isinstance(n_permutations, (int, np.integer)) or n_permutations < 1:
        raise InputError(f"the number of permutations M must be an integer ≥ 1; got {n_permutations!r}")
    if antithetic and n_permutations % 2:
        raise InputError(f"antithetic sampling pairs each permutation with its reverse: M must be even; got {n_permutations}")


def sample_permutations(n_players: int, n_permutations: int, seed: int | None = None,
                        antithetic: bool = False) -> np.ndarray:
    """(M, n) uniform random permutations; with ``antithetic`` rows 2k+1 reverse rows 2k."""
    _check_permutation_count(n_permutations, antithetic)
    rng = np.random.default_rng(resolve_seed(seed))
    m = n_permutations // 2 if antithetic else n_permutations
    perms = np.argsort(rng.random((m, n_players)), axis=1)
    if antithetic:
        perms = np.stack([perms, perms[:, ::-1]], axis=1).reshape(n_permutations, n_players)
    return perms


def _std_errors(marginals: np.ndarray | torch.Tensor, antithetic: bool):
    """Per-player standard error of the mean marginal over the permutation axis (−2).

    Antithetic pairs are averaged first, so the pair means are the i.i.d. draws.
    """
    if antithetic:
        shape = marginals.shape
        marginals = marginals.reshape(*shape[:-2], shape[-2] // 2, 2, shape[-1]).mean(-2)
    m = marginals.shape[-2]
    if m < 2:
        return marginals[..., 0, :] * float("nan")
    if isinstance(marginals, torch.Tensor):
        return marginals.std(dim=-2) / math.sqrt(m)
    return marginals.std(axis=-2, ddof=1) / math.sqrt(m)


# ------------------------------------------------------------------------------------------ game boundary

def check_game(game) -> int:
    """The number of players of ``game``, after checking it is a game (a callable with ``n_players`` ≥ 1)."""
    if not callable(game):
        raise InputTypeError(f"a game must be callable on a (k × n) boolean coalition matrix; got {type(game).__name__}")
    n = getattr(game, "n_players", None)
    if n is None:
        raise InputTypeError(f"{_name(game)} has no n_players: wrap a plain function as "
                        "scp.core.games.FunctionGame(fn, n_players)")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"{_name(game)} has n_players = {n!r}: a game needs at least one player")
    return int(n)


def _name(game) -> str:
    return getattr(game, "__name__", None) or type(game).__name__


def evaluate_game(game, coalitions: np.ndarray) -> np.ndarray:
    """v of each row of ``coalitions`` as float64, refusing complex or non-numeric values (numpy would drop an
    imaginary part with only a warning) and NaN or ±inf values (they would poison every φ_i).  Every estimator
    values a user's game through this function."""
    values = real_values(game(coalitions), _name(game))
    if values.shape[0] != coalitions.shape[0]:
        raise InputError(f"{_name(game)} returned {values.shape[0]} values for {coalitions.shape[0]} coalitions")
    bad = ~np.isfinite(values)
    if bad.any():
        first = np.flatnonzero(bad)[0]
        raise InputError(f"{_name(game)} returned non-finite values (NaN or inf) for {int(bad.sum())} of "
                         f"{len(values)} coalitions (first: players {np.flatnonzero(coalitions[first]).tolist()} "
                         f"-> {values[first]}); Shapley values of such a game are undefined")
    return values


# ---------------------------------------------------------------------------------------------------- exact

def exact(game: Game, max_players: int = DEFAULT_EXACT_LIMIT, batch_size: int = 1 << 14,
          max_seconds: float | None = EXACT_MAX_SECONDS) -> ShapleyResult:
    """Exact Shapley values by enumerating all 2^n coalitions in batches of ``batch_size``.

    Refused, with the number of coalitions, the memory, the expected time and the alternatives: above
    ``max_players`` (default :data:`DEFAULT_EXACT_LIMIT` = 16; raise it to go further), above
    :data:`EXACT_MAX_BYTES` of memory (before any evaluation), and when the game's evaluation rate, measured on a
    few coalitions first (:func:`_probe_exact`, only when 2^n > ``batch_size``), says the whole enumeration would
    take more than ``max_seconds`` (``None``: no time limit, no probe).  ``n_evaluations`` counts the 2^n values of
    the table, not the probe's."""
    n = check_game(game)
    total = 2**n
    memory = f"about {_gib(EXACT_BYTES_PER_COALITION * total)} of memory"
    if n > max_players:
        raise InputError(f"exact Shapley needs 2^n = 2^{n} = {total:,} evaluations ({memory}); n = {n} exceeds "
                         f"max_players = {max_players} (raise max_players or use monte_carlo)")
    if EXACT_BYTES_PER_COALITION * total > EXACT_MAX_BYTES:
        raise InputError(f"exact Shapley on n = {n} players enumerates 2^{n} = {total:,} coalitions and needs {memory},"
                         f" more than the {_gib(EXACT_MAX_BYTES)} exact allows (scp.core.shapley.EXACT_MAX_BYTES); "
                         f"{_exact_alternatives(n)}")
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise InputError(f"batch_size must be an integer ≥ 1; got {batch_size!r}")
    if max_seconds is not None and not (isinstance(max_seconds, (int, float)) and max_seconds > 0):
        raise InputError(f"max_seconds must be a number > 0 or None; got {max_seconds!r}")
    if max_seconds is not None and total > batch_size:  # one call only: nothing to extrapolate
        _probe_exact(game, n, batch_size, max_seconds, memory)
    table = np.empty(total)
    for s in range(0, total, batch_size):  # the matrix of all coalitions is never built: one batch at a time
        table[s:s + batch_size] = evaluate_game(game, all_coalitions(n, s, s + batch_size))
    return ShapleyResult(values=shapley_from_table(table), n_evaluations=total, method="exact",
                         std_errors=np.zeros(n))


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
            "(None: no time limit)")


def _expected_seconds(timings: list[tuple[int, float]], total: int, batch_size: int) -> float:
    """Time for ``total`` coalitions in calls of ``batch_size``, from the last two (coalitions, seconds) probes
    fitted as seconds = overhead + k·per_coalition."""
    (k1, t1), (k2, t2) = timings[-2:]
    per = max((t2 - t1) / (k2 - k1), 0.0) if k2 != k1 else t2 / k2
    overhead = max(t2 - per * k2, 0.0)
    return -(-total // batch_size) * overhead + total * per


def _exact_alternatives(n: int) -> str:
    return (f"use monte_carlo(game, n_permutations=M) instead (M·(n − 1) + 2 evaluations: {200 * (n - 1) + 2:,} for "
            "M = 200; a ValueNetGame over a Deep Sets network takes its fast path, ψ once per unit)")


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

def leave_one_out(game: Game) -> ShapleyResult:
    """φ_i^LOO = v(N) − v(N∖{i})."""
    n = check_game(game)
    coalitions = np.vstack([np.ones((1, n), dtype=bool), ~np.eye(n, dtype=bool)])
    values = evaluate_game(game, coalitions)
    return ShapleyResult(values=values[0] - values[1:], n_evaluations=n + 1, method="leave_one_out")


# ----------------------------------------------------------------------------------------------- Monte Carlo

def monte_carlo(game: Game, n_permutations: int = 50, antithetic: bool = False, seed: int | None = None,
                device: str | torch.device | None = None, path: str = "auto",
                permutations: np.ndarray | None = None, control_variate: str | None = None,
                prefix: str = "auto") -> ShapleyResult:
    """Algorithm 1: φ̂_i = (1/M) Σ_m [v(P_i^{π_m} ∪ {i}) − v(P_i^{π_m})].

    ``path``: "auto" (fast path for value-network games, generic otherwise), "generic" (all prefix coalitions
    of all permutations in one batched game call; any game) or "fast".  Explicit ``permutations`` (M, n)
    override sampling, so both paths can be compared on the same draws.  ``control_variate="position"`` and
    ``prefix`` are options of the fast path (see :func:`deepsets_shapley`).
    """
    if path not in ("auto", "generic", "fast"):
        raise InputError(f"path must be 'auto', 'generic' or 'fast'; got {path!r}")
    _check_options(control_variate, prefix)
    seed = resolve_seed(seed)
    n = check_game(game)
    if permutations is None:
        permutations = sample_permutations(n, n_permutations, seed, antithetic)
    else:
        permutations = _check_permutations(permutations, n)
        _check_permutation_count(permutations.shape[0], antithetic)
    fast = isinstance(game, ValueNetGame) and hasattr(game.net, "rho_first_layer")
    if path == "fast" and not fast:
        raise InputError("the fast path needs a ValueNetGame over a Deep Sets network")
    if path != "generic" and fast:
        return _monte_carlo_valuenet(game, permutations, antithetic, seed, device, control_variate, prefix)
    if control_variate is not None:
        raise InputError(f"control_variate={control_variate!r} needs the fast path (a ValueNetGame over a Deep Sets "
                         "network); the generic path takes any game and supports none")
    return _monte_carlo_generic(game, permutations, antithetic, seed)


def _check_permutations(permutations, n: int) -> np.ndarray:
    perms = np.asarray(permutations)
    if perms.ndim != 2 or perms.shape[1] != n or perms.shape[0] < 1:
        raise InputError(f"permutations must be (M ≥ 1, {n}); got shape {perms.shape}")
    if not (np.sort(perms, axis=1) == np.arange(n)).all():
        raise InputError("every row of permutations must be a permutation of 0..n-1")
    return perms.astype(np.int64)


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
    return ShapleyResult(values=marginals.mean(0), std_errors=_std_errors(marginals, antithetic),
                         n_evaluations=int(m * (n - 1) + 2), method="monte_carlo[generic]", seed=seed,
                         n_permutations=m, metadata={"antithetic": antithetic})


def _monte_carlo_valuenet(game: ValueNetGame, perms: np.ndarray, antithetic: bool, seed: int, device,
                          control_variate: str | None, prefix: str) -> ShapleyResult:
    net = game.net
    dev = resolve_device(device) if device is not None else next(net.parameters()).device
    if next(net.parameters()).device != dev:
        net.to(dev)
    was_training = net.training
    if was_training:
        net.eval()
    try:
        with torch.no_grad():
            g, g0 = game.first_layer_rows()  # ψ and ρ's first layer, computed once per game object
            batch = first_layer_shapley(
                net, g[None].to(dev), g0[None].to(dev), None, torch.as_tensor(perms, device=dev)[None],
                antithetic=antithetic, seeds=(seed,), control_variate=control_variate, prefix=prefix)
    finally:
        if was_training:
            net.train()
    return batch.result(0)


def padded_permutations(n_units: Sequence[int], width: int, n_permutations: int, antithetic: bool,
                        seeds: Sequence[int]) -> torch.Tensor:
    """(b, M, width) permutations: row i holds :func:`sample_permutations` (n_i, M, seeds[i]) of its valid
    units, followed by its padding positions in order.  Each row depends only on its own n_i and seed."""
    out = np.empty((len(n_units), n_permutations, width), dtype=np.int64)
    for i, (n, seed) in enumerate(zip(n_units, seeds)):
        out[i, :, :n] = sample_permutations(n, n_permutations, seed, antithetic)
        out[i, :, n:] = np.arange(n, width)
    return torch.from_numpy(out)


def _check_options(control_variate: str | None, prefix: str) -> None:
    if control_variate not in CONTROL_VARIATES:
        raise InputError(f"control_variate must be one of {CONTROL_VARIATES}; got {control_variate!r}")
    if prefix not in PREFIX_PATHS:
        raise InputError(f"prefix must be one of {PREFIX_PATHS}; got {prefix!r}")


def resolve_prefix(prefix: str, n: int) -> str:
    """The prefix-sum path used for width n: "auto" picks gather + cumsum from :data:`CUMSUM_MIN_UNITS` on."""
    if prefix == "auto":
        return "cumsum" if n >= CUMSUM_MIN_UNITS else "gemm"
    return prefix


def deepsets_shapley(net, units: torch.Tensor, query: torch.Tensor, mask: torch.Tensor | None = None,
                     extra: torch.Tensor | None = None, n_permutations: int = 50, antithetic: bool = False,
                     seed: int | Sequence[int] | None = None, permutations: torch.Tensor | None = None,
                     chunk_elements: int = 1 << 23, prefix: str = "auto",
                     control_variate: str | None = None) -> BatchShapley:
    """Batched Monte-Carlo Shapley values of Deep Sets value networks over padded contexts.

    With g_c = W₁ψ(x_c) and g₀ = W₁·base + b₁, the first ρ layer of prefix P_t^π is g₀ + Σ_{s≤t} g_{π(s)}, so
    ψ runs once per unit and only the rest of ρ once per prefix (:func:`first_layer_shapley`).  Gradients flow
    to ψ and ρ.  ``mask`` (b, n) marks valid units (padding False); the network's ``encode`` receives it (a
    context-conditioned ψ(c | C) attends over the valid units).

    ``seed`` is one seed for every context or one per context; context i's permutations are drawn from its
    seed and its own length only (:func:`padded_permutations`), so its values do not depend on the batch it
    is in, and equal :func:`monte_carlo` on its game with the same seed.  ``chunk_elements`` bounds the
    floats of prefix sums held at once (contexts and permutations are chunked), so long contexts cost time, not
    memory.  ``prefix`` and ``control_variate``: see :func:`first_layer_shapley`.
    """
    b, n, _ = units.shape
    mask = torch.ones(b, n, dtype=torch.bool, device=units.device) if mask is None else mask.to(torch.bool)
    from scp.models.value_net import check_inputs

    check_inputs(units, query, mask, extra)
    _check_options(control_variate, prefix)
    n_units = mask.sum(1)
    if (n_units == 0).any():
        raise InputError(f"empty context: batch rows {torch.nonzero(n_units == 0).flatten().tolist()} have no valid unit")
    if (mask.long().diff(dim=1) > 0).any():
        raise InputError("mask must be a padding mask: valid units first, padding after (no gaps)")
    if seed is None or isinstance(seed, (int, np.integer)):
        seeds = (resolve_seed(seed),) * b
    else:
        seeds = tuple(resolve_seed(s) for s in seed)
        if len(seeds) != b:
            raise InputError(f"got {len(seeds)} seeds for a batch of {b} contexts")
    if permutations is None:
        _check_permutation_count(n_permutations, antithetic)
        permutations = padded_permutations(n_units.tolist(), n, n_permutations, antithetic, seeds).to(units.device)
    h, base = net.encode(units, query, extra, mask)
    first_w, first_b = net.rho_first_layer()
    g = (h @ first_w.T) * mask[..., None].to(h.dtype)  # (b, n, H), zero on padding
    g0 = base @ first_w.T + first_b  # (b, H)
    return first_layer_shapley(net, g, g0, mask, permutations, antithetic=antithetic, seeds=seeds,
                               chunk_elements=chunk_elements, prefix=prefix, control_variate=control_variate)


def first_layer_shapley(net, g: torch.Tensor, g0: torch.Tensor, mask: torch.Tensor | None, permutations: torch.Tensor,
                        antithetic: bool = False, seeds: Sequence[int] = (), chunk_elements: int = 1 << 23,
                        prefix: str = "auto", control_variate: str | None = None,
                        position_table: torch.Tensor | None = None) -> BatchShapley:
    """Monte-Carlo Shapley values from ρ's first-layer rows g (b, n, H) (zero on padding) and g₀ (b, H).

    v(P) = rest_of_ρ(g₀ + Σ_{c∈P} g_c) for every interior prefix P_t^π, 1 ≤ t ≤ n − 1, of every permutation
    (b, M, n) (∅ and N are valued once per context); differences give the marginals, scattered back to players.

    ``prefix`` computes the M·(n − 1) prefix sums per context either as one batched product of the 0/1
    prefix-membership matrices with g ("gemm": O(M·n²·H) arithmetic, but one dense kernel, fastest for short
    contexts) or by gathering g in permutation order and summing cumulatively ("cumsum": O(M·n·H)); "auto"
    chooses by n (:func:`resolve_prefix`).  Both give the same values up to float rounding.

    ``control_variate="position"`` subtracts, from player i's marginal at position s, the mean-field marginal
    c_{i,s} = ρ̃(ȳ_{i,s} + g_i) − ρ̃(ȳ_{i,s}), ȳ_{i,s} = g₀ + s/(n−1)·Σ_{j≠i} g_j the expected first layer of a
    uniform s-subset of the other players (ρ̃ = rest of ρ), and adds back its exact mean (1/n)·Σ_s c_{i,s}: the
    position of i in a uniform permutation is uniform on 0..n−1, so E[c_{i,pos_i}] = (1/n)·Σ_s c_{i,s} and the
    estimate stays unbiased for any network.  c is evaluated at :data:`POSITION_GRID` geometrically spaced
    positions and interpolated between them (:func:`_position_table`): 2·n·POSITION_GRID more ρ evaluations.  Each permutation's sample is
    then shifted by an equal share of its efficiency gap, (Δ − Σ_j x_j)/n with Δ = v(N) − v(∅) (a zero-mean
    correction), so the estimate stays efficient.  ``position_table`` passes c (b, n, n) when the caller keeps it
    across calls (:func:`position_table`; its evaluations are then not counted again).  An additive control
    variate (e.g. a first-order expansion of ρ, or the skip path alone) would change nothing here: its marginals
    are constants, so permutation sampling of the remainder has the same variance.
    """
    b, n, width = g.shape
    mask = torch.ones(b, n, dtype=torch.bool, device=g.device) if mask is None else mask.to(torch.bool)
    n_units = mask.sum(1)
    if permutations.ndim != 3 or permutations.shape[0] != b or permutations.shape[2] != n:
        raise InputError(f"permutations must be (batch, M, n) = ({b}, M, {n}); got {tuple(permutations.shape)}")
    n_permutations = permutations.shape[1]
    _check_permutation_count(n_permutations, antithetic)
    _check_options(control_variate, prefix)
    permutations = permutations.to(g.device).long()
    path = resolve_prefix(prefix, n)
    v_empty, v_grand = net.rho_after_first(torch.stack([g0, g0 + g.sum(1)]))  # (b,) each
    ranks = permutations.argsort(dim=-1)
    interior = _interior_values(net, g, g0, permutations, ranks, path, chunk_elements) if n > 1 else \
        g.new_zeros(b, n_permutations, 0)
    prefix_values = torch.cat([v_empty[:, None, None].expand(b, n_permutations, 1), interior,
                               v_grand[:, None, None].expand(b, n_permutations, 1)], dim=2)  # (b, M, n+1)
    # a context of n_i < n units is whole from step n_i on: value those prefixes as N itself, so its marginals
    # telescope to exactly v(N) − v(∅) and its padding gets exactly 0
    whole = torch.arange(n + 1, device=g.device)[None, :] >= n_units[:, None]  # (b, n+1)
    prefix_values = torch.where(whole[:, None, :], v_grand[:, None, None], prefix_values)
    marg_in_order = prefix_values.diff(dim=2)  # (b, M, n)
    samples = torch.zeros_like(marg_in_order).scatter(2, permutations, marg_in_order)
    extra_evaluations = torch.zeros_like(n_units)
    if control_variate == "position":
        given = position_table is not None
        c = position_table if given else _position_table(net, g, g0, mask, chunk_elements)  # (b, n, n positions)
        if c.shape != (b, n, n):
            raise InputError(f"position_table must be (batch, n, n) = ({b}, {n}, {n}); got {tuple(c.shape)}")
        valid = mask.to(g.dtype)
        mean_c = c.sum(2) / n_units[:, None].to(g.dtype)  # (b, n): exact E over the uniform position
        at_pos = torch.gather(c[:, None].expand(b, n_permutations, n, n), 3, ranks[..., None]).squeeze(3)
        samples = (samples - at_pos + mean_c[:, None, :]) * valid[:, None, :]
        gap = (v_grand - v_empty)[:, None] - samples.sum(2)  # (b, M): each sample's efficiency gap
        samples = samples + gap[..., None] * valid[:, None, :] / n_units[:, None, None].to(g.dtype)
        extra_evaluations = torch.zeros_like(n_units) if given else 2 * n_units * POSITION_GRID
    phi = samples.mean(1)
    return BatchShapley(values=phi, std_errors=_std_errors(samples.detach(), antithetic), n_units=n_units,
                        n_permutations=n_permutations, antithetic=antithetic, seeds=tuple(seeds),
                        grand_values=v_grand.detach(), empty_values=v_empty.detach(),
                        control_variate=control_variate, prefix=path, extra_evaluations=extra_evaluations)


def _interior_values(net, g: torch.Tensor, g0: torch.Tensor, permutations: torch.Tensor, ranks: torch.Tensor,
                     path: str, chunk_elements: int) -> torch.Tensor:
    """(b, M, n − 1) values of the interior prefixes, chunked over contexts × permutations."""
    b, n, width = g.shape
    m_all = permutations.shape[1]
    per_pair = (n - 1) * (n + width) if path == "gemm" else (2 * n - 1) * width  # floats per (context, permutation)
    perm_chunk = max(1, min(m_all, chunk_elements // per_pair))
    ctx_chunk = max(1, chunk_elements // (per_pair * m_all)) if perm_chunk == m_all else 1
    steps = torch.arange(1, n, device=g.device)
    rows = []
    for s in range(0, b, ctx_chunk):
        gs, g0s, pieces = g[s:s + ctx_chunk], g0[s:s + ctx_chunk], []
        for p in range(0, m_all, perm_chunk):
            if path == "gemm":
                r = ranks[s:s + ctx_chunk, p:p + perm_chunk]
                members = (r[:, :, None, :] < steps[None, None, :, None]).to(g.dtype)  # (c, m, n−1, n)
                c, m = members.shape[:2]
                # g₀ + members @ g in one fused call (no extra pass over the prefix tensor)
                pre = torch.baddbmm(g0s[:, None, :], members.reshape(c, -1, n), gs).reshape(c, m, n - 1, width)
            else:
                order = permutations[s:s + ctx_chunk, p:p + perm_chunk, :n - 1]  # (c, m, n−1): the last is not needed
                c, m = order.shape[:2]
                offset = (torch.arange(c, device=g.device) * n)[:, None, None]
                rows_in_order = torch.nn.functional.embedding(order + offset, gs.reshape(c * n, width))
                pre = blocked_cumsum(rows_in_order, dim=2) + g0s[:, None, None, :]
            pieces.append(net.rho_after_first(pre))  # (c, m, n−1)
        rows.append(torch.cat(pieces, dim=1))
    return torch.cat(rows)


def blocked_cumsum(x: torch.Tensor, dim: int, block: int = 32) -> torch.Tensor:
    """Cumulative sum along ``dim`` in blocks: a (block × block) lower-triangular product within each block, then
    a cumulative sum of the block totals added to the blocks after them.  Same values as ``x.cumsum(dim)`` up to
    float rounding; on CPU several times faster than torch's scan for long axes (dense kernels)."""
    x = x.movedim(dim, -2)
    n = x.shape[-2]
    pad = (-n) % block
    blocks = torch.nn.functional.pad(x, (0, 0, 0, pad)).reshape(*x.shape[:-2], -1, block, x.shape[-1])
    tri = torch.ones(block, block, dtype=x.dtype, device=x.device).tril()
    within = torch.matmul(tri, blocks)  # (…, n_blocks, block, H): prefix sums inside each block
    before = within[..., :-1, -1, :].cumsum(-2)  # totals of all earlier blocks
    within = within + torch.nn.functional.pad(before, (0, 0, 1, 0))[..., None, :]
    return within.reshape(*x.shape[:-2], -1, x.shape[-1])[..., :n, :].movedim(-2, dim)


def position_table(net, g: torch.Tensor, g0: torch.Tensor, mask: torch.Tensor | None = None,
                   chunk_elements: int = 1 << 23) -> torch.Tensor:
    """The position control variate's table c (b, n players, n positions) (see :func:`first_layer_shapley`)."""
    mask = torch.ones(g.shape[:2], dtype=torch.bool, device=g.device) if mask is None else mask.to(torch.bool)
    return _position_table(net, g, g0, mask, chunk_elements)


def _position_table(net, g: torch.Tensor, g0: torch.Tensor, mask: torch.Tensor, chunk_elements: int) -> torch.Tensor:
    """c_{i,s} for valid i and s < n_b: the mean-field marginal ρ̃(ȳ + g_i) − ρ̃(ȳ), ȳ = g₀ + x/(n_b−1)·(G − g_i),
    evaluated at :data:`POSITION_GRID` positions x_k = n_b^{k/(P−1)} − 1 (geometric from 0 to n_b − 1, dense near
    the start, where marginals change fastest) and linear in s between them: 2·n·P evaluations instead of 2·n².
    Any fixed function of the position is an unbiased control variate, so this is exact in expectation; at
    n = 41 on HotpotQA it removes as much variance as all n positions (``scp.bench.benchmarks`` accuracy)."""
    b, n, width = g.shape
    n_units = mask.sum(1).to(g.dtype)
    steps = torch.arange(POSITION_GRID, device=g.device, dtype=g.dtype) / (POSITION_GRID - 1)
    grid = n_units[:, None] ** steps[None, :] - 1  # (b, P): strictly increasing from 0 to n_b − 1
    frac = grid / (n_units[:, None] - 1).clamp(min=1)
    others = g.sum(1, keepdim=True) - g  # (b, n, H): Σ_{j≠i} g_j
    player_chunk = max(1, chunk_elements // (2 * b * POSITION_GRID * width))
    rows = []
    for i in range(0, n, player_chunk):
        base = g0[:, None, None, :] + frac[:, None, :, None] * others[:, i:i + player_chunk, None, :]  # (b, p, P, H)
        rows.append(net.rho_after_first(base + g[:, i:i + player_chunk, None, :]) - net.rho_after_first(base))
    at_grid = torch.cat(rows, dim=1)  # (b, n, P)
    s = torch.arange(n, device=g.device, dtype=g.dtype)[None, :].expand(b, n).contiguous()
    k = (torch.searchsorted(grid.contiguous(), s, right=True) - 1).clamp(0, POSITION_GRID - 2)  # (b, n positions)
    lo, hi = grid.gather(1, k), grid.gather(1, k + 1)
    w = ((s - lo) / (hi - lo).clamp(min=1e-12)).clamp(0, 1)[:, None, :]  # one unit: every grid point is 0
    kk = k[:, None, :].expand(b, n, n)
    c = at_grid.gather(2, kk) * (1 - w) + at_grid.gather(2, kk + 1) * w
    inside = mask[:, :, None] & (torch.arange(n, device=g.device)[None, None, :] < mask.sum(1)[:, None, None])
    return c * inside.to(g.dtype)


def naive_monte_carlo(game: Game, n_permutations: int, seed: int | None = None) -> ShapleyResult:
    """Algorithm 1 as written: one game call per prefix coalition (a reference for benchmarks only)."""
    seed = resolve_seed(seed)
    n = check_game(game)
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
    return ShapleyResult(values=phi / n_permutations, n_evaluations=n_permutations * (n + 1),
                         method="monte_carlo[naive]", seed=seed, n_permutations=n_permutations)


# -------------------------------------------------------------------------------------------- max games

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


# ------------------------------------------------------------------------------------------- one interface

ESTIMATORS = {"exact": exact, "monte_carlo": monte_carlo, "leave_one_out": leave_one_out, "loo": leave_one_out}


def estimate(game: Game, method: str = "monte_carlo", **kwargs) -> ShapleyResult:
    """Estimate Shapley values of ``game`` with ``method`` in {exact, monte_carlo, leave_one_out}."""
    if method not in ESTIMATORS:
        raise InputError(f"unknown estimator {method!r}; choose one of {sorted(ESTIMATORS)}")
    return ESTIMATORS[method](game, **kwargs)
