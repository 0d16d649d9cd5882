"""``python -m scp.bench estimator``: per-context latency and accuracy of every estimator at n = 41 units,
M = 50 permutations (budget M·(n − 1) + 2 = 2,002 game evaluations) on the shipped model: our fast path (batched
and one context per call, plain / antithetic / position control variate), the generic path, a naive Algorithm 1,
and every peer of :mod:`scp.bench.peers` on the same game."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from scp.bench.common import (
    RESULTS,
    environment,
    hotpot_contexts,
    make_game,
    reference,
    shipped_model,
    spread,
    timed_rounds,
    write_result,
)
from scp.bench.methods import OURS, accuracy_row, budget_of, method_calls
from scp.bench.peers import peer_methods, shapiq_methods
from scp.core.fast_path import deepsets_shapley


def estimator(quick: bool = False, device: str = "cpu", out_dir: Path = RESULTS) -> dict:
    """Latency and accuracy of every estimator at n = 41, M = 50 on real HotpotQA contexts (module docstring;
    methodology: :mod:`scp.bench`)."""
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
    names += list(shapiq_methods()) + list(peer_methods())
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
    counted = [
        f"{row['method']} {row['evaluations']['mean']:.0f} [{row['evaluations']['min']}, {row['evaluations']['max']}]"
        for row in result["rows"]
        if "evaluations" in row and row["evaluations"]["mean"] != result["budget"]
    ]
    if counted:
        lines += ["", "Game rows evaluated per estimate (counted), where fewer than the budget: " + "; ".join(counted)]
    lines += [f"\n{name} failed: {message}" for name, message in result.get("failed", {}).items()]
    return "\n".join(lines)
