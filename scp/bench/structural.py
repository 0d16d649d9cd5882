"""Structural control variates for Monte-Carlo Shapley on Deep Sets games (a benchmark-layer prototype): the value
network's own Taylor expansion, stratified by coalition size, as a surrogate game whose Shapley values are known.

A Deep Sets game is v(S) = f(h(S)), h(S) = g₀ + Σ_{c∈S} g_c, g_c = W₁ψ_c (ρ's first layer of each unit) and f the
rest of the network (``net.rho_after_first``).  With G = Σ_c g_c, Ḡ = G/n, e_c = g_c − Ḡ and h̄_k = g₀ + (k/n)·G,
a coalition of size k has h(S) = h̄_k + d(S), d(S) = Σ_{c∈S} e_c.  The surrogate expands f at h̄_{|S|}:

    u(S) = a_k + b_k·d(S) + ½·1_Sᵀ Q_k 1_S,  k = |S|,  a_k = f(h̄_k),  b_k = ∇f(h̄_k),  Q_k = E ∇²f(h̄_k) Eᵀ

(E the n × H matrix of rows e_c, so 1_SᵀQ_k1_S = d(S)ᵀ∇²f(h̄_k)d(S); order 1 drops Q).  d(∅) = d(N) = 0, so
u(∅) = v(∅) and u(N) = v(N).  Its Shapley value is exact (:func:`surrogate_shapley`), and with the same M
permutations φ̂ = φ(u) + MC estimate of φ(v − u): the prefixes that value v value u too, at the cost of one dot
product b_t·d(P_t) per prefix (plus 1ᵀQ_t1 at order 2).  Since v − u vanishes at ∅ and N, each permutation's
samples sum to exactly v(N) − v(∅).  Variants (:func:`control_variates`, :func:`cv_samples`): antithetic pairs;
the surrogate beside the engine's position table (u's marginal centred at its position's exact mean); coefficients
fitted by least squares on the other folds of permutations (cross-fitted, so unbiased), per player or shared.

Measured (:func:`measure`, M = 50, 10 HotpotQA contexts, one thread): the surrogate alone removes about as much
variance as the position control variate on the shipped network (order 1) or less (the paper's network at random
init); order 2 removes more on the shipped network but its Hessian-vector products cost 2–3× plain Monte Carlo;
the best at equal time is within ≈ 15% of antithetic + position.  ``python -m scp.bench.structural`` prints the
tables.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from scp.bench.common import RESULTS, environment, write_result
from scp.core.fast_path import blocked_cumsum, first_layer_shapley, position_table, resolve_prefix
from scp.core.permutations import sample_permutations
from scp.errors import InputError

HESSIAN_SIZES = 8
"""Coalition sizes at which order 2 evaluates ∇²f (geometric from 1 to n − 1); Q_k is linear in k between them."""


@dataclass
class Surrogate:
    """u(S) = a_k + b_k·d(S) + ½·1_SᵀQ_k1_S for |S| = k (module docstring), on one context of n units."""

    a: torch.Tensor  # (n + 1,): f(h̄_k)
    b: torch.Tensor  # (n + 1, H): ∇f(h̄_k)
    e: torch.Tensor  # (n, H): g_c − Ḡ
    q: torch.Tensor | None = None  # (n + 1, n, n) symmetric, zero at k = 0 and n (where d = 0); None at order 1


def hessian_sizes(n: int, count: int | None) -> torch.Tensor:
    """The sizes 1 ≤ k ≤ n − 1 at which Q_k is evaluated: all of them (``count`` None) or ≈ ``count`` geometrically
    spaced integers from 1 to n − 1 (dense at small k, like the engine's position grid)."""
    if count is None or count >= n - 1:
        return torch.arange(1, n)
    grid = np.unique(np.rint(np.geomspace(1, n - 1, count)).astype(np.int64))
    return torch.from_numpy(grid)


def build_surrogate(
    net, g: torch.Tensor, g0: torch.Tensor, order: int = 1, sizes: int | None = HESSIAN_SIZES
) -> Surrogate:
    """The surrogate of the game v(S) = f(g₀ + Σ_{c∈S} g_c) (g (n, H), g₀ (H,)): a_k and b_k from one batched
    forward and backward pass of f at the n + 1 points h̄_k; at ``order`` 2 also Q_k = E∇²f(h̄_k)Eᵀ from n
    Hessian-vector products (double backward) at each of the :func:`hessian_sizes` ``sizes``, symmetrised and
    linear in k between them.  Cost: n + 1 gradients, plus n·|sizes| Hessian-vector products at order 2."""
    if order not in (1, 2):
        raise InputError(f"the surrogate's order must be 1 or 2; got {order!r}")
    n = g.shape[0]
    g, g0 = g.detach(), g0.detach()
    total = g.sum(0)
    e = g - total / n
    k = torch.arange(n + 1, dtype=g.dtype, device=g.device)
    centers = g0 + k[:, None] / n * total  # (n + 1, H): h̄_k
    with torch.enable_grad():
        y = centers.clone().requires_grad_(True)
        a = net.rho_after_first(y)
        (b,) = torch.autograd.grad(a.sum(), y)
    q = None
    if order == 2 and n > 1:
        grid = hessian_sizes(n, sizes).to(g.device)
        with torch.enable_grad():
            y = centers[grid].repeat_interleave(n, 0).requires_grad_(True)  # (|grid|·n, H): h̄_k once per tangent e_c
            tangents = e.repeat(len(grid), 1)
            (grad,) = torch.autograd.grad(net.rho_after_first(y).sum(), y, create_graph=True)
            (hv,) = torch.autograd.grad((grad * tangents).sum(), y)  # rows ∇²f(h̄_k)·e_c (f acts row by row)
        at_grid = hv.reshape(len(grid), n, -1) @ e.T  # (|grid|, n, n): e_cᵀ∇²f(h̄_k)e_c'
        q = _interpolate_sizes(0.5 * (at_grid + at_grid.transpose(1, 2)), grid, n)
    return Surrogate(a=a.detach(), b=b, e=e, q=q)


def _interpolate_sizes(at_grid: torch.Tensor, grid: torch.Tensor, n: int) -> torch.Tensor:
    """(n + 1, n, n): the grid's tables (the grid runs from 1 to n − 1) at k = 0..n, linear in k between grid sizes,
    0 at k = 0 and n."""
    k = torch.arange(1, n, device=grid.device)
    hi = torch.searchsorted(grid, k).clamp(max=len(grid) - 1)
    lo = (hi - 1).clamp(min=0)
    span = (grid[hi] - grid[lo]).clamp(min=1).to(at_grid.dtype)
    w = ((k - grid[lo]).to(at_grid.dtype) / span).clamp(0, 1)[:, None, None]
    inner = at_grid[lo] * (1 - w) + at_grid[hi] * w
    zero = at_grid.new_zeros(1, n, n)
    return torch.cat([zero, inner, zero])


def surrogate_values(s: Surrogate, coalitions: torch.Tensor) -> torch.Tensor:
    """u of each row of a (k, n) 0/1 coalition matrix, by its definition (what :func:`surrogate_shapley` values)."""
    z = coalitions.to(s.e.dtype)
    size = z.sum(1).round().long()
    u = s.a[size] + (s.b[size] * (z @ s.e)).sum(1)
    if s.q is not None:
        u = u + 0.5 * torch.einsum("kc,kcd,kd->k", z, s.q[size], z)
    return u


def surrogate_shapley(s: Surrogate) -> torch.Tensor:
    """φ(u) in closed form: the mean over positions of :func:`positional_means`.  For the first-order part,

        φ_i(a + b·d) = (a_n − a_0)/n + e_i·Σ_{k=1}^{n−1} b_k/(n−1)

    (b_k, 1 ≤ k ≤ n−1, collects (n−k)/(n−1) from position k−1 and k/(n−1) from position k); for Q_k = Q constant the
    pairwise part is ½Q_ii + ½Σ_{c≠i}Q_ic, each pair term split equally between its two players.  Efficient:
    Σ_i φ_i(u) = u(N) − u(∅) = a_n − a_0."""
    return positional_means(s).mean(1)


def positional_means(s: Surrogate) -> torch.Tensor:
    """(n players, n positions): T_{i,k} = E[u(S∪i) − u(S)] over S uniform of size k in N∖{i}, so
    φ_i(u) = (1/n)Σ_k T_{i,k}.

    With P(c ∈ S) = p₁(k) = k/(n−1), P(c, c' ∈ S) = p₂(k) = k(k−1)/((n−1)(n−2)), E d(S) = −p₁(k)·e_i (Σ_c e_c = 0)
    and d(S∪i) = d(S) + e_i:

        T_{i,k} = a_{k+1} − a_k + (1 − p₁(k))·b_{k+1}·e_i + p₁(k)·b_k·e_i
                  + ½Q_{k+1}[i,i] + p₁(k)·R_{k+1,i} + ½p₁(k)·(D_{k+1,i} − D_{k,i}) + ½p₂(k)·(O_{k+1,i} − O_{k,i})

    R_{k,i} = Σ_{c≠i}Q_k[i,c], D_{k,i} = Σ_{c≠i}Q_k[c,c], O_{k,i} = Σ_{c≠c'; c,c'≠i}Q_k[c,c'] (the last line only at
    order 2; Q_k symmetric)."""
    n = s.e.shape[0]
    k = torch.arange(n, dtype=s.e.dtype, device=s.e.device)
    p1 = k / max(n - 1, 1)
    p2 = k * (k - 1) / ((n - 1) * (n - 2)) if n > 2 else torch.zeros_like(k)
    be = s.e @ s.b.T  # (n, n + 1): b_k·e_i
    t = s.a.diff() + (1 - p1) * be[:, 1:] + p1 * be[:, :-1]
    if s.q is None:
        return t
    diag = s.q.diagonal(dim1=1, dim2=2).T  # (n, n + 1): Q_k[i, i]
    rows = s.q.sum(2).T
    trace = diag.sum(0)
    r = rows - diag
    d = trace - diag
    o = s.q.sum((1, 2)) - 2 * rows + 2 * diag - trace
    with_i = 0.5 * diag[:, 1:] + p1 * r[:, 1:] + 0.5 * p1 * d[:, 1:] + 0.5 * p2 * o[:, 1:]
    without_i = 0.5 * p1 * d[:, :-1] + 0.5 * p2 * o[:, :-1]
    return t + with_i - without_i


def prefix_marginals(
    net, g: torch.Tensor, g0: torch.Tensor, permutations: torch.Tensor, *surrogates: Surrogate
) -> list[torch.Tensor]:
    """[m_v, m_u for each surrogate]: (M, n) marginals along each of the (M, n) permutations, in player order.
    The interior prefix sums P_t (as the engine computes them: a 0/1-matrix product below
    :data:`~scp.core.fast_path.CUMSUM_MIN_UNITS` units, gather + blocked cumulative sum from there) give
    v(P_t) = f(g₀ + Σ_{P_t} g) and u(P_t) = a_t + b_t·d(P_t) [+ ½·1ᵀQ_t1], d(P_t) = Σ_{P_t} g − (t/n)·G;
    u(∅) = a_0, u(N) = a_n."""
    m, n = permutations.shape
    total = g.sum(0)
    t = torch.arange(1, n, device=g.device)
    gemm = resolve_prefix("auto", n) == "gemm"
    members = None
    if gemm or any(s.q is not None for s in surrogates):
        members = (permutations.argsort(1)[:, None, :] < t[None, :, None]).to(g.dtype)  # (M, n − 1, n): P_t
    sums = members @ g if gemm else blocked_cumsum(g[permutations[:, : n - 1]], dim=1)  # (M, n − 1, H)
    v_ends = net.rho_after_first(torch.stack([g0, g0 + total]))
    prefixes = [torch.cat([v_ends[0].expand(m, 1), net.rho_after_first(g0 + sums), v_ends[1].expand(m, 1)], 1)]
    for s in surrogates:
        u = s.a[t] + torch.einsum("mth,th->mt", sums, s.b[t]) - t.to(g.dtype) / n * (s.b[t] @ total)  # + b_t·d(P_t)
        if s.q is not None:
            u = u + 0.5 * (torch.bmm(members.transpose(0, 1), s.q[t]).transpose(0, 1) * members).sum(-1)
        prefixes.append(torch.cat([s.a[0].expand(m, 1), u, s.a[n].expand(m, 1)], 1))
    return [torch.zeros(m, n, dtype=g.dtype, device=g.device).scatter(1, permutations, p.diff(dim=1)) for p in prefixes]


def _units(x: torch.Tensor, antithetic: bool) -> torch.Tensor:
    """The i.i.d. sampling units: permutations, or antithetic pairs (rows 2j, 2j+1) averaged."""
    return x.reshape(-1, 2, *x.shape[1:]).mean(1) if antithetic else x


def at_positions(table: torch.Tensor, permutations: torch.Tensor) -> torch.Tensor:
    """(M, n): table[i, position of i in permutation m] for an (n players, n positions) table."""
    return torch.gather(table, 1, permutations.argsort(1).T).T


def control_variates(
    permutations: torch.Tensor,
    c: torch.Tensor | None = None,
    mu: torch.Tensor | None = None,
    means: torch.Tensor | None = None,
) -> list[torch.Tensor]:
    """Zero-mean control variates (M, n) for player i's marginal at its position p = pos_i:

    - a surrogate's marginals ``mu`` alone (``means`` T = :func:`positional_means`): m_u − φ_i(u),
      φ_i(u) = (1/n)Σ_k T_{i,k};
    - position table c (n, n) (:func:`scp.core.fast_path.position_table`) alone: c_{i,p} − (1/n)Σ_k c_{i,k}
      (p is uniform on 0..n−1), the engine's position control variate;
    - both: the position table and the surrogate's marginal centred at its position, m_u − T_{i,p}
      (E[m_u | p] = T_{i,p}), the part of u's marginal that varies with the coalition, not with p.
    """
    cvs = []
    if c is not None:
        cvs.append(at_positions(c, permutations) - c.mean(1))
    if mu is not None:
        cvs.append(mu - (means.mean(1) if c is None else at_positions(means, permutations)))
    return cvs


def cv_samples(
    mv: torch.Tensor,
    cvs: list[torch.Tensor],
    antithetic: bool = False,
    folds: int | None = None,
    shared: bool = False,
) -> torch.Tensor:
    """Per-unit samples x (units: permutations, or antithetic pairs averaged) whose mean is φ̂, from the marginals
    of v (M, n) and zero-mean control variates Y_1..Y_p (each (M, n)).

    ``folds`` None: x = m_v − Σ_j Y_j, unbiased.  ``folds`` K: x = m_v − Σ_j β_ij·Y_j with player i's β_i the least
    squares fit of m_v,i on (Y_1,i..Y_p,i) over the units of the other K − 1 folds (unit u in fold u mod K), or
    with ``shared`` one β for all players, fitted on all their samples of those folds: β is then independent of
    the samples it corrects, so x stays unbiased (β fitted on the same sample would bias φ̂ by O(1/M)).  Then each
    unit is shifted by an equal share of its efficiency gap (Δ − Σ_j x_j)/n, Δ = Σ_j m_v,j = v(N) − v(∅), a
    zero-mean correction: Σ_i φ̂_i = v(N) − v(∅) exactly (a surrogate's m_u − φ(u) alone already sums to 0 over
    players, as u(∅) = v(∅) and u(N) = v(N))."""
    y = _units(mv, antithetic)
    if not cvs:
        return y
    z = _units(torch.stack(cvs, -1), antithetic)  # (U, n, p)
    if folds is None:
        x = y - z.sum(-1)
    else:
        fold = torch.arange(y.shape[0], device=y.device) % folds
        member = torch.nn.functional.one_hot(fold, folds).T.to(y.dtype)  # (K, U)
        # each fold's sums, then the other folds' (all minus its own): counts, Σz, Σy, Σzzᵀ, Σzy per player
        stats = [member.sum(1), torch.einsum("ku,uip->kip", member, z), member @ y]
        stats += [torch.einsum("ku,uip,uiq->kipq", member, z, z), torch.einsum("ku,uip,ui->kip", member, z, y)]
        count, sz, sy, szz, szy = (t.sum(0) - t for t in stats)
        gram = szz - sz[..., :, None] * sz[..., None, :] / count[:, None, None, None]
        cross = szy - sz * sy[..., None] / count[:, None, None]
        if shared:
            gram, cross = gram.sum(1, keepdim=True), cross.sum(1, keepdim=True)
        beta = (torch.linalg.pinv(gram) @ cross[..., None])[..., 0]  # (K, n or 1, p): the normal equations
        x = y - (z * beta[fold]).sum(-1)
    return x + (y.sum(1, keepdim=True) - x.sum(1, keepdim=True)) / y.shape[1]


class Spec(NamedTuple):
    """An estimator: antithetic pairs, the surrogate's order (None: no surrogate), the position table, the folds of
    cross-fitted coefficients (None: β = 1) and whether β is shared by the players (:func:`cv_samples`)."""

    antithetic: bool = False
    order: int | None = None
    position: bool = False
    folds: int | None = None
    shared: bool = False


def structural_shapley(
    net, g: torch.Tensor, g0: torch.Tensor, permutations: torch.Tensor, spec: Spec, sizes: int | None = HESSIAN_SIZES
) -> torch.Tensor:
    """φ̂ over the (M, n) ``permutations`` (antithetic pairs in rows 2j, 2j+1) by ``spec``: with a surrogate of order
    1 or 2 (:func:`build_surrogate`), φ(u) + MC estimate of φ(v − u); with the position table too, both control
    variates of :func:`control_variates`; with folds, their cross-fitted coefficients (:func:`cv_samples`).  All
    tables are computed in the call.  No gradients (a measurement, not training)."""
    with torch.no_grad():
        c = position_table(net, g[None], g0[None])[0] if spec.position else None
        if spec.order is None:
            (mv,) = prefix_marginals(net, g, g0, permutations)
            cvs = control_variates(permutations, c)
        else:
            s = build_surrogate(net, g, g0, spec.order, sizes)
            mv, mu = prefix_marginals(net, g, g0, permutations, s)
            cvs = control_variates(permutations, c, mu, positional_means(s))
        return cv_samples(mv, cvs, spec.antithetic, spec.folds, spec.shared).mean(0)


# ----------------------------------------------------------------------------------------------- measurement

FOLDS = 5
ESTIMATORS = {
    "plain MC": Spec(),
    "antithetic": Spec(antithetic=True),
    "position CV": Spec(position=True),
    "antithetic + position CV": Spec(antithetic=True, position=True),
    "position CV, shared β": Spec(position=True, folds=FOLDS, shared=True),
    "order 1": Spec(order=1),
    "antithetic + order 1": Spec(antithetic=True, order=1),
    "order 1, β per player": Spec(order=1, folds=FOLDS),
    "order 1, shared β": Spec(order=1, folds=FOLDS, shared=True),
    "order 2": Spec(order=2),
    "antithetic + order 2": Spec(antithetic=True, order=2),
    "order 2, β per player": Spec(order=2, folds=FOLDS),
    "order 2, shared β": Spec(order=2, folds=FOLDS, shared=True),
    "position + order 2": Spec(order=2, position=True),
    "position + order 1, shared β": Spec(order=1, position=True, folds=FOLDS, shared=True),
    "position + order 2, shared β": Spec(order=2, position=True, folds=FOLDS, shared=True),
    "antithetic + position + order 1, shared β": Spec(True, 1, True, FOLDS, True),
    "antithetic + position + order 2, shared β": Spec(True, 2, True, FOLDS, True),
}
"""The measured estimators; every β is cross-fitted on :data:`FOLDS` folds ("per player" as asked; "shared": one β
per control variate for all players, fitted on n times the samples — per-player fits on M = 50 are unstable)."""
ENGINE = {"plain MC": None, "antithetic": None, "position CV": "position", "antithetic + position CV": "position"}
"""The estimators the engine has (:func:`scp.core.fast_path.first_layer_shapley`; its control variate): timed there."""
OWN_PLAIN = "plain MC (this module's prefix path)"


def _replicate_estimates(net, g, g0, m: int, replicates: int, seed: int) -> dict[str, torch.Tensor]:
    """name -> (replicates, n) estimates of every :data:`ESTIMATORS` entry, all on the same M permutations per
    replicate (the antithetic ones on one fresh set of M/2 pairs); tables computed once per context."""
    n = g.shape[0]
    surrogates = {k: build_surrogate(net, g, g0, k) for k in (1, 2)}
    means = {k: positional_means(s) for k, s in surrogates.items()}
    c = position_table(net, g[None], g0[None])[0]
    out: dict[str, list[torch.Tensor]] = {name: [] for name in ESTIMATORS}
    for r in range(replicates):
        for anti in (False, True):
            perms = torch.from_numpy(sample_permutations(n, m, seed + 2 * r + anti, anti))
            mv, *mus = prefix_marginals(net, g, g0, perms, *surrogates.values())
            mu = dict(zip(surrogates, mus))
            for name, spec in ESTIMATORS.items():
                if spec.antithetic == anti:
                    k = spec.order
                    cvs = control_variates(perms, c if spec.position else None, mu.get(k), means.get(k))
                    out[name].append(cv_samples(mv, cvs, anti, spec.folds, spec.shared).mean(0))
    return {name: torch.stack(v) for name, v in out.items()}


def _timed_calls(net, g, g0, m: int) -> dict[str, Callable[[int], object]]:
    """name -> one call from the game's rows (g, g₀) to φ̂, its tables included: the :data:`ENGINE` estimators by
    :func:`scp.core.fast_path.first_layer_shapley`, the others by :func:`structural_shapley` (and this module's
    plain path, to separate its own prefix-sum cost from the control variates')."""
    n = g.shape[0]

    def perms(r: int, anti: bool) -> torch.Tensor:
        return torch.from_numpy(sample_permutations(n, m, 1000 + r, anti))

    def engine(r: int, spec: Spec, control_variate: str | None) -> torch.Tensor:
        p = perms(r, spec.antithetic)[None]
        return first_layer_shapley(
            net, g[None], g0[None], None, p, spec.antithetic, control_variate=control_variate
        ).values

    calls: dict[str, Callable[[int], object]] = {}
    for name, spec in ESTIMATORS.items():
        if name in ENGINE:
            calls[name] = lambda r, spec=spec, cv=ENGINE[name]: engine(r, spec, cv)
        else:
            calls[name] = lambda r, spec=spec: structural_shapley(net, g, g0, perms(r, spec.antithetic), spec)
    calls[OWN_PLAIN] = lambda r: structural_shapley(net, g, g0, perms(r, False), Spec())
    return calls


def variance_reductions(
    net, rows: list[tuple[torch.Tensor, torch.Tensor]], m: int, replicates: int, seed: int = 0
) -> dict[str, list[float]]:
    """name -> per context Σ_i Var(plain φ̂_i) / Σ_i Var(φ̂_i) at equal M (the ratio of mean squared errors; all are
    unbiased), each variance over ``replicates`` independent replicates of M permutations."""
    ratios: dict[str, list[float]] = {name: [] for name in ESTIMATORS}
    with torch.no_grad():
        for j, (g, g0) in enumerate(rows):
            est = _replicate_estimates(net, g, g0, m, replicates, seed + 10_000 * j)
            plain = est["plain MC"].var(0).sum()
            for name in ESTIMATORS:
                ratios[name].append(float(plain / est[name].var(0).sum()))
    return ratios


def cpu_times(calls: dict[str, Callable[[int], object]], repeats: int, min_seconds: float = 0.1) -> dict[str, list]:
    """name -> CPU seconds (this process's, ``time.process_time``) per call in each of ``repeats`` measurements: as
    :func:`scp.bench.common.timed_rounds` (an untimed warm-up that sets the back-to-back calls per measurement, the
    order rotated between repeats), but CPU rather than wall time, which other processes on a shared machine do
    not inflate (one thread: CPU time is the call's own compute)."""
    inner = {}
    for name, call in calls.items():
        start = time.process_time()
        call(-1)
        inner[name] = max(1, math.ceil(min_seconds / max(time.process_time() - start, 1e-6)))
    names, times = list(calls), {name: [] for name in calls}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.process_time()
            for _ in range(inner[name]):
                calls[name](r)
            times[name].append((time.process_time() - start) / inner[name])
    return times


def time_ratios(net, g: torch.Tensor, g0: torch.Tensor, m: int, repeats: int = 9) -> dict[str, float]:
    """name -> median CPU seconds per call (:func:`cpu_times`, one thread) / the engine's plain Monte Carlo's;
    "plain MC seconds": the latter."""
    with torch.no_grad():
        times = cpu_times(_timed_calls(net, g, g0, m), repeats)
    base = statistics.median(times["plain MC"])
    return {name: statistics.median(t) / base for name, t in times.items()} | {"plain MC seconds": base}


def _game_rows(net, units: torch.Tensor, query: torch.Tensor, extra: torch.Tensor | None):
    from scp.models.game import ValueNetGame

    return ValueNetGame(net, units, query, extra, cache_psi=True).first_layer_rows()


SETUPS = (
    "shipped network, n = 41",
    "paper network (random init), n = 41",
    "paper network (trained), n = 41",
    "paper network (random init), n = 100",
    "shipped network, n = 500",
    "paper network (trained), n = 500",
)
LONG = 500
"""From this n on a setup measures at most :data:`LONG_SCALE` (contexts, replicates): each call costs n/41× more."""
LONG_SCALE = (4, 12)


def _setup(title: str, contexts: int) -> tuple:
    """(network, [(g, g₀) per context]) of one of :data:`SETUPS` on HotpotQA test contexts embedded as its config
    reads them: the shipped checkpoint, or the paper's 3.03M network at random init (seed 0) or trained with
    notebook 01's recipe (:func:`scp.bench.common.paper_model`)."""
    from scp.bench.common import hotpot_contexts, paper_model, shipped_model

    n = int(title.rsplit("= ", 1)[1])
    if title.startswith("shipped"):
        model, config = shipped_model()
    else:
        model, config = paper_model(trained="(trained)" in title)
    return model, [_game_rows(model, c.units, c.query, c.extra) for c in hotpot_contexts(config, n, contexts)]


def measure(contexts: int = 10, m: int = 50, replicates: int = 30, setups: tuple[str, ...] = SETUPS) -> dict[str, dict]:
    """Variance reductions (:func:`variance_reductions`) over ``contexts`` HotpotQA test contexts and time ratios
    (:func:`time_ratios` on the first context) on one thread, for each of ``setups`` (:data:`SETUPS`; from
    n = :data:`LONG` on at most :data:`LONG_SCALE`).  Prints markdown tables and returns their numbers."""
    torch.set_num_threads(1)
    report = {}
    for title in setups:
        c, r = contexts, replicates
        if int(title.rsplit("= ", 1)[1]) >= LONG:
            c, r = min(c, LONG_SCALE[0]), min(r, LONG_SCALE[1])
        net, rows = _setup(title, c)
        vr = variance_reductions(net, rows, m, r)
        tr = time_ratios(net, *rows[0], m)
        report[title] = {"variance_reduction": vr, "time_ratio": tr, "replicates": r}
        print(format_table(title, vr, tr, m, r), flush=True)
    return report


def _geo(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in values))


