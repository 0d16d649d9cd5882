"""``python -m scp.bench long``: latency, throughput and peak memory (ru_maxrss of a fresh process per
configuration) for n ∈ {10, 41, 100, 500, 2000} and M ∈ {50, 400, 1000} on the paper's 3.03M network."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

from scp.bench.common import RESULTS, environment, hotpot_units, spread, write_result
from scp.bench.methods import budget_of
from scp.core.fast_path import deepsets_shapley, resolve_prefix
from scp.models.value_net import DeepSetsValue

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
