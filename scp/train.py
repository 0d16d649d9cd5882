"""Training value networks with a pairwise margin loss on Monte-Carlo Shapley values.

L = mean over contexts of mean over (positive i, negative j) of max(0, ε − (φ_i − φ_j)), with φ from the
differentiable Deep Sets fast path (M permutations, fresh ones every step) inside the forward pass; optionally
plus λ·mean_S (v(S) − B·t(S))² over sampled coalitions S, with t a game with a meaning
(:mod:`scp.coalition_targets`: coverage of supporting facts, complementarity of a bridge's two paragraphs).
AdamW, cosine schedule with linear warm-up, validation AUC every epoch, best checkpoint kept, exact resume.
The pointwise control scores each unit alone with an MLP on the same inputs and the same loss on its scores.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from .devices import resolve_device
from .errors import InputError
from . import checkpoint
from .coalition_targets import batch_targets, check_targets
from .context_net import ContextDeepSets, ContextEncoder
from .features import STRUCTURAL, Context, check_features, collate, contexts_from_examples
from .metrics import aggregate, pairwise_auc
from .shapley import deepsets_shapley
from .value_net import QUERY_MODES, ConvexDeepSets, DeepSetsValue, SetValueNet, check_inputs, mlp

MODELS = ("deepsets", "convex", "pointwise", "context", "context-pointwise")
POINTWISE = ("pointwise", "context-pointwise")
EMBEDDERS = ("minilm", "glove", "wordllama", "random", "bert-base")
CHECKPOINT_FORMAT = "scp-checkpoint-v2"  # v2: content checksum verified on load; a safetensors file (scp.checkpoint)


@dataclass
class TrainConfig:
    """Everything that defines a training run (stored in every checkpoint)."""

    datasets: tuple[str, ...] = ("hotpotqa",)
    val_dataset: str | None = None  # defaults to the first training dataset
    unit_repr: str = "sentence"  # "sentence" or "title" ("Title: sentence")
    embedder: str = "minilm"
    model: str = "deepsets"
    query_mode: str = "member"
    features: tuple[str, ...] = ()
    hidden: int = 1024
    latent: int = 512
    dropout: float = 0.1
    bound: float = 1.0
    output: str = "sigmoid"  # or "clip" (linear inside [0, B])
    skip: bool = False  # a linear path beside ρ's MLP (set models)
    n_permutations: int = 50
    antithetic: bool = False
    eval_permutations: int = 50
    margin: float = 0.15
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup: float = 0.1
    epochs: int = 10
    batch_size: int = 16
    seed: int = 0
    max_train_examples: int | None = None
    max_val_examples: int | None = None
    # context-conditioned models: the attention encoder's width, heads, layers and inducing points (0 = SAB)
    width: int = 128
    heads: int = 4
    layers: int = 1
    n_inducing: int = 0
    # set-level supervision: λ·MSE of v(S) against these games on n_coalitions sampled coalitions per context
    set_targets: tuple[str, ...] = ()
    set_weight: float = 1.0
    n_coalitions: int = 16
    shapley_weight: float = 1.0  # weight of the Shapley margin loss (0: coalitions only)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # NumPy scalars (a seed from np.arange) become Python values
            if isinstance(getattr(self, f.name), np.generic):
                setattr(self, f.name, getattr(self, f.name).item())
        wrong = [f"{f.name} must be of type {f.type}, not {getattr(self, f.name)!r}" for f in dataclasses.fields(self)
                 if not _config_value_ok(getattr(self, f.name), str(f.type))]
        if wrong:  # before any comparison, which would raise a TypeError of its own
            raise InputError("bad training config: " + "; ".join(wrong))
        self.datasets, self.features = tuple(self.datasets), check_features(self.features)
        self.set_targets = check_targets(self.set_targets)
        problems = []
        for name in ("max_train_examples", "max_val_examples"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                problems.append(f"{name} must be an integer ≥ 1 or None, got {getattr(self, name)!r}")
        if self.seed < 0:
            problems.append(f"seed must be an integer ≥ 0, got {self.seed}")
        if not self.datasets:
            problems.append("datasets is empty")
        if self.unit_repr not in ("sentence", "title"):
            problems.append(f"unit_repr must be 'sentence' or 'title', not {self.unit_repr!r}")
        if self.embedder not in EMBEDDERS and "/" not in self.embedder:
            problems.append(f"unknown embedder {self.embedder!r}: use one of {EMBEDDERS} or a hub name like "
                            "'sentence-transformers/all-mpnet-base-v2'")
        if self.model not in MODELS:
            problems.append(f"model must be one of {MODELS}, not {self.model!r}")
        if self.query_mode not in QUERY_MODES:
            problems.append(f"query_mode must be one of {QUERY_MODES}, not {self.query_mode!r}")
        if self.model in POINTWISE + ("context",) and self.query_mode == "member":
            problems.append(f"model {self.model!r} does not take query_mode 'member'")
        if self.model in POINTWISE and (self.set_targets or self.shapley_weight != 1.0):
            problems.append("a pointwise scorer has no v(S): set_targets and shapley_weight apply to set models")
        if self.model == "convex" and self.set_targets:
            problems.append("set_targets are not supported for ConvexDeepSets (its weights are clamped)")
        if self.shapley_weight < 0 or self.set_weight < 0 or (self.shapley_weight == 0 and not self.set_targets):
            problems.append("need shapley_weight ≥ 0, set_weight ≥ 0, and set_targets when shapley_weight is 0")
        if any(f in STRUCTURAL for f in self.features) and self.unit_repr != "title":
            problems.append(f"structural features {STRUCTURAL} read 'Title: sentence' units: use unit_repr='title'")
        for name in ("width", "heads", "layers", "n_coalitions"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                problems.append(f"{name} must be an integer ≥ 1, got {getattr(self, name)!r}")
        if not isinstance(self.n_inducing, int) or self.n_inducing < 0:
            problems.append(f"n_inducing must be an integer ≥ 0, got {self.n_inducing!r}")
        if self.model == "convex" and (self.skip or self.output != "sigmoid"):
            problems.append("ConvexDeepSets has no skip path and a sigmoid output only")
        if self.query_mode == "member" and self.features:
            problems.append("query_mode 'member' takes no per-unit features")
        for name in ("n_permutations", "eval_permutations", "epochs", "batch_size", "hidden", "latent"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                problems.append(f"{name} must be an integer ≥ 1, got {getattr(self, name)!r}")
        if self.antithetic and (self.n_permutations % 2 or self.eval_permutations % 2):
            problems.append("antithetic sampling needs even n_permutations and eval_permutations")
        if not self.margin > 0 or not self.lr > 0 or self.weight_decay < 0 or not 0 <= self.warmup < 1:
            problems.append("need margin > 0, lr > 0, weight_decay ≥ 0 and 0 ≤ warmup < 1")
        elif not all(math.isfinite(getattr(self, name)) for name in ("margin", "lr", "weight_decay")):
            problems.append(f"margin, lr and weight_decay must be finite; got margin={self.margin}, lr={self.lr}, "
                            f"weight_decay={self.weight_decay}")
        if not 0 <= self.dropout < 1:
            problems.append(f"dropout must be in [0, 1), got {self.dropout}")
        if problems:
            raise InputError("bad training config: " + "; ".join(problems))

    @property
    def with_title(self) -> bool:
        return self.unit_repr == "title"


PRESETS: dict[str, dict] = {
    # the paper's network: 3.03M parameters, query as a set member, bare sentences, ε = 0.15
    "paper": {},
    # the Deep Sets recipe notebooks 01–12 train, shipped until notebook 13 chose "structure" (kept as
    # models/scp-hotpotqa-deepsets.safetensors; chosen on HotpotQA validation AUC in results/ablations):
    # "Title: sentence" units, ψ input [s⊙q, s, cos, BM25-z], a small network, a linear skip path beside ρ's MLP,
    # margin 0.05 (Shapley
    # values of ~40 units share v(N) − v(∅) ≤ B = 1, so ε = 0.15 asks for a large share per positive)
    "best": dict(unit_repr="title", query_mode="product_concat", features=("cos", "bm25z"), hidden=256, latent=128,
                 skip=True, margin=0.05, epochs=6, n_permutations=20),
    # the pointwise control: the same inputs and loss, one unit at a time (no set, no Shapley)
    "pointwise": dict(unit_repr="title", model="pointwise", query_mode="product_concat", features=("cos", "bm25z"),
                      hidden=256, latent=128, margin=0.05, epochs=6),
    # the shipped set model (models/scp-hotpotqa-best.safetensors, chosen on validation AUC over 3 seeds in
    # notebook 13):
    # "best" plus the structural features only the whole context can give
    "structure": dict(unit_repr="title", query_mode="product_concat", features=("cos", "bm25z", *STRUCTURAL),
                      hidden=256, latent=128, skip=True, margin=0.05, epochs=6, n_permutations=20),
    # its matched control (models/pointwise-hotpotqa-best.safetensors)
    "structure-pointwise": dict(unit_repr="title", model="pointwise", query_mode="product_concat",
                                features=("cos", "bm25z", *STRUCTURAL), hidden=256, latent=128, margin=0.05, epochs=6),
}
SHIPPED_PRESET = "structure"  # the recipe of models/scp-hotpotqa-best.safetensors


def config_from_preset(preset: str = "paper", **overrides) -> TrainConfig:
    """The config of ``preset`` with ``overrides`` (``None`` values left out); an unknown preset or setting, or a
    value of the wrong type, raises :class:`~scp.errors.InputError`."""
    if not isinstance(preset, str) or preset not in PRESETS:
        raise InputError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    fields = [f.name for f in dataclasses.fields(TrainConfig)]
    unknown = [k for k in overrides if k not in fields]
    if unknown:
        raise InputError(f"unknown training setting(s) {', '.join(map(repr, unknown))}; TrainConfig has "
                         f"{', '.join(fields)}")
    return TrainConfig(**{**PRESETS[preset], **{k: v for k, v in overrides.items() if v is not None}})


class PointwiseScorer(SetValueNet):
    """The control: score(c) = MLP(x_c), the same ψ inputs as the set model, no set and no Shapley."""

    def __init__(self, embed_dim: int = 384, hidden: int = 256, query_mode: str = "product_concat", n_extra: int = 0,
                 dropout: float = 0.1):
        super().__init__(embed_dim, query_mode, n_extra, bound=1.0)
        self.scorer = mlp([self.psi_in, hidden, hidden, 1], dropout)

    def forward(self, units, query, mask=None, extra=None):
        check_inputs(units, query, mask, extra, self.embed_dim, self.n_extra)
        return self.scorer(self.psi_input(units, query, extra)).squeeze(-1)


class ContextPointwise(PointwiseScorer):
    """The matched control of :class:`scp.context_net.ContextDeepSets`: the same attention encoder over the
    context, then a per-unit head, score(c) = MLP(Enc(x; q)_c); ``mask`` marks the context's valid units."""

    def __init__(self, embed_dim: int = 384, hidden: int = 256, query_mode: str = "product_concat", n_extra: int = 0,
                 dropout: float = 0.1, width: int = 128, heads: int = 4, layers: int = 1, n_inducing: int = 0):
        super().__init__(embed_dim, hidden, query_mode, n_extra, dropout)
        self.encoder = ContextEncoder(self.psi_in, embed_dim, width, heads, layers, n_inducing, dropout)
        self.scorer = mlp([width, hidden, hidden, 1], dropout)

    def forward(self, units, query, mask=None, extra=None):
        check_inputs(units, query, mask, extra, self.embed_dim, self.n_extra)
        return self.scorer(self.encoder(self.psi_input(units, query, extra), query, mask)).squeeze(-1)


