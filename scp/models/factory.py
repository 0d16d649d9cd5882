"""Networks from a config or a checkpoint: :func:`build_model`, and :func:`load_checkpoint`, which verifies a
checkpoint's checksums, entries, config and weights before building the network it describes."""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch
from torch import nn

from scp.core.memory import check_memory, format_bytes
from scp.errors import InputError, InputTypeError
from scp.models import checkpoint
from scp.models.config import TrainConfig, _is_int, _is_number, config_problems
from scp.models.context_net import ContextDeepSets
from scp.models.pointwise import ContextPointwise, PointwiseScorer
from scp.models.value_net import ConvexDeepSets, DeepSetsValue

CHECKPOINT_FORMAT = (
    "scp-checkpoint-v2"  # v2: content checksum verified on load; a safetensors file (scp.models.checkpoint)
)
MAX_PARAMETER_BYTES = 2 << 30
"""The most parameter memory a network built from a config may hold: 2 GiB, far above any real config (the paper's
network holds 12 MiB, the shipped one 1.6 MiB), so a config asking for more is a mistake or a forgery."""


def parameter_count(config: TrainConfig, embed_dim: int) -> tuple[int, int]:
    """(parameters, bytes) of the network ``config`` describes on ``embed_dim``-d embeddings, counted on torch's meta
    device: nothing is allocated, however large the sizes."""
    with torch.device("meta"):
        model = _network(config, embed_dim)
    params = list(model.parameters())
    return sum(p.numel() for p in params), sum(p.numel() * p.element_size() for p in params)


def build_model(config: TrainConfig, embed_dim: int, source: str = "this config") -> nn.Module:
    """The network ``config`` describes on ``embed_dim``-d embeddings, built only when ``embed_dim`` is an integer
    ≥ 1 and its parameters (:func:`parameter_count`) fit in :data:`MAX_PARAMETER_BYTES` and in the memory
    available; otherwise one :class:`InputError` naming the bytes it would need (``source`` names the config in
    it, e.g. the checkpoint it came from)."""
    if not _is_int(embed_dim) or embed_dim < 1:
        raise InputError(f"{source}: embed_dim must be an integer ≥ 1; got {embed_dim!r}")
    n_params, n_bytes = parameter_count(config, embed_dim)
    sizes = ", ".join(
        f"{k} {getattr(config, k):,}"
        for k in ("hidden", "latent", "width", "heads", "layers", "n_inducing")
        if k in ("hidden", "latent") or config.model.startswith("context")
    )
    what = f"the {config.model!r} network of {source} ({sizes}, embed_dim {embed_dim:,}) holds {n_params:,} parameters"
    if n_bytes > MAX_PARAMETER_BYTES:
        raise InputError(
            f"{what}, {format_bytes(n_bytes)}: more than the {format_bytes(MAX_PARAMETER_BYTES)} a network may hold "
            "(scp.models.factory.MAX_PARAMETER_BYTES); no real config is that large: use smaller sizes, or retrain "
            "the checkpoint if it came from one"
        )
    check_memory(n_bytes, what + " and", "use smaller sizes")
    return _network(config, embed_dim)


def _network(config: TrainConfig, embed_dim: int) -> nn.Module:
    common = dict(
        embed_dim=embed_dim, query_mode=config.query_mode, n_extra=len(config.features), dropout=config.dropout
    )
    encoder = dict(width=config.width, heads=config.heads, layers=config.layers, n_inducing=config.n_inducing)
    if config.model == "pointwise":
        return PointwiseScorer(hidden=config.hidden, **common)
    if config.model == "context-pointwise":
        return ContextPointwise(hidden=config.hidden, **common, **encoder)
    if config.model == "context":
        return ContextDeepSets(
            hidden=config.hidden,
            latent=config.latent,
            bound=config.bound,
            output=config.output,
            skip=config.skip,
            **common,
            **encoder,
        )
    if config.model == "convex":
        return ConvexDeepSets(hidden=config.hidden, latent=config.latent, bound=config.bound, **common)
    return DeepSetsValue(
        hidden=config.hidden, latent=config.latent, bound=config.bound, output=config.output, skip=config.skip, **common
    )


def load_checkpoint(path: str | os.PathLike, embedder_id: str | None = None, embed_dim: int | None = None):
    """(model in eval mode, TrainConfig, checkpoint dict), after verifying the file's checksums and structure.

    An unreadable, altered or foreign file, or one whose entries, config or weights do not fit (a missing entry,
    an unknown setting, a wrong type, a weight of another name or shape, NaN weights) is a
    :class:`scp.models.checkpoint.CheckpointError`; a mismatched embedder or dimension is an :class:`InputError`.
    """
    ckpt = read_checkpoint(path, MODEL_ENTRIES)
    if embedder_id is not None and embedder_id != ckpt["embedder_id"]:
        raise InputError(f"checkpoint {path} was trained on embedder {ckpt['embedder_id']!r}, not {embedder_id!r}")
    if embed_dim is not None and embed_dim != ckpt["embed_dim"]:
        raise InputError(f"checkpoint {path} expects {ckpt['embed_dim']}-d embeddings, got {embed_dim}-d")
    config = TrainConfig(**ckpt["config"])
    model = build_model(config, ckpt["embed_dim"], source=f"checkpoint {path}")
    load_weights(model, ckpt["weights"], path)
    return model.eval(), config, ckpt


