"""``python -m scp.bench training``: a training step with the batch's contexts grouped by exact length (no padding)
against the padded batch, and what grouping does to the trained model's validation AUC (seeds against seeds).

Step times: the same random batches of real training contexts, one model per mode from one initialisation, the two
modes alternating step by step (the order rotated each step), one torch thread; medians of the steps.  AUC: the
config trained to the end under each mode for each seed (:func:`scp.training.loop.train`); grouping
changes only dropout's masks and float rounding, so its effect is judged against the spread over seeds.
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path
from unittest import mock

import numpy as np
import torch

from scp.bench.common import RESULTS, environment, spread, write_result
from scp.data.embedders import CachedEmbedder, get_embedder
from scp.data.features import collate
from scp.models.config import TrainConfig
from scp.models.factory import build_model
from scp.training import loop
from scp.training.loop import differentiable_scores, has_pairs, pairwise_margin_loss, train
from scp.training.runs import prepare

NETS = {
    "shipped size (H = 256)": TrainConfig(datasets=("hotpotqa",), hidden=256, latent=128, epochs=6),
    "paper (3.03M, H = 1024)": TrainConfig(datasets=("hotpotqa",), hidden=1024, latent=512, epochs=5),
}
"""The networks timed: the suite's 256-wide Deep Sets (notebooks 02, 07, 13) and the paper's network (13)."""


def _padding(batches: list[list]) -> float:
    """Share of the padded batches' unit slots that are padding."""
    slots = sum(len(b) * max(c.n_units for c in b) for b in batches)
    return 1 - sum(c.n_units for b in batches for c in b) / slots


def step_times(config: TrainConfig, contexts: list, n_steps: int) -> dict:
    """Median seconds of one optimiser step, padded and grouped, on the first ``n_steps`` batches of an epoch."""
    order = np.random.default_rng([config.seed, 0]).permutation(len(contexts))
    batches = [
        [contexts[i] for i in order[s * config.batch_size : (s + 1) * config.batch_size]] for s in range(n_steps)
    ]
    runs = {}
    for mode in ("padded", "grouped"):
        torch.manual_seed(config.seed)
        model = build_model(config, contexts[0].units.shape[1])
        runs[mode] = (model, torch.optim.AdamW(model.parameters(), lr=config.lr), [])
    for step, chunk in enumerate(batches):
        batch = collate(chunk)
        for mode in ("padded", "grouped")[:: 1 if step % 2 == 0 else -1]:
            model, opt, times = runs[mode]
            t0 = time.perf_counter()
            scores = differentiable_scores(
                model, batch, config.n_permutations, config.antithetic, step, by_length=mode == "grouped"
            )
            loss = pairwise_margin_loss(scores, batch.labels, batch.mask, config.margin)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
    out = {mode: spread(runs[mode][2]) for mode in runs}
    out["padded_over_grouped"] = out["padded"]["median"] / out["grouped"]["median"]
    out["padding_share"] = _padding(batches)
    return out