def build_model(config: TrainConfig, embed_dim: int) -> nn.Module:
    common = dict(embed_dim=embed_dim, query_mode=config.query_mode, n_extra=len(config.features),
                  dropout=config.dropout)
    encoder = dict(width=config.width, heads=config.heads, layers=config.layers, n_inducing=config.n_inducing)
    if config.model == "pointwise":
        return PointwiseScorer(hidden=config.hidden, **common)
    if config.model == "context-pointwise":
        return ContextPointwise(hidden=config.hidden, **common, **encoder)
    if config.model == "context":
        return ContextDeepSets(hidden=config.hidden, latent=config.latent, bound=config.bound, output=config.output,
                               skip=config.skip, **common, **encoder)
    if config.model == "convex":
        return ConvexDeepSets(hidden=config.hidden, latent=config.latent, bound=config.bound, **common)
    return DeepSetsValue(hidden=config.hidden, latent=config.latent, bound=config.bound, output=config.output,
                         skip=config.skip, **common)


def unit_scores(model: nn.Module, batch, n_permutations: int, antithetic: bool, seed: int) -> torch.Tensor:
    """(b, n) scores: Monte-Carlo Shapley values for set models (each context's permutations seeded by
    ``seed`` and its key, see :meth:`Batch.seeds`), MLP outputs for the pointwise control."""
    if isinstance(model, PointwiseScorer):
        return model(batch.units, batch.query, batch.mask, batch.extra)
    extra = batch.extra if model.n_extra else None
    return deepsets_shapley(model, batch.units, batch.query, batch.mask, extra, n_permutations=n_permutations,
                            antithetic=antithetic, seed=batch.seeds(seed)).values


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


