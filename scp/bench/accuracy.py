"""``python -m scp.bench accuracy``: accuracy per second — RMSE against exact values or a high-M reference vs
wall time on the shipped network at n ∈ {10, 41, 100, 500} and the paper's trained 3.03M network at n = 41, and the
ratio of time-to-RMSE between our best estimator and the best peer (figure + JSON)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np

from scp.bench.common import (
    FIGURES,
    RESULTS,
    environment,
    hotpot_contexts,
    make_game,
    paper_model,
    reference,
    shipped_model,
    spread,
    timed_rounds,
    write_result,
)
from scp.bench.methods import EXACT, OURS, accuracy_row, budget_of, method_calls
from scp.bench.peers import peer_methods, shapiq_methods

SETUPS: dict[str, list[int]] = {
    "shipped network, n = 10": [5, 10, 20, 50, 100],
    "shipped network, n = 41": [10, 20, 50, 100, 200, 500],
    "paper network (trained), n = 41": [10, 20, 50, 100, 200, 500],
    "shipped network, n = 100": [10, 20, 50, 100, 200, 500],
    "shipped network, n = 500": [5, 10, 20, 50, 100],
}
"""Curve label -> the permutation counts M measured (a budget at or above 2^n is skipped: enumeration is exact)."""
QUICK_SETUPS = {"shipped network, n = 10": [20, 50, 100], "shipped network, n = 41": [20, 50, 200]}
TARGETS = {"paper network (trained), n = 41": 2.0, "shipped network, n = 41": 3.0}
"""Issue 28's targets: at equal RMSE our best estimator this many times faster than the best peer."""


def setup_model(label: str):
    """(model, config) a curve label names: the shipped checkpoint or the paper's network (:mod:`scp.bench.common`)."""
    if label.startswith("shipped"):
        return shipped_model()
    return paper_model(trained="(trained)" in label)


def units_of(label: str) -> int:
    """n of a curve label (``"… n = 41"``; results written before labels named the network are keyed ``"41"``)."""
    return int(label.rsplit("= ", 1)[-1])


def accuracy(quick: bool = False, out_dir: Path = RESULTS, figure_dir: Path = FIGURES) -> dict:
    """RMSE vs wall time of our estimators and the peers (:mod:`scp.bench.peers`) on every curve of
    :data:`SETUPS` (methodology: :mod:`scp.bench`)."""
    setups = QUICK_SETUPS if quick else SETUPS
    n_contexts, repeats, m_ref, cap = (1, 3, 4000, 1.0) if quick else (3, 10, 40000, 20.0)
    names = list(OURS) + list(shapiq_methods()) + list(peer_methods())
    curves: dict[str, dict[str, list[dict]]] = {}
    refs_se, failures = {}, {}
    for label, grid in setups.items():
        n = units_of(label)
        model, config = setup_model(label)
        games = [make_game(model, c) for c in hotpot_contexts(config, n, n_contexts)]
        refs, se = zip(*[reference(g, m_ref) for g in games])
        refs_se[label] = float(np.mean(se))
        curves[label] = {name: [] for name in names}
        alive = list(names)
        for m in grid:
            if budget_of(n, m) >= 2**n:  # at 2^n evaluations exact enumeration is the answer
                continue
            names_here = alive + ([EXACT] if n <= 16 and not curves[label].get(EXACT) else [])
            failed: dict[str, str] = {}
            times, outputs = timed_rounds(method_calls(games, m, names_here), repeats, failures=failed)
            for name, message in failed.items():  # recorded; tried again at the next (larger) budget
                failures.setdefault(label, {})[f"{name}, M = {m}"] = message
            if EXACT in names_here:
                curves[label][EXACT] = [
                    {
                        "m": None,
                        "budget": 2**n,
                        "seconds": spread(times[EXACT]),
                        **accuracy_row(outputs[EXACT], list(refs), n),
                    }
                ]
            for name in [k for k in alive if k in times]:  # (exact is measured once: it does not depend on M)
                t = spread(times[name])
                curves[label][name].append(
                    {"m": m, "budget": budget_of(n, m), "seconds": t, **accuracy_row(outputs[name], list(refs), n)}
                )
                if t["median"] > cap:  # larger budgets of this method would only cost more time
                    alive.remove(name)
            print(f"{label}, M = {m}: done", flush=True)
    result = {
        "env": environment("cpu", quick),
        "models": {
            "shipped network": "models/scp-hotpotqa-best.safetensors",
            "paper network (trained)": "the paper's 3.03M network, notebook 01's recipe (scp.bench.common)",
        },
        "contexts_per_n": n_contexts,
        "repeats": repeats,
        "m_ref": m_ref,
        "reference_rms_se": refs_se,
        "time_cap_s": cap,
        "curves": curves,
        "failed": failures,
        "ratios": {label: time_to_rmse_ratios(c) for label, c in curves.items()},
    }
    result["figure"] = str(Path(figure_dir) / "accuracy_per_second.png")
    write_result(result, "accuracy.json", out_dir)
    plot_accuracy(result, figure_dir)
    print(format_accuracy(result))
    return result


def _label(key: str) -> str:
    """A curve's title: its label, or ``n = …`` for results keyed by n alone (the shipped network)."""
    return f"n = {key}" if key.isdigit() else key


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
    """At every RMSE some peer reaches at one of its budgets: the fastest peer's time to reach it over our fastest
    estimator's time (None where either family never reaches it)."""
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
                "peer": best_theirs,
                "peer_seconds": t_theirs[best_theirs],
                "ratio": t_theirs[best_theirs] / t_ours[best_ours],
            }
        )
    return rows


