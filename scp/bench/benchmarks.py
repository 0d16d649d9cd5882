"""Benchmarks of the Shapley estimators: ``python -m scp.bench WHICH [--quick] [--threads N]``.

WHICH is one of
- ``estimator``: per-context latency AND accuracy of every estimator at n = 41 units, M = 50 permutations
  (budget M·(n − 1) + 2 = 2,052 game evaluations) on the shipped model: our fast path (batched and one context per
  call, plain / antithetic / position control variate), the generic path, a naive Algorithm 1, and every Shapley-
  value approximator of the installed shapiq on the same game;
- ``accuracy``: accuracy per second: RMSE against a high-M reference vs wall time, n ∈ {10, 41, 100}, and the
  ratio of time-to-RMSE between our best estimator and the best shapiq approximator (figure + JSON);
- ``prefix``: prefix sums as a 0/1-matrix product (GEMM) vs gather + blocked cumulative sum, by n;
- ``long``: latency, throughput and peak memory (ru_maxrss of a fresh process per configuration) for
  n ∈ {10, 41, 100, 500, 2000} and M ∈ {50, 400, 1000} on the paper's 3.03M network;
- ``adaptive``: the certified adaptive budget vs fixed M = 50 on the HotpotQA test split (AUC, M used, time);
- ``convexity``: supermodularity violations of ConvexDeepSets vs the unconstrained network;
- ``endtoend``: :mod:`scp.bench.e2e` (what a user waits for);
- ``gpu``: the GPU check, CPU and CUDA in one run within ~5 minutes: the fast path on CUDA equal to the CPU on
  fixed seeds and permutations, its contexts/s at n ∈ {41, 100, 500, 2000} × M ∈ {50, 1000}, peak device memory,
  the measured GEMM rate it is compared with, one training epoch and SmolLM2 prefill tokens/s; writes
  results/bench/gpu.json (exits 1 on a machine without a CUDA device; ``--dry-run``: the CPU stands in, tiny
  sizes, written to ``--out DIR``);
- ``all``: estimator, accuracy, prefix, long, adaptive and endtoend, then ``report``;
- ``report``: rewrite the generated tables of BENCHMARKS.md from results/bench/*.json.

Methodology.  Every time is the median of ≥ 5 repeats (``--quick``: fewer, labelled) with min and max, methods
taking turns in an order rotated between repeats, after one untimed warm-up call each.  Every baseline gets the
best game it can use: a :class:`~scp.models.game.ValueNetGame` with ``cache_psi=True``, which computes ψ and ρ's first
layer once per context (g_c = W₁ψ_c, v(S) = rest_of_ρ(g₀ + Σ_S g_c)) and keeps them across calls; shapiq's
permutation sampler values all its permutations in one game call.  The cost of ψ is outside every timing.  Each
accuracy is measured on the same calls that are timed: RMSE = sqrt(mean over repeats and players of (φ̂_i − φ_i)²)
against exact values (n ≤ 16) or an antithetic + position-control-variate estimate with M_ref permutations (its
own standard error is recorded), and the mean overlap of the estimated and reference Top-5 sets.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from scp.core.enumeration import exact
from scp.core.fast_path import deepsets_shapley, resolve_prefix
from scp.core.monte_carlo import monte_carlo, naive_monte_carlo
from scp.errors import InputError
from scp.models.game import ValueNetGame
from scp.models.value_net import DeepSetsValue
from scp.paths import SHIPPED_MODEL

CHECKPOINT = SHIPPED_MODEL
RESULTS = Path("results/bench")
FIGURES = Path("figures/bench")
DOC = Path("BENCHMARKS.md")
TOP_K = 5
REF_SEED = 12345


# ------------------------------------------------------------------------------------------------ plumbing


def environment(device: str = "cpu", quick: bool = False) -> dict:
    """What the numbers depend on beyond the code: machine, threads, versions, load."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    env = {
        "cpu": cpu,
        "logical_cores": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "device": device,
        "quick": quick,
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "loadavg": list(os.getloadavg()),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    try:
        from importlib.metadata import version

        import shapiq

        env["shapiq"] = getattr(shapiq, "__version__", None) or version("shapiq")
    except ImportError:
        env["shapiq"] = None
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


def spread(values: Sequence[float]) -> dict:
    """Median, min and max of repeated measurements."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "repeats": len(values)}


def timed_rounds(
    calls: dict[str, Callable[[int], object]],
    repeats: int,
    sync: Callable[[], None] = lambda: None,
    min_seconds: float = 0.05,
    failures: dict[str, str] | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[object]]]:
    """Seconds per call and outputs of ``repeats`` measurements of each ``calls[name](r)``, r = repeat index.

    One untimed warm-up call each first; it also sets how many back-to-back calls one measurement takes (enough
    to last ``min_seconds``, so millisecond calls are not at the mercy of one scheduler tick; the time reported is
    per call).  In repeat r the methods run in the order rotated by r, so no method always runs first.  With
    ``failures`` given, a method whose warm-up raises is left out and its error recorded there."""
    names, inner = [], {}
    for name in calls:
        start = time.perf_counter()
        try:
            calls[name](-1)
        except Exception as error:  # e.g. an approximator refusing a budget below its minimum
            if failures is None:
                raise
            failures[name] = f"{type(error).__name__}: {error}"
            continue
        sync()
        names.append(name)
        inner[name] = max(1, math.ceil(min_seconds / max(time.perf_counter() - start, 1e-6)))
    times: dict[str, list[float]] = {k: [] for k in names}
    outputs: dict[str, list[object]] = {k: [] for k in names}
    for r in range(repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            for _ in range(inner[name]):
                out = calls[name](r)
            sync()
            times[name].append((time.perf_counter() - start) / inner[name])
            outputs[name].append(out)
    return times, outputs


def write_result(obj, name: str, out_dir: Path = RESULTS) -> Path:
    from scp.io import write_json as atomic_write

    path = Path(out_dir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(obj, path)
    print(f"written to {path}")
    return path


# ----------------------------------------------------------------------------------------------------- data


def shipped_model(device: str = "cpu"):
    """(model, config) of the shipped checkpoint, in eval mode on ``device``."""
    from scp.models.factory import load_checkpoint

    model, config, _ = load_checkpoint(CHECKPOINT)
    return model.to(device).eval(), config


def hotpot_units(n: int, count: int, with_title: bool, split: str = "test") -> tuple[list[str], list[list[str]]]:
    """``count`` (query, n unit texts) pairs from real HotpotQA contexts: context j's query with its own units,
    followed by those of the next contexts when it has fewer than n (a long retrieval context), cut at n."""
    from scp.data.datasets import load_dataset

    examples = load_dataset("hotpotqa", split=split)
    queries, lists = [], []
    for j in range(count):
        units, e = [], j
        while len(units) < n:
            units += examples[e % len(examples)].unit_texts(with_title=with_title)
            e += 1
        queries.append(examples[j].query)
        lists.append(units[:n])
    return queries, lists


def hotpot_contexts(config, n: int, count: int, device: str = "cpu"):
    """:func:`hotpot_units` embedded and featurised as the checkpoint expects (cached embeddings)."""
    from scp.data.embedders import CachedEmbedder, get_embedder
    from scp.data.features import build_contexts

    queries, lists = hotpot_units(n, count, config.with_title)
    contexts = build_contexts(queries, lists, CachedEmbedder(get_embedder(config.embedder)), config.features)
    for c in contexts:
        c.units, c.query, c.extra = c.units.to(device), c.query.to(device), c.extra.to(device)
    return contexts


def make_game(model, context) -> ValueNetGame:
    """The best game for every estimator: ψ and ρ's first layer computed once, here, outside any timing."""
    game = ValueNetGame(model, context.units, context.query, context.extra, cache_psi=True)
    game.first_layer_rows()
    return game


def reference(game: ValueNetGame, m_ref: int) -> tuple[np.ndarray, float]:
    """(φ, its RMS standard error): exact for n ≤ 16, else antithetic + position control variate with m_ref."""
    if game.n_players <= 16:
        return exact(game).values, 0.0
    res = monte_carlo(game, m_ref, antithetic=True, control_variate="position", seed=REF_SEED)
    return res.values, float(np.sqrt(np.mean(res.std_errors**2)))


# --------------------------------------------------------------------------------------------------- methods

OURS = {  # name -> monte_carlo options (fast path on the caching game)
    "ours: MC (Algorithm 1, fast path)": {},
    "ours: MC antithetic": {"antithetic": True},
    "ours: MC + position CV": {"control_variate": "position"},
    "ours: MC antithetic + position CV": {"antithetic": True, "control_variate": "position"},
}


EXACT = "ours: exact (all 2^n coalitions, one game call)"


