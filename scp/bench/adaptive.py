"""``python -m scp.bench adaptive``: the certified adaptive budget vs fixed M = 50 on the HotpotQA test split
(AUC, M used, time)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from scp.bench.common import RESULTS, environment, shipped_model, spread, timed_rounds, write_result
from scp.core.fast_path import deepsets_shapley

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