def coalition_loss(model: nn.Module, batch, contexts: Sequence[Context], config: TrainConfig, seed: int) -> torch.Tensor:
    """mean over contexts and sampled coalitions S of (v(S) − B·t(S))², ψ computed once per context."""
    seeds = [seed + i for i in range(len(contexts))]
    coalitions, targets = batch_targets(contexts, batch.mask.shape[1], config.set_targets, config.n_coalitions, seeds)
    h, base = model.encode(batch.units, batch.query, batch.extra if model.n_extra else None, batch.mask)
    values = model.pooled_value(base[:, None, :] + coalitions.to(h.device, h.dtype) @ h)  # (b, k)
    return ((values - model.bound * targets.to(values.device)) ** 2).mean()


def has_pairs(context: Context) -> bool:
    labels = context.labels
    return labels is not None and bool((labels > 0.5).any()) and bool((labels < 0.5).any())


# --------------------------------------------------------------------------------------------- checkpoints

def ids_hash(ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


def load_checkpoint(path: str | os.PathLike, embedder_id: str | None = None, embed_dim: int | None = None):
    """(model in eval mode, TrainConfig, checkpoint dict), after verifying the file's checksums and structure.

    An unreadable, altered or foreign file, or one whose entries, config or weights do not fit (a missing entry,
    an unknown setting, a wrong type, a weight of another name or shape, NaN weights) is a
    :class:`scp.checkpoint.CheckpointError`; a mismatched embedder or dimension is an :class:`InputError`.
    """
    ckpt = read_checkpoint(path, MODEL_ENTRIES)
    if embedder_id is not None and embedder_id != ckpt["embedder_id"]:
        raise InputError(f"checkpoint {path} was trained on embedder {ckpt['embedder_id']!r}, not {embedder_id!r}")
    if embed_dim is not None and embed_dim != ckpt["embed_dim"]:
        raise InputError(f"checkpoint {path} expects {ckpt['embed_dim']}-d embeddings, got {embed_dim}-d")
    config = TrainConfig(**ckpt["config"])
    model = build_model(config, ckpt["embed_dim"])
    load_weights(model, ckpt["weights"], path)
    return model.eval(), config, ckpt


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_ci(value) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_number(v) for v in value)


