"""``python -m scp.bench gpu``: the GPU check, CPU and CUDA in one run within ~5 minutes — the fast path on CUDA
equal to the CPU on fixed seeds and permutations, its contexts/s at n ∈ {41, 100, 500, 2000} × M ∈ {50, 1000},
peak device memory, the measured GEMM rate it is compared with, one training epoch and SmolLM2 prefill tokens/s;
writes results/bench/gpu.json (exits 1 on a machine without a CUDA device; ``--dry-run``: the CPU stands in, tiny
sizes, written to ``--out DIR``)."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from scp.bench.common import RESULTS, environment, hotpot_units, shipped_model, spread, write_result
from scp.bench.methods import budget_of
from scp.core.fast_path import deepsets_shapley, resolve_prefix
from scp.errors import InputError

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