def _is_ci(value) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_number(v) for v in value)


def _is_history(value) -> bool:
    row = {
        "epoch": _is_int,
        "train_loss": _is_number,
        "val_auc": _is_number,
        "val_auc_ci": _is_ci,
        "seconds": _is_number,
    }
    return isinstance(value, list) and all(
        isinstance(h, dict) and all(k in h and ok(h[k]) for k, ok in row.items()) for h in value
    )


def _is_rng(value) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.dim() == 1


# every entry scp.training.loop writes: (test of its value, what it must be)
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
    "weights": (
        lambda v: (
            isinstance(v, dict)
            and bool(v)
            and all(isinstance(k, str) and isinstance(t, torch.Tensor) for k, t in v.items())
        ),
        "a non-empty dict of named tensors",
    ),
    "weights_fingerprint": (lambda v: isinstance(v, str), "a string"),
    "val_metrics": (
        lambda v: isinstance(v, dict) and _is_number(v.get("auc")) and _is_ci(v.get("auc_ci")),
        "a dict with a numeric auc and a two-number auc_ci",
    ),
    "epoch": (lambda v: _is_int(v) and v >= 1, "an integer ≥ 1"),
    "history": (_is_history, "a list of per-epoch dicts (epoch, train_loss, val_auc, val_auc_ci, seconds)"),
    "optimizer": (
        lambda v: isinstance(v, dict) and isinstance(v.get("state"), dict) and isinstance(v.get("param_groups"), list),
        "an optimizer state dict (state, param_groups)",
    ),
    "scheduler": (lambda v: isinstance(v, dict), "a scheduler state dict"),
    "torch_rng": (_is_rng, "a 1-d uint8 tensor"),
    "cuda_rng": (
        lambda v: v is None or (isinstance(v, list) and all(_is_rng(t) for t in v)),
        "None or a list of 1-d uint8 tensors",
    ),
    "best_val_auc": (_is_number, "a number"),
    "seconds": (lambda v: _is_number(v) and v >= 0, "a number ≥ 0"),
}
MODEL_ENTRIES = ("format", "config", "embedder_id", "embed_dim", "weights")  # what load_checkpoint needs
RESUME_ENTRIES = MODEL_ENTRIES + (
    "data_hash",
    "epoch",
    "history",
    "optimizer",
    "scheduler",
    "torch_rng",
    "best_val_auc",
    "seconds",
)  # what resuming from last.safetensors needs


def checkpoint_problems(ckpt: dict, require: Sequence[str] = MODEL_ENTRIES) -> list[str]:
    """What is missing from or malformed in a checkpoint's payload: every entry of ``require`` must be there,
    and every entry of :data:`ENTRIES` that is there must have its type (unknown entries are left alone)."""
    problems = [f"it has no {k!r} entry" for k in require if k not in ckpt]
    problems += [
        f"its {k!r} entry is not {what} (found {type(ckpt[k]).__name__})"
        for k, (ok, what) in ENTRIES.items()
        if k in ckpt and not ok(ckpt[k])
    ]
    if isinstance(ckpt.get("config"), dict) and all(isinstance(k, str) for k in ckpt["config"]):
        problems += config_problems(ckpt["config"])
    return problems


def read_checkpoint(path: str | os.PathLike, require: Sequence[str] = MODEL_ENTRIES) -> dict:
    """The verified payload of a training checkpoint whose structure is sound (:func:`checkpoint_problems`):
    anything else is one :class:`scp.models.checkpoint.CheckpointError` naming the file and the problem; a
    ``path`` that is no str or ``os.PathLike`` of a str (a number, bytes, an open file) is an
    :class:`InputTypeError`."""
    if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
        raise InputTypeError(
            f"the checkpoint must be a path (a str or pathlib.Path to a .safetensors file); got a "
            f"{type(path).__name__}: {path!r:.80}"
        )
    ckpt = checkpoint.load(path, CHECKPOINT_FORMAT)
    problems = checkpoint_problems(ckpt, require)
    if problems:
        raise checkpoint.CheckpointError(
            f"checkpoint {path} is malformed: {'; '.join(problems)}; it was not written "
            "by this version of `scp train`: retrain it or restore a good copy"
        )
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
        raise checkpoint.CheckpointError(
            f"checkpoint {path} does not fit the network its config describes: "
            f"{'; '.join(problems[:6])}: retrain it or restore a good copy"
        )
    try:
        model.load_state_dict(weights)
    except (RuntimeError, ValueError, TypeError, KeyError) as error:
        raise checkpoint.CheckpointError(
            f"checkpoint {path}: its weights cannot be loaded ({' '.join(str(error).split())[:200]})"
        ) from None


def weights_fingerprint(model: nn.Module) -> str:
    """sha256 of the weights alone: equal fingerprints mean bit-identical networks."""
    return checkpoint.content_checksum({"weights": model.state_dict()})