def seed_aucs(config: TrainConfig, train_ctx: list, val_ctx: list, seeds: list[int], embedder_id: str) -> list[dict]:
    """Best validation AUC and training seconds of ``config`` per seed, trained padded and grouped."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="scp-bench-training-") as tmp:
        for seed in seeds:
            cfg = dataclasses.replace(config, seed=seed)
            for mode in ("padded", "grouped"):
                # the training loop always groups; the padded run swaps in its padded scores for this call only
                scores = partial(differentiable_scores, by_length=mode == "grouped")
                with mock.patch.object(loop, "differentiable_scores", scores):
                    result = train(cfg, train_ctx, val_ctx, Path(tmp) / f"{mode}-{seed}", embedder_id, progress=False)
                rows.append({"seed": seed, "mode": mode, "val_auc": result.best_val_auc, "seconds": result.seconds})
                print(f"seed {seed}, {mode}: val AUC {result.best_val_auc:.4f} in {result.seconds:.0f} s", flush=True)
    return rows


def training(quick: bool = False, out_dir: Path = RESULTS) -> dict:
    """Step times of both networks and (unless ``quick``) the shipped-size network's validation AUC over three
    seeds, padded against grouped, on HotpotQA's training split; one torch thread."""
    torch.set_num_threads(1)
    limit = {"max_train_examples": 64, "max_val_examples": 16, "epochs": 1} if quick else {}
    embedder = CachedEmbedder(get_embedder("minilm"))
    nets, steps = {}, 4 if quick else 30
    data = None
    for label, base in NETS.items():
        config = dataclasses.replace(base, **limit)
        if data is None:
            train_ctx, val_ctx, _ = prepare(config, embedder)
            data = [c for c in train_ctx if has_pairs(c)], val_ctx
        nets[label] = step_times(config, data[0], min(steps, len(data[0]) // config.batch_size))
        print(
            f"{label}: step {nets[label]['padded']['median']:.3f} s padded, {nets[label]['grouped']['median']:.3f} s "
            f"grouped ({nets[label]['padded_over_grouped']:.2f}×; {nets[label]['padding_share']:.0%} padding)",
            flush=True,
        )
    shipped = dataclasses.replace(NETS["shipped size (H = 256)"], **limit)
    seeds = [0] if quick else [0, 1, 2]
    aucs = seed_aucs(shipped, data[0], data[1], seeds, embedder.id)
    result = {
        "env": environment("cpu", quick),
        "dataset": "hotpotqa",
        "n_train": len(data[0]),
        "n_val": len(data[1]),
        "steps": nets,
        "auc_config": dataclasses.asdict(shipped),
        "aucs": aucs,
        "summary": auc_summary(aucs),
    }
    write_result(result, "training.json", out_dir)
    print(format_training(result))
    return result


def auc_summary(rows: list[dict]) -> dict:
    """Per mode: mean, seed standard deviation and mean seconds; and the grouped − padded mean difference against the
    padded seeds' standard deviation."""
    out = {}
    for mode in ("padded", "grouped"):
        aucs = [r["val_auc"] for r in rows if r["mode"] == mode]
        out[mode] = {
            "mean": statistics.fmean(aucs),
            "sd": statistics.stdev(aucs) if len(aucs) > 1 else None,
            "seconds": statistics.fmean(r["seconds"] for r in rows if r["mode"] == mode),
        }
    out["difference"] = out["grouped"]["mean"] - out["padded"]["mean"]
    return out


def format_training(result: dict) -> str:
    lines = [
        f"HotpotQA training split ({result['n_train']} contexts with both kinds of unit), batches of 16, one thread",
        "",
        "| network | padded s / step: median [min, max] | grouped s / step | padded / grouped | padding share |",
        "| --- | --- | --- | --- | --- |",
    ]
    for label, r in result["steps"].items():
        p, g = r["padded"], r["grouped"]
        lines.append(
            f"| {label} | {p['median']:.3f} [{p['min']:.3f}, {p['max']:.3f}] | {g['median']:.3f} [{g['min']:.3f}, "
            f"{g['max']:.3f}] | {r['padded_over_grouped']:.2f} | {r['padding_share']:.0%} |"
        )
    s = result["summary"]
    per_seed = {
        m: ", ".join(f"{r['val_auc']:.3f}" for r in result["aucs"] if r["mode"] == m) for m in s if m != "difference"
    }
    sd = s["padded"]["sd"]
    lines += [
        "",
        f"Validation AUC of the shipped-size network by seed: padded {per_seed['padded']}, grouped "
        f"{per_seed['grouped']}; grouped − padded mean {s['difference']:+.4f}"
        + (f" (padded seeds' sd {sd:.4f})" if sd is not None else "")
        + f"; training seconds {s['padded']['seconds']:.0f} padded, {s['grouped']['seconds']:.0f} grouped.",
    ]
    return "\n".join(lines)