def shapiq_methods() -> dict[str, tuple[Callable, dict]]:
    """Every Shapley-value approximator of the installed shapiq: name -> (constructor(n, seed), approximate kwargs).

    Interaction approximators are included where they are asked for the Shapley value (kADD-SHAP, order-1
    RegressionFSII, SPEX with index "SV"); SVARMIQ with index "SV" is SVARM itself, and ProxySPEX needs lightgbm,
    which the project does not install.  {} if shapiq is not installed."""
    try:
        from shapiq import approximator as A
    except ImportError:
        return {}
    return {
        "shapiq PermutationSamplingSV": (lambda n, s: A.PermutationSamplingSV(n, random_state=s), {"all_in_one": True}),
        "shapiq KernelSHAP": (lambda n, s: A.KernelSHAP(n, random_state=s), {}),
        "shapiq KernelSHAP (pairing)": (lambda n, s: A.KernelSHAP(n, pairing_trick=True, random_state=s), {}),
        "shapiq RegressionFSII (order 1, pairing)": (
            lambda n, s: A.RegressionFSII(n, max_order=1, pairing_trick=True, random_state=s),
            {},
        ),
        "shapiq kADDSHAP (pairing)": (lambda n, s: A.kADDSHAP(n, pairing_trick=True, random_state=s), {}),
        "shapiq UnbiasedKernelSHAP (pairing)": (
            lambda n, s: A.UnbiasedKernelSHAP(n, pairing_trick=True, random_state=s),
            {},
        ),
        "shapiq SVARM": (lambda n, s: A.SVARM(n, random_state=s), {}),
        "shapiq SVARM (pairing)": (lambda n, s: A.SVARM(n, pairing_trick=True, random_state=s), {}),
        "shapiq OwenSamplingSV": (lambda n, s: A.OwenSamplingSV(n, random_state=s), {}),
        "shapiq StratifiedSamplingSV": (lambda n, s: A.StratifiedSamplingSV(n, random_state=s), {}),
        "shapiq SPEX (index SV)": (lambda n, s: A.SPEX(n=n, index="SV", max_order=1, random_state=s), {}),
    }


def shapiq_values(iv, n: int) -> np.ndarray:
    """φ_i from shapiq's InteractionValues; a player missing from a sparse result (SPEX) has value 0."""
    lookup = iv.interaction_lookup
    return np.array([iv.values[lookup[(i,)]] if (i,) in lookup else 0.0 for i in range(n)], dtype=np.float64)


def budget_of(n: int, m: int) -> int:
    """Game evaluations of M permutations: M·(n − 1) + 2."""
    return m * (n - 1) + 2


def method_calls(games: list[ValueNetGame], m: int, names: Sequence[str], device: str = "cpu") -> dict:
    """name -> call(r) returning (values of context r mod C, context index) for one repeat r (seed 1000 + r)."""
    n = games[0].n_players
    calls = {}
    for name in names:
        if name == EXACT:

            def call(r):
                j = r % len(games)
                return exact(games[j]).values, j
        elif name in OURS:

            def call(r, kw=OURS[name]):
                j = r % len(games)
                return monte_carlo(games[j], m, seed=1000 + r, device=device, **kw).values, j
        elif name == "generic path (one batched game call)":

            def call(r):
                j = r % len(games)
                return monte_carlo(games[j], m, seed=1000 + r, path="generic").values, j
        elif name == "naive Algorithm 1 (one game call per coalition)":

            def call(r):
                j = r % len(games)
                return naive_monte_carlo(games[j], m, seed=1000 + r).values, j
        else:
            make, opts = shapiq_methods()[name]
            budget = budget_of(n, m)

            def call(r, make=make, opts=opts, budget=budget):
                j = r % len(games)
                approx = make(n, 1000 + r)
                kwargs = {"batch_size": m + 1} if opts.get("all_in_one") else {}
                return approx.approximate(budget, games[j], **kwargs), j

        calls[name] = call
    return calls


def accuracy_row(outputs: list, refs: list[np.ndarray], n: int) -> dict:
    """RMSE and Top-K overlap of one method's outputs [(values or InteractionValues, context index)]."""
    sq, overlap = [], []
    k = min(TOP_K, n - 1)
    for out, j in outputs:
        values = out if isinstance(out, np.ndarray) else shapiq_values(out, n)
        sq.append(np.mean((values - refs[j]) ** 2))
        truth = set(np.argsort(-refs[j], kind="stable")[:k].tolist())
        overlap.append(len(truth & set(np.argsort(-values, kind="stable")[:k].tolist())) / k)
    return {"rmse": float(np.sqrt(np.mean(sq))), "topk_overlap": float(np.mean(overlap)), "k": k}


# ---------------------------------------------------------------------------------------------- estimator


def estimator(quick: bool = False, device: str = "cpu", out_dir: Path = RESULTS) -> dict:
    """Latency and accuracy of every estimator at n = 41, M = 50 on real HotpotQA contexts (module docstring)."""
    n, m = 41, 50
    n_contexts, repeats, m_ref = (4, 5, 4000) if quick else (16, 10, 20000)
    model, config = shipped_model(device)
    contexts = hotpot_contexts(config, n, n_contexts, device)
    games = [make_game(model, c) for c in contexts]
    refs, ref_se = zip(*[reference(g, m_ref) for g in games])
    from scp.data.features import collate

    batch = collate(contexts, device)
    extra = batch.extra
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def batched(r):
        with torch.no_grad():
            values = deepsets_shapley(
                model,
                batch.units,
                batch.query,
                batch.mask,
                extra,
                n_permutations=m,
                seed=[1000 + r + j for j in range(n_contexts)],
            ).values
        return values.double().cpu().numpy()

    names = list(OURS) + ["generic path (one batched game call)", "naive Algorithm 1 (one game call per coalition)"]
    names += list(shapiq_methods())
    calls = {f"ours: fast path, {n_contexts} contexts per call": batched, **method_calls(games, m, names, device)}
    failures: dict[str, str] = {}
    times, outputs = timed_rounds(calls, repeats, sync, failures=failures)
    rows = []
    for name in times:
        per_context = n_contexts if name.startswith("ours: fast path,") else 1
        if per_context > 1:
            outs = [(vals[j], j) for vals in outputs[name] for j in range(n_contexts)]
        else:
            outs = outputs[name]
        rows.append(
            {
                "method": name,
                "seconds_per_context": spread([t / per_context for t in times[name]]),
                **accuracy_row(outs, list(refs), n),
            }
        )
    result = {
        "env": environment(device, quick),
        "n": n,
        "m": m,
        "budget": budget_of(n, m),
        "contexts": n_contexts,
        "model": "shipped (models/scp-hotpotqa-best.safetensors)",
        "m_ref": m_ref,
        "reference_rms_se": float(np.mean(ref_se)),
        "rows": rows,
        "failed": failures,
    }
    write_result(result, "estimator_gpu.json" if device.startswith("cuda") else "estimator.json", out_dir)
    print(format_estimator(result))
    return result


def format_estimator(result: dict) -> str:
    env = result["env"]
    lines = [
        f"n = {result['n']} units, M = {result['m']} (budget {result['budget']} evaluations), "
        f"{result['contexts']} HotpotQA test contexts, {result['model']}, {env['device']}, "
        f"torch threads = {env['threads']}; reference: M_ref = {result['m_ref']} (RMS s.e. "
        f"{result['reference_rms_se']:.1e})",
        "",
        "| method | ms per context: median [min, max] | RMSE | Top-5 overlap |",
        "| --- | --- | --- | --- |",
    ]
    for row in result["rows"]:
        s = row["seconds_per_context"]
        lines.append(
            f"| {row['method']} | {s['median'] * 1e3:.2f} [{s['min'] * 1e3:.2f}, {s['max'] * 1e3:.2f}] | "
            f"{row['rmse']:.2e} | {row['topk_overlap']:.2f} |"
        )
    lines += [f"\n{name} failed: {message}" for name, message in result.get("failed", {}).items()]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- accuracy


def accuracy(quick: bool = False, out_dir: Path = RESULTS, figure_dir: Path = FIGURES) -> dict:
    """RMSE vs wall time of our estimators and shapiq's at n ∈ {10, 41, 100} (module docstring)."""
    sizes = {10: [10, 20, 50, 100], 41: [10, 20, 50, 100, 200, 500], 100: [10, 20, 50, 100, 200, 500]}
    n_contexts, repeats, m_ref, cap = (1, 3, 4000, 1.0) if quick else (3, 10, 40000, 20.0)
    if quick:
        sizes = {10: [20, 50, 100], 41: [20, 50, 200], 100: [20, 50, 200]}
    model, config = shipped_model()
    names = list(OURS) + list(shapiq_methods())
    curves: dict[int, dict[str, list[dict]]] = {}
    refs_se, failures = {}, {}
    for n, grid in sizes.items():
        games = [make_game(model, c) for c in hotpot_contexts(config, n, n_contexts)]
        refs, se = zip(*[reference(g, m_ref) for g in games])
        refs_se[str(n)] = float(np.mean(se))
        curves[n] = {name: [] for name in names}
        alive = list(names)
        for m in grid:
            if budget_of(n, m) >= 2**n:  # at 2^n evaluations exact enumeration is the answer
                continue
            names_here = alive + ([EXACT] if n <= 16 and not curves[n].get(EXACT) else [])
            failed: dict[str, str] = {}
            times, outputs = timed_rounds(method_calls(games, m, names_here), repeats, failures=failed)
            for name, message in failed.items():  # recorded; tried again at the next (larger) budget
                failures.setdefault(str(n), {})[f"{name}, M = {m}"] = message
            if EXACT in names_here:
                curves[n][EXACT] = [
                    {
                        "m": None,
                        "budget": 2**n,
                        "seconds": spread(times[EXACT]),
                        **accuracy_row(outputs[EXACT], list(refs), n),
                    }
                ]
            for name in [k for k in alive if k in times]:  # (exact is measured once: it does not depend on M)
                t = spread(times[name])
                curves[n][name].append(
                    {"m": m, "budget": budget_of(n, m), "seconds": t, **accuracy_row(outputs[name], list(refs), n)}
                )
                if t["median"] > cap:  # larger budgets of this method would only cost more time
                    alive.remove(name)
            print(f"n = {n}, M = {m}: done", flush=True)
    ratios = {n: time_to_rmse_ratios(curves[n]) for n in curves}
    result = {
        "env": environment("cpu", quick),
        "model": "shipped (models/scp-hotpotqa-best.safetensors)",
        "contexts_per_n": n_contexts,
        "repeats": repeats,
        "m_ref": m_ref,
        "reference_rms_se": refs_se,
        "time_cap_s": cap,
        "curves": {str(n): c for n, c in curves.items()},
        "failed": failures,
        "ratios": {str(n): r for n, r in ratios.items()},
    }
    result["figure"] = str(Path(figure_dir) / "accuracy_per_second.png")
    write_result(result, "accuracy.json", out_dir)
    plot_accuracy(result, figure_dir)
    print(format_accuracy(result))
    return result


