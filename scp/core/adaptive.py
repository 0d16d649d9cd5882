"""A certified adaptive Monte-Carlo budget: permutations are drawn in rounds until the Top-K set is certified.

The paper fixes M.  Here M grows geometrically, M_1 = ``min_permutations``, M_{r+1} = min(2·M_r, ``max_permutations``),
and after every round each player i gets a confidence interval φ̂_i ± r_i from its t i.i.d. draws (marginals, or
antithetic pair means), which lie in an interval of width R = 2·B when the game's values lie in [0, B]:

- Hoeffding: r = R·sqrt(ln(2/δ') / (2t));
- empirical Bernstein (Maurer & Pontil 2009, Thm 4, two-sided): r = sqrt(2·V·ln(4/δ') / t) + 7R·ln(4/δ') / (3(t − 1)),
  V the unbiased sample variance (it shrinks with V, so low-variance players certify early);
- Student (asymptotic, not a finite-sample bound): r = t_{t−1}(1 − δ'/2)·sqrt(V/t), valid as t → ∞ by the
  central limit theorem.  It is the only one of the three without a range term, and on a value network the range
  term decides: any bound that holds for every distribution on an interval of width R pays ≈ R·ln(1/δ')/t (a draw
  may jump by R with small probability), and R = 2B = 2 is 100–1000× the gaps between near-tied sentences.
  Certificates say which kind they are (``rigorous``).  Only the Student interval takes the draws of the position
  control variate (:func:`scp.core.fast_path.first_layer_shapley`), whose range is not R.

Each check uses δ' = δ / (n · R_max), R_max the number of rounds the schedule allows: a union bound over players
and rounds (Theorem A.3 made sequential), so with probability ≥ 1 − δ every interval of every round holds at
once, whatever round stopping happens at.  With K̂ the estimated Top-K set, the certificate is

    margin = min_{i∈K̂} (φ̂_i − r_i) − max_{j∉K̂} (φ̂_j + r_j).

Sampling stops once margin ≥ −``tolerance`` or at ``max_permutations``.  On the good event, every dropped player's
true value exceeds every kept one's by at most −margin; so margin > 0 ("separated") means K̂ is the true Top-K
set with probability ≥ 1 − δ, and margin ≥ −ε means no swap of a kept and a dropped player gains more than ε
(for the Student interval: approximately, as t grows).  The run's :class:`~scp.core.result.ShapleyResult` carries
the :class:`~scp.core.result.TopKCertificate` (``result.certificate``).

A ``budget`` of B coalition evaluations sets ``max_permutations`` to the largest M whose full schedule fits:
M·(n − 1) + R(M)·(2 + e) ≤ B, R(M) the rounds of the schedule and e = 2·n·P with the position control variate
(:func:`max_permutations_for_budget`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from scipy import stats

from scp.core.fast_path import POSITION_GRID, check_fast_path_memory, first_layer_shapley, position_table
from scp.core.games import Game, check_game
from scp.core.monte_carlo import check_monte_carlo_memory, monte_carlo
from scp.core.permutations import check_flag, derive_seed, padded_permutations, resolve_seed
from scp.core.result import ShapleyResult, TopKCertificate, check_budget, refuse_budget_below
from scp.core.selection import is_integer, is_real
from scp.devices import eval_mode
from scp.errors import InputError

__all__ = [
    "BOUNDS",
    "DEFAULT_MAX_PERMUTATIONS",
    "DEFAULT_MIN_PERMUTATIONS",
    "RIGOROUS",
    "adaptive_deepsets_shapley",
    "adaptive_monte_carlo",
    "bernstein_radius",
    "certify_topk",
    "check_options",
    "hoeffding_radius",
    "max_permutations_for_budget",
    "round_schedule",
    "student_radius",
]

BOUNDS = ("bernstein", "hoeffding", "student")
RIGOROUS = ("bernstein", "hoeffding")
DEFAULT_MIN_PERMUTATIONS = 16
DEFAULT_MAX_PERMUTATIONS = 1000
"""The largest M when neither ``max_permutations`` nor ``budget`` is given."""


def hoeffding_radius(t: np.ndarray | int, value_range: float, delta: float) -> np.ndarray:
    """Two-sided Hoeffding radius R·sqrt(ln(2/δ)/(2t)) for the mean of t i.i.d. draws in an interval of width R."""
    return value_range * np.sqrt(math.log(2.0 / delta) / (2.0 * np.asarray(t, dtype=np.float64)))


def bernstein_radius(variance: np.ndarray, t: int, value_range: float, delta: float) -> np.ndarray:
    """Two-sided empirical-Bernstein radius sqrt(2V·ln(4/δ)/t) + 7R·ln(4/δ)/(3(t−1)) (t ≥ 2 draws, width R)."""
    if t < 2:
        return np.full(np.shape(variance), np.inf)
    log = math.log(4.0 / delta)
    return np.sqrt(2.0 * np.maximum(variance, 0.0) * log / t) + 7.0 * value_range * log / (3.0 * (t - 1))


def student_radius(variance: np.ndarray, t: int, delta: float) -> np.ndarray:
    """Asymptotic two-sided radius t_{t−1}(1 − δ/2)·sqrt(V/t) (Student-t quantile, t ≥ 2 draws): valid as t → ∞
    by the central limit theorem, not for every t — no certificate, an estimate of one."""
    if t < 2:
        return np.full(np.shape(variance), np.inf)
    return float(stats.t.ppf(1.0 - delta / 2.0, t - 1)) * np.sqrt(np.maximum(variance, 0.0) / t)


def round_schedule(min_permutations: int, max_permutations: int, antithetic: bool = False) -> list[int]:
    """Cumulative M after each round: min_M, 2·min_M, 4·min_M, …, capped at (and ending on) max_M."""
    check_flag(antithetic, "antithetic")
    for name, value in (("min_permutations", min_permutations), ("max_permutations", max_permutations)):
        if not is_integer(value) or value < 2:
            raise InputError(f"{name} must be an integer ≥ 2 (two draws give a variance); got {value!r}")
    if max_permutations < min_permutations:
        raise InputError(f"max_permutations = {max_permutations} must be ≥ min_permutations = {min_permutations}")
    if antithetic and (min_permutations % 4 or max_permutations % 2):
        raise InputError(
            "antithetic rounds need min_permutations divisible by 4 (two pairs) and an even "
            f"max_permutations; got {min_permutations}, {max_permutations}"
        )
    totals = [int(min_permutations)]
    while totals[-1] < max_permutations:
        totals.append(int(min(2 * totals[-1], max_permutations)))
    return totals


def _check(k: int, n: int, delta: float, tolerance: float, bound: str, control_variate: str | None) -> None:
    if not is_integer(k) or not 1 <= k <= n:
        raise InputError(f"k must be an integer in [1, n = {n}]; got {k!r}")
    check_options(delta, tolerance, bound, control_variate)


def check_options(
    delta: float, tolerance: float = 0.0, bound: str = "bernstein", control_variate: str | None = None
) -> None:
    """Clear errors for δ outside (0, 1), a negative or infinite tolerance, an unknown bound, or a rigorous bound
    with a control variate (its draws do not lie in the game's range)."""
    if not is_real(delta) or not 0 < delta < 1:
        raise InputError(f"delta (failure probability) must lie in (0, 1); got {delta!r}")
    if not is_real(tolerance) or not (math.isfinite(tolerance) and tolerance >= 0):
        raise InputError(f"tolerance must be a finite number ≥ 0; got {tolerance!r}")
    if bound not in BOUNDS:
        raise InputError(f"bound must be one of {BOUNDS}; got {bound!r}")
    if control_variate is not None and bound in RIGOROUS:
        raise InputError(
            f"the {bound} bound needs draws in the game's range; with control_variate="
            f"{control_variate!r} use bound='student' (asymptotic), or drop the control variate"
        )


class _Moments:
    """Running Σx and Σx² (float64) of per-player draws, fed one round (mean, standard error, count) at a time."""

    def __init__(self, n: int):
        self.s1, self.s2, self.t = np.zeros(n), np.zeros(n), 0

    def add(self, mean: np.ndarray, std_error: np.ndarray, t: int) -> None:
        var = np.nan_to_num(np.asarray(std_error, np.float64) ** 2 * t) if t > 1 else 0.0  # ddof = 1 within the round
        mean = np.asarray(mean, np.float64)
        self.s1 += t * mean
        self.s2 += (t - 1) * var + t * mean**2
        self.t += t

    @property
    def mean(self) -> np.ndarray:
        return self.s1 / self.t

    @property
    def variance(self) -> np.ndarray:
        if self.t < 2:
            return np.full_like(self.s1, np.nan)
        return np.maximum(self.s2 - self.t * self.mean**2, 0.0) / (self.t - 1)


def certify_topk(mean: np.ndarray, radius: np.ndarray, k: int) -> tuple[float, float]:
    """(gap, margin) of the estimated Top-K set (ties to the lower index, as :func:`scp.core.selection.select`)."""
    order = np.argsort(-mean, kind="stable")
    if k >= mean.size:
        return math.inf, math.inf
    kept, dropped = order[:k], order[k:]
    gap = float(mean[order[k - 1]] - mean[order[k]])
    margin = float((mean[kept] - radius[kept]).min() - (mean[dropped] + radius[dropped]).max())
    return gap, margin


def _radius(moments: _Moments, value_range: float, delta_each: float, bound: str) -> np.ndarray:
    if bound == "hoeffding":
        return np.broadcast_to(hoeffding_radius(moments.t, value_range, delta_each), moments.s1.shape)
    if bound == "student":
        return student_radius(moments.variance, moments.t, delta_each)
    return bernstein_radius(moments.variance, moments.t, value_range, delta_each)


def _certificate(
    moments: _Moments,
    k: int,
    delta: float,
    tolerance: float,
    bound: str,
    value_range: float,
    n_rounds: int,
    rounds: int,
    m_used: int,
    at_max: bool,
) -> TopKCertificate:
    n = moments.s1.size
    radius = _radius(moments, value_range, delta / (n * n_rounds), bound)
    gap, margin = certify_topk(moments.mean, radius, k)
    certified = margin >= -tolerance
    return TopKCertificate(
        k=int(k),
        delta=float(delta),
        tolerance=float(tolerance),
        bound=bound,
        n_permutations=int(m_used),
        rounds=rounds,
        gap=gap,
        radius=gap - margin if math.isfinite(gap) else 0.0,
        margin=margin,
        certified=bool(certified),
        separated=bool(margin > 0),
        stopped_at_max=bool(at_max and not certified),
        rigorous=bound in RIGOROUS,
    )


def max_permutations_for_budget(
    budget: int,
    n: int,
    min_permutations: int = DEFAULT_MIN_PERMUTATIONS,
    antithetic: bool = False,
    control_variate: str | None = None,
) -> int:
    """The largest ``max_permutations`` M whose whole schedule fits in ``budget`` coalition evaluations:
    M·(n − 1) + R(M)·(2 + e) ≤ budget, R(M) = len(round_schedule(min_permutations, M)) and e = 2·n·P with the
    position control variate (each round values ∅ and N, and the game path recomputes the variate's table).  A
    budget below one round of ``min_permutations`` is refused; with n = 1 one round is exact: M = min_permutations."""
    budget = check_budget(budget)
    extra = 2 * n * POSITION_GRID if control_variate == "position" else 0

    def cost(m: int) -> int:
        return m * (n - 1) + len(round_schedule(min_permutations, m, antithetic)) * (2 + extra)

    refuse_budget_below(
        budget,
        cost(min_permutations),
        "adaptive",
        n,
        f"one round of min_permutations = {min_permutations}, {min_permutations}·(n − 1) + 2"
        + (f" + 2·n·{POSITION_GRID}" if extra else ""),
    )
    if n == 1:
        return min_permutations
    m = (budget - 2 - extra) // (n - 1)
    m -= m % 2 if antithetic else 0
    while cost(m) > budget:  # cost(min_permutations) fits, so this stops at M ≥ min_permutations
        m -= 2 if antithetic else 1
    return m


def _resolve_max(
    n: int,
    max_permutations: int | None,
    budget: int | None,
    min_permutations: int,
    antithetic: bool,
    control_variate: str | None,
) -> int:
    if budget is not None and max_permutations is not None:
        raise InputError(
            f"give budget (evaluations) or max_permutations, not both; got budget={budget!r}, "
            f"max_permutations={max_permutations!r}"
        )
    if budget is not None:
        return max_permutations_for_budget(budget, n, min_permutations, antithetic, control_variate)
    return DEFAULT_MAX_PERMUTATIONS if max_permutations is None else max_permutations


def adaptive_monte_carlo(
    game: Game,
    k: int,
    delta: float = 0.05,
    min_permutations: int = DEFAULT_MIN_PERMUTATIONS,
    max_permutations: int | None = None,
    antithetic: bool = False,
    seed: int | None = None,
    value_range: float | None = None,
    tolerance: float = 0.0,
    bound: str = "bernstein",
    control_variate: str | None = None,
    device: str | torch.device | None = None,
    *,
    budget: int | None = None,
) -> ShapleyResult:
    """Monte-Carlo Shapley values with M chosen in rounds until the Top-K set is certified (module docstring).

    ``value_range`` bounds max v − min v over coalitions (marginals then lie in an interval of width 2·value_range);
    it defaults to the game's ``value_bound`` (a :class:`~scp.models.game.ValueNetGame`: its network's bound B) and
    must be given for a game without one.  ``max_permutations`` (default :data:`DEFAULT_MAX_PERMUTATIONS`) or
    ``budget`` (:func:`max_permutations_for_budget`) caps M; not both.  Returns a
    :class:`~scp.core.result.ShapleyResult` whose ``n_permutations`` is the M used and whose ``certificate`` is the
    :class:`~scp.core.result.TopKCertificate`.  The same seed gives the same numbers.
    """
    n = check_game(game)
    _check(k, n, delta, tolerance, bound, control_variate)
    if value_range is None:
        value_range = getattr(game, "value_bound", None)
        if value_range is None:
            raise InputError(
                "value_range (a bound on max v − min v) is needed for a game without a value_bound (a "
                "ValueNetGame has one: its network's bound B)"
            )
        value_range = float(value_range)
    if not (is_real(value_range) and math.isfinite(value_range) and value_range > 0):
        raise InputError(f"value_range must be a finite number > 0; got {value_range!r}")
    max_permutations = _resolve_max(n, max_permutations, budget, min_permutations, antithetic, control_variate)
    schedule = round_schedule(min_permutations, max_permutations, antithetic)
    # before any round is spent
    check_monte_carlo_memory(game, _largest_round(schedule), device=device, method="adaptive (its largest round)")
    seed = resolve_seed(seed)
    moments, used, evaluations = _Moments(n), 0, 0
    for r, total in enumerate(schedule, start=1):
        res = monte_carlo(
            game,
            total - used,
            antithetic=antithetic,
            seed=derive_seed(seed, f"adaptive-round-{r}"),
            control_variate=control_variate,
            device=device,
        )
        draws = (total - used) // 2 if antithetic else total - used
        moments.add(res.values, res.std_errors, draws)
        used, evaluations = total, evaluations + res.n_evaluations
        cert = _certificate(
            moments, k, delta, tolerance, bound, 2.0 * value_range, len(schedule), r, used, total == schedule[-1]
        )
        if cert.certified:
            break
    return ShapleyResult(
        values=moments.mean,
        std_errors=np.sqrt(moments.variance / moments.t),
        n_evaluations=int(evaluations),
        method="monte_carlo[adaptive]",
        seed=seed,
        n_permutations=used,
        metadata={"antithetic": antithetic, "control_variate": control_variate},
        certificate=cert,
    )


def _largest_round(schedule: list[int]) -> int:
    """The most permutations one round of ``schedule`` (cumulative M) draws."""
    return max(b - a for a, b in zip([0, *schedule[:-1]], schedule))


def adaptive_deepsets_shapley(
    net,
    units: torch.Tensor,
    query: torch.Tensor,
    mask: torch.Tensor | None = None,
    extra: torch.Tensor | None = None,
    k: int | Sequence[int] = 1,
    delta: float = 0.05,
    min_permutations: int = DEFAULT_MIN_PERMUTATIONS,
    max_permutations: int | None = None,
    antithetic: bool = False,
    seeds: int | Sequence[int] | None = None,
    tolerance: float = 0.0,
    bound: str = "bernstein",
    control_variate: str | None = None,
    *,
    budget: int | None = None,
) -> list[ShapleyResult]:
    """:func:`adaptive_monte_carlo` for a padded batch of value-network contexts, without gradients.

    ψ and ρ's first layer (and the position control variate's table) run once per context; each round values only
    the contexts not yet certified.  Context i's draws come from its own seed and length (and, with a ``budget``,
    its own ``max_permutations``), so its values and certificate do not depend on the batch.  ``k`` is one K or
    one per context.  Returns one :class:`~scp.core.result.ShapleyResult` per context: its n_i Shapley values
    (float64), the M used, the evaluations spent (the variate's table counted once) and its ``certificate``.
    """
    b, n, _ = units.shape
    mask = torch.ones(b, n, dtype=torch.bool, device=units.device) if mask is None else mask.to(torch.bool)
    n_units = mask.sum(1).tolist()
    ks = [k] * b if isinstance(k, (int, np.integer)) else list(k)
    if len(ks) != b:
        raise InputError(f"got {len(ks)} values of k for a batch of {b} contexts")
    for ki, ni in zip(ks, n_units):
        _check(ki, ni, delta, tolerance, bound, control_variate)
    seeds = (
        [resolve_seed(seeds)] * b
        if seeds is None or isinstance(seeds, (int, np.integer))
        else [resolve_seed(s) for s in seeds]
    )
    if len(seeds) != b:
        raise InputError(f"got {len(seeds)} seeds for a batch of {b} contexts")
    schedules = [
        round_schedule(
            min_permutations,
            _resolve_max(ni, max_permutations, budget, min_permutations, antithetic, control_variate),
            antithetic,
        )
        for ni in n_units
    ]
    check_fast_path_memory(b, max(_largest_round(s) for s in schedules), n, units.device)
    with eval_mode(net), torch.no_grad():
        h, base = net.encode(units, query, extra, mask)
        w, bias = net.rho_first_layer()
        g = (h @ w.T) * mask[..., None].to(h.dtype)
        g0 = base @ w.T + bias
        table = position_table(net, g, g0, mask) if control_variate == "position" else None  # once per context
        moments = [_Moments(ni) for ni in n_units]
        certs: list[TopKCertificate | None] = [None] * b
        used = [0] * b
        evaluations = [2 * ni * POSITION_GRID if table is not None else 0 for ni in n_units]
        active, r = list(range(b)), 0
        while active:
            r += 1
            steps = [schedules[i][r - 1] - used[i] for i in active]
            still = []
            for m in dict.fromkeys(steps):  # contexts that draw the same M this round share one call
                rows = [i for i, step in zip(active, steps) if step == m]
                width = max(n_units[i] for i in rows)
                round_seeds = [derive_seed(seeds[i], f"adaptive-round-{r}") for i in rows]
                perms = padded_permutations([n_units[i] for i in rows], width, m, antithetic, round_seeds).to(
                    units.device
                )
                res = first_layer_shapley(
                    net,
                    g[rows, :width],
                    g0[rows],
                    mask[rows, :width],
                    perms,
                    antithetic=antithetic,
                    seeds=round_seeds,
                    control_variate=control_variate,
                    position_table=None if table is None else table[rows, :width, :width],
                )
                draws = m // 2 if antithetic else m
                for row, i in enumerate(rows):
                    ni, last = n_units[i], schedules[i][-1]
                    moments[i].add(
                        res.values[row, :ni].double().cpu().numpy(),
                        res.std_errors[row, :ni].double().cpu().numpy(),
                        draws,
                    )
                    used[i] += m
                    evaluations[i] += int(res.n_evaluations[row])
                    certs[i] = _certificate(
                        moments[i],
                        ks[i],
                        delta,
                        tolerance,
                        bound,
                        2.0 * net.bound,
                        len(schedules[i]),
                        r,
                        used[i],
                        used[i] == last,
                    )
                    if not certs[i].certified and used[i] < last:
                        still.append(i)
            active = sorted(still)
    return [
        ShapleyResult(
            values=mo.mean,
            std_errors=np.sqrt(mo.variance / mo.t),
            n_evaluations=int(ev),
            method="monte_carlo[adaptive]",
            seed=seed,
            n_permutations=u,
            metadata={"antithetic": antithetic, "control_variate": control_variate},
            certificate=cert,
        )
        for mo, ev, seed, u, cert in zip(moments, evaluations, seeds, used, certs)
    ]