def format_table(title: str, vr: dict[str, list[float]], tr: dict[str, float], m: int, replicates: int) -> str:
    """Markdown: per estimator the geometric mean [min, max] over contexts of the variance reduction at equal M, the
    time ratio and the variance reduction at equal time (that geometric mean over the time ratio)."""
    lines = [
        f"{title}: M = {m}, {len(vr['plain MC'])} contexts × {replicates} replicates; engine plain MC "
        f"{tr['plain MC seconds'] * 1e3:.1f} ms CPU per call (one thread), this module's plain path "
        f"{tr[OWN_PLAIN]:.2f}× that",
        "",
        "| estimator | variance reduction at equal M: geo. mean [min, max] | time / plain | at equal time |",
        "| --- | --- | --- | --- |",
    ]
    for name in ESTIMATORS:
        r = vr[name]
        geo = _geo(r)
        lines.append(f"| {name} | {geo:.2f} [{min(r):.2f}, {max(r):.2f}] | {tr[name]:.2f} | {geo / tr[name]:.2f} |")
    return "\n".join(lines) + "\n"


TARGET_RMSE_RATIO = 0.5
"""Issue 28's target: at equal time, the RMSE of a structural control variate ≤ 0.5× plain Monte Carlo's on the
shipped network (a variance reduction at equal time ≥ 4)."""