def time_to(points: list[dict], target: float) -> float | None:
    """Seconds a method needs to reach RMSE ≤ target: log-log interpolation along its (time, RMSE) curve made
    monotone (running minimum of RMSE over increasing time); its first time if already there; None if never."""
    pts = sorted((p["seconds"]["median"], p["rmse"]) for p in points)
    best, mono = math.inf, []
    for t, r in pts:
        best = min(best, r)
        mono.append((t, best))
    if not mono or mono[-1][1] > target:
        return None
    if mono[0][1] <= target:
        return mono[0][0]
    for (t0, r0), (t1, r1) in zip(mono, mono[1:]):
        if r1 <= target < r0:
            w = (math.log(r0) - math.log(target)) / (math.log(r0) - math.log(r1))
            return math.exp(math.log(t0) + w * (math.log(t1) - math.log(t0)))
    return None


def time_to_rmse_ratios(curves: dict[str, list[dict]]) -> list[dict]:
    """At every RMSE some shapiq approximator reaches at one of its budgets: the fastest shapiq method's time to
    reach it over our fastest estimator's time (None where either family never reaches it)."""
    ours = {k: v for k, v in curves.items() if k.startswith("ours") and v}
    theirs = {k: v for k, v in curves.items() if not k.startswith("ours") and v}
    rows = []
    for target in sorted({p["rmse"] for pts in theirs.values() for p in pts}):
        t_ours = {k: time_to(v, target) for k, v in ours.items()}
        t_theirs = {k: time_to(v, target) for k, v in theirs.items()}
        t_ours = {k: t for k, t in t_ours.items() if t is not None}
        t_theirs = {k: t for k, t in t_theirs.items() if t is not None}
        if not t_ours or not t_theirs:
            continue
        best_ours, best_theirs = min(t_ours, key=t_ours.get), min(t_theirs, key=t_theirs.get)
        rows.append(
            {
                "rmse": target,
                "ours": best_ours,
                "ours_seconds": t_ours[best_ours],
                "shapiq": best_theirs,
                "shapiq_seconds": t_theirs[best_theirs],
                "ratio": t_theirs[best_theirs] / t_ours[best_ours],
            }
        )
    return rows


OUR_COLOURS = ("tab:blue", "tab:red", "tab:green", "tab:orange")
SHAPIQ_COLOURS = (
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "lightcoral",
    "tab:gray",
    "tab:olive",
    "tab:cyan",
    "navy",
    "goldenrod",
    "black",
    "peru",
)


def plot_accuracy(result: dict, figure_dir: Path = FIGURES) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = result["curves"]
    fig, axes = plt.subplots(1, len(curves), figsize=(5.2 * len(curves), 4.6), squeeze=False)
    styles = {}
    for ax, (n, methods) in zip(axes[0], curves.items()):
        for name, pts in methods.items():
            if not pts:
                continue
            if name == EXACT:  # RMSE 0: a vertical line at its time
                ax.axvline(pts[0]["seconds"]["median"], color="k", ls=":", lw=1.5, label=name)
                continue
            ours = name.startswith("ours")
            if name not in styles:  # our estimators: solid, saturated; shapiq's: dashed, their own hues
                palette = OUR_COLOURS if ours else SHAPIQ_COLOURS
                colour = palette[sum(k.startswith("ours") == ours for k in styles) % len(palette)]
                styles[name] = dict(
                    ls="-" if ours else "--", marker="o" if ours else "s", lw=2.0 if ours else 1.2, color=colour
                )
            style = styles[name]
            ax.plot([p["seconds"]["median"] for p in pts], [p["rmse"] for p in pts], label=name, ms=4, **style)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("wall time per context [s] (median)")
        ax.set_ylabel("RMSE vs reference")
        ax.set_title(f"n = {n} units")
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = [], []
    for ax in axes[0]:  # every method once, whichever panel it appears in
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, frameon=False)
    env = result["env"]
    fig.suptitle(
        f"Shapley accuracy per second, shipped model on HotpotQA ({env['cpu']}, torch threads = "
        f"{env['threads']}{', quick run' if env['quick'] else ''})",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0.14, 1, 0.95))
    figure_dir = Path(figure_dir)
    figure_dir.mkdir(parents=True, exist_ok=True)
    path = figure_dir / "accuracy_per_second.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def headline(result: dict, n: str = "41") -> dict | None:
    """The ratio at the smallest RMSE both families reach at n (the hardest common target), and the smallest ratio
    over all common targets."""
    rows = result["ratios"].get(n) or []
    if not rows:
        return None
    hardest = min(rows, key=lambda r: r["rmse"])
    return {
        "at_hardest": hardest,
        "min_ratio": min(r["ratio"] for r in rows),
        "median_ratio": statistics.median(r["ratio"] for r in rows),
        "targets": len(rows),
    }