def _is_history(value) -> bool:
    row = {"epoch": _is_int, "train_loss": _is_number, "val_auc": _is_number, "val_auc_ci": _is_ci,
           "seconds": _is_number}
    return isinstance(value, list) and all(isinstance(h, dict) and all(k in h and ok(h[k]) for k, ok in row.items())
                                           for h in value)


def _is_rng(value) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.dim() == 1


# every entry scp.train writes: (test of its value, what it must be)
ENTRIES = {
    "format": (lambda v: isinstance(v, str), "a string"),
    "config": (lambda v: isinstance(v, dict) and all(isinstance(k, str) for k in v), "a dict of TrainConfig settings"),
    "embedder_id": (lambda v: isinstance(v, str) and bool(v), "a non-empty string"),
    "embed_dim": (lambda v: _is_int(v) and v >= 1, "an integer ≥ 1"),
    "data_hash": (lambda v: isinstance(v, str), "a string"),
    "n_train": (lambda v: _is_int(v) and v >= 0, "an integer ≥ 0"),
    "n_val": (lambda v: _is_int(v) and v >= 0, "an integer ≥ 0"),
    "n_params": (lambda v: _is_int(v) and v >= 0, "an integer ≥ 0"),
    "environment": (lambda v: isinstance(v, dict), "a dict"),
    "inputs_fingerprint": (lambda v: isinstance(v, str), "a string"),
    "weights": (lambda v: isinstance(v, dict) and bool(v) and all(isinstance(k, str) and isinstance(t, torch.Tensor)
                                                               for k, t in v.items()),
                "a non-empty dict of named tensors"),
    "weights_fingerprint": (lambda v: isinstance(v, str), "a string"),
    "val_metrics": (lambda v: isinstance(v, dict) and _is_number(v.get("auc")) and _is_ci(v.get("auc_ci")),
                    "a dict with a numeric auc and a two-number auc_ci"),
    "epoch": (lambda v: _is_int(v) and v >= 1, "an integer ≥ 1"),
    "history": (_is_history, "a list of per-epoch dicts (epoch, train_loss, val_auc, val_auc_ci, seconds)"),
    "optimizer": (lambda v: isinstance(v, dict) and isinstance(v.get("state"), dict)
                  and isinstance(v.get("param_groups"), list), "an optimizer state dict (state, param_groups)"),
    "scheduler": (lambda v: isinstance(v, dict), "a scheduler state dict"),
    "torch_rng": (_is_rng, "a 1-d uint8 tensor"),
    "cuda_rng": (lambda v: v is None or (isinstance(v, list) and all(_is_rng(t) for t in v)),
                 "None or a list of 1-d uint8 tensors"),
    "best_val_auc": (_is_number, "a number"),
    "seconds": (lambda v: _is_number(v) and v >= 0, "a number ≥ 0"),
}
MODEL_ENTRIES = ("format", "config", "embedder_id", "embed_dim", "weights")  # what load_checkpoint needs
RESUME_ENTRIES = MODEL_ENTRIES + ("data_hash", "epoch", "history", "optimizer", "scheduler", "torch_rng",
                                  "best_val_auc", "seconds")  # what resuming from last.safetensors needs