def structural(quick: bool = False, out_dir: Path = RESULTS) -> dict:
    """``python -m scp.bench structural``: :func:`measure` on one thread (torch and BLAS) at M = 50 — 10 contexts
    × 30 replicates on every setup of :data:`SETUPS`; quick: 3 contexts × 8 replicates, the shipped network only —
    written to ``results/bench/structural.json`` with the environment."""
    from threadpoolctl import threadpool_limits

    contexts, replicates, m = (3, 8, 50) if quick else (10, 30, 50)
    torch.set_num_threads(1)  # torch's parallel regions take their thread count from torch, not from OpenMP's limit
    with threadpool_limits(1):
        setups = measure(contexts, m, replicates, SETUPS[:1] if quick else SETUPS)
        env = environment(quick=quick)
    result = {"env": env, "m": m, "replicates": replicates, "contexts": contexts}
    write_result(result | {"setups": setups}, "structural.json", out_dir)
    return result | {"setups": setups}


def equal_time(vr: dict[str, list[float]], tr: dict[str, float]) -> dict[str, float]:
    """name -> variance reduction at equal CPU time: the geometric mean over contexts at equal M over the time
    ratio (an estimator twice as slow gets half the permutations)."""
    return {name: _geo(vr[name]) / tr[name] for name in ESTIMATORS}


