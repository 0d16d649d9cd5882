"""The Deep Sets fast path: Monte-Carlo Shapley values of value networks without a network call per coalition.

A Deep Sets value network is v(S) = ρ(base + Σ_{c∈S} ψ(x_c)) with ρ's first layer linear (W₁, b₁).  With
g_c = W₁ψ(x_c) and g₀ = W₁·base + b₁, the first ρ layer of a coalition is g₀ + Σ_{c∈S} g_c, so ψ runs once per unit
and only the rest of ρ (ρ̃) once per coalition: v(S) = ρ̃(g₀ + Σ_{c∈S} g_c).  Monte Carlo (Algorithm 1) values the
M·(n − 1) interior prefixes P_t^π of M permutations, φ̂_i = (1/M)·Σ_m [v(P_i^{π_m} ∪ {i}) − v(P_i^{π_m})], from prefix
sums of the rows g (a 0/1-matrix product for short contexts, gather + blocked cumulative sum for long ones), for a
padded batch of many contexts in one batched ρ̃ call; differentiable in the network's parameters (training uses it
inside the loss).  Options: antithetic pairs, and the unbiased position control variate.

The fast path reads a network through a small duck-typed interface, so this module imports nothing of the models:
``net.encode(units, query, extra, mask) -> (ψ rows (b, n, L), base (b, L))``, ``net.rho_first_layer() -> (W₁, b₁)``,
``net.rho_after_first(y) -> v`` and ``net.bound`` (values lie in [0, B]).  A game takes the fast path when it is a
:class:`FastPathGame` over such a network (:func:`has_fast_path`), e.g. :class:`scp.models.game.ValueNetGame`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from scp.core.memory import check_memory
from scp.core.permutations import (
    PERMUTATION_BYTES,
    check_permutation_count,
    padded_permutations,
    resolve_seed,
    std_errors,
)
from scp.core.result import ShapleyResult
from scp.core.selection import is_integer
from scp.devices import eval_mode, resolve_device
from scp.errors import InputError

__all__ = [
    "CONTROL_VARIATES",
    "CUMSUM_MIN_UNITS",
    "FAST_PATH_BYTES",
    "POSITION_GRID",
    "PREFIX_PATHS",
    "BatchShapley",
    "FastPathGame",
    "blocked_cumsum",
    "check_fast_options",
    "check_fast_path_memory",
    "check_inputs",
    "deepsets_shapley",
    "fast_path_monte_carlo",
    "first_layer_shapley",
    "has_fast_path",
    "position_table",
    "resolve_prefix",
]

CONTROL_VARIATES = (None, "position")
POSITION_GRID = 8  # positions at which the position control variate is evaluated (see _position_table)
PREFIX_PATHS = ("auto", "gemm", "cumsum")
CUMSUM_MIN_UNITS = 192
"""From this many units (the padded width) on, "auto" computes prefix sums by gather + cumsum instead of the
0/1-matrix product; measured by ``python -m scp.bench prefix`` (see BENCHMARKS.md: on one CPU thread the two paths
tie near n = 128–192 and gather + cumsum wins from 192 on for both the shipped and the paper-sized network)."""
FAST_PATH_BYTES = 56
"""Bytes the fast path holds per context, permutation and unit where the network runs: the permutations and their
ranks (int64) and five (b, M, n) float arrays (prefix values, marginals, samples and their work copies) of up to 8
bytes; the prefix sums themselves are chunked (``chunk_elements``)."""


@runtime_checkable
class FastPathGame(Protocol):
    """A game played by a Deep Sets network on one context, as the fast path reads it.

    ``net`` is the network (the fast path applies when it has ``rho_first_layer``, :func:`has_fast_path`);
    ``first_layer_rows()`` returns (g (n, H), g₀ (H,)), ρ's first layer applied to each unit's ψ and to the base
    term (cached by the game).  A game may also declare ``value_bound`` = B when its values lie in [0, B] (the
    adaptive budget's default range, :func:`scp.core.adaptive.adaptive_monte_carlo`).
    """

    net: Any

    def first_layer_rows(self) -> tuple[torch.Tensor, torch.Tensor]: ...


def has_fast_path(game) -> bool:
    """Whether Monte Carlo on ``game`` can take the fast path: a :class:`FastPathGame` whose network has a linear
    first ρ layer (``rho_first_layer``)."""
    return isinstance(game, FastPathGame) and hasattr(game.net, "rho_first_layer")


def check_inputs(
    units: torch.Tensor,
    query: torch.Tensor,
    mask: torch.Tensor | None,
    extra: torch.Tensor | None,
    embed_dim: int | None = None,
    n_extra: int | None = None,
) -> None:
    """Raise a clear error for malformed value-network inputs: ``units`` (b, n, d) with n ≥ 1, ``query`` (b, d),
    ``mask`` (b, n), ``extra`` (b, n, e), all finite (and d = ``embed_dim``, e = ``n_extra`` when given)."""
    if units.ndim != 3:
        raise InputError(f"units must be (batch, n_units, dim); got shape {tuple(units.shape)}")
    b, n, d = units.shape
    if n == 0:
        raise InputError("empty context: a value network needs at least one unit")
    if embed_dim is not None and d != embed_dim:
        raise InputError(f"unit embeddings have dimension {d}, the network expects {embed_dim}")
    if query.shape != (b, d):
        raise InputError(f"query must be (batch, dim) = ({b}, {d}); got {tuple(query.shape)}")
    if not torch.isfinite(units).all():
        raise InputError("unit embeddings contain NaN or inf")
    if not torch.isfinite(query).all():
        raise InputError("query embedding contains NaN or inf")
    if mask is not None and mask.shape != (b, n):
        raise InputError(f"mask must be (batch, n_units) = ({b}, {n}); got {tuple(mask.shape)}")
    if extra is not None:
        if extra.ndim != 3 or extra.shape[:2] != (b, n):
            raise InputError(f"extra features must be (batch, n_units, n_extra); got {tuple(extra.shape)}")
        if not torch.isfinite(extra).all():
            raise InputError("extra unit features contain NaN or inf")
    e = 0 if extra is None else extra.shape[2]
    if n_extra is not None and e != n_extra:
        raise InputError(f"the network expects {n_extra} extra features per unit; got {e}")


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
            n_evaluations=int(self.n_evaluations[i]),
            method="monte_carlo[deepsets-fast]",
            seed=self.seeds[i],
            n_permutations=self.n_permutations,
            metadata={
                "antithetic": self.antithetic,
                "v_grand": float(self.grand_values[i]),
                "v_empty": float(self.empty_values[i]),
                "control_variate": self.control_variate,
                "prefix": self.prefix,
            },
        )


def check_fast_path_memory(n_contexts: int, n_permutations: int, width: int, device: torch.device | str) -> None:
    """Refuse a fast-path call whose (contexts × M × width) arrays need more memory than is available: the
    permutations drawn on the host (:data:`~scp.core.permutations.PERMUTATION_BYTES` + 8 per entry) and
    :data:`FAST_PATH_BYTES` per entry on ``device`` (:func:`scp.core.memory.check_memory`)."""
    entries = int(n_contexts) * int(n_permutations) * int(width)
    what = f"Monte Carlo with M = {n_permutations:,} permutations of {width:,} units" + (
        f" in each of {n_contexts:,} contexts" if n_contexts > 1 else ""
    )
    advice = "use fewer permutations (a smaller budget or n_permutations) or fewer contexts per batch"
    host = entries * (PERMUTATION_BYTES + 8)
    if torch.device(device).type == "cuda":
        check_memory(host, what, advice)
        check_memory(entries * FAST_PATH_BYTES, what, advice, device)
    else:
        check_memory(host + entries * FAST_PATH_BYTES, what, advice)


def check_chunk_elements(chunk_elements: int) -> None:
    """``chunk_elements`` (the most prefix-sum floats held at once) is an integer ≥ 1."""
    if not is_integer(chunk_elements) or chunk_elements < 1:
        raise InputError(f"chunk_elements must be an integer ≥ 1; got {chunk_elements!r}")


def check_fast_options(control_variate: str | None, prefix: str) -> None:
    """Clear errors for an unknown control variate or prefix-sum path."""
    if control_variate not in CONTROL_VARIATES:
        raise InputError(f"control_variate must be one of {CONTROL_VARIATES}; got {control_variate!r}")
    if prefix not in PREFIX_PATHS:
        raise InputError(f"prefix must be one of {PREFIX_PATHS}; got {prefix!r}")


def resolve_prefix(prefix: str, n: int) -> str:
    """The prefix-sum path used for width n: "auto" picks gather + cumsum from :data:`CUMSUM_MIN_UNITS` on."""
    if prefix == "auto":
        return "cumsum" if n >= CUMSUM_MIN_UNITS else "gemm"
    return prefix


def deepsets_shapley(
    net,
    units: torch.Tensor,
    query: torch.Tensor,
    mask: torch.Tensor | None = None,
    extra: torch.Tensor | None = None,
    n_permutations: int = 50,
    antithetic: bool = False,
    seed: int | Sequence[int] | None = None,
    permutations: torch.Tensor | None = None,
    chunk_elements: int = 1 << 23,
    prefix: str = "auto",
    control_variate: str | None = None,
) -> BatchShapley:
    """Batched Monte-Carlo Shapley values of Deep Sets value networks over padded contexts.

    With g_c = W₁ψ(x_c) and g₀ = W₁·base + b₁, the first ρ layer of prefix P_t^π is g₀ + Σ_{s≤t} g_{π(s)}, so
    ψ runs once per unit and only the rest of ρ once per prefix (:func:`first_layer_shapley`).  Gradients flow
    to ψ and ρ.  ``mask`` (b, n) marks valid units (padding False); the network's ``encode`` receives it (a
    context-conditioned ψ(c | C) attends over the valid units).

    ``seed`` is one seed for every context or one per context; context i's permutations are drawn from its
    seed and its own length only (:func:`scp.core.permutations.padded_permutations`), so its values do not depend
    on the batch it is in, and equal :func:`scp.core.monte_carlo.monte_carlo` on its game with the same seed.
    ``chunk_elements`` bounds the floats of prefix sums held at once (contexts and permutations are chunked), so
    long contexts cost time, not memory.  ``prefix`` and ``control_variate``: see :func:`first_layer_shapley`.
    """
    b, n, _ = units.shape
    mask = torch.ones(b, n, dtype=torch.bool, device=units.device) if mask is None else mask.to(torch.bool)
    check_inputs(units, query, mask, extra)
    check_fast_options(control_variate, prefix)
    check_chunk_elements(chunk_elements)
    n_units = mask.sum(1)
    if (n_units == 0).any():
        raise InputError(
            f"empty context: batch rows {torch.nonzero(n_units == 0).flatten().tolist()} have no valid unit"
        )
    if (mask.long().diff(dim=1) > 0).any():
        raise InputError("mask must be a padding mask: valid units first, padding after (no gaps)")
    if seed is None or isinstance(seed, (int, np.integer)):
        seeds = (resolve_seed(seed),) * b
    else:
        seeds = tuple(resolve_seed(s) for s in seed)
        if len(seeds) != b:
            raise InputError(f"got {len(seeds)} seeds for a batch of {b} contexts")
    if permutations is None:
        check_permutation_count(n_permutations, antithetic)
        check_fast_path_memory(b, n_permutations, n, units.device)
        permutations = padded_permutations(n_units.tolist(), n, n_permutations, antithetic, seeds).to(units.device)
    h, base = net.encode(units, query, extra, mask)
    first_w, first_b = net.rho_first_layer()
    g = (h @ first_w.T) * mask[..., None].to(h.dtype)  # (b, n, H), zero on padding
    g0 = base @ first_w.T + first_b  # (b, H)
    return first_layer_shapley(
        net,
        g,
        g0,
        mask,
        permutations,
        antithetic=antithetic,
        seeds=seeds,
        chunk_elements=chunk_elements,
        prefix=prefix,
        control_variate=control_variate,
    )


def first_layer_shapley(
    net,
    g: torch.Tensor,
    g0: torch.Tensor,
    mask: torch.Tensor | None,
    permutations: torch.Tensor,
    antithetic: bool = False,
    seeds: Sequence[int] = (),
    chunk_elements: int = 1 << 23,
    prefix: str = "auto",
    control_variate: str | None = None,
    position_table: torch.Tensor | None = None,
) -> BatchShapley:
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
    positions and interpolated between them (:func:`_position_table`): 2·n·POSITION_GRID more ρ evaluations.  Each
    permutation's sample is
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
    check_permutation_count(n_permutations, antithetic)
    check_fast_options(control_variate, prefix)
    check_chunk_elements(chunk_elements)
    permutations = permutations.to(g.device).long()
    path = resolve_prefix(prefix, n)
    v_empty, v_grand = net.rho_after_first(torch.stack([g0, g0 + g.sum(1)]))  # (b,) each
    ranks = permutations.argsort(dim=-1)
    interior = (
        _interior_values(net, g, g0, permutations, ranks, path, chunk_elements)
        if n > 1
        else g.new_zeros(b, n_permutations, 0)
    )
    prefix_values = torch.cat(
        [
            v_empty[:, None, None].expand(b, n_permutations, 1),
            interior,
            v_grand[:, None, None].expand(b, n_permutations, 1),
        ],
        dim=2,
    )  # (b, M, n+1)
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
    return BatchShapley(
        values=phi,
        std_errors=std_errors(samples.detach(), antithetic),
        n_units=n_units,
        n_permutations=n_permutations,
        antithetic=antithetic,
        seeds=tuple(seeds),
        grand_values=v_grand.detach(),
        empty_values=v_empty.detach(),
        control_variate=control_variate,
        prefix=path,
        extra_evaluations=extra_evaluations,
    )


def _interior_values(
    net,
    g: torch.Tensor,
    g0: torch.Tensor,
    permutations: torch.Tensor,
    ranks: torch.Tensor,
    path: str,
    chunk_elements: int,
) -> torch.Tensor:
    """(b, M, n − 1) values of the interior prefixes, chunked over contexts × permutations."""
    b, n, width = g.shape
    m_all = permutations.shape[1]
    per_pair = (n - 1) * (n + width) if path == "gemm" else (2 * n - 1) * width  # floats per (context, permutation)
    perm_chunk = max(1, min(m_all, chunk_elements // per_pair))
    ctx_chunk = max(1, chunk_elements // (per_pair * m_all)) if perm_chunk == m_all else 1
    steps = torch.arange(1, n, device=g.device)
    rows = []
    for s in range(0, b, ctx_chunk):
        gs, g0s, pieces = g[s : s + ctx_chunk], g0[s : s + ctx_chunk], []
        for p in range(0, m_all, perm_chunk):
            if path == "gemm":
                r = ranks[s : s + ctx_chunk, p : p + perm_chunk]
                members = (r[:, :, None, :] < steps[None, None, :, None]).to(g.dtype)  # (c, m, n−1, n)
                c, m = members.shape[:2]
                # g₀ + members @ g in one fused call (no extra pass over the prefix tensor)
                pre = torch.baddbmm(g0s[:, None, :], members.reshape(c, -1, n), gs).reshape(c, m, n - 1, width)
            else:
                order = permutations[
                    s : s + ctx_chunk, p : p + perm_chunk, : n - 1
                ]  # (c, m, n−1): the last is not needed
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


def position_table(
    net, g: torch.Tensor, g0: torch.Tensor, mask: torch.Tensor | None = None, chunk_elements: int = 1 << 23
) -> torch.Tensor:
    """The position control variate's table c (b, n players, n positions) (see :func:`first_layer_shapley`)."""
    mask = torch.ones(g.shape[:2], dtype=torch.bool, device=g.device) if mask is None else mask.to(torch.bool)
    return _position_table(net, g, g0, mask, chunk_elements)