def _config_value_ok(value, annotation: str) -> bool:
    for kind in (a.strip() for a in annotation.split("|")):
        if ((kind == "None" and value is None) or (kind == "str" and isinstance(value, str))
                or (kind == "bool" and isinstance(value, bool)) or (kind == "int" and _is_int(value))
                or (kind == "float" and _is_number(value))
                or (kind.startswith("tuple[str") and isinstance(value, (list, tuple))
                    and all(isinstance(v, str) for v in value))):
            return True
    return False


def config_problems(stored: dict) -> list[str]:
    """What is wrong with a checkpoint's stored TrainConfig (unknown settings, wrong types, invalid values)."""
    fields = {f.name: str(f.type) for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(k for k in stored if k not in fields)
    problems = [f"its config has unknown setting(s) {', '.join(map(repr, unknown))}"] if unknown else []
    problems += [f"its config setting {k!r} is {stored[k]!r}, not of type {fields[k]}" for k in stored
                 if k in fields and not _config_value_ok(stored[k], fields[k])]
    if not problems:
        try:
            TrainConfig(**stored)
        except (InputError, TypeError, ValueError) as error:
            problems.append(f"its config is invalid ({' '.join(str(error).split())[:300]})")
    return problems


def checkpoint_problems(ckpt: dict, require: Sequence[str] = MODEL_ENTRIES) -> list[str]:
    """What is missing from or malformed in a checkpoint's payload: every entry of ``require`` must be there,
    and every entry of :data:`ENTRIES` that is there must have its type (unknown entries are left alone)."""
    problems = [f"it has no {k!r} entry" for k in require if k not in ckpt]
    problems += [f"its {k!r} entry is not {what} (found {type(ckpt[k]).__name__})"
                 for k, (ok, what) in ENTRIES.items() if k in ckpt and not ok(ckpt[k])]
    if isinstance(ckpt.get("config"), dict) and all(isinstance(k, str) for k in ckpt["config"]):
        problems += config_problems(ckpt["config"])
    return problems


def read_checkpoint(path: str | os.PathLike, require: Sequence[str] = MODEL_ENTRIES) -> dict:
    """The verified payload of a training checkpoint whose structure is sound (:func:`checkpoint_problems`):
    anything else is one :class:`scp.checkpoint.CheckpointError` naming the file and the problem."""
    ckpt = checkpoint.load(path, CHECKPOINT_FORMAT)
    problems = checkpoint_problems(ckpt, require)
    if problems:
        raise checkpoint.CheckpointError(f"checkpoint {path} is malformed: {'; '.join(problems)}; it was not written "
                                         "by this version of `scp train`: retrain it or restore a good copy")
    return ckpt


def load_weights(model: nn.Module, weights: dict, path) -> None:
    """``model.load_state_dict(weights)`` once every name, shape and dtype matches and every value is finite."""
    expected = model.state_dict()
    problems = []
    missing = [k for k in expected if k not in weights]
    unexpected = [k for k in weights if k not in expected]
    if missing:
        problems.append(f"missing weights {', '.join(missing[:4])}{' …' if len(missing) > 4 else ''}")
    if unexpected:
        problems.append(f"unexpected weights {', '.join(unexpected[:4])}{' …' if len(unexpected) > 4 else ''}")
    for key, want in expected.items():
        got = weights.get(key)
        if not isinstance(got, torch.Tensor):
            continue
        if tuple(got.shape) != tuple(want.shape):
            problems.append(f"weight {key} has shape {tuple(got.shape)}, the model needs {tuple(want.shape)}")
        elif got.dtype != want.dtype:
            problems.append(f"weight {key} is {got.dtype}, the model needs {want.dtype}")
        elif got.is_floating_point() and not bool(torch.isfinite(got).all()):
            problems.append(f"weight {key} holds NaN or infinite values")
    if problems:
        raise checkpoint.CheckpointError(f"checkpoint {path} does not fit the network its config describes: "
                                         f"{'; '.join(problems[:6])}: retrain it or restore a good copy")
    try:
        model.load_state_dict(weights)
    except (RuntimeError, ValueError, TypeError, KeyError) as error:
        raise checkpoint.CheckpointError(f"checkpoint {path}: its weights cannot be loaded "
                                         f"({' '.join(str(error).split())[:200]})") from None


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
    return {"torch": str(torch.__version__), "threads": torch.get_num_threads(), "device": str(device),
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def inputs_fingerprint(train_contexts: Sequence[Context], val_contexts: Sequence[Context]) -> str:
    """sha256 of every tensor training reads (embeddings, features, labels): equal fingerprints mean the same
    inputs to the bit.  Embeddings of the same texts can differ in the last bits when a model encodes them in
    other batches (padding), so a cold embedding cache may give other inputs than a warm one."""
    return checkpoint.content_checksum({"contexts": [(c.units, c.query, c.extra, c.labels)
                                                     for c in (*train_contexts, *val_contexts)]})


def weights_fingerprint(model: nn.Module) -> str:
    """sha256 of the weights alone: equal fingerprints mean bit-identical networks."""
    return checkpoint.content_checksum({"weights": model.state_dict()})


def evaluate_auc(model: nn.Module, contexts: Sequence[Context], config: TrainConfig, batch_size: int = 32) -> dict:
    """Mean per-context pairwise AUC (bootstrap CI) of the model's unit scores, fixed evaluation seed."""
    was_training = model.training
    model.eval()
    aucs = []
    with torch.no_grad():
        for s in range(0, len(contexts), batch_size):
            chunk = contexts[s:s + batch_size]
            batch = collate(chunk, next(model.parameters()).device)
            scores = unit_scores(model, batch, config.eval_permutations, config.antithetic, config.seed).cpu()
            aucs += [pairwise_auc(scores[i, :c.n_units].numpy(), c.labels.numpy()) for i, c in enumerate(chunk)]
    model.train(was_training)
    agg = aggregate(aucs, n_boot=200, seed=0)
    return {"auc": agg.mean, "auc_ci": [agg.ci_low, agg.ci_high], "n": agg.n_used, "excluded": agg.n_excluded}


def cosine_schedule(total_steps: int, warmup: float):
    warm = max(1, int(round(warmup * total_steps)))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warm) / max(1, total_steps - warm))))
    return factor


