"""Training runs from a config: the data splits it reads, embedding them, and runs that are reused, resumed or
trained under a name hashed from every setting."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from scp.data.datasets import DATASET_KWARGS
from scp.data.features import contexts_from_examples
from scp.errors import InputError
from scp.io import write_json
from scp.models.config import TrainConfig, same_config
from scp.models.factory import read_checkpoint
from scp.training.loop import TrainResult, ids_hash, train


def load_split(name: str, split: str, path=None, limit: int | None = None):
    from scp.data.datasets import load_dataset, split_examples

    examples = load_dataset(name, path, **DATASET_KWARGS.get(name, {}))
    chosen = split_examples(examples, split)
    return chosen[:limit] if limit else chosen


def split_examples_for(config: TrainConfig, data_path=None):
    """The training examples (union of the datasets' train splits) and validation examples of ``config``.

    ``data_path`` (a file or data directory) is read for the one training dataset (and for validation when
    ``val_dataset`` is that dataset); with several training datasets it is an error, as it names one dataset's data.
    """
    if data_path is not None and len(config.datasets) > 1:
        raise InputError(
            f"--data / data_path names the data of one dataset, but the config trains on "
            f"{len(config.datasets)} ({', '.join(config.datasets)}); point SCP_DATA_DIR at a folder "
            "holding all of them instead"
        )
    path = data_path
    val_name = config.val_dataset or config.datasets[0]
    train_ex = [ex for name in config.datasets for ex in load_split(name, "train", path)]
    val_ex = load_split(
        val_name, "validation", path if val_name == config.datasets[0] else None, config.max_val_examples
    )
    return train_ex[: config.max_train_examples] if config.max_train_examples else train_ex, val_ex


def prepare(config: TrainConfig, embedder, data_path=None, show_progress: bool = False):
    """Train contexts (union of the datasets' train splits) and validation contexts (``val_dataset``)."""
    train_ex, val_ex = split_examples_for(config, data_path)
    train_ctx = contexts_from_examples(train_ex, embedder, config.features, config.with_title, show_progress)
    val_ctx = contexts_from_examples(val_ex, embedder, config.features, config.with_title, show_progress)
    return train_ctx, val_ctx, [ex.id for ex in train_ex]


def run(
    config: TrainConfig, out_dir, data_path=None, resume: bool = False, progress: bool = True, cache_dir=None
) -> TrainResult:
    """Load data, embed (cached), train; also writes ``out_dir/config.json``."""
    from scp.data.embedders import CachedEmbedder, get_embedder

    embedder = CachedEmbedder(get_embedder(config.embedder), cache_dir)
    train_ctx, val_ctx, ids = prepare(config, embedder, data_path, show_progress=progress)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(dataclasses.asdict(config), out_dir / "config.json")
    return train(config, train_ctx, val_ctx, out_dir, embedder.id, resume=resume, progress=progress, data_ids=ids)


# settings added after run names were first used: left out of the name's hash while at their defaults, so the
# folders of earlier runs keep their names
LATER_FIELDS = ("width", "heads", "layers", "n_inducing", "set_targets", "set_weight", "n_coalitions", "shapley_weight")


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
