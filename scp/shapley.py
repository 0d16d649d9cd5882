"""Shapley estimators with one interface: ``estimate(game, method, **kw) -> ShapleyResult``.

φ_i(v) = Σ_{S ⊆ N∖{i}} |S|!(n−|S|−1)!/n! · (v(S∪{i}) − v(S)) = E_π[v(P_i^π ∪ {i}) − v(P_i^π)],
P_i^π the players before i in a uniform random permutation π.

- :func:`exact` enumerates all 2^n coalitions (batched), O(n·2^n) arithmetic.
- :func:`monte_carlo` is the paper's Algorithm 1: M permutations, every prefix coalition evaluated in one
  batched call, each player credited its marginal.  A value-network game takes the Deep Sets fast path
  (:func:`deepsets_shapley`): ψ once per unit, ρ's first linear layer applied before the prefix sums, one
  batched ρ call for all M·(n+1) prefixes of many contexts; differentiable in the network's parameters.
- :func:`leave_one_out` is v(N) − v(N∖{i}) (n + 1 evaluations); it is not a Shapley estimator and fails on
  redundancy (two copies of a needed sentence each get ≈ 0).
- :func:`max_game_shapley` / :func:`max_shapley` are closed forms for max games in O(m log m).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from .games import Game, ValueNetGame, all_coalitions

DEFAULT_EXACT_LIMIT = 16


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

    @property
    def n_evaluations(self) -> torch.Tensor:
        """Coalitions valued per context (see :class:`ShapleyResult`): M·(n_b − 1) + 2."""
        return self.n_permutations * (self.n_units - 1) + 2

    def result(self, i: int) -> ShapleyResult:
        n = int(self.n_units[i])
        return ShapleyResult(
            values=self.values[i, :n].detach().double().cpu().numpy(),
            std_errors=self.std_errors[i, :n].double().cpu().numpy(),
            n_evaluations=int(self.n_evaluations[i]), method="monte_carlo[deepsets-fast]", seed=self.seeds[i],
            n_permutations=self.n_permutations,
            metadata={"antithetic": self.antithetic, "v_grand": float(self.grand_values[i]),
                      "v_empty": float(self.empty_values[i])})


def resolve_seed(seed: int | None) -> int:
    """The given seed, or a fresh one drawn from OS entropy (recorded in results so runs can be repeated)."""
    if seed is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer or None; got {seed!r}")
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
        raise ValueError(f"the number of permutations M must be an integer ≥ 1; got {n_permutations!r}")
    if antithetic and n_permutations % 2:
        raise ValueError(f"antithetic sampling pairs each permutation with its reverse: M must be even; got {n_permutations}")


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
        raise TypeError(f"a game must be callable on a (k × n) boolean coalition matrix; got {type(game).__name__}")
    n = getattr(game, "n_players", None)
    if n is None:
        raise TypeError(f"{_name(game)} has no n_players: wrap a plain function as "
                        "scp.games.FunctionGame(fn, n_players)")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{_name(game)} has n_players = {n!r}: a game needs at least one player")
    return int(n)


def _name(game) -> str:
    return getattr(game, "__name__", None) or type(game).__name__


def evaluate_game(game, coalitions: np.ndarray) -> np.ndarray:
    """v of each row of ``coalitions`` as float64, refusing NaN or ±inf values (they would poison every φ_i)."""
    values = np.asarray(game(coalitions), dtype=np.float64).reshape(-1)
    if values.shape[0] != coalitions.shape[0]:
        raise ValueError(f"{_name(game)} returned {values.shape[0]} values for {coalitions.shape[0]} coalitions")
    bad = ~np.isfinite(values)
    if bad.any():
        first = np.flatnonzero(bad)[0]
        raise ValueError(f"{_name(game)} returned non-finite values (NaN or inf) for {int(bad.sum())} of "
                         f"{len(values)} coalitions (first: players {np.flatnonzero(coalitions[first]).tolist()} "
                         f"-> {values[first]}); Shapley values of such a game are undefined")
    return values


# ---------------------------------------------------------------------------------------------------- exact

def exact(game: Game, max_players: int = DEFAULT_EXACT_LIMIT, batch_size: int = 1 << 14) -> ShapleyResult:
    """Exact Shapley values by enumerating all 2^n coalitions (refused above ``max_players``)."""
    n = check_game(game)
    if n > max_players:
        raise ValueError(f"exact Shapley needs 2^n = 2^{n} evaluations; n = {n} exceeds max_players = {max_players} "
                         f"(raise max_players or use monte_carlo)")
    table = np.concatenate([evaluate_game(game, all_coalitions(n)[s:s + batch_size])
                            for s in range(0, 2**n, batch_size)])
    return ShapleyResult(values=shapley_from_table(table), n_evaluations=2**n, method="exact",
                         std_errors=np.zeros(n))


def shapley_from_table(table: np.ndarray) -> np.ndarray:
    """φ from all 2^n values indexed by bitmask: φ_i = Σ_{S∌i} w(|S|)(v(S+i) − v(S)), w(s) = 1/(n·C(n−1, s))."""
    table = np.asarray(table, dtype=np.float64)
    n = int(round(math.log2(table.size)))
    masks = np.arange(table.size)
    sizes = np.bitwise_count(masks.astype(np.uint64)).astype(np.int64)
    weights = np.array([1.0 / (n * math.comb(n - 1, s)) for s in range(n)])
    phi = np.empty(n)
    for i in range(n):
        without = masks[(masks >> i) & 1 == 0]
        phi[i] = weights[sizes[without]] @ (table[without | (1 << i)] - table[without])
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
                permutations: np.ndarray | None = None) -> ShapleyResult:
    """Algorithm 1: φ̂_i = (1/M) Σ_m [v(P_i^{π_m} ∪ {i}) − v(P_i^{π_m})].

    ``path``: "auto" (fast path for value-network games, generic otherwise), "generic" (all prefix coalitions
    of all permutations in one batched game call; any game) or "fast".  Explicit ``permutations`` (M, n)
    override sampling, so both paths can be compared on the same draws.
    """
    if path not in ("auto", "generic", "fast"):
        raise ValueError(f"path must be 'auto', 'generic' or 'fast'; got {path!r}")
    seed = resolve_seed(seed)
    n = check_game(game)
    if permutations is None:
        permutations = sample_permutations(n, n_permutations, seed, antithetic)
    else:
        permutations = _check_permutations(permutations, n)
        _check_permutation_count(permutations.shape[0], antithetic)
    fast = isinstance(game, ValueNetGame) and hasattr(game.net, "rho_first_layer")
    if path == "fast" and not fast:
        raise ValueError("the fast path needs a ValueNetGame over a Deep Sets network")
    if path != "generic" and fast:
        return _monte_carlo_valuenet(game, permutations, antithetic, seed, device)
    return _monte_carlo_generic(game, permutations, antithetic, seed)


def _check_permutations(permutations, n: int) -> np.ndarray:
    perms = np.asarray(permutations)
    if perms.ndim != 2 or perms.shape[1] != n or perms.shape[0] < 1:
        raise ValueError(f"permutations must be (M ≥ 1, {n}); got shape {perms.shape}")
    if not (np.sort(perms, axis=1) == np.arange(n)).all():
        raise ValueError("every row of permutations must be a permutation of 0..n-1")
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


def _monte_carlo_valuenet(game: ValueNetGame, perms: np.ndarray, antithetic: bool, seed: int, device) -> ShapleyResult:
    dev = torch.device(device) if device is not None else next(game.net.parameters()).device
    was_training = game.net.training
    game.net.eval()
    try:
        with torch.no_grad():
            units, query, extra = game.units, game.query, game.extra
            batch = deepsets_shapley(
                game.net.to(dev), units[None].to(dev), query[None].to(dev),
                extra=None if extra is None else extra[None].to(dev),
                n_permutations=perms.shape[0], antithetic=antithetic, seed=seed,
                permutations=torch.as_tensor(perms, device=dev)[None])
    finally:
        game.net.train(was_training)
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


def deepsets_shapley(net, units: torch.Tensor, query: torch.Tensor, mask: torch.Tensor | None = None,
                     extra: torch.Tensor | None = None, n_permutations: int = 50, antithetic: bool = False,
                     seed: int | Sequence[int] | None = None, permutations: torch.Tensor | None = None,
                     chunk_elements: int = 1 << 23) -> BatchShapley:
    """Batched Monte-Carlo Shapley values of Deep Sets value networks over padded contexts.

    With g_c = W₁ψ(x_c) and g₀ = W₁·base + b₁, the first ρ layer of prefix P_t^π is g₀ + Σ_{s≤t} g_{π(s)}:
    one batched product of the 0/1 prefix-membership matrices (M·(n−1) × n) with g gives all interior
    prefixes (a GEMM, cheaper in memory traffic than gather + cumulative sum); ∅ and N are valued once per
    context; one call of the rest of ρ values them, and differences give the marginals, scattered back to
    players.  Gradients flow to ψ and ρ.  ``mask`` (b, n) marks valid units (padding False).

    ``seed`` is one seed for every context or one per context; context i's permutations are drawn from its
    seed and its own length only (:func:`padded_permutations`), so its values do not depend on the batch it
    is in, and equal :func:`monte_carlo` on its game with the same seed.  ``chunk_elements`` bounds the
    floats held per ρ call (contexts and permutations are chunked), so long contexts cost time, not memory.
    """
    b, n, _ = units.shape
    mask = torch.ones(b, n, dtype=torch.bool, device=units.device) if mask is None else mask.to(torch.bool)
    from .value_net import check_inputs

    check_inputs(units, query, mask, extra)
    n_units = mask.sum(1)
    if (n_units == 0).any():
        raise ValueError(f"empty context: batch rows {torch.nonzero(n_units == 0).flatten().tolist()} have no valid unit")
    if (mask.long().diff(dim=1) > 0).any():
        raise ValueError("mask must be a padding mask: valid units first, padding after (no gaps)")
    if seed is None or isinstance(seed, (int, np.integer)):
        seeds = (resolve_seed(seed),) * b
    else:
        seeds = tuple(resolve_seed(s) for s in seed)
        if len(seeds) != b:
            raise ValueError(f"got {len(seeds)} seeds for a batch of {b} contexts")
    if permutations is None:
        _check_permutation_count(n_permutations, antithetic)
        permutations = padded_permutations(n_units.tolist(), n, n_permutations, antithetic, seeds).to(units.device)
    else:
        if permutations.ndim != 3 or permutations.shape[0] != b or permutations.shape[2] != n:
            raise ValueError(f"permutations must be (batch, M, n) = ({b}, M, {n}); got {tuple(permutations.shape)}")
        n_permutations = permutations.shape[1]
        _check_permutation_count(n_permutations, antithetic)
        permutations = permutations.to(units.device).long()
    h, base = net.encode(units, query, extra, mask)
    first_w, first_b = net.rho_first_layer()
    g = (h @ first_w.T) * mask[..., None].to(h.dtype)  # (b, n, H), zero on padding
    g0 = base @ first_w.T + first_b  # (b, H)
    v_empty, v_grand = net.rho_after_first(g0), net.rho_after_first(g0 + g.sum(1))  # (b,)
    # interior prefix t (1 ≤ t ≤ n−1) of permutation π holds the players of rank < t: a 0/1 matrix times g
    # gives all of them.  Chunks of contexts × permutations keep memory near ``chunk_elements`` floats.
    ranks = permutations.argsort(dim=-1)
    steps = torch.arange(1, n, device=units.device)
    per_pair = max(1, n - 1) * (n + g.shape[-1])
    perm_chunk = max(1, min(n_permutations, chunk_elements // per_pair))
    ctx_chunk = max(1, chunk_elements // (per_pair * n_permutations)) if perm_chunk == n_permutations else 1
    rows = []
    for s in range(0, b, ctx_chunk):
        pieces = []
        for p in range(0, n_permutations, perm_chunk):
            r = ranks[s:s + ctx_chunk, p:p + perm_chunk]
            members = (r[:, :, None, :] < steps[None, None, :, None]).to(g.dtype)  # (c, m, n−1, n)
            c, m = members.shape[:2]
            # g₀ + members @ g in one fused call (no extra pass over the prefix tensor)
            prefix = torch.baddbmm(g0[s:s + ctx_chunk, None, :], members.reshape(c, -1, n), g[s:s + ctx_chunk])
            pieces.append(net.rho_after_first(prefix.reshape(c, m, n - 1, g.shape[-1])))  # (c, m, n−1)
        rows.append(torch.cat(pieces, dim=1))
    interior = torch.cat(rows)
    prefix_values = torch.cat([v_empty[:, None, None].expand(b, n_permutations, 1), interior,
                               v_grand[:, None, None].expand(b, n_permutations, 1)], dim=2)  # (b, M, n+1)
    # a context of n_i < n units is whole from step n_i on: value those prefixes as N itself, so its marginals
    # telescope to exactly v(N) − v(∅) and its padding gets exactly 0
    whole = torch.arange(n + 1, device=units.device)[None, :] >= n_units[:, None]  # (b, n+1)
    prefix_values = torch.where(whole[:, None, :], v_grand[:, None, None], prefix_values)
    marg_in_order = prefix_values.diff(dim=2)  # (b, M, n)
    marginals = torch.zeros_like(marg_in_order).scatter(2, permutations, marg_in_order)
    phi = marginals.mean(1)
    return BatchShapley(values=phi, std_errors=_std_errors(marginals.detach(), antithetic), n_units=n_units,
                        n_permutations=n_permutations, antithetic=antithetic, seeds=seeds,
                        grand_values=v_grand.detach(), empty_values=v_empty.detach())


def naive_monte_carlo(game: Game, n_permutations: int, seed: int | None = None) -> ShapleyResult:
    """Algorithm 1 as written: one game call per prefix coalition (a reference for benchmarks only)."""
    seed = resolve_seed(seed)
    perms = sample_permutations(game.n_players, n_permutations, seed)
    n = game.n_players
    phi = np.zeros(n)
    for perm in perms:
        coalition = np.zeros((1, n), dtype=bool)
        previous = game(coalition)[0]
        for player in perm:
            coalition[0, player] = True
            current = game(coalition)[0]
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
        raise ValueError("a max game needs at least one player")
    if not np.isfinite(r).all():
        raise ValueError("max-game scores must be finite")
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
        raise ValueError(f"relevance must be (n_players, n_aspects); got shape {r.shape}")
    w = np.ones(r.shape[1]) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (r.shape[1],):
        raise ValueError(f"weights must have shape ({r.shape[1]},); got {w.shape}")
    return np.stack([max_game_shapley(r[:, j]) for j in range(r.shape[1])], axis=1) @ w


# ------------------------------------------------------------------------------------------- one interface

ESTIMATORS = {"exact": exact, "monte_carlo": monte_carlo, "leave_one_out": leave_one_out, "loo": leave_one_out}


def estimate(game: Game, method: str = "monte_carlo", **kwargs) -> ShapleyResult:
    """Estimate Shapley values of ``game`` with ``method`` in {exact, monte_carlo, leave_one_out}."""
    if method not in ESTIMATORS:
        raise ValueError(f"unknown estimator {method!r}; choose one of {sorted(ESTIMATORS)}")
    return ESTIMATORS[method](game, **kwargs)