def train(config: TrainConfig, train_contexts: Sequence[Context], val_contexts: Sequence[Context], out_dir,
          embedder_id: str, resume: bool = False, progress: bool = True, stop_after_epochs: int | None = None,
          data_ids: Sequence[str] | None = None, device: str | torch.device | None = None) -> TrainResult:
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
    meta = {"format": CHECKPOINT_FORMAT, "config": asdict(config), "embedder_id": embedder_id, "embed_dim": embed_dim,
            "data_hash": ids_hash(data_ids if data_ids is not None else [c.id for c in train_contexts]),
            "n_train": len(train_contexts), "n_val": len(val_contexts),
            "n_params": sum(p.numel() for p in model.parameters()), "environment": training_environment(device),
            "inputs_fingerprint": inputs_fingerprint(train_contexts, val_contexts)}
    history, best_auc, start_epoch, seconds = [], -1.0, 0, 0.0
    last_path, best_path = out_dir / "last.safetensors", out_dir / "best.safetensors"
    if resume:
        if not last_path.is_file():
            legacy = out_dir / "last.pt"
            hint = (f"; {legacy} is in the legacy format: scp convert-checkpoint {legacy} {last_path}"
                    if legacy.is_file() else " (drop --resume to start a new run there)")
            raise InputError(f"cannot resume: no checkpoint {last_path}{hint}")
        state = read_checkpoint(last_path, RESUME_ENTRIES)
        if not same_config(state["config"], config) or state["data_hash"] != meta["data_hash"]:
            raise InputError(f"cannot resume from {last_path}: it was written for another config or other data")
        load_weights(model, state["weights"], last_path)
        try:
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
            torch.set_rng_state(state["torch_rng"])
            if state.get("cuda_rng") is not None and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(state["cuda_rng"])
        except (RuntimeError, ValueError, TypeError, KeyError, IndexError) as error:
            raise checkpoint.CheckpointError(f"checkpoint {last_path}: its optimizer, scheduler or RNG state cannot be "
                                             f"restored ({' '.join(str(error).split())[:200]}): start again without "
                                             "--resume or restore a good copy") from None
        history, best_auc, start_epoch, seconds = state["history"], state["best_val_auc"], state["epoch"], state["seconds"]
    end_epoch = config.epochs if stop_after_epochs is None else min(config.epochs, start_epoch + stop_after_epochs)

    for epoch in range(start_epoch, end_epoch):
        t0 = time.perf_counter()
        model.train()
        order = np.random.default_rng([config.seed, epoch]).permutation(len(train_contexts))
        losses = []
        bar = tqdm(range(steps_per_epoch), desc=f"epoch {epoch + 1}/{config.epochs}", disable=not progress, leave=False)
        for step in bar:
            chunk = [train_contexts[i] for i in order[step * config.batch_size:(step + 1) * config.batch_size]]
            batch = collate(chunk, device)
            seed = (config.seed * 1_000_003 + epoch * steps_per_epoch + step) % (2**63)
            loss = torch.zeros((), device=device)
            if config.shapley_weight > 0:
                scores = unit_scores(model, batch, config.n_permutations, config.antithetic, seed)
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
        history.append({"epoch": epoch + 1, "train_loss": float(np.mean(losses)), "val_auc": val["auc"],
                        "val_auc_ci": val["auc_ci"], "seconds": seconds})
        if progress:
            print(f"epoch {epoch + 1}/{config.epochs}: loss {np.mean(losses):.4f}  val AUC {val['auc']:.4f}  "
                  f"({seconds:.0f}s)", flush=True)
        if val["auc"] > best_auc:
            best_auc = val["auc"]
            checkpoint.save({**meta, "weights": model.state_dict(), "weights_fingerprint": weights_fingerprint(model),
                             "val_metrics": val, "epoch": epoch + 1,
                         "history": history}, best_path)
        checkpoint.save({**meta, "weights": model.state_dict(), "optimizer": opt.state_dict(),
                     "scheduler": sched.state_dict(), "torch_rng": torch.get_rng_state(),
                     "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None, "epoch": epoch + 1,
                     "history": history, "best_val_auc": best_auc, "seconds": seconds, "val_metrics": val}, last_path)
    return TrainResult(best_path, last_path, best_auc, history, seconds)


