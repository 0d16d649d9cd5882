"""Training value networks with a pairwise margin loss on Monte-Carlo Shapley values.

L = mean over contexts of mean over (positive i, negative j) of max(0, ε − (φ_i − φ_j)), with φ from the
differentiable Deep Sets fast path (M permutations, fresh ones every step; the contexts of each exact length
together, without padding) inside the forward pass; optionally
plus λ·mean_S (v(S) − B·t(S))² over sampled coalitions S, with t a game with a meaning
(:mod:`scp.data.coalition_targets`: coverage of supporting facts, complementarity of a bridge's two paragraphs).
AdamW, cosine schedule with linear warm-up, validation AUC every epoch, best checkpoint kept, exact resume.
The pointwise control scores each unit alone with an MLP on the same inputs and the same loss on its scores.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from scp.core.fast_path import deepsets_shapley
from scp.core.metrics import aggregate, pairwise_auc
from scp.data.coalition_targets import batch_targets
from scp.data.features import Context, collate
from scp.devices import resolve_device
from scp.errors import InputError
from scp.models import checkpoint
from scp.models.config import TrainConfig, same_config
from scp.models.factory import (
    CHECKPOINT_FORMAT,
    RESUME_ENTRIES,
    build_model,
    load_weights,
    read_checkpoint,
    weights_fingerprint,
)
from scp.models.pointwise import PointwiseScorer
from scp.models.scoring import score_contexts
from scp.models.value_net import ConvexDeepSets


def differentiable_scores(
    model: nn.Module, batch, n_permutations: int, antithetic: bool, seed: int, by_length: bool = True
) -> torch.Tensor:
    """(b, n) scores the loss differentiates (0 on padding): Monte-Carlo Shapley values for set models through the
    fast path (:func:`scp.core.fast_path.deepsets_shapley`, each context's permutations seeded by ``seed`` and its
    key, see :meth:`Batch.seeds`), MLP outputs for the pointwise control.  Evaluation scores the same way without
    gradients through :func:`scp.models.scoring.score_contexts`.

    ``by_length``: the batch's contexts of each exact length run together without padding
    (:meth:`Batch.length_groups`), the same values as the padded batch up to float rounding (a context's
    permutations depend on its seed and length only), without the prefix evaluations of padded positions; only
    dropout draws other masks (the tensors have other shapes).
    """
    if isinstance(model, PointwiseScorer):
        return model(batch.units, batch.query, batch.mask, batch.extra)
    seeds = batch.seeds(seed)
    groups = batch.length_groups() if by_length else [(list(range(len(seeds))), batch)]
    width, rows_out = batch.mask.shape[1], [None] * len(seeds)
    for rows, part in groups:
        values = deepsets_shapley(
            model,
            part.units,
            part.query,
            part.mask,
            part.extra,
            n_permutations=n_permutations,
            antithetic=antithetic,
            seed=[seeds[r] for r in rows],
        ).values
        values = nn.functional.pad(values, (0, width - values.shape[1]))
        for k, r in enumerate(rows):
            rows_out[r] = values[k]
    return torch.stack(rows_out)


def pairwise_margin_loss(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, margin: float) -> torch.Tensor:
    """Mean over contexts (with ≥ 1 pair) of mean_{i∈pos, j∈neg} max(0, ε − (s_i − s_j))."""
    pos = (labels > 0.5) & mask
    neg = (labels < 0.5) & mask
    pairs = pos[:, :, None] & neg[:, None, :]  # (b, n, n): i positive, j negative
    hinge = torch.relu(margin - (scores[:, :, None] - scores[:, None, :])) * pairs
    n_pairs = pairs.sum((1, 2))
    valid = n_pairs > 0
    if not valid.any():
        raise InputError("no (positive, negative) pair in the batch: every context needs both kinds of unit")
    return (hinge.sum((1, 2))[valid] / n_pairs[valid]).mean()


def coalition_loss(
    model: nn.Module, batch, contexts: Sequence[Context], config: TrainConfig, seed: int
) -> torch.Tensor:
    """mean over contexts and sampled coalitions S of (v(S) − B·t(S))², ψ computed once per context."""
    seeds = [seed + i for i in range(len(contexts))]
    coalitions, targets = batch_targets(contexts, batch.mask.shape[1], config.set_targets, config.n_coalitions, seeds)
    h, base = model.encode(batch.units, batch.query, batch.extra, batch.mask)
    values = model.pooled_value(base[:, None, :] + coalitions.to(h.device, h.dtype) @ h)  # (b, k)
    return ((values - model.bound * targets.to(values.device)) ** 2).mean()


def has_pairs(context: Context) -> bool:
    labels = context.labels
    return labels is not None and bool((labels > 0.5).any()) and bool((labels < 0.5).any())


# --------------------------------------------------------------------------------------------- checkpoints


def ids_hash(ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


# ------------------------------------------------------------------------------------------------ training


@dataclass
class TrainResult:
    best_path: Path
    last_path: Path
    best_val_auc: float
    history: list[dict] = field(default_factory=list)
    seconds: float = 0.0


def training_environment(device: torch.device) -> dict:
    """What bit-identical training depends on beyond code, config and data (recorded in checkpoints)."""
    return {
        "torch": str(torch.__version__),
        "threads": torch.get_num_threads(),
        "device": str(device),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def inputs_fingerprint(train_contexts: Sequence[Context], val_contexts: Sequence[Context]) -> str:
    """sha256 of every tensor training reads (embeddings, features, labels): equal fingerprints mean the same
    inputs to the bit.  Embeddings of the same texts can differ in the last bits when a model encodes them in
    other batches (padding), so a cold embedding cache may give other inputs than a warm one."""
    return checkpoint.content_checksum(
        {"contexts": [(c.units, c.query, c.extra, c.labels) for c in (*train_contexts, *val_contexts)]}
    )


def evaluate_auc(model: nn.Module, contexts: Sequence[Context], config: TrainConfig, batch_size: int = 32) -> dict:
    """Mean per-context pairwise AUC (bootstrap CI) of the model's unit scores, fixed evaluation seed (contexts
    batched by length: the values of any batching, up to float rounding)."""
    results = score_contexts(
        model,
        contexts,
        "monte_carlo",
        seed=config.seed,
        batch_size=batch_size,
        by_length=True,
        n_permutations=config.eval_permutations,
        antithetic=config.antithetic,
    )
    aucs = [pairwise_auc(r.values, c.labels.numpy()) for r, c in zip(results, contexts)]
    agg = aggregate(aucs, n_boot=200, seed=0)
    return {"auc": agg.mean, "auc_ci": [agg.ci_low, agg.ci_high], "n": agg.n_used, "excluded": agg.n_excluded}


def cosine_schedule(total_steps: int, warmup: float):
    warm = max(1, int(round(warmup * total_steps)))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warm) / max(1, total_steps - warm))))

    return factor


def _check_optimizer_shapes(model: nn.Module, opt: torch.optim.Optimizer, path: Path) -> None:
    """Every per-parameter tensor of a restored optimizer state (Adam's moments) has its parameter's shape: torch's
    ``load_state_dict`` does not check, and ``opt.step`` would fail mid-epoch with a RuntimeError."""
    names = {id(p): n for n, p in model.named_parameters()}
    for param in model.parameters():
        for key, value in opt.state.get(param, {}).items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape != param.shape:
                raise checkpoint.CheckpointError(
                    f"checkpoint {path}: its optimizer state {key!r} of {names[id(param)]} has shape "
                    f"{tuple(value.shape)}, the parameter {tuple(param.shape)}: start again without --resume or "
                    "restore a good copy"
                )


def train(
    config: TrainConfig,
    train_contexts: Sequence[Context],
    val_contexts: Sequence[Context],
    out_dir,
    embedder_id: str,
    resume: bool = False,
    progress: bool = True,
    stop_after_epochs: int | None = None,
    data_ids: Sequence[str] | None = None,
    device: str | torch.device | None = None,
) -> TrainResult:
    """Train on precomputed contexts; writes ``last.safetensors`` (full state, every epoch) and
    ``best.safetensors``.

    ``resume`` continues from ``out_dir/last.safetensors`` and reaches the same weights as an uninterrupted run.
    ``stop_after_epochs`` ends the call early (as an interruption would) without changing the schedule.
    ``device`` defaults to CUDA when present; permutations are always drawn on the CPU generator.
    """
    out_dir = Path(out_dir)
    train_contexts = [c for c in train_contexts if has_pairs(c)]
    if not train_contexts:
        raise InputError("no training context has both a positive and a negative unit")
    val_contexts = [c for c in val_contexts if has_pairs(c)]
    if not val_contexts:
        raise InputError("no validation context has both a positive and a negative unit")
    embed_dim = train_contexts[0].units.shape[1]
    torch.manual_seed(config.seed)
    device = resolve_device(device)
    model = build_model(config, embed_dim).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    steps_per_epoch = math.ceil(len(train_contexts) / config.batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine_schedule(config.epochs * steps_per_epoch, config.warmup))
    meta = {
        "format": CHECKPOINT_FORMAT,
        "config": asdict(config),
        "embedder_id": embedder_id,
        "embed_dim": embed_dim,
        "data_hash": ids_hash(data_ids if data_ids is not None else [c.id for c in train_contexts]),
        "n_train": len(train_contexts),
        "n_val": len(val_contexts),
        "n_params": sum(p.numel() for p in model.parameters()),
        "environment": training_environment(device),
        "inputs_fingerprint": inputs_fingerprint(train_contexts, val_contexts),
    }
    history, best_auc, start_epoch, seconds = [], -1.0, 0, 0.0
    last_path, best_path = out_dir / "last.safetensors", out_dir / "best.safetensors"
    if resume:
        if not last_path.is_file():
            legacy = out_dir / "last.pt"
            hint = (
                f"; {legacy} is in the legacy format: scp convert-checkpoint {legacy} {last_path}"
                if legacy.is_file()
                else " (drop --resume to start a new run there)"
            )
            raise InputError(f"cannot resume: no checkpoint {last_path}{hint}")
        state = read_checkpoint(last_path, RESUME_ENTRIES)
        if not same_config(state["config"], config) or state["data_hash"] != meta["data_hash"]:
            raise InputError(f"cannot resume from {last_path}: it was written for another config or other data")
        done = state["epoch"]
        if type(done) is not int or not 1 <= done <= config.epochs:
            raise checkpoint.CheckpointError(
                f"checkpoint {last_path} says it is the state after epoch {done!r}, outside the run's plan of "
                f"epochs 1 to {config.epochs}: start again without --resume or restore a good copy"
            )
        load_weights(model, state["weights"], last_path)
        try:
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
            torch.set_rng_state(state["torch_rng"])
            if state.get("cuda_rng") is not None and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(state["cuda_rng"])
        except (RuntimeError, ValueError, TypeError, KeyError, IndexError) as error:
            raise checkpoint.CheckpointError(
                f"checkpoint {last_path}: its optimizer, scheduler or RNG state cannot be "
                f"restored ({' '.join(str(error).split())[:200]}): start again without "
                "--resume or restore a good copy"
            ) from None
        _check_optimizer_shapes(model, opt, last_path)
        history, best_auc, start_epoch, seconds = (
            state["history"],
            state["best_val_auc"],
            state["epoch"],
            state["seconds"],
        )
    end_epoch = config.epochs if stop_after_epochs is None else min(config.epochs, start_epoch + stop_after_epochs)

    for epoch in range(start_epoch, end_epoch):
        t0 = time.perf_counter()
        model.train()
        order = np.random.default_rng([config.seed, epoch]).permutation(len(train_contexts))
        losses = []
        bar = tqdm(range(steps_per_epoch), desc=f"epoch {epoch + 1}/{config.epochs}", disable=not progress, leave=False)
        for step in bar:
            chunk = [train_contexts[i] for i in order[step * config.batch_size : (step + 1) * config.batch_size]]
            batch = collate(chunk, device)
            seed = (config.seed * 1_000_003 + epoch * steps_per_epoch + step) % (2**63)
            loss = torch.zeros((), device=device)
            if config.shapley_weight > 0:
                scores = differentiable_scores(model, batch, config.n_permutations, config.antithetic, seed)
                loss = config.shapley_weight * pairwise_margin_loss(scores, batch.labels, batch.mask, config.margin)
            if config.set_targets:
                loss = loss + config.set_weight * coalition_loss(model, batch, chunk, config, seed)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            if isinstance(model, ConvexDeepSets):
                model.clamp_()
            losses.append(loss.item())
            bar.set_postfix(loss=f"{np.mean(losses):.4f}")
        val = evaluate_auc(model, val_contexts, config)
        seconds += time.perf_counter() - t0
        history.append(
            {
                "epoch": epoch + 1,
                "train_loss": float(np.mean(losses)),
                "val_auc": val["auc"],
                "val_auc_ci": val["auc_ci"],
                "seconds": seconds,
            }
        )
        if progress:
            print(
                f"epoch {epoch + 1}/{config.epochs}: loss {np.mean(losses):.4f}  val AUC {val['auc']:.4f}  "
                f"({seconds:.0f}s)",
                flush=True,
            )
        if val["auc"] > best_auc:
            best_auc = val["auc"]
            checkpoint.save(
                {
                    **meta,
                    "weights": model.state_dict(),
                    "weights_fingerprint": weights_fingerprint(model),
                    "val_metrics": val,
                    "epoch": epoch + 1,
                    "history": history,
                },
                best_path,
            )
        checkpoint.save(
            {
                **meta,
                "weights": model.state_dict(),
                "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(),
                "torch_rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                "epoch": epoch + 1,
                "history": history,
                "best_val_auc": best_auc,
                "seconds": seconds,
                "val_metrics": val,
            },
            last_path,
        )
    return TrainResult(best_path, last_path, best_auc, history, seconds)