OUR_COLOURS = ("tab:blue", "tab:red", "tab:green", "tab:orange")
PEER_COLOURS = (
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
    "darkviolet",
    "teal",
    "crimson",
    "yellowgreen",
    "slategray",
)


def plot_accuracy(result: dict, figure_dir: Path = FIGURES) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = result["curves"]
    cols = min(3, len(curves))
    rows = math.ceil(len(curves) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.2 * rows + 1.0), squeeze=False)
    for ax in axes.flat[len(curves) :]:
        ax.set_visible(False)
    styles = {}
    for ax, (key, methods) in zip(axes.flat, curves.items()):
        for name, pts in methods.items():
            if not pts:
                continue
            if name == EXACT:  # RMSE 0: a vertical line at its time
                ax.axvline(pts[0]["seconds"]["median"], color="k", ls=":", lw=1.5, label=name)
                continue
            ours = name.startswith("ours")
            if name not in styles:  # our estimators: solid, saturated; the peers': dashed, their own hues
                palette = OUR_COLOURS if ours else PEER_COLOURS
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
        ax.set_title(_label(key), fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = [], []
    for ax in axes.flat:  # every method once, whichever panel it appears in
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, frameon=False)
    env = result["env"]
    fig.suptitle(
        f"Shapley accuracy per second on HotpotQA test contexts ({env['cpu']}, torch threads = "
        f"{env['threads']}{', quick run' if env['quick'] else ''})",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0.8 / (4.2 * rows + 1.0) + 0.06, 1, 0.96))
    figure_dir = Path(figure_dir)
    figure_dir.mkdir(parents=True, exist_ok=True)
    path = figure_dir / "accuracy_per_second.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def headline(result: dict, key: str) -> dict | None:
    """On curve ``key``: the ratio at the smallest RMSE both families reach (the hardest common target), and the
    smallest and median ratio over all common targets."""
    rows = result["ratios"].get(key) or []
    if not rows:
        return None
    hardest = min(rows, key=lambda r: r["rmse"])
    return {
        "at_hardest": hardest,
        "min_ratio": min(r["ratio"] for r in rows),
        "median_ratio": statistics.median(r["ratio"] for r in rows),
        "targets": len(rows),
    }


def best_peer(row: dict) -> tuple[str, float]:
    """(name, seconds) of a ratio row's fastest peer (an accuracy.json written before shap's explainers and the
    papers' estimators joined the shapiq approximators calls it "shapiq")."""
    key = "peer" if "peer" in row else "shapiq"
    return row[key], row[f"{key}_seconds"]


def _budget_cell(point: dict) -> str:
    """The budget, and the game rows a peer that counts them evaluated when that is fewer (mean over repeats)."""
    rows = point.get("evaluations")
    if rows is None or rows["mean"] == point["budget"]:
        return str(point["budget"])
    return f"{point['budget']} ({rows['mean']:.0f} evaluated)"


def format_accuracy(result: dict) -> str:
    lines = []
    for key, methods in result["curves"].items():
        lines += [
            f"{_label(key)} (reference RMS s.e. {result['reference_rms_se'][key]:.1e})",
            "",
            "| method | M | budget | ms per context: median [min, max] | RMSE | Top-5 overlap |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for name, pts in methods.items():
            for p in pts:
                s = p["seconds"]
                lines.append(
                    f"| {name} | {p['m']} | {_budget_cell(p)} | {s['median'] * 1e3:.2f} "
                    f"[{s['min'] * 1e3:.2f}, {s['max'] * 1e3:.2f}] | {p['rmse']:.2e} | "
                    f"{p['topk_overlap']:.2f} |"
                )
        lines.append("")
    lines += [
        "Time to reach an RMSE (best of each family; targets = RMSEs the peers reach):",
        "",
        "| curve | target RMSE | our best | its time [ms] | best peer | its time [ms] | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key, rows in result["ratios"].items():
        shown = sorted(rows, key=lambda r: r["rmse"])
        if len(shown) > 8:  # eight targets spread over the range, the hardest included
            shown = [shown[i] for i in sorted({round(x) for x in np.linspace(0, len(shown) - 1, 8)})]
        for r in shown:
            peer, seconds = best_peer(r)
            lines.append(
                f"| {_label(key)} | {r['rmse']:.2e} | {r['ours']} | {r['ours_seconds'] * 1e3:.2f} | {peer} | "
                f"{seconds * 1e3:.2f} | {r['ratio']:.1f}× |"
            )
    for key, failed in result.get("failed", {}).items():
        calls = "; ".join(f"{name}: {message}" for name, message in failed.items())
        lines += ["", f"{_label(key)}, failed calls: {calls}"]
    for key in result["ratios"]:
        h = headline(result, key)
        if not h:
            continue
        r = h["at_hardest"]
        peer, seconds = best_peer(r)
        target = TARGETS.get(key)
        verdict = ""
        if target is not None:
            shortfall = target / r["ratio"]
            verdict = f"; target ≥ {target:g}×: " + ("met" if shortfall <= 1 else f"missed by {shortfall:.2f}×")
        lines += [
            "",
            f"**{_label(key)}: at RMSE {r['rmse']:.2e} (the smallest both reach) {r['ours']} needs "
            f"{r['ours_seconds'] * 1e3:.2f} ms, {peer} {seconds * 1e3:.2f} ms: {r['ratio']:.1f}× faster; over all "
            f"{h['targets']} common targets the ratio is ≥ {h['min_ratio']:.1f}× (median {h['median_ratio']:.1f}×)"
            f"{verdict}.**",
        ]
    return "\n".join(lines)