# ------------------------------------------------------------------------------------------ data plumbing

DATASET_KWARGS = {"musique": {"granularity": "sentence"}}


def load_split(name: str, split: str, path=None, limit: int | None = None):
    from .data import load_dataset, split_examples

    examples = load_dataset(name, path, **DATASET_KWARGS.get(name, {}))
    chosen = split_examples(examples, split)
    return chosen[:limit] if limit else chosen


def split_examples_for(config: TrainConfig, data_path=None):
    """The training examples (union of the datasets' train splits) and validation examples of ``config``.

    ``data_path`` (a file or data directory) is read for the one training dataset (and for validation when
    ``val_dataset`` is that dataset); with several training datasets it is an error, as it names one dataset's data.
    """
    if data_path is not None and len(config.datasets) > 1:
        raise InputError(f"--data / data_path names the data of one dataset, but the config trains on "
                         f"{len(config.datasets)} ({', '.join(config.datasets)}); point SCP_DATA_DIR at a folder "
                         "holding all of them instead")
    path = data_path
    val_name = config.val_dataset or config.datasets[0]
    train_ex = [ex for name in config.datasets for ex in load_split(name, "train", path)]
    val_ex = load_split(val_name, "validation", path if val_name == config.datasets[0] else None,
                        config.max_val_examples)
    return train_ex[:config.max_train_examples] if config.max_train_examples else train_ex, val_ex


