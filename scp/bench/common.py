"""What every benchmark section shares: the timing plumbing (a warm-up, then repeats in rotated order; median,
min and max; the environment a number depends on; atomic JSON results) and the data (the shipped model, real
HotpotQA contexts, the ψ-caching game every estimator plays, and reference values)."""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_info

from scp.core.enumeration import exact
from scp.core.monte_carlo import monte_carlo
from scp.models.game import ValueNetGame
from scp.paths import SHIPPED_MODEL

CHECKPOINT = SHIPPED_MODEL
RESULTS = Path("results/bench")
FIGURES = Path("figures/bench")
DOC = Path("BENCHMARKS.md")
TOP_K = 5
REF_SEED = 12345


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
        "thread_pools": {Path(pool["filepath"]).name: pool["num_threads"] for pool in threadpool_info()},  # BLAS, OMP
        "python": platform.python_version(),
        "device": device,
        "quick": quick,
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "loadavg": list(os.getloadavg()),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    for package in ("shapiq", "shap"):  # the peers' libraries
        try:
            env[package] = version(package)
        except PackageNotFoundError:
            env[package] = None
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


PAPER_RECIPE = dict(unit_repr="title", epochs=5, n_permutations=20, datasets=("hotpotqa",), seed=0)
"""Notebook 01's recipe for the paper's 3.03M network (its section 2): 5 epochs, M = 20, "Title: sentence" units."""


def paper_model(trained: bool, device: str = "cpu"):
    """(model, config) of the paper's 3.03M network in eval mode: at random init (seed 0), or trained with
    :data:`PAPER_RECIPE` into ``bench-models/`` beside the embedding cache (``$SCP_CACHE_DIR``), reused from there
    when it is there (a miss trains it: about 10 minutes on one thread)."""
    from scp.data.embedders import default_cache_dir, get_embedder
    from scp.models.config import config_from_preset
    from scp.models.factory import build_model, load_checkpoint
    from scp.training.runs import train_or_load

    config = config_from_preset("paper", **PAPER_RECIPE)
    if trained:
        model, config, _ = load_checkpoint(train_or_load(config, default_cache_dir() / "bench-models"))
    else:
        torch.manual_seed(0)
        model = build_model(config, get_embedder(config.embedder).dim)
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
