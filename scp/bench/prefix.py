"""``python -m scp.bench prefix``: the fast path's prefix sums as a 0/1-matrix product (GEMM) vs gather + blocked
cumulative sum, by n."""

from __future__ import annotations

import statistics
from pathlib import Path

import torch

from scp.bench.common import RESULTS, environment, spread, timed_rounds, write_result
from scp.core.fast_path import deepsets_shapley
from scp.models.value_net import DeepSetsValue


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