def _position_table(net, g: torch.Tensor, g0: torch.Tensor, mask: torch.Tensor, chunk_elements: int) -> torch.Tensor:
    """c_{i,s} for valid i and s < n_b: the mean-field marginal ρ̃(ȳ + g_i) − ρ̃(ȳ), ȳ = g₀ + x/(n_b−1)·(G − g_i),
    evaluated at :data:`POSITION_GRID` positions x_k = n_b^{k/(P−1)} − 1 (geometric from 0 to n_b − 1, dense near
    the start, where marginals change fastest) and linear in s between them: 2·n·P evaluations instead of 2·n².
    Any fixed function of the position is an unbiased control variate, so this is exact in expectation; at
    n = 41 on HotpotQA it removes as much variance as all n positions (``scp.bench.accuracy``)."""
    b, n, width = g.shape
    n_units = mask.sum(1).to(g.dtype)
    steps = torch.arange(POSITION_GRID, device=g.device, dtype=g.dtype) / (POSITION_GRID - 1)
    grid = n_units[:, None] ** steps[None, :] - 1  # (b, P): strictly increasing from 0 to n_b − 1
    frac = grid / (n_units[:, None] - 1).clamp(min=1)
    others = g.sum(1, keepdim=True) - g  # (b, n, H): Σ_{j≠i} g_j
    player_chunk = max(1, chunk_elements // (2 * b * POSITION_GRID * width))
    rows = []
    for i in range(0, n, player_chunk):
        base = g0[:, None, None, :] + frac[:, None, :, None] * others[:, i : i + player_chunk, None, :]  # (b, p, P, H)
        rows.append(net.rho_after_first(base + g[:, i : i + player_chunk, None, :]) - net.rho_after_first(base))
    at_grid = torch.cat(rows, dim=1)  # (b, n, P)
    s = torch.arange(n, device=g.device, dtype=g.dtype)[None, :].expand(b, n).contiguous()
    k = (torch.searchsorted(grid.contiguous(), s, right=True) - 1).clamp(0, POSITION_GRID - 2)  # (b, n positions)
    lo, hi = grid.gather(1, k), grid.gather(1, k + 1)
    w = ((s - lo) / (hi - lo).clamp(min=1e-12)).clamp(0, 1)[:, None, :]  # one unit: every grid point is 0
    kk = k[:, None, :].expand(b, n, n)
    c = at_grid.gather(2, kk) * (1 - w) + at_grid.gather(2, kk + 1) * w
    inside = mask[:, :, None] & (torch.arange(n, device=g.device)[None, None, :] < mask.sum(1)[:, None, None])
    return c * inside.to(g.dtype)


def fast_path_monte_carlo(
    game: FastPathGame,
    permutations: np.ndarray,
    antithetic: bool,
    seed: int,
    device: str | torch.device | None = None,
    control_variate: str | None = None,
    prefix: str = "auto",
) -> ShapleyResult:
    """Monte Carlo on one :class:`FastPathGame` over the given (M, n) permutations, without gradients: the game's
    cached rows (g, g₀) through :func:`first_layer_shapley` (``device``: where to run; default the network's)."""
    net = game.net
    dev = resolve_device(device) if device is not None else next(net.parameters()).device
    if next(net.parameters()).device != dev:
        net.to(dev)
    with eval_mode(net), torch.no_grad():
        g, g0 = game.first_layer_rows()  # ψ and ρ's first layer, computed once per game object
        batch = first_layer_shapley(
            net,
            g[None].to(dev),
            g0[None].to(dev),
            None,
            torch.as_tensor(permutations, device=dev)[None],
            antithetic=antithetic,
            seeds=(seed,),
            control_variate=control_variate,
            prefix=prefix,
        )
    return batch.result(0)