def prepare(config: TrainConfig, embedder, data_path=None, show_progress: bool = False):
    """Train contexts (union of the datasets' train splits) and validation contexts (``val_dataset``)."""
    train_ex, val_ex = split_examples_for(config, data_path)
    train_ctx = contexts_from_examples(train_ex, embedder, config.features, config.with_title, show_progress)
    val_ctx = contexts_from_examples(val_ex, embedder, config.features, config.with_title, show_progress)
    return train_ctx, val_ctx, [ex.id for ex in train_ex]


def run(config: TrainConfig, out_dir, data_path=None, resume: bool = False, progress: bool = True,
        cache_dir=None) -> TrainResult:
    """Load data, embed (cached), train; also writes ``out_dir/config.json``."""
    from .embed import CachedEmbedder, get_embedder

    embedder = CachedEmbedder(get_embedder(config.embedder), cache_dir)
    train_ctx, val_ctx, ids = prepare(config, embedder, data_path, show_progress=progress)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=1))
    return train(config, train_ctx, val_ctx, out_dir, embedder.id, resume=resume, progress=progress, data_ids=ids)


# settings added after run names were first used: left out of the name's hash while at their defaults, so the
# folders of earlier runs keep their names
LATER_FIELDS = ("width", "heads", "layers", "n_inducing", "set_targets", "set_weight", "n_coalitions", "shapley_weight")


def same_config(stored: dict, config: TrainConfig) -> bool:
    """Whether a checkpoint's stored config is ``config`` (settings it predates take their defaults)."""
    return asdict(TrainConfig(**stored)) == asdict(config)


def run_name(config: TrainConfig) -> str:
    """A folder name for ``config``: datasets, model and a hash of every setting."""
    defaults = asdict(TrainConfig())
    settings = {k: v for k, v in asdict(config).items() if k not in LATER_FIELDS or v != defaults[k]}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=list).encode()).hexdigest()[:10]
    return f"{'+'.join(config.datasets)}-{config.model}-{digest}"


def train_or_load(config: TrainConfig, root, progress: bool = False, cache_dir=None) -> Path:
    """``best.safetensors`` of ``config`` under ``root/run_name(config)``: reused when a finished run of this exact
    config on the same data is there, resumed when one was interrupted, trained otherwise.  Lets notebooks share
    models without ever using one trained on other settings or data."""
    out = Path(root) / run_name(config)
    last, best = out / "last.safetensors", out / "best.safetensors"
    resume = False
    if last.is_file():
        state = read_checkpoint(last, ("config", "data_hash", "epoch"))
        ids = [ex.id for ex in split_examples_for(config)[0]]
        resume = same_config(state["config"], config) and state["data_hash"] == ids_hash(ids)
        if resume and state["epoch"] == config.epochs and best.is_file():
            return best
    return run(config, out, resume=resume, progress=progress, cache_dir=cache_dir).best_path