def format_accuracy(result: dict) -> str:
    lines = []
    for n, methods in result["curves"].items():
        lines += [
            f"n = {n} (reference RMS s.e. {result['reference_rms_se'][n]:.1e})",
            "",
            "| method | M | budget | ms per context: median [min, max] | RMSE | Top-5 overlap |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for name, pts in methods.items():
            for p in pts:
                s = p["seconds"]
                lines.append(
                    f"| {name} | {p['m']} | {p['budget']} | {s['median'] * 1e3:.2f} "
                    f"[{s['min'] * 1e3:.2f}, {s['max'] * 1e3:.2f}] | {p['rmse']:.2e} | "
                    f"{p['topk_overlap']:.2f} |"
                )
        lines.append("")
    lines += [
        "Time to reach an RMSE (best of each family; targets = RMSEs shapiq methods reach):",
        "",
        "| n | target RMSE | our best | its time [ms] | best shapiq | its time [ms] | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n, rows in result["ratios"].items():
        shown = sorted(rows, key=lambda r: r["rmse"])
        if len(shown) > 8:  # eight targets spread over the range, the hardest included
            shown = [shown[i] for i in sorted({round(x) for x in np.linspace(0, len(shown) - 1, 8)})]
        for r in shown:
            lines.append(
                f"| {n} | {r['rmse']:.2e} | {r['ours']} | {r['ours_seconds'] * 1e3:.2f} | {r['shapiq']} | "
                f"{r['shapiq_seconds'] * 1e3:.2f} | {r['ratio']:.1f}× |"
            )
    for n, failed in result.get("failed", {}).items():
        lines += ["", f"n = {n}, failed calls: " + "; ".join(f"{name}: {message}" for name, message in failed.items())]
    h = headline(result)
    if h:
        r = h["at_hardest"]
        lines += [
            "",
            f"**n = 41: at RMSE {r['rmse']:.2e} (the smallest both reach) {r['ours']} needs "
            f"{r['ours_seconds'] * 1e3:.2f} ms, {r['shapiq']} {r['shapiq_seconds'] * 1e3:.2f} ms: "
            f"{r['ratio']:.1f}× faster; over all {h['targets']} common targets the ratio is ≥ "
            f"{h['min_ratio']:.1f}× (median {h['median_ratio']:.1f}×).**",
        ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------- prefix


def prefix(quick: bool = False, out_dir: Path = RESULTS) -> dict:
    """Fast-path time with prefix sums by GEMM vs gather + blocked cumsum, M = 50, one context, by n."""
    from scp.core.fast_path import CUMSUM_MIN_UNITS

    sizes = [16, 32, 64, 128, 256, 512] if quick else [16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024]
    repeats = 3 if quick else 7
    torch.manual_seed(0)
    nets = {
        "shipped size (H = 257)": DeepSetsValue(
            embed_dim=384, hidden=256, latent=128, query_mode="product_concat", n_extra=2, skip=True
        ).eval(),
        "paper (3.03M, H = 1024)": DeepSetsValue().eval(),
    }
    rows = []
    for label, net in nets.items():
        for n in sizes:
            units, query = torch.randn(1, n, 384), torch.randn(1, 384)
            extra = torch.randn(1, n, 2) if net.n_extra else None

            def run(path):
                def call(r):
                    with torch.no_grad():
                        return deepsets_shapley(
                            net, units, query, None, extra, n_permutations=50, seed=100 + r, prefix=path
                        ).values

                return call

            times, outputs = timed_rounds({"gemm": run("gemm"), "cumsum": run("cumsum")}, repeats)
            diff = max(float((a - b).abs().max()) for a, b in zip(outputs["gemm"], outputs["cumsum"]))
            rows.append(
                {
                    "net": label,
                    "n": n,
                    "gemm": spread(times["gemm"]),
                    "cumsum": spread(times["cumsum"]),
                    "max_abs_difference": diff,
                }
            )
            print(
                f"{label}, n = {n}: gemm {statistics.median(times['gemm']) * 1e3:.1f} ms, cumsum "
                f"{statistics.median(times['cumsum']) * 1e3:.1f} ms",
                flush=True,
            )
    result = {
        "env": environment("cpu", quick),
        "m": 50,
        "rows": rows,
        "threshold_in_code": CUMSUM_MIN_UNITS,
        "crossover": crossover(rows),
    }
    write_result(result, "prefix.json", out_dir)
    print(format_prefix(result))
    return result


def crossover(rows: list[dict]) -> dict:
    """Per network: the smallest n from which gather + cumsum is faster at every measured larger n."""
    out = {}
    for net in dict.fromkeys(r["net"] for r in rows):
        mine = sorted((r for r in rows if r["net"] == net), key=lambda r: r["n"])
        faster = [r["cumsum"]["median"] < r["gemm"]["median"] for r in mine]
        first = next((mine[i]["n"] for i in range(len(mine)) if all(faster[i:])), None)
        out[net] = first
    return out


def format_prefix(result: dict) -> str:
    lines = [
        f"M = {result['m']}, one context, torch threads = {result['env']['threads']}",
        "",
        "| network | n | GEMM ms: median [min, max] | gather + cumsum ms: median [min, max] | GEMM / cumsum | "
        "max abs difference |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["rows"]:
        g, c = r["gemm"], r["cumsum"]
        lines.append(
            f"| {r['net']} | {r['n']} | {g['median'] * 1e3:.2f} [{g['min'] * 1e3:.2f}, "
            f"{g['max'] * 1e3:.2f}] | {c['median'] * 1e3:.2f} [{c['min'] * 1e3:.2f}, {c['max'] * 1e3:.2f}] | "
            f"{g['median'] / c['median']:.2f} | {r['max_abs_difference']:.1e} |"
        )
    where = "; ".join(f"{net}: {'n = ' + str(n) if n else 'never'}" for net, n in result["crossover"].items())
    lines += [
        "",
        f"gather + cumsum is faster at every measured n from ({where}) on; the code switches at n ≥ "
        f"{result['threshold_in_code']} (scp.core.fast_path.CUMSUM_MIN_UNITS).",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------- long

LONG_SIZES = (10, 41, 100, 500, 2000)
LONG_PERMUTATIONS = (50, 400, 1000)


def long_worker(n: int, m: int, repeats: int) -> dict:
    """One configuration in this (fresh) process: times, then the process's peak resident memory."""
    from scp.data.embedders import CachedEmbedder, get_embedder

    torch.manual_seed(0)
    net = DeepSetsValue().eval()
    queries, lists = hotpot_units(n, 1, with_title=False)
    emb = CachedEmbedder(get_embedder("minilm")).encode(queries + lists[0])
    query, units = torch.from_numpy(emb[:1]), torch.from_numpy(emb[1:])[None]
    rss_before = _current_rss()
    times = []
    with torch.no_grad():
        for r in range(repeats):
            start = time.perf_counter()
            deepsets_shapley(net, units, query, n_permutations=m, seed=r)
            times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    return {
        "n": n,
        "m": m,
        "seconds": spread(times),
        "peak_rss_bytes": peak,
        "rss_before_bytes": rss_before,
        "prefix": resolve_prefix("auto", n),
        "threads": torch.get_num_threads(),
    }


def _current_rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def long_contexts(quick: bool = False, threads: int | None = None, out_dir: Path = RESULTS) -> dict:
    """Every (n, M) configuration in its own process (module docstring)."""
    rows = []
    for n in LONG_SIZES:
        for m in LONG_PERMUTATIONS:
            repeats = (1 if n * m >= 400_000 else 2) if quick else 5
            cmd = [
                sys.executable,
                "-m",
                "scp.bench",
                "long-worker",
                "--n",
                str(n),
                "--m",
                str(m),
                "--repeats",
                str(repeats),
            ] + (["--threads", str(threads)] if threads else [])
            out = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if out.returncode != 0:
                raise RuntimeError(f"long-context worker n={n}, M={m} failed:\n{out.stderr[-2000:]}")
            row = json.loads(out.stdout.strip().splitlines()[-1])
            row["evaluations_per_second"] = budget_of(n, m) / row["seconds"]["median"]
            rows.append(row)
            print(
                f"n = {n}, M = {m}: {row['seconds']['median']:.3f} s, peak RSS {row['peak_rss_bytes'] / 2**30:.2f} GiB",
                flush=True,
            )
    result = {
        "env": environment("cpu", quick),
        "model": "paper DeepSetsValue (3.03M parameters, random weights)",
        "rows": rows,
    }
    write_result(result, "long.json", out_dir)
    print(format_long(result))
    return result


def format_long(result: dict) -> str:
    lines = [
        f"{result['model']}, MiniLM embeddings of real HotpotQA sentences, one context per call, "
        f"torch threads = {result['rows'][0]['threads']}",
        "",
        "| n | M | prefix sums | latency s: median [min, max] | repeats | contexts/s | coalition values/s | "
        "peak RSS [GiB] | RSS before [GiB] |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["rows"]:
        s = r["seconds"]
        lines.append(
            f"| {r['n']} | {r['m']} | {r['prefix']} | {s['median']:.3f} [{s['min']:.3f}, {s['max']:.3f}] | "
            f"{s['repeats']} | {1 / s['median']:.2f} | {r['evaluations_per_second']:.3g} | "
            f"{r['peak_rss_bytes'] / 2**30:.2f} | {r['rss_before_bytes'] / 2**30:.2f} |"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- adaptive

ADAPTIVE_SETTINGS = (  # (label, keep ratio giving K = ⌈keep·n⌉, tolerance ε, bound, control variate)
    ("rigorous", 0.5, 0.0, "bernstein", None),
    ("student + CV, ε = 0.02", 0.5, 0.02, "student", "position"),
    ("student + CV, ε = 0.02", 0.1, 0.02, "student", "position"),
    ("student + CV, exact Top-K", 0.1, 0.0, "student", "position"),
)


def adaptive(
    quick: bool = False,
    out_dir: Path = RESULTS,
    delta: float = 0.05,
    max_permutations: int = 1000,
    settings: Sequence[tuple] = ADAPTIVE_SETTINGS,
) -> dict:
    """The adaptive budget vs fixed M on the HotpotQA test split with the shipped model: mean pairwise AUC, M used,
    certified share, the boundary's gap and radius, and scoring time (median of repeats, methods rotated, the
    same batches of 32 contexts sorted by length for every row; embeddings and features computed beforehand).
    Fixed-M rows: the paper's M = 50, M = 16, and — for each control-variate setting — the fixed M that gives
    every context the budget that setting needed at most (what a non-adaptive run must spend for the same
    certificate on every context)."""
    from scp.core.adaptive import adaptive_deepsets_shapley
    from scp.core.metrics import aggregate, pairwise_auc
    from scp.core.selection import keep_count
    from scp.data.datasets import load_dataset
    from scp.data.embedders import CachedEmbedder, get_embedder
    from scp.data.features import collate, contexts_from_examples

    model, config = shipped_model()
    examples = load_dataset("hotpotqa", split="test", limit=30 if quick else None)
    contexts = contexts_from_examples(
        examples, CachedEmbedder(get_embedder(config.embedder)), config.features, config.with_title
    )
    labels = [c.labels.numpy() for c in contexts]
    order = sorted(range(len(contexts)), key=lambda i: contexts[i].n_units)
    batches = [
        (idx, collate([contexts[i] for i in idx])) for idx in (order[s : s + 32] for s in range(0, len(order), 32))
    ]
    repeats = 3 if quick else 5

    def auc(scores):
        agg = aggregate([pairwise_auc(s, y) for s, y in zip(scores, labels)], n_boot=1000, seed=0)
        return {"mean": agg.mean, "ci": [agg.ci_low, agg.ci_high], "n_used": agg.n_used}

    def fixed(m: int, cv: str | None):
        def call(_r):
            scores = [None] * len(contexts)
            with torch.no_grad():
                for idx, b in batches:
                    vals = deepsets_shapley(
                        model, b.units, b.query, b.mask, b.extra, n_permutations=m, seed=b.seeds(0), control_variate=cv
                    ).values
                    for row, i in enumerate(idx):
                        scores[i] = vals[row, : contexts[i].n_units].double().numpy()
            return scores, None

        return call

    def adaptive_call(keep, tol, bound, cv):
        def call(_r):
            scores, certs = [None] * len(contexts), [None] * len(contexts)
            for idx, b in batches:
                results = adaptive_deepsets_shapley(
                    model,
                    b.units,
                    b.query,
                    b.mask,
                    b.extra,
                    k=[keep_count(contexts[i].n_units, keep) for i in idx],
                    delta=delta,
                    max_permutations=max_permutations,
                    seeds=b.seeds(0),
                    tolerance=tol,
                    bound=bound,
                    control_variate=cv,
                )
                for i, r in zip(idx, results):
                    scores[i], certs[i] = r.values, r.certificate
            return scores, certs

        return call

    calls = {"fixed M = 50": fixed(50, None), "fixed M = 16": fixed(16, None)}
    fixed_m = {"fixed M = 50": 50, "fixed M = 16": 16}
    labels_of = {}
    for label, keep, tol, bound, cv in settings:
        name = f"adaptive {label}, K = ⌈{keep}·n⌉"
        calls[name], labels_of[name] = adaptive_call(keep, tol, bound, cv), (keep, tol, bound, cv)
    times, outputs = timed_rounds(calls, repeats, min_seconds=0.0)
    # the fixed budget each control-variate setting needed at most, given to every context
    m_fixed = {max(c.n_permutations for c in outputs[name][0][1]) for name, s in labels_of.items() if s[3]}
    extra = {f"fixed M = {m} + CV (the most any context needed)": fixed(m, "position") for m in sorted(m_fixed)}
    fixed_m.update({name: m for name, m in zip(extra, sorted(m_fixed))})
    t2, o2 = timed_rounds(extra, repeats, min_seconds=0.0) if extra else ({}, {})
    times, outputs = times | t2, outputs | o2
    rows = []
    for name in calls | extra:
        scores, certs = outputs[name][0]
        row = {"setting": name, "seconds": spread(times[name]), "auc": auc(scores), "certified": None}
        if certs is None:
            m = fixed_m[name]
            row.update(median_m=m, mean_m=float(m), max_m=m)
        else:
            keep, tol, bound, cv = labels_of[name]
            used = [c.n_permutations for c in certs]
            row.update(
                keep=keep,
                tolerance=tol,
                bound=bound,
                control_variate=cv,
                rigorous=certs[0].rigorous,
                median_m=statistics.median(used),
                mean_m=float(np.mean(used)),
                max_m=max(used),
                certified=float(np.mean([c.certified for c in certs])),
                separated=float(np.mean([c.separated for c in certs])),
                median_gap=statistics.median(c.gap for c in certs),
                median_radius=statistics.median(c.radius for c in certs),
            )
        rows.append(row)
    result = {
        "env": environment("cpu", quick),
        "contexts": len(contexts),
        "delta": delta,
        "max_permutations": max_permutations,
        "rows": rows,
        "command": "python -m scp.bench adaptive" + (" --quick" if quick else ""),
    }
    write_result(result, "adaptive.json", out_dir)
    print(format_adaptive(result))
    return result


def format_adaptive(result: dict) -> str:
    base = result["rows"][0]["seconds"]["median"]
    lines = [
        f"HotpotQA test split, {result['contexts']} contexts, shipped model, torch threads = "
        f"{result['env']['threads']}, δ = {result['delta']}, M from 16 doubling to at most "
        f"{result['max_permutations']}; gap = φ̂_(K) − φ̂_(K+1), radius = what the intervals cost at the "
        "boundary (certified when radius ≤ gap + ε); medians over contexts; time: median [min, max] of "
        f"{result['rows'][0]['seconds']['repeats']} repeats",
        "",
        "| setting | AUC [95% CI] | M: median / mean / max | certified | separated | median gap | median radius | "
        "scoring time [s] | time vs M = 50 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["rows"]:
        a, s = r["auc"], r["seconds"]
        adaptive_row = r["certified"] is not None
        pct = (lambda x: f"{100 * x:.0f}%") if adaptive_row else (lambda x: "—")
        num = (lambda x: f"{x:.4f}") if adaptive_row else (lambda x: "—")
        lines.append(
            f"| {r['setting']} | {a['mean']:.4f} [{a['ci'][0]:.4f}, {a['ci'][1]:.4f}] | "
            f"{r['median_m']:g} / {r['mean_m']:.0f} / {r['max_m']:g} | {pct(r.get('certified'))} | "
            f"{pct(r.get('separated'))} | {num(r.get('median_gap'))} | {num(r.get('median_radius'))} | "
            f"{s['median']:.2f} [{s['min']:.2f}, {s['max']:.2f}] | {s['median'] / base:.2f}× |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- convexity


def convexity(quick: bool = False, seed: int = 0) -> dict:
    """Fraction of violated supermodularity inequalities v(S+i+j) − v(S+i) − v(S+j) + v(S) ≥ 0 on random
    (S, i, j), for ConvexDeepSets and the unconstrained DeepSetsValue (paper sizes, random init, n = 41,
    float64), on the logit game (before the bound) and on the bounded game v = B·σ(·).  The value range is
    printed because a saturated sigmoid makes every inequality hold trivially."""
    from scp.core.theory import supermodularity_violation_rate
    from scp.models.value_net import ConvexDeepSets

    torch.manual_seed(seed)
    n, samples = 41, 1000 if quick else 5000
    units, query = torch.randn(n, 384, dtype=torch.float64), torch.randn(384, dtype=torch.float64)
    nets = {
        "ConvexDeepSets": ConvexDeepSets().double().eval(),
        "DeepSetsValue (unconstrained)": DeepSetsValue(query_mode="product").double().eval(),
    }
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
            print(
                f"  {name:30s} {'v = B·σ(logit)' if bounded else 'logit game':16s} violation rate {r.rate:.3f} "
                f"(max violation {r.max_violation:.2e}; values over coalitions in "
                f"[{values.min():.3g}, {values.max():.3g}])"
            )
    return out


# ---------------------------------------------------------------------------------------------------- gpu

GPU_SIZES = (41, 100, 500, 2000)
GPU_PERMUTATIONS = (50, 1000)
GPU_FILE = "gpu.json"
GPU_DRY_FILE = "gpu_dry_run.json"
GPU_COMMAND = "scripts/gpu_check.sh   (or: python -m scp.bench gpu)"
GPU_RTOL = 1e-5  # |Δφ| ≤ GPU_RTOL · B: see _gpu_equality


def _no_cuda_message() -> str:
    return (
        "scp.bench gpu: no CUDA device: torch.cuda.is_available() is False (torch "
        f"{torch.__version__}, CUDA build {torch.version.cuda}); run it on a machine with an NVIDIA GPU and a "
        "CUDA build of torch, or `python -m scp.bench gpu --dry-run` to test the plumbing on the CPU"
    )


class _Budget:
    """A wall-clock deadline for the whole run and each section; measurements stop early, never overrun it by
    more than one call."""

    def __init__(self, seconds: float):
        self.start, self.seconds = time.perf_counter(), seconds

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.start)


def _synthetic_contexts(net, b: int, n: int, seed: int, lengths: Sequence[int] | None = None):
    """(units, query, mask, extra) on the CPU, float32: unit-norm random embeddings and N(0,1) features of the
    network's input sizes (throughput and equality depend on shapes, not on what the vectors say)."""
    gen = torch.Generator().manual_seed(seed)
    units = torch.randn(b, n, net.embed_dim, generator=gen)
    units = units / units.norm(dim=-1, keepdim=True)
    query = torch.randn(b, net.embed_dim, generator=gen)
    query = query / query.norm(dim=-1, keepdim=True)
    extra = torch.randn(b, n, net.n_extra, generator=gen) if net.n_extra else None
    mask = torch.ones(b, n, dtype=torch.bool)
    for i, length in enumerate(lengths or ()):
        mask[i, length:] = False
    return units, query, mask, extra


def _to(device, *tensors):
    return tuple(None if t is None else t.to(device) for t in tensors)


def _gpu_equality(net, device: str, configs) -> dict:
    """The fast path on ``device`` against the CPU on the same contexts, seeds and (explicitly passed) permutations.

    Tolerance: |φ_device − φ_cpu| ≤ GPU_RTOL · B for every player, B the network's bound (v ∈ [0, B], so every φ
    and every marginal is on that scale).  float32 carries ~6e-8 relative error per operation; a prefix sum of
    ≤ n rows, the ρ layers (reductions of ≤ 257 terms) and a mean over M marginals reordered between MKL/oneDNN
    and cuBLAS accumulate to ~1e-6 · B at n = 500, so 1e-5 · B leaves a factor ~10 for reduction order while an
    indexing or masking bug (errors ~1e-2 · B and up) fails it.  The float32-CPU error against a float64-CPU run
    of the same permutations is reported beside it as the rounding scale itself.  TF32 is switched off."""
    from scp.core.permutations import padded_permutations

    rows = []
    net64 = _copy_net(net).double()
    for spec in configs:
        n, m, b, cv = spec["n"], spec["m"], spec["contexts"], spec["control_variate"]
        lengths = [n - 3 * i for i in range(b)]  # ragged: padding masks exercised too
        units, query, mask, extra = _synthetic_contexts(net, b, n, seed=7 + n)
        for i, length in enumerate(lengths):
            mask[i, length:] = False
        seeds = [100 + i for i in range(b)]
        perms = padded_permutations(mask.sum(1).tolist(), n, m, False, seeds)
        kw = dict(seed=seeds, permutations=perms, control_variate=cv)
        with torch.no_grad():
            cpu = deepsets_shapley(net, units, query, mask, extra, **kw).values
            ref = deepsets_shapley(
                net64, units.double(), query.double(), mask, None if extra is None else extra.double(), **kw
            ).values
            u, q, mk, e = _to(device, units, query, mask, extra)
            dev_net = _copy_net(net).to(device)
            dev = deepsets_shapley(dev_net, u, q, mk, e, **kw).values.cpu()
        bound = float(net.bound)
        diff = float((dev - cpu).abs().max())
        rows.append(
            {
                "n": n,
                "m": m,
                "contexts": b,
                "lengths": lengths,
                "control_variate": cv,
                "prefix": resolve_prefix("auto", n),
                "max_abs_diff_device_vs_cpu": diff,
                "max_abs_diff_cpu32_vs_cpu64": float((cpu.double() - ref).abs().max()),
                "max_abs_phi": float(cpu.abs().max()),
                "bound": bound,
                "atol": GPU_RTOL * bound,
                "passed": bool(diff <= GPU_RTOL * bound and torch.isfinite(dev).all()),
            }
        )
    return {
        "tolerance": f"max |φ_device − φ_cpu| ≤ {GPU_RTOL:g} · B (B = the network's bound), float32, TF32 off",
        "rows": rows,
        "passed": all(r["passed"] for r in rows),
    }


def _copy_net(net):
    import copy

    return copy.deepcopy(net).eval()


def _rest_of_rho_flops(net) -> float:
    """Multiply-adds ×2 of ρ after its first layer, per prefix (the Linear layers; norms and ReLU not counted)."""
    linears = [mod for mod in net.rho if isinstance(mod, torch.nn.Linear)][1:]
    return float(sum(2 * mod.in_features * mod.out_features for mod in linears))


def _fast_path_flops(net, n: int, m: int) -> float:
    """Counted arithmetic of one context's fast path: M·(n−1) interior prefixes through the rest of ρ plus
    the prefix sums (gemm: a 0/1 (M(n−1) × n)·(n × H) product; cumsum: one add per element)."""
    width = net.rho_first_layer()[0].shape[0]
    prefixes = m * (n - 1)
    prefix = 2.0 * prefixes * n * width if resolve_prefix("auto", n) == "gemm" else float(prefixes * width)
    return prefixes * _rest_of_rho_flops(net) + prefix


def _sync(device: str) -> Callable[[], None]:
    return torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)


def _capped(
    call: Callable[[], object], sync: Callable[[], None], cap_s: float, max_repeats: int, budget: _Budget
) -> list[float]:
    """One untimed warm-up, then timed repeats until ``max_repeats`` or ``cap_s`` (≥ 1 repeat unless the run's
    budget is spent)."""
    call()
    sync()
    times: list[float] = []
    while len(times) < max_repeats and (not times or sum(times) < cap_s) and budget.left() > 0:
        start = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - start)
    return times


def _device_batch(device: str, n: int, m: int) -> int:
    """Contexts per call: on CUDA enough for ~2^27 prefix-sum floats per call (the device is only busy with
    large kernels; ≤ 1.5 GiB live), on the CPU one context per call beyond n = 100 (a batch only adds memory)."""
    if device.startswith("cuda"):
        return int(max(1, min(256, (1 << 27) // (m * n * 257))))
    return 16 if n * m <= 100 * 50 else 1


def _chunk_for(device: str) -> int:
    return (1 << 27) if device.startswith("cuda") else (1 << 23)  # the CPU default (cache-sized chunks)


def _gpu_throughput(
    net, devices: dict[str, str], sizes, perms, cap_s: float, max_repeats: int, budget: _Budget, section_s: float
) -> list[dict]:
    """Contexts per second of :func:`deepsets_shapley` per (n, M), each device in turn on the same inputs."""
    from scp.core.permutations import padded_permutations

    section = _Budget(min(section_s, budget.left()))
    nets = {label: _copy_net(net).to(d) for label, d in devices.items()}
    rows = []
    for n in sizes:
        for m in perms:
            row = {
                "n": n,
                "m": m,
                "prefix": resolve_prefix("auto", n),
                "flops_per_context": _fast_path_flops(net, n, m),
            }
            for label, d in devices.items():
                b = _device_batch(d, n, m)
                if section.left() <= 0:
                    row[label] = {"skipped": "the section's time budget was spent"}
                    continue
                units, query, mask, extra = _to(d, *_synthetic_contexts(net, b, n, seed=n * 7919 + m))
                chunk = _chunk_for(d)
                seeds = [r for r in range(b)]
                sync = _sync(d)
                if d.startswith("cuda"):
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats()

                def call(label=label, units=units, query=query, mask=mask, extra=extra, chunk=chunk, seeds=seeds):
                    with torch.no_grad():
                        return deepsets_shapley(
                            nets[label], units, query, mask, extra, n_permutations=m, seed=seeds, chunk_elements=chunk
                        )

                try:
                    times = _capped(call, sync, cap_s, max_repeats, section)
                except torch.OutOfMemoryError as error:  # recorded, the run goes on
                    row[label] = {"contexts_per_call": b, "error": f"out of memory: {str(error)[:200]}"}
                    continue
                start = time.perf_counter()
                padded_permutations([n] * b, n, m, False, seeds)  # the host-side share of one call
                host = time.perf_counter() - start
                med = statistics.median(times) if times else float("nan")
                row[label] = {
                    "device": d,
                    "contexts_per_call": b,
                    "chunk_elements": chunk,
                    "seconds_per_call": spread(times) if times else None,
                    "contexts_per_second": b / med,
                    "coalition_values_per_second": b * budget_of(n, m) / med,
                    "flops_per_second": b * row["flops_per_context"] / med,
                    "host_permutation_seconds_per_call": host,
                    "peak_device_bytes": torch.cuda.max_memory_allocated() if d.startswith("cuda") else None,
                }
            if all("contexts_per_second" in row.get(label, {}) for label in devices):
                row["ratio"] = row["device"]["contexts_per_second"] / row["cpu"]["contexts_per_second"]
            rows.append(row)
            print(_throughput_line(row, devices), flush=True)
    return rows


def _throughput_line(row: dict, devices: dict[str, str]) -> str:
    parts = [f"n = {row['n']:4d}, M = {row['m']:4d}:"]
    for d in devices:
        r = row.get(d, {})
        parts.append(
            f"{d} ({devices[d]}) {r['contexts_per_second']:.3g} contexts/s ({r['contexts_per_call']} per call, "
            f"{r['seconds_per_call']['repeats']} repeats)"
            if "contexts_per_second" in r
            else f"{d} {r.get('error') or r.get('skipped')}"
        )
    if "ratio" in row:
        parts.append(f"ratio {row['ratio']:.3g}×")
    return " ".join(parts)


def _matmul_rate(device: str, shape: tuple[int, int, int], cap_s: float, budget: _Budget) -> dict:
    """Measured float32 (TF32 off) throughput of (rows × k)·(k × cols) on ``device``."""
    rows, k, cols = shape
    gen = torch.Generator().manual_seed(0)
    a, w = torch.randn(rows, k, generator=gen).to(device), torch.randn(k, cols, generator=gen).to(device)
    times = _capped(lambda: a @ w, _sync(device), cap_s, 10, budget)
    med = statistics.median(times)
    return {"shape": list(shape), "seconds": spread(times), "flops_per_second": 2.0 * rows * k * cols / med}


def _gpu_limits(net, devices: dict[str, str], dry: bool, budget: _Budget) -> dict:
    """The physical limit: measured float32 GEMM throughput on the fast path's dominant product — the rest of
    ρ's first matrix on a chunk of prefixes, (2^20 × 256)·(256 × 128) — and on a large square product."""
    linear = [mod for mod in net.rho if isinstance(mod, torch.nn.Linear)][1]
    rows = 1 << (12 if dry else 20)
    square = 256 if dry else 4096
    out = {}
    for label, d in devices.items():
        out[label] = {
            "device": d,
            "rho_layer": _matmul_rate(d, (rows, linear.in_features, linear.out_features), 1.0, budget),
            "square": _matmul_rate(d, (square, square, square), 1.0, budget),
        }
        if d.startswith("cuda"):
            x = torch.empty(1 << (20 if dry else 28), device=d)
            times = _capped(lambda: x.clone(), _sync(d), 1.0, 10, budget)
            out[label]["copy_bytes_per_second"] = 2 * x.numel() * 4 / statistics.median(times)  # read + write
            del x
    return out


def _gpu_training(devices: dict[str, str], dry: bool) -> dict:
    """One epoch of the shipped preset on HotpotQA (train split, validation and checkpoint writes included)
    on each device; in a dry run on the first 64 + 32 contexts only."""
    import tempfile

    from scp.data.embedders import CachedEmbedder, get_embedder
    from scp.models.config import SHIPPED_PRESET, config_from_preset
    from scp.training.loop import train
    from scp.training.runs import prepare

    config = config_from_preset(SHIPPED_PRESET, epochs=1)
    start = time.perf_counter()
    if dry:  # no cold MiniLM embedding of the whole split on a CPU: random vectors of 64 + 32 contexts
        from scp.data.features import contexts_from_examples
        from scp.training.runs import split_examples_for

        embedder = get_embedder("random")
        train_ex, val_ex = split_examples_for(config, None)
        train_ctx, val_ctx, ids = (
            contexts_from_examples(train_ex[:64], embedder, config.features, config.with_title),
            contexts_from_examples(val_ex[:32], embedder, config.features, config.with_title),
            None,
        )
    else:  # cold on a fresh machine: MiniLM embeds the split (on the GPU when sentence-transformers sees it)
        embedder = CachedEmbedder(get_embedder(config.embedder))
        train_ctx, val_ctx, ids = prepare(config, embedder)
    embed_seconds = time.perf_counter() - start
    out = {
        "preset": SHIPPED_PRESET,
        "embedder": embedder.id,
        "train_contexts": len(train_ctx),
        "val_contexts": len(val_ctx),
        "embed_seconds": embed_seconds,
    }
    for label, d in devices.items():
        with tempfile.TemporaryDirectory(prefix="scp-gpu-") as tmp:
            start = time.perf_counter()
            res = train(config, train_ctx, val_ctx, tmp, embedder.id, progress=False, data_ids=ids, device=d)
            _sync(d)()
            out[label] = {"device": d, "epoch_seconds": time.perf_counter() - start, "val_auc": res.best_val_auc}
        print(
            f"one training epoch ({SHIPPED_PRESET}, {len(train_ctx)} + {len(val_ctx)} contexts) on {d}: "
            f"{out[label]['epoch_seconds']:.2f} s, validation AUC {res.best_val_auc:.4f}",
            flush=True,
        )
    out["ratio"] = out["cpu"]["epoch_seconds"] / out["device"]["epoch_seconds"]
    return out


def _gpu_reader(devices: dict[str, str], dry: bool, cap_s: float, budget: _Budget) -> dict:
    """Prefill throughput of SmolLM2 (scp.llm.readers.LocalReader, float32): one forward pass of a batch of left-padded
    HotpotQA prompts (question + its context), tokens/s counting real (unpadded) prompt tokens."""
    from scp.llm.readers import LocalReader, _left_pad

    count = 2 if dry else 16
    examples_q, lists = hotpot_units(10 if dry else 40, count, with_title=False)
    out: dict = {"model": "smollm2", "prompts": count}
    for label, d in devices.items():
        start = time.perf_counter()
        lm = LocalReader(device=d, batch_size=count)
        load = time.perf_counter() - start
        encoded = [lm.prompt_ids(q, units) for q, units in zip(examples_q, lists)]
        ids, mask = _left_pad(encoded, lm.pad_token_id)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        ids, mask, positions = ids.to(d), mask.to(d), positions.to(d)
        keep = {"logits_to_keep": 1} if lm._keep_arg else {}

        def call():
            with torch.inference_mode():
                return lm.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False, **keep)

        times = _capped(call, _sync(d), cap_s, 5, budget)
        tokens = int(mask.sum())
        med = statistics.median(times)
        out[label] = {
            "device": d,
            "model_name": lm.model_name,
            "load_seconds": load,
            "batch": count,
            "tokens": tokens,
            "padded_tokens": int(mask.numel()),
            "seconds": spread(times),
            "tokens_per_second": tokens / med,
        }
        print(
            f"reader prefill on {d}: {tokens} tokens in {med:.3f} s = {tokens / med:.0f} tokens/s (load {load:.1f} s)",
            flush=True,
        )
        lm = None  # frees the model before the next device loads its own
    out["ratio"] = out["device"]["tokens_per_second"] / out["cpu"]["tokens_per_second"]
    return out


def gpu(quick: bool = True, out_dir: Path = RESULTS, dry_run: bool = False, budget_s: float | None = None) -> int:
    """The GPU check (module docstring): equality with the CPU, fast-path throughput, matrix-multiply limit,
    one training epoch and reader prefill, CPU and CUDA in the same run; ``results/bench/gpu.json``.

    Exit status: 0 all sections ran and the equality holds; 1 no CUDA device (and no ``dry_run``); 2 the
    equality failed; 3 a section could not run (its error is in the JSON).  ``dry_run``: the same script with
    the CPU standing in for CUDA at tiny sizes, written to ``out_dir/gpu_dry_run.json`` (never gpu.json)."""
    if not dry_run and not torch.cuda.is_available():
        print(_no_cuda_message(), file=sys.stderr)
        return 1
    if dry_run and Path(out_dir).resolve() == RESULTS.resolve():
        raise InputError(f"a dry run never writes to {RESULTS}: pass --out DIR")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    target = "cpu" if dry_run else "cuda"
    devices = {"cpu": "cpu", "device": target}  # JSON labels -> torch devices
    budget = _Budget(budget_s or (120.0 if dry_run else 285.0))
    sizes, perms = ((10, 41), (5, 20)) if dry_run else (GPU_SIZES, GPU_PERMUTATIONS)
    net, _ = shipped_model("cpu")
    env = environment(target, quick)
    env.update(
        {"cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() if not dry_run else None, "tf32": False}
    )
    if not dry_run:
        props = torch.cuda.get_device_properties(0)
        env.update(
            {"gpu": props.name, "gpu_memory_bytes": props.total_memory, "multiprocessors": props.multi_processor_count}
        )
    result: dict = {
        "dry_run": dry_run,
        "note": (
            "DRY RUN: the CPU stands in for CUDA at tiny sizes; no GPU numbers"
            if dry_run
            else "CPU and CUDA measured in the same run"
        ),
        "env": env,
        "devices": devices,
        "model": "shipped (models/scp-hotpotqa-best.safetensors), synthetic unit-norm inputs",
        "budget_seconds": budget.seconds,
        "errors": {},
        "section_seconds": {},
    }
    eq_configs = (
        [
            {"n": 10, "m": 6, "contexts": 2, "control_variate": None},
            {"n": 41, "m": 6, "contexts": 2, "control_variate": "position"},
        ]
        if dry_run
        else [
            {"n": 41, "m": 50, "contexts": 4, "control_variate": None},
            {"n": 100, "m": 50, "contexts": 4, "control_variate": "position"},
            {"n": 500, "m": 20, "contexts": 2, "control_variate": None},
        ]
    )
    sections = {  # name -> (call, seconds it is planned to take at most)
        "equality": (lambda: _gpu_equality(net, target, eq_configs), 20),
        "matmul": (lambda: _gpu_limits(net, devices, dry_run, budget), 15),
        "throughput": (
            lambda: _gpu_throughput(
                net,
                devices,
                sizes,
                perms,
                cap_s=0.2 if dry_run else 2.0,
                max_repeats=3 if dry_run else 5,
                budget=budget,
                section_s=30 if dry_run else 140,
            ),
            150,
        ),
        "training": (lambda: _gpu_training(devices, dry_run), 60),
        "reader": (lambda: _gpu_reader(devices, dry_run, 0.2 if dry_run else 2.0, budget), 40),
    }
    for name, (call, planned) in sections.items():
        if budget.left() <= 0:
            result["errors"][name] = "not run: the overall time budget was spent"
            continue
        print(f"\n== {name} (planned ≤ {planned} s; {budget.left():.0f} s of the budget left)", flush=True)
        start = time.perf_counter()
        try:
            result[name] = call()
        except Exception as error:  # recorded, never skipped silently
            result["errors"][name] = f"{type(error).__name__}: {error}"
            print(f"{name} FAILED: {result['errors'][name]}", file=sys.stderr, flush=True)
        result["section_seconds"][name] = time.perf_counter() - start
    result["total_seconds"] = time.perf_counter() - budget.start
    eq = result.get("equality")
    result["passed"] = bool(eq and eq["passed"])
    result["complete"] = not result["errors"]
    write_result(result, GPU_DRY_FILE if dry_run else GPU_FILE, out_dir)
    print("\n" + format_gpu(result))
    if not result["passed"]:
        print(
            "scp.bench gpu: EQUALITY FAILED: the fast path on the device differs from the CPU beyond "
            f"{GPU_RTOL:g} · B (see 'equality' in the JSON)",
            file=sys.stderr,
        )
        return 2
    if result["errors"]:
        print(f"scp.bench gpu: incomplete: {sorted(result['errors'])} could not run (see 'errors')", file=sys.stderr)
        return 3
    return 0


def _fmt(x, spec=".3g") -> str:
    return "—" if x is None else format(x, spec)


def format_gpu(result: dict) -> str:
    """The GPU section of BENCHMARKS.md from gpu.json."""
    env, cpu, dev = result["env"], "cpu", "device"
    name = env.get("gpu") or f"{result['devices']['device']} standing in for the GPU"

    lines = []
    if result.get("dry_run"):
        lines += ["**DRY RUN (the CPU stands in for CUDA; these are not GPU numbers).**", ""]
    lines.append(
        f"{name}"
        + (
            f" ({env['gpu_memory_bytes'] / 2**30:.0f} GiB, {env.get('multiprocessors')} SMs)"
            if env.get("gpu_memory_bytes")
            else ""
        )
        + f"; torch {env['torch']}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, TF32 off; CPU side: "
        f"{env['cpu']}, {env['threads']} torch threads; {env['date']}; whole run "
        f"{result.get('total_seconds', float('nan')):.0f} s (budget {result['budget_seconds']:.0f} s). "
        f"{result['model']}. Ratios are device/CPU, measured in the same run."
    )
    eq = result.get("equality")
    if eq:
        lines += [
            "",
            f"Equality ({eq['tolerance']}): **{'passed' if eq['passed'] else 'FAILED'}**",
            "",
            "| n | M | contexts | control variate | prefix | max abs diff device vs CPU | tolerance | "
            "float32 CPU vs float64 CPU |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in eq["rows"]:
            lines.append(
                f"| {r['n']} | {r['m']} | {r['contexts']} | {r['control_variate'] or '—'} | {r['prefix']} "
                f"| {r['max_abs_diff_device_vs_cpu']:.1e} | {r['atol']:.1e} | "
                f"{r['max_abs_diff_cpu32_vs_cpu64']:.1e} |"
            )
    limits = result.get("matmul", {})
    peak = limits.get(dev, {}).get("rho_layer", {}).get("flops_per_second")
    if limits:
        lines += [
            "",
            "Physical limit, measured (float32 GEMM, median of timed products after a warm-up):",
            "",
            "| device | ρ-layer shape | TFLOP/s | square shape | TFLOP/s | copy TB/s (read + write) |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for d in (cpu, dev):
            lim = limits.get(d)
            if lim:
                copy = lim.get("copy_bytes_per_second")
                lines.append(
                    f"| {d} | {'×'.join(map(str, lim['rho_layer']['shape']))} | "
                    f"{lim['rho_layer']['flops_per_second'] / 1e12:.3g} | "
                    f"{'×'.join(map(str, lim['square']['shape']))} | "
                    f"{lim['square']['flops_per_second'] / 1e12:.3g} | {_fmt(copy and copy / 1e12)} |"
                )
    rows = result.get("throughput")
    if rows:
        lines += [
            "",
            f"Batched fast path (`deepsets_shapley`), contexts per second (contexts per call, timed "
            f"repeats); fraction = counted FLOP/s over the measured ρ-layer GEMM rate on {dev}:",
            "",
            f"| n | M | prefix | {cpu} contexts/s | {dev} contexts/s | {dev}/{cpu} | peak {dev} memory [GiB] | "
            f"fraction of {dev} GEMM rate | host permutation share of a {dev} call |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in rows:
            cells = []
            for d in (cpu, dev):
                x = r.get(d, {})
                cells.append(
                    f"{x['contexts_per_second']:.3g} ({x['contexts_per_call']}, {x['seconds_per_call']['repeats']})"
                    if "contexts_per_second" in x
                    else (x.get("error") or x.get("skipped") or "—")
                )
            x = r.get(dev, {})
            mem = x.get("peak_device_bytes")
            frac = x["flops_per_second"] / peak if peak and "flops_per_second" in x else None
            host = (
                x["host_permutation_seconds_per_call"] / x["seconds_per_call"]["median"]
                if "contexts_per_second" in x
                else None
            )
            lines.append(
                f"| {r['n']} | {r['m']} | {r['prefix']} | {cells[0]} | {cells[1]} | {_fmt(r.get('ratio'))} | "
                f"{_fmt(mem and mem / 2**30)} | {_fmt(frac, '.1%') if frac is not None else '—'} | "
                f"{_fmt(host, '.0%') if host is not None else '—'} |"
            )
    tr = result.get("training")
    if tr:
        lines += [
            "",
            f"One training epoch, {tr['preset']} preset, HotpotQA ({tr['train_contexts']} train + "
            f"{tr['val_contexts']} validation contexts, validation and checkpoint writes included): "
            + "; ".join(
                f"{d} {tr[d]['epoch_seconds']:.2f} s (AUC {tr[d]['val_auc']:.4f})" for d in (cpu, dev) if d in tr
            )
            + (f"; {dev} is {tr['ratio']:.3g}× faster" if "ratio" in tr else "")
            + ".",
        ]
    rd = result.get("reader")
    if rd:
        lines += [
            "",
            f"Reader prefill ({rd.get(dev, rd.get(cpu, {})).get('model_name', rd['model'])}, float32, "
            f"{rd['prompts']} HotpotQA prompts in one batch): "
            + "; ".join(
                f"{d} {rd[d]['tokens_per_second']:.0f} tokens/s ({rd[d]['tokens']} tokens)"
                for d in (cpu, dev)
                if d in rd
            )
            + (f"; ratio {rd['ratio']:.3g}×" if "ratio" in rd else "")
            + ".",
        ]
    for section, error in result.get("errors", {}).items():
        lines += ["", f"_{section}: not measured: {error}_"]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------- report

SECTIONS = {  # marker in BENCHMARKS.md -> (json file, formatter)
    "estimator": ("estimator.json", format_estimator),
    "accuracy": ("accuracy.json", format_accuracy),
    "prefix": ("prefix.json", format_prefix),
    "long": ("long.json", format_long),
    "adaptive": ("adaptive.json", format_adaptive),
}


def environment_table(results: dict[str, dict]) -> str:
    lines = [
        "| benchmark | CPU | logical cores | affinity | torch threads | torch | shapiq | run | date | "
        "load average (1, 5, 15 min) at the end |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, res in results.items():
        e = res.get("env") or res.get("meta") or {}  # scp.bench.e2e names some fields its own way
        cpu = e.get("cpu", "—")
        cores = e.get("logical_cores", e.get("cpu_count", "?"))
        affinity = e.get("affinity", f"{e['cpus_usable']} usable" if "cpus_usable" in e else "?")
        threads = e.get("threads", e.get("torch_threads", "?"))
        loadavg = e.get("loadavg", e.get("loadavg_end"))
        load = ", ".join(f"{x:.2f}" for x in loadavg) if loadavg else "?"
        lines.append(
            f"| {name} | {cpu} | {cores} | {affinity} | {threads} | {e.get('torch', '?')} | "
            f"{e.get('shapiq', '—')} | {'quick' if e.get('quick') else 'full'} | {e.get('date', '?')} | "
            f"{load} |"
        )
    return "\n".join(lines)


def report(out_dir: Path = RESULTS, doc: Path = DOC) -> None:
    """Replace each ``<!-- bench:NAME -->…<!-- /bench:NAME -->`` block of BENCHMARKS.md with the table rendered
    from results/bench/NAME.json (or a note that it has not been run)."""
    text = Path(doc).read_text()
    loaded = {}
    for name, (file, fmt) in SECTIONS.items():
        path = Path(out_dir) / file
        if path.is_file():
            loaded[name] = json.loads(path.read_text())
            body = fmt(loaded[name])
        else:
            body = f"_not run yet: `python -m scp.bench {name}` writes {path}_"
        text = _replace_block(text, name, body)
    e2e = Path(out_dir) / "endtoend.json"
    if e2e.is_file():
        from scp.bench.e2e import format_table

        loaded["endtoend"] = json.loads(e2e.read_text())
        text = _replace_block(text, "endtoend", format_table(loaded["endtoend"]))
    gpu_json = Path(out_dir) / GPU_FILE
    if gpu_json.is_file():
        body = format_gpu(json.loads(gpu_json.read_text()))
    else:
        body = (
            f"_The GPU check has not run on a GPU yet: on a machine with an NVIDIA GPU run `{GPU_COMMAND}`; it "
            f"writes {gpu_json}._"
        )
    text = _replace_block(text, "gpu", body)
    text = _replace_block(text, "environment", environment_table(loaded))
    Path(doc).write_text(text)
    print(f"{doc} regenerated from {out_dir}/*.json")


def _replace_block(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    if begin not in text or end not in text:
        raise InputError(f"BENCHMARKS.md has no {begin} … {end} block")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body.strip()}\n{end}{tail}"


# --------------------------------------------------------------------------------------------------- main


def endtoend(argv: list[str]) -> int:
    try:
        from scp.bench import e2e as bench_e2e
    except ImportError as error:
        print(f"scp.bench endtoend: scp.bench.e2e is not available ({error})", file=sys.stderr)
        return 2
    return bench_e2e.main(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["endtoend"]:
        return endtoend(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m scp.bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "which",
        choices=[
            "estimator",
            "accuracy",
            "prefix",
            "long",
            "adaptive",
            "convexity",
            "endtoend",
            "gpu",
            "all",
            "report",
            "long-worker",
        ],
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats, contexts and sizes (a smoke run)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--m", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="gpu: the CPU stands in for CUDA at tiny sizes (tests the plumbing; never gpu.json)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="gpu: the folder the JSON is written to (default results/bench; a dry run: a new temporary folder)",
    )
    args = parser.parse_args(argv)
    if args.which != "gpu" and (args.dry_run or args.out):
        parser.error("--dry-run and --out belong to gpu")
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be ≥ 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    if args.which == "long-worker":
        print(json.dumps(long_worker(args.n, args.m, args.repeats)))
        return 0
    if args.which == "gpu":
        if args.dry_run:
            import tempfile

            out = args.out or Path(tempfile.mkdtemp(prefix="scp-gpu-dry-"))
        else:
            out = args.out or RESULTS
        return gpu(out_dir=out, dry_run=args.dry_run)
    if args.which == "all":
        estimator(quick=args.quick)
        accuracy(quick=args.quick)
        prefix(quick=args.quick)
        long_contexts(quick=args.quick, threads=args.threads)
        adaptive(quick=args.quick)
        threads = ["--threads", str(args.threads)] if args.threads else []
        code = endtoend((["--quick"] if args.quick else []) + threads)
        report()
        return code
    {
        "estimator": lambda: estimator(quick=args.quick),
        "accuracy": lambda: accuracy(quick=args.quick),
        "prefix": lambda: prefix(quick=args.quick),
        "adaptive": lambda: adaptive(quick=args.quick),
        "long": lambda: long_contexts(quick=args.quick, threads=args.threads),
        "convexity": lambda: convexity(quick=args.quick),
        "report": report,
    }[args.which]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