def format_structural(result: dict) -> str:
    """BENCHMARKS.md's section: one :func:`format_table` per setup, then the target on the shipped network — the
    best estimator with a surrogate at equal time, its RMSE over plain Monte Carlo's (1/sqrt of the variance
    reduction) against :data:`TARGET_RMSE_RATIO`, and the best of all for comparison."""
    parts = []
    for title, r in result["setups"].items():
        reps = r.get("replicates", result["replicates"])  # per setup since long contexts use fewer
        parts.append(format_table(title, r["variance_reduction"], r["time_ratio"], result["m"], reps))
    shipped = next((r for title, r in result["setups"].items() if title.startswith("shipped")), None)
    if shipped is not None:
        at_time = equal_time(shipped["variance_reduction"], shipped["time_ratio"])
        surrogate = max((name for name in ESTIMATORS if "order" in name), key=at_time.get)
        best = max(ESTIMATORS, key=at_time.get)
        engine = max(ENGINE, key=at_time.get)
        rmse = at_time[surrogate] ** -0.5
        verdict = "met" if rmse <= TARGET_RMSE_RATIO else f"missed: {rmse / TARGET_RMSE_RATIO:.2f}× the target"
        parts.append(
            f"Target (shipped network, equal CPU time): RMSE of the best structural control variate "
            f"({surrogate}) / plain Monte Carlo = {rmse:.2f} against ≤ {TARGET_RMSE_RATIO} — {verdict}. The best "
            f"estimator at equal time is {best} (RMSE ratio {at_time[best] ** -0.5:.2f}); the engine's best, "
            f"{engine}, reaches {at_time[engine] ** -0.5:.2f}, so the surrogate's variance at equal time is "
            f"{at_time[engine] / at_time[surrogate]:.2f}× the engine's (below 1: the surrogate is better)."
        )
    return "\n".join(parts)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="variance reductions and time ratios of the structural CVs")
    parser.add_argument("--contexts", type=int, default=10)
    parser.add_argument("--permutations", type=int, default=50, help="M")
    parser.add_argument("--replicates", type=int, default=30)
    parser.add_argument("--setup", type=int, choices=range(len(SETUPS)), nargs="*", help="indices into SETUPS")
    args = parser.parse_args()
    chosen = SETUPS if args.setup is None else tuple(SETUPS[i] for i in args.setup)
    measure(args.contexts, args.permutations, args.replicates, chosen)
