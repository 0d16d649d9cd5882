"""Benchmarks that print ratios measured in one run: ``python -m scp.bench {estimator,convexity} [--quick]``.

estimator: per-context latency of Monte-Carlo Shapley on the paper's 3.03M Deep Sets network, n = 41 units,
M = 50 permutations, 32 contexts: the batched fast path, the generic path (all prefixes of all permutations in
one batched game call), the generic path on a ψ-caching game, a naive Algorithm 1 (one network forward per
coalition), and shapiq's PermutationSamplingSV with the same network as its game and the same budget; plus the
fast path's achieved GFLOP/s against an fp32 matrix multiply measured in the same run.

convexity: how often random supermodularity inequalities fail for ConvexDeepSets vs the unconstrained network.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import numpy as np
import torch

from .games import ValueNetGame
from .shapley import deepsets_shapley, monte_carlo, naive_monte_carlo
from .value_net import DeepSetsValue


def timed(fn: Callable[[], object], repeats: int = 3) -> float:
    """Median wall-clock seconds of ``repeats`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matmul_gflops(m: int = 4096, k: int = 1024, n: int = 512, repeats: int = 5) -> float:
    """fp32 GEMM throughput at ρ's dominant shape (prefixes × 1024 → 512)."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    return 2 * m * k * n / timed(lambda: a @ b, repeats) / 1e9


def fast_path_flops(net: DeepSetsValue, n: int, m: int, contexts: int) -> float:
    """Multiply-add FLOPs of the fast path: ψ per unit (+ query), W₁ per unit, ρ after W₁ per prefix."""
    lin = [mod for mod in net.psi if isinstance(mod, torch.nn.Linear)]
    psi = sum(2 * layer.in_features * layer.out_features for layer in lin)
    rho = [mod for mod in net.rho if isinstance(mod, torch.nn.Linear)]
    first = 2 * rho[0].in_features * rho[0].out_features
    rest = sum(2 * layer.in_features * layer.out_features for layer in rho[1:])
    per_context = (n + 1) * (psi + first) + m * (n + 1) * rest + m * n * rho[0].out_features
    return contexts * per_context


def estimator(quick: bool = False, seed: int = 0) -> dict:
    torch.manual_seed(seed)
    n, m, contexts = 41, 50, 32
    slow_contexts = 1 if quick else 2
    net = DeepSetsValue().eval()
    units, query = torch.randn(contexts, n, 384), torch.randn(contexts, 384)
    rows = {}
    with torch.inference_mode():
        t_fast = timed(lambda: deepsets_shapley(net, units, query, n_permutations=m, seed=seed), 2 if quick else 3)
        rows["fast path (batched, 32 contexts)"] = t_fast / contexts
        games = [ValueNetGame(net, units[i], query[i]) for i in range(slow_contexts)]
        cached = [ValueNetGame(net, units[i], query[i], cache_psi=True) for i in range(slow_contexts)]
        rows["generic path (network forward per coalition, batched)"] = timed(
            lambda: [monte_carlo(g, m, seed=seed, path="generic") for g in games], 1) / slow_contexts
        rows["generic path (ψ-caching game)"] = timed(
            lambda: [monte_carlo(g, m, seed=seed, path="generic") for g in cached], 1) / slow_contexts
        rows["naive Algorithm 1 (one forward per coalition)"] = timed(
            lambda: naive_monte_carlo(games[0], m, seed=seed), 1)
        try:
            from shapiq import PermutationSamplingSV

            budget = m * (n + 1)
            approx = PermutationSamplingSV(n=n, random_state=seed)
            rows["shapiq PermutationSamplingSV (same game, same budget)"] = timed(
                lambda: approx.approximate(budget=budget, game=games[0]), 1)
        except ImportError:
            rows["shapiq PermutationSamplingSV (same game, same budget)"] = float("nan")
        gflops_mm = matmul_gflops()
        achieved = fast_path_flops(net, n, m, contexts) / (t_fast * 1e9)
    fast = rows["fast path (batched, 32 contexts)"]
    print(f"Monte-Carlo Shapley, DeepSetsValue ({sum(p.numel() for p in net.parameters()):,} params), "
          f"n = {n}, M = {m}, torch threads = {torch.get_num_threads()}")
    print(f"{'method':58s} {'ms/context':>11s} {'fast speed-up':>14s}")
    for name, sec in rows.items():
        print(f"{name:58s} {sec * 1e3:11.1f} {sec / fast:13.1f}x")
    print(f"fast path: {achieved:.1f} GFLOP/s; fp32 matmul (4096x1024 @ 1024x512) in this run: {gflops_mm:.1f} GFLOP/s "
          f"-> {100 * achieved / gflops_mm:.0f}% of measured matmul throughput")
    return {"ms_per_context": {k: v * 1e3 for k, v in rows.items()}, "fast_gflops": achieved, "matmul_gflops": gflops_mm}


def convexity(quick: bool = False, seed: int = 0) -> dict:
    """Fraction of violated supermodularity inequalities v(S+i+j) − v(S+i) − v(S+j) + v(S) ≥ 0 on random
    (S, i, j), for ConvexDeepSets and the unconstrained DeepSetsValue (paper sizes, random init, n = 41,
    float64), on the logit game (before the bound) and on the bounded game v = B·σ(·).  The value range is
    printed because a saturated sigmoid makes every inequality hold trivially."""
    from .theory import supermodularity_violation_rate

    torch.manual_seed(seed)
    n, samples = 41, 1000 if quick else 5000
    units, query = torch.randn(n, 384, dtype=torch.float64), torch.randn(384, dtype=torch.float64)
    nets = {"ConvexDeepSets": __import__("scp.value_net", fromlist=["ConvexDeepSets"]).ConvexDeepSets().double().eval(),
            "DeepSetsValue (unconstrained)": DeepSetsValue(query_mode="product").double().eval()}
    out = {}
    print(f"supermodularity violations on {samples} random (S, i, j), n = {n}")
    for name, net in nets.items():
        with torch.no_grad():
            h, base = net.encode(units[None], query[None])

        def game(C, bounded):
            with torch.no_grad():
                pooled = base + torch.as_tensor(C, dtype=h.dtype) @ h[0]
                return (net.pooled_value(pooled) if bounded else net.rho(pooled).squeeze(-1)).double().numpy()
        for bounded in (False, True):
            sizes = np.random.default_rng(seed).random((200, n)) < np.linspace(0, 1, 200)[:, None]
            values = game(sizes, bounded)
            tol = 1e-9 * max(1.0, float(np.abs(values).max()))
            r = supermodularity_violation_rate(lambda C: game(C, bounded), n, samples, seed=seed, tol=tol)
            out[(name, bounded)] = r.rate
            print(f"  {name:30s} {'v = B·σ(logit)' if bounded else 'logit game':16s} violation rate {r.rate:.3f} "
                  f"(max violation {r.max_violation:.2e}; values over coalitions in "
                  f"[{values.min():.3g}, {values.max():.3g}])")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scp.bench", description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["estimator", "convexity"])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (smoke run)")
    args = parser.parse_args(argv)
    {"estimator": estimator, "convexity": convexity}[args.which](quick=args.quick)


if __name__ == "__main__":
    main()
