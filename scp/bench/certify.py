"""A PAC Top-K stopping rule in the style of SHAP@k, against the engine's certified adaptive budget.

SHAP@k (Kariyappa et al., AAAI 2024) casts Top-K identification as an Explore-m bandit problem: each player is an
arm whose pulls are unbiased draws of its Shapley value, and LUCB sampling (Kalyanakrishnan et al. 2012) pulls
only the two most ambiguous arms — the kept player with the lowest lower bound and the dropped player with the
highest upper bound — until LB(kept) > UB(dropped) − ε.  :func:`lucb_topk` adapts it to a game on n players:

- A *targeted draw* of player i is its marginal x = v(P ∪ {i}) − v(P), P the predecessors of i in a uniform random
  permutation (P's size uniform on 0..n−1, then P uniform among subsets of N∖{i} of that size), so E[x] = φ_i.  It
  values the two coalitions P ∪ {i} and P (v(∅) and v(N) are valued once and reused: 2 − 2/n on average), where
  one permutation on the Deep Sets fast path gives a marginal of every player for n − 1 evaluations.
- Player i's draws come from its own random stream (seed, i), so its j-th draw is the same whatever the rule
  asked for before: the draws of each arm are one i.i.d. sequence, of which the rule reads a prefix.
- Each arm's count t_i moves on a geometric grid G: t_0 = ``min_draws``, t_{j+1} = max(t_j + 1, ⌈γ·t_j⌉),
  γ = ``growth``, every t_j ≤ t_max = ⌊(B − 2)/2⌋ (B the ``budget``, so |G| is fixed before any draw).  Every
  player first gets t_0 draws.  Each step then finds the two most ambiguous arms, h = argmin_{i∈K̂}(φ̂_i − r_i)
  and l = argmax_{j∉K̂}(φ̂_j + r_j) (K̂ the Top-K of the means, ties to the lower index), and moves one of them
  to its next grid point: the one with the larger r_i/t_i.  Moving from t to γ·t draws shrinks r by the same
  factor for either arm (1 − γ^(−1/2) for the variance term, 1 − 1/γ for the range term) and costs (γ − 1)·t
  draws, so this is the step that shrinks r_h + r_l most per evaluation.  (LUCB proper draws once from both; on
  a geometric grid that lets an arm that keeps being h or l — e.g. a player of zero variance next to the
  boundary — grow geometrically and take the whole budget.)
- Intervals φ̂_i ± r(t_i), with the families of :mod:`scp.core.adaptive` on draws of range R = 2·``value_range``:
  empirical Bernstein (Maurer & Pontil 2009, Thm 4: sqrt(2V·ln(4/δ')/t) + 7R·ln(4/δ')/(3(t − 1))), Hoeffding, or
  Student (t_{t−1}(1 − δ'/2)·sqrt(V/t), asymptotic only), all at δ' = δ/(n·|G|).

Anytime union bound.  For a fixed player i and grid point t ∈ G, the mean of i's first t draws lies within r(t)
of φ_i except with probability δ' (Bernstein, Hoeffding: for every t; Student: as t → ∞).  There are n·|G| such
events, so with probability ≥ 1 − δ all hold at once.  At every decision the rule reads each arm at a grid point,
so on that event every interval it ever uses holds, whichever step it stops at (the stopping time is random;
the union covers every point it could stop at).  It stops when

    margin = min_{i∈K̂}(φ̂_i − r_i) − max_{j∉K̂}(φ̂_j + r_j) ≥ −ε,

then on the event φ_i ≥ φ_j − ε for every kept i and dropped j (ε = 0, margin > 0: K̂ is the true Top-K), with
probability ≥ 1 − δ for Bernstein and Hoeffding; or when the next step's draws (at most 2 evaluations each) would
take the evaluations past B, or h and l are both at the last grid point: not certified.  The paper's
SamplingSHAP@k uses the normal interval at δ/n, checked after every pull; the Student rule here pays the same
union over G as the rigorous ones, so the two differ only in the interval family.

``python -m scp.bench.certify`` measures both rules (and the engine's ``bound="student"`` and
``bound="bernstein"``) on the HotpotQA test split with the shipped model and prints the table (:func:`measure`).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from scp.bench.common import REF_SEED, RESULTS, environment, make_game, reference, spread, timed_rounds, write_result
from scp.core.adaptive import (
    DEFAULT_MIN_PERMUTATIONS,
    RIGOROUS,
    adaptive_deepsets_shapley,
    bernstein_radius,
    certify_topk,
    check_options,
    hoeffding_radius,
    round_schedule,
    student_radius,
)
from scp.core.games import Game, check_game, evaluate_game
from scp.core.permutations import derive_seed, resolve_seed
from scp.core.result import check_budget
from scp.core.selection import is_integer, is_real, keep_count
from scp.errors import InputError

__all__ = [
    "certify",
    "format_certify",
    "DEFAULT_GROWTH",
    "DEFAULT_MIN_DRAWS",
    "LUCBResult",
    "draw_grid",
    "engine_cap",
    "format_table",
    "lucb_topk",
    "main",
    "measure",
]

DEFAULT_MIN_DRAWS = 16
"""Draws of every player before the first LUCB step (the engine's first round is 16 permutations)."""
DEFAULT_GROWTH = 1.25
"""γ: an arm moves from t to ⌈γ·t⌉ draws when it is picked."""


@dataclass(frozen=True)
class LUCBResult:
    """What :func:`lucb_topk` spent and certified on one game.

    ``values`` φ̂ (mean of each player's draws), ``radius`` r_i at its count ``draws[i]``, ``kept`` K̂ (sorted),
    ``gap`` = φ̂_(K) − φ̂_(K+1), ``margin`` as in the module docstring, ``certified`` = margin ≥ −ε, ``separated``
    = margin > 0, ``stopped_at_cap`` = stopped by the budget or the grid without a certificate, ``rigorous`` =
    a finite-sample interval family, ``n_evaluations`` the coalitions the game valued (∅ and N once each),
    ``steps`` the LUCB steps after the first t_0 draws of every player, ``grid_points`` = |G|."""

    values: np.ndarray
    radius: np.ndarray
    draws: np.ndarray
    kept: np.ndarray
    gap: float
    margin: float
    certified: bool
    separated: bool
    stopped_at_cap: bool
    rigorous: bool
    n_evaluations: int
    steps: int
    grid_points: int


def draw_grid(min_draws: int, max_draws: int, growth: float = DEFAULT_GROWTH) -> list[int]:
    """The counts an arm may be read at: t_0 = ``min_draws``, t_{j+1} = max(t_j + 1, ⌈γ·t_j⌉), all ≤ ``max_draws``."""
    if not is_integer(min_draws) or min_draws < 2:
        raise InputError(f"min_draws must be an integer ≥ 2 (two draws give a variance); got {min_draws!r}")
    if not (is_real(growth) and math.isfinite(growth) and growth > 1):
        raise InputError(f"growth must be a finite number > 1; got {growth!r}")
    if not is_integer(max_draws) or max_draws < min_draws:
        raise InputError(f"max_draws = {max_draws!r} must be an integer ≥ min_draws = {min_draws}")
    grid = [int(min_draws)]
    while (nxt := max(grid[-1] + 1, math.ceil(growth * grid[-1]))) <= max_draws:
        grid.append(nxt)
    return grid


def engine_cap(n: int, max_permutations: int, min_permutations: int = DEFAULT_MIN_PERMUTATIONS) -> int:
    """Evaluations of the engine's whole doubling schedule up to ``max_permutations`` on n players:
    M·(n − 1) + 2·R, R the rounds of :func:`scp.core.adaptive.round_schedule` (each values ∅ and N)."""
    return max_permutations * (n - 1) + 2 * len(round_schedule(min_permutations, max_permutations))


def _radius(variance: float, t: int, value_range: float, delta_each: float, bound: str) -> float:
    if bound == "hoeffding":
        return float(hoeffding_radius(t, value_range, delta_each))
    if bound == "student":
        return float(student_radius(np.array([variance]), t, delta_each)[0])
    return float(bernstein_radius(np.array([variance]), t, value_range, delta_each)[0])


class _Arms:
    """Per-player draw streams, running means and sums of squared deviations (Chan's merge), and the valuation of
    targeted draws with v(∅) and v(N) known."""

    def __init__(self, game: Game, seed: int):
        self.game, self.n = game, game.n_players
        self.rngs = [np.random.default_rng([seed, i]) for i in range(self.n)]
        self.t = np.zeros(self.n, dtype=np.int64)
        self.mean, self.m2 = np.zeros(self.n), np.zeros(self.n)
        ends = np.zeros((2, self.n), dtype=bool)
        ends[1] = True
        self.v_empty, self.v_grand = evaluate_game(game, ends)
        self.evaluations = 2

    def draw(self, counts: dict[int, int]) -> None:
        """``counts[i]`` more targeted draws of each player i, valued in one call of the game."""
        befores = []
        for i, d in counts.items():
            keys = self.rngs[i].random((d, self.n))
            befores.append(keys < keys[:, i : i + 1])  # the players ahead of i in the permutation ordered by keys
        before = np.concatenate(befores)
        after = before.copy()
        after[np.arange(len(after)), np.repeat(list(counts), list(counts.values()))] = True
        coalitions = np.concatenate([after, before])
        size = coalitions.sum(1)
        values = np.where(size == 0, self.v_empty, self.v_grand)
        inner = (size > 0) & (size < self.n)
        if inner.any():
            values[inner] = evaluate_game(self.game, coalitions[inner])
        self.evaluations += int(inner.sum())
        marginals = values[: len(after)] - values[len(after) :]
        start = 0
        for i, d in counts.items():
            x = marginals[start : start + d]
            start += d
            mean_x, total = x.mean(), self.t[i] + d
            shift = mean_x - self.mean[i]
            self.m2[i] += ((x - mean_x) ** 2).sum() + shift**2 * self.t[i] * d / total
            self.mean[i] += shift * d / total
            self.t[i] = total

    def variance(self, i: int) -> float:
        return float(self.m2[i] / (self.t[i] - 1))


def lucb_topk(
    game: Game,
    k: int,
    budget: int,
    delta: float = 0.05,
    tolerance: float = 0.0,
    bound: str = "bernstein",
    min_draws: int = DEFAULT_MIN_DRAWS,
    growth: float = DEFAULT_GROWTH,
    value_range: float | None = None,
    seed: int | None = None,
) -> LUCBResult:
    """LUCB Top-K identification with player-targeted draws, stopped by the certificate or by ``budget``
    coalition evaluations (module docstring: the rule, its intervals and the union bound that makes it anytime).

    ``value_range`` bounds max v − min v (draws then lie in an interval of width 2·value_range); it defaults to
    the game's ``value_bound`` (a :class:`~scp.models.game.ValueNetGame`: its network's bound B).  A budget below
    2 + 2·n·``min_draws`` (∅, N and every player's first draws at 2 evaluations each) is refused.  The same seed
    gives the same result."""
    n = check_game(game)
    if not is_integer(k) or not 1 <= k <= n:
        raise InputError(f"k must be an integer in [1, n = {n}]; got {k!r}")
    check_options(delta, tolerance, bound)
    budget = check_budget(budget)
    if budget is None or budget < 2 + 2 * n * min_draws:
        raise InputError(
            f"budget = {budget!r} evaluations cannot pay for ∅, N and {min_draws} targeted draws of each of the "
            f"{n} players (2 + 2·n·min_draws = {2 + 2 * n * min_draws})"
        )
    if value_range is None:
        value_range = getattr(game, "value_bound", None)
        if value_range is None:
            raise InputError("value_range (a bound on max v − min v) is needed for a game without a value_bound")
    if not (is_real(value_range) and math.isfinite(value_range) and value_range > 0):
        raise InputError(f"value_range must be a finite number > 0; got {value_range!r}")
    grid = draw_grid(min_draws, (budget - 2) // 2, growth)
    delta_each, width = delta / (n * len(grid)), 2.0 * float(value_range)
    arms = _Arms(game, resolve_seed(seed))
    arms.draw(dict.fromkeys(range(n), min_draws))
    level = np.zeros(n, dtype=np.int64)  # arm i has grid[level[i]] draws
    radius = np.array([_radius(arms.variance(i), min_draws, width, delta_each, bound) for i in range(n)])
    steps, at_cap = 0, False
    while True:
        gap, margin = certify_topk(arms.mean, radius, k)
        if margin >= -tolerance:
            break
        order = np.argsort(-arms.mean, kind="stable")
        kept, dropped = order[:k], order[k:]
        pair = [kept[np.argmin((arms.mean - radius)[kept])], dropped[np.argmax((arms.mean + radius)[dropped])]]
        pair = [int(i) for i in pair if level[i] + 1 < len(grid)]
        if not pair:
            at_cap = True
            break
        i = max(pair, key=lambda j: radius[j] / arms.t[j])  # the larger shrink of r_h + r_l per evaluation
        more = grid[level[i] + 1] - grid[level[i]]
        if arms.evaluations + 2 * more > budget:
            at_cap = True
            break
        arms.draw({i: more})
        level[i] += 1
        radius[i] = _radius(arms.variance(i), grid[level[i]], width, delta_each, bound)
        steps += 1
    return LUCBResult(
        values=arms.mean.copy(),
        radius=radius,
        draws=arms.t.copy(),
        kept=np.sort(np.argsort(-arms.mean, kind="stable")[:k]),
        gap=gap,
        margin=margin,
        certified=bool(margin >= -tolerance),
        separated=bool(margin > 0),
        stopped_at_cap=at_cap,
        rigorous=bound in RIGOROUS,
        n_evaluations=arms.evaluations,
        steps=steps,
        grid_points=len(grid),
    )


# ------------------------------------------------------------------------------------------------ measurement

RULES = (  # (label, rule, bound)
    ("full permutations, Student (engine default)", "engine", "student"),
    ("full permutations, Bernstein", "engine", "bernstein"),
    ("LUCB targeted draws, Student", "lucb", "student"),
    ("LUCB targeted draws, Bernstein", "lucb", "bernstein"),
)


def measure(
    n_contexts: int = 100,
    repeats: int = 3,
    delta: float = 0.05,
    max_permutations: int = 1000,
    keeps: Sequence[float] = (0.3, 0.5),
    tolerances: Sequence[float] = (0.0, 0.01),
    m_ref: int = 4000,
) -> dict:
    """Each rule of :data:`RULES` at K = ⌈keep·n⌉ and each ε on the first ``n_contexts`` HotpotQA test contexts
    ("Title: sentence" units, the shipped model): certified share, evaluations used (the LUCB rules capped at the
    engine's whole schedule to ``max_permutations``, :func:`engine_cap`), and how often a certified set is the
    Top-K of (or ε-correct against) the reference (:func:`scp.bench.common.reference` with ``m_ref`` antithetic
    permutations and the position control variate).  Time: per rule and setting, the seconds for all contexts
    from the context's tensors (ψ included) to the certificate, median [min, max] of ``repeats`` rotated repeats
    after one warm-up (:func:`scp.bench.common.timed_rounds`); each context's seed is derived from its key, so
    every repeat gives the same results."""
    from scp.bench.common import shipped_model
    from scp.data.datasets import load_dataset
    from scp.data.embedders import CachedEmbedder, get_embedder
    from scp.data.features import contexts_from_examples

    model, config = shipped_model()
    examples = load_dataset("hotpotqa", split="test", limit=n_contexts)
    contexts = contexts_from_examples(
        examples, CachedEmbedder(get_embedder(config.embedder)), config.features, config.with_title
    )
    seeds = [derive_seed(0, c.key) for c in contexts]
    refs, ref_se = [], []
    start = time.perf_counter()
    for c in contexts:
        phi, se = reference(make_game(model, c), m_ref)
        refs.append(phi)
        ref_se.append(se)
    ref_seconds = time.perf_counter() - start

    def run(keep: float, tol: float, rule: str, bound: str):
        def call(_r: int) -> list[dict]:
            out = []
            for c, seed in zip(contexts, seeds):
                n, k = c.n_units, keep_count(c.n_units, keep)
                if rule == "engine":
                    res = adaptive_deepsets_shapley(
                        model,
                        c.units[None],
                        c.query[None],
                        None,
                        c.extra[None],
                        k=k,
                        delta=delta,
                        max_permutations=max_permutations,
                        seeds=seed,
                        tolerance=tol,
                        bound=bound,
                    )[0]
                    values, certified, evaluations = res.values, res.certificate.certified, res.n_evaluations
                else:
                    res = lucb_topk(
                        make_game(model, c),
                        k,
                        engine_cap(n, max_permutations),
                        delta=delta,
                        tolerance=tol,
                        bound=bound,
                        seed=seed,
                    )
                    values, certified, evaluations = res.values, res.certified, res.n_evaluations
                out.append(
                    {
                        "kept": np.sort(np.argsort(-values, kind="stable")[:k]),
                        "certified": certified,
                        "evaluations": evaluations,
                    }
                )
            return out

        return call

    calls, settings = {}, {}
    for keep in keeps:
        for tol in tolerances:
            for label, rule, bound in RULES:
                name = f"K = ⌈{keep}·n⌉, ε = {tol}: {label}"
                calls[name], settings[name] = run(keep, tol, rule, bound), (keep, tol, label, bound)
    with torch.no_grad():
        times, outputs = timed_rounds(calls, repeats, min_seconds=0.0)
    rows = []
    for name, (keep, tol, label, bound) in settings.items():
        records = outputs[name][0]
        certified = [j for j, r in enumerate(records) if r["certified"]]
        agree, correct = 0, 0
        for j in certified:
            n, k, phi = contexts[j].n_units, keep_count(contexts[j].n_units, keep), refs[j]
            kept = records[j]["kept"]
            dropped = np.setdiff1d(np.arange(n), kept)
            agree += bool(np.array_equal(kept, np.sort(np.argsort(-phi, kind="stable")[:k])))
            correct += bool(phi[kept].min() >= phi[dropped].max() - tol)
        rows.append(
            {
                "keep": keep,
                "tolerance": tol,
                "rule": label,
                "rigorous": bound in RIGOROUS,
                "certified": len(certified),
                "median_evaluations": statistics.median(r["evaluations"] for r in records),
                "median_m": statistics.median(r["evaluations"] / (c.n_units - 1) for r, c in zip(records, contexts)),
                "agree": agree,
                "eps_correct": correct,
                "seconds": spread(times[name]),
            }
        )
    gaps = []
    for phi in refs:
        for keep in keeps:
            k, desc = keep_count(len(phi), keep), np.sort(phi)[::-1]
            gaps.append(float(desc[k - 1] - desc[k]))
    return {
        "contexts": len(contexts),
        "n_units": {
            "min": min(c.n_units for c in contexts),
            "median": statistics.median(c.n_units for c in contexts),
            "max": max(c.n_units for c in contexts),
        },
        "delta": delta,
        "max_permutations": max_permutations,
        "m_ref": m_ref,
        "ref_seed": REF_SEED,
        "ref_rms_se_median": statistics.median(ref_se),
        "ref_boundary_gap_median": statistics.median(gaps),
        "ref_seconds": ref_seconds,
        "threads": torch.get_num_threads(),
        "rows": rows,
    }


def format_table(result: dict) -> str:
    """The measurement as a markdown table, with what it was measured on."""
    u = result["n_units"]
    lines = [
        f"HotpotQA test split, first {result['contexts']} contexts (n = {u['min']}–{u['max']} units, median "
        f"{u['median']:g}), shipped model, δ = {result['delta']}, torch threads = {result['threads']}; cap: the "
        f"engine's whole schedule to M = {result['max_permutations']} (M·(n − 1) + 2·rounds evaluations) for every "
        f"rule.  Reference: M = {result['m_ref']} antithetic + position CV, median RMS standard error "
        f"{result['ref_rms_se_median']:.2e}, median boundary gap φ_(K) − φ_(K+1) "
        f"{result['ref_boundary_gap_median']:.2e}.  'agree': certified and the reference's Top-K; 'ε-correct': "
        "certified and every kept reference value ≥ every dropped one − ε.  Equivalent M = evaluations/(n − 1).  "
        f"Time: all contexts, median [min, max] of {result['rows'][0]['seconds']['repeats']} repeats.",
        "",
        "| K | ε | rule | rigorous | certified | median evaluations | median equiv. M | agree / certified | "
        "ε-correct / certified | time [s] |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    total = result["contexts"]
    for r in result["rows"]:
        s = r["seconds"]
        lines.append(
            f"| ⌈{r['keep']}·n⌉ | {r['tolerance']} | {r['rule']} | {'yes' if r['rigorous'] else 'no'} | "
            f"{r['certified']}/{total} ({100 * r['certified'] / total:.0f}%) | {r['median_evaluations']:,.0f} | "
            f"{r['median_m']:.0f} | {r['agree']}/{r['certified']} | {r['eps_correct']}/{r['certified']} | "
            f"{s['median']:.2f} [{s['min']:.2f}, {s['max']:.2f}] |"
        )
    return "\n".join(lines)


def certify(quick: bool = False, out_dir: Path = RESULTS) -> dict:
    """``python -m scp.bench certify``: :func:`measure` on one thread (torch and BLAS) — the first 100 HotpotQA test
    contexts, 3 repeats, K = ⌈0.3·n⌉ and ⌈0.5·n⌉, ε ∈ {0, 0.01}; quick: 10 contexts, 1 repeat, K = ⌈0.5·n⌉,
    ε = 0.01, reference M = 500 — written to ``results/bench/certify.json`` with the environment."""
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    with threadpool_limits(1):
        if quick:
            result = measure(10, 1, keeps=(0.5,), tolerances=(0.01,), m_ref=500)
        else:
            result = measure()
    result["env"] = environment(quick=quick)
    write_result(result, "certify.json", out_dir)
    return result


format_certify = format_table
"""BENCHMARKS.md's section from ``results/bench/certify.json``."""


def main(argv: list[str] | None = None) -> int:
    """``python -m scp.bench.certify [--contexts N] [--repeats R] [--keeps …] [--tolerances …]``: :func:`measure`
    on one thread, printed (a subset of the settings keeps each run short)."""
    from threadpoolctl import threadpool_limits

    parser = argparse.ArgumentParser(prog="python -m scp.bench.certify", description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, default=100, help="the first N HotpotQA test contexts")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats after one warm-up")
    parser.add_argument("--keeps", type=float, nargs="+", default=[0.3, 0.5], help="keep ratios: K = ⌈keep·n⌉")
    parser.add_argument("--tolerances", type=float, nargs="+", default=[0.0, 0.01], help="tolerances ε")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    with threadpool_limits(1):
        result = measure(args.contexts, args.repeats, keeps=args.keeps, tolerances=args.tolerances)
    print(format_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
