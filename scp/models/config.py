"""A value network's recipe: :class:`TrainConfig` (architecture, inputs and training settings, stored in
every checkpoint), the named presets, and the checks a stored config must pass."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass

import numpy as np

from scp.data.coalition_targets import check_targets
from scp.data.features import STRUCTURAL, check_features
from scp.errors import InputError
from scp.models.value_net import QUERY_MODES

MODELS = ("deepsets", "convex", "pointwise", "context", "context-pointwise")
POINTWISE = ("pointwise", "context-pointwise")
EMBEDDERS = ("minilm", "glove", "wordllama", "random", "bert-base")


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
        wrong = [
            f"{f.name} must be of type {f.type}, not {getattr(self, f.name)!r}"
            for f in dataclasses.fields(self)
            if not _config_value_ok(getattr(self, f.name), str(f.type))
        ]
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
            problems.append(
                f"unknown embedder {self.embedder!r}: use one of {EMBEDDERS} or a hub name like "
                "'sentence-transformers/all-mpnet-base-v2'"
            )
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
            problems.append(
                f"margin, lr and weight_decay must be finite; got margin={self.margin}, lr={self.lr}, "
                f"weight_decay={self.weight_decay}"
            )
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
    "best": dict(
        unit_repr="title",
        query_mode="product_concat",
        features=("cos", "bm25z"),
        hidden=256,
        latent=128,
        skip=True,
        margin=0.05,
        epochs=6,
        n_permutations=20,
    ),
    # the pointwise control: the same inputs and loss, one unit at a time (no set, no Shapley)
    "pointwise": dict(
        unit_repr="title",
        model="pointwise",
        query_mode="product_concat",
        features=("cos", "bm25z"),
        hidden=256,
        latent=128,
        margin=0.05,
        epochs=6,
    ),
    # the shipped set model (models/scp-hotpotqa-best.safetensors, chosen on validation AUC over 3 seeds in
    # notebook 13):
    # "best" plus the structural features only the whole context can give
    "structure": dict(
        unit_repr="title",
        query_mode="product_concat",
        features=("cos", "bm25z", *STRUCTURAL),
        hidden=256,
        latent=128,
        skip=True,
        margin=0.05,
        epochs=6,
        n_permutations=20,
    ),
    # its matched control (models/pointwise-hotpotqa-best.safetensors)
    "structure-pointwise": dict(
        unit_repr="title",
        model="pointwise",
        query_mode="product_concat",
        features=("cos", "bm25z", *STRUCTURAL),
        hidden=256,
        latent=128,
        margin=0.05,
        epochs=6,
    ),
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
        raise InputError(
            f"unknown training setting(s) {', '.join(map(repr, unknown))}; TrainConfig has {', '.join(fields)}"
        )
    return TrainConfig(**{**PRESETS[preset], **{k: v for k, v in overrides.items() if v is not None}})


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _config_value_ok(value, annotation: str) -> bool:
    for kind in (a.strip() for a in annotation.split("|")):
        if (
            (kind == "None" and value is None)
            or (kind == "str" and isinstance(value, str))
            or (kind == "bool" and isinstance(value, bool))
            or (kind == "int" and _is_int(value))
            or (kind == "float" and _is_number(value))
            or (
                kind.startswith("tuple[str")
                and isinstance(value, (list, tuple))
                and all(isinstance(v, str) for v in value)
            )
        ):
            return True
    return False


def config_problems(stored: dict) -> list[str]:
    """What is wrong with a checkpoint's stored TrainConfig (unknown settings, wrong types, invalid values)."""
    fields = {f.name: str(f.type) for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(k for k in stored if k not in fields)
    problems = [f"its config has unknown setting(s) {', '.join(map(repr, unknown))}"] if unknown else []
    problems += [
        f"its config setting {k!r} is {stored[k]!r}, not of type {fields[k]}"
        for k in stored
        if k in fields and not _config_value_ok(stored[k], fields[k])
    ]
    if not problems:
        try:
            TrainConfig(**stored)
        except (InputError, TypeError, ValueError) as error:
            problems.append(f"its config is invalid ({' '.join(str(error).split())[:300]})")
    return problems


def same_config(stored: dict, config: TrainConfig) -> bool:
    """Whether a checkpoint's stored config is ``config`` (settings it predates take their defaults)."""
    return asdict(TrainConfig(**stored)) == asdict(config)
