"""The model store: trained runs kept by what they were trained on, outside the work tree, shared by clones.

A store entry is the folder one training run leaves (``best.safetensors``, ``last.safetensors``, ``config.json``),
under ``$SCP_CACHE_DIR/trained-models/<key>/`` (``~/.cache/scp/trained-models`` without the variable), with a
``store.json`` holding its lineage.  The key is the sha256 of the lineage (:func:`lineage`):

- the :class:`~scp.models.config.TrainConfig` (every setting, the seed among them);
- the torch thread count of the training process (always 1 here: the stage trains single-threaded, since a
  model's last bits depend on it), and the torch version;
- the sha256 of every data file the run's splits are read from, and the hashes of the training and validation ids;
- the embeddings' fingerprint: sha256 of the float32 vectors of every text the run embeds (queries and units,
  training and validation), as the embedding cache holds them — a vector's last bits depend on the process that
  first embedded it, so the same texts embedded elsewhere give another key;
- a hash of the training code path: the source of every ``scp`` module :mod:`scp.training.runs` imports, directly
  or not (:func:`scp.suite.graph.code_digests`'s closure), not the whole package; the suite's own modules,
  this one among them, are not in it.

A hit needs no committed provenance to be trusted: the key is its lineage.  Entries are written atomically under a
lock per key (one trainer per key; a second waits and then finds the entry): a run trains into ``<key>.partial/``
(resumed there if it was cut) and is renamed into place when it finished.  :func:`train_missing` trains the
missing entries of a plan in N single-thread worker processes, longest first, each worker building the embedder and
featurising a dataset's contexts once for all the models it trains on them.  :func:`materialize` copies an entry
into a checkout's ``runs/models/<run_name>/``, where :func:`scp.training.runs.train_or_load` finds it finished and
loads it, so a notebook whose models were planned only loads.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from scp.errors import DataFormatError, InputError

STORE_ENV = "SCP_MODEL_STORE"
"""Overrides where the store lives (default ``$SCP_CACHE_DIR/trained-models``)."""

LINEAGE_FILE = "store.json"
"""The file of a store entry (and of a run folder materialized from one) that holds its key and lineage."""

THREADS = 1
"""torch threads of every training the stage runs (a model's last bits depend on the thread count)."""

TRAINING_ROOTS = ("scp.training.runs",)
"""The modules whose import closure is the training code path the key hashes."""

__all__ = [
    "Entry",
    "LINEAGE_FILE",
    "STORE_ENV",
    "StageReport",
    "embedded_texts",
    "entries",
    "lineage",
    "materialize",
    "store_dir",
    "train_missing",
    "training_code",
    "training_examples",
]


def store_dir(store: str | os.PathLike[str] | None = None) -> Path:
    """Where the store lives: ``store``, else ``$SCP_MODEL_STORE``, else ``$SCP_CACHE_DIR/trained-models``, else
    ``~/.cache/scp/trained-models``; outside the work tree, so clones share it."""
    if store is not None:
        return Path(store).expanduser()
    if os.environ.get(STORE_ENV):
        return Path(os.environ[STORE_ENV]).expanduser()
    base = os.environ.get("SCP_CACHE_DIR")
    return (Path(base).expanduser() if base else Path.home() / ".cache" / "scp") / "trained-models"


def _sha_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@cache
def training_code() -> str:
    """sha256 over ``{module: sha256 of its source}`` of the training code path (:data:`TRAINING_ROOTS`' closure)."""
    from scp.suite.graph import SCP_SOURCE, _closure, _module_file

    modules = sorted(_closure(TRAINING_ROOTS, SCP_SOURCE))
    digests = {m: _sha_bytes(_module_file(m, SCP_SOURCE).read_bytes()) for m in modules}
    return _sha_bytes(json.dumps(digests, sort_keys=True).encode())


def _data_key(config) -> str:
    """What :func:`scp.training.runs.split_examples_for` reads of a config: its datasets and limits."""
    return json.dumps(
        [list(config.datasets), config.val_dataset, config.max_train_examples, config.max_val_examples], default=list
    )


@cache
def _examples_of(data_key: str) -> tuple[list, list, list[str]]:
    from scp.data.datasets import dataset_file
    from scp.models.config import TrainConfig
    from scp.training.runs import split_examples_for

    datasets, val_dataset, max_train, max_val = json.loads(data_key)
    config = TrainConfig(
        datasets=tuple(datasets), val_dataset=val_dataset, max_train_examples=max_train, max_val_examples=max_val
    )
    train, val = split_examples_for(config)
    names = sorted({*config.datasets, config.val_dataset or config.datasets[0]})
    files = [dataset_file(n) for n in names]
    missing = [n for n, f in zip(names, files) if f is None]
    if missing:
        raise InputError(f"the model store keys runs by their data files: no local file for {', '.join(missing)}")
    return train, val, [str(f) for f in files]


def training_examples(config) -> tuple[list, list, list[str]]:
    """Training and validation examples of a config (:func:`scp.training.runs.split_examples_for`, read once per
    datasets and limits) and the data files they come from (:func:`scp.data.datasets.dataset_file`)."""
    return _examples_of(_data_key(config))


def _config_json(config) -> str:
    from scp.io import jsonable

    return json.dumps(jsonable(dataclasses.asdict(config)), sort_keys=True)


def embedded_texts(examples: Sequence, with_title: bool) -> list[str]:
    """Every text :func:`scp.data.features.contexts_from_examples` embeds for ``examples``, in its order."""
    return [ex.query for ex in examples] + [u for ex in examples for u in ex.unit_texts(with_title=with_title)]


def _fingerprint(embedder, texts: Sequence[str]) -> str:
    import numpy as np

    return _sha_bytes(np.ascontiguousarray(embedder.encode(list(texts), batch_size=256), dtype=np.float32).tobytes())


_FINGERPRINTS: dict[tuple[str, bool, str], str] = {}


def _embeddings_of(config, embedder) -> str:
    """The embeddings' fingerprint of a config's training and validation texts (once per data, unit text and
    embedder)."""
    key = (_data_key(config), bool(config.with_title), embedder.cache_id)
    if key not in _FINGERPRINTS:
        train, val, _ = training_examples(config)
        _FINGERPRINTS[key] = _fingerprint(embedder, embedded_texts([*train, *val], config.with_title))
    return _FINGERPRINTS[key]


def lineage(config, embedder=None) -> dict[str, Any]:
    """What a run of ``config`` is trained on (see the module docstring); ``embedder``: the cached embedder to read
    the vectors through (default ``CachedEmbedder(get_embedder(config.embedder))``)."""
    import torch

    from scp.data.embedders import CachedEmbedder, get_embedder
    from scp.lineage import sha256
    from scp.suite.notebook import shown_path
    from scp.training.loop import ids_hash

    train, val, files = training_examples(config)
    embedder = embedder or CachedEmbedder(get_embedder(config.embedder))
    return {
        "config": json.loads(_config_json(config)),
        "threads": THREADS,
        "torch": torch.__version__,
        "data_files": {shown_path(f): sha256(f) for f in files},
        "train_ids": ids_hash([ex.id for ex in train]),
        "val_ids": ids_hash([ex.id for ex in val]),
        "embeddings": {"embedder": embedder.cache_id, "sha256": _embeddings_of(config, embedder)},
        "training_code": training_code(),
    }


def key_of(record: Mapping[str, Any]) -> str:
    """The store key of a lineage record: the first 24 hex digits of the sha256 of its canonical JSON."""
    return _sha_bytes(json.dumps(record, sort_keys=True).encode())[:24]


@dataclass(frozen=True)
class Entry:
    """One planned model: its config, its run folder's name, its lineage and key, and where it lives in the store."""

    config: Any
    run_name: str
    lineage: dict[str, Any]
    key: str
    path: Path

    @property
    def stored(self) -> bool:
        return (self.path / "best.safetensors").is_file() and (self.path / LINEAGE_FILE).is_file()


def entries(configs: Iterable, store: Path | None = None, priority: Callable[[Any], Any] | None = None) -> list[Entry]:
    """:class:`Entry` of each config (deduplicated: two configs with one lineage are one entry), in the order of
    ``priority(config)`` (smallest first; the runner passes :func:`scp.experiments.plan.stage_priority`, the paper's
    networks and then the longest trainings first), else in the order given."""
    from scp.data.embedders import CachedEmbedder, get_embedder
    from scp.training.runs import run_name

    root, embedders, out, seen = store_dir(store), {}, [], set()
    for config in configs if priority is None else sorted(configs, key=priority):
        if config.embedder not in embedders:
            embedders[config.embedder] = CachedEmbedder(get_embedder(config.embedder))
        record = lineage(config, embedders[config.embedder])
        key = key_of(record)
        if key in seen:
            continue
        seen.add(key)
        out.append(Entry(config, run_name(config), record, key, root / key))
    return out


# ----------------------------------------------------------------------------------------------- training


_PREPARED: dict[str, tuple] = {}
_EMBEDDERS: dict[str, Any] = {}


def _prepared(config, cache_dir):
    """Training and validation contexts of ``config``, featurised once per worker for every config that shares
    the data, unit text, features and embedder (only the model settings differ)."""
    from scp.data.embedders import CachedEmbedder, get_embedder
    from scp.data.features import contexts_from_examples

    data_key = json.dumps([_data_key(config), list(config.features), config.with_title, config.embedder])
    if data_key not in _PREPARED:
        if config.embedder not in _EMBEDDERS:
            _EMBEDDERS[config.embedder] = CachedEmbedder(get_embedder(config.embedder), cache_dir)
        embedder = _EMBEDDERS[config.embedder]
        train, val, _ = training_examples(config)
        _PREPARED[data_key] = (
            contexts_from_examples(train, embedder, config.features, config.with_title),
            contexts_from_examples(val, embedder, config.features, config.with_title),
            [ex.id for ex in train],
            embedder.id,
        )
    return _PREPARED[data_key]


def _one_thread() -> None:
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(THREADS)
    import torch

    torch.set_num_threads(THREADS)


def train_entry(config_json: str, record: dict[str, Any], path: str, cache_dir: str | None = None) -> dict[str, Any]:
    """Train one store entry at ``path`` unless it is there (under its lock: a second trainer of the key waits, then
    finds it); returns ``{"key", "trained", "seconds"}``.  Runs in a single-thread worker process."""
    from scp.io import exclusive_lock, write_json
    from scp.lineage import sha256
    from scp.models.config import TrainConfig
    from scp.training.loop import train

    _one_thread()
    final = Path(path)
    key = final.name
    t0 = time.perf_counter()
    with exclusive_lock(final.parent / ".locks" / f"{key}.lock", f"store entry {key}", wait=True):
        if (final / "best.safetensors").is_file() and (final / LINEAGE_FILE).is_file():
            return {"key": key, "trained": False, "seconds": 0.0}
        config = TrainConfig(**json.loads(config_json))
        partial = final.parent / f"{key}.partial"
        partial.mkdir(parents=True, exist_ok=True)
        train_ctx, val_ctx, ids, embedder_id = _prepared(config, cache_dir)
        write_json(dataclasses.asdict(config), partial / "config.json")
        resume = (partial / "last.safetensors").is_file()
        result = train(
            config, list(train_ctx), list(val_ctx), partial, embedder_id, resume=resume, progress=False, data_ids=ids
        )
        seconds = time.perf_counter() - t0
        write_json(
            {
                "key": key,
                "lineage": record,
                "best_sha256": sha256(result.best_path),
                "train_seconds": round(seconds, 3),
                "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
            partial / LINEAGE_FILE,
        )
        if final.exists():  # a folder without a finished entry (a crash between rename and lineage): replaced
            shutil.rmtree(final)
        os.replace(partial, final)
    return {"key": key, "trained": True, "seconds": seconds}


@dataclass
class StageReport:
    """What the training stage did: entries planned, found in the store, trained; seconds; jobs."""

    planned: int = 0
    hits: int = 0
    trained: int = 0
    seconds: float = 0.0
    jobs: int = 1
    per_entry: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        return (
            f"{self.planned} models planned, {self.hits} found in the store, {self.trained} trained "
            f"in {self.seconds:.1f} s ({self.jobs} single-thread workers)"
        )


def train_missing(
    planned: Sequence[Entry], jobs: int = 1, cache_dir: str | None = None, echo: Callable[..., Any] | None = None
) -> StageReport:
    """Train every entry of ``planned`` not in the store, in ``jobs`` single-thread worker processes (spawned),
    longest first (``planned`` is in that order); entries already stored are hits."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    if jobs < 1:
        raise InputError(f"the training stage needs at least one worker, not {jobs}")
    say = echo or (lambda *a, **k: None)
    report = StageReport(planned=len(planned), jobs=jobs)
    missing = [e for e in planned if not e.stored]
    report.hits = len(planned) - len(missing)
    t0 = time.perf_counter()
    if missing:
        say(f"[train] {len(missing)} of {len(planned)} planned models are not in the store: training, {jobs} at once")
        with ProcessPoolExecutor(max_workers=min(jobs, len(missing)), mp_context=get_context("spawn")) as pool:
            futures = {
                pool.submit(train_entry, _config_json(e.config), e.lineage, str(e.path), cache_dir): e for e in missing
            }
            for done, future in enumerate(as_completed(futures), 1):
                entry, out = futures[future], future.result()
                report.trained += int(out["trained"])
                report.per_entry[entry.key] = out["seconds"]
                say(f"[train] {done}/{len(missing)} {entry.run_name} ({entry.key}) in {out['seconds']:.1f} s")
    report.seconds = time.perf_counter() - t0
    return report


# --------------------------------------------------------------------------------------------- materialize


def read_lineage(folder: Path) -> dict[str, Any] | None:
    """The ``store.json`` of a store entry or a run folder materialized from one (None when there is none)."""
    from scp.io import read_json

    path = Path(folder) / LINEAGE_FILE
    if not path.is_file():
        return None
    record = read_json(path, str(path))
    if not isinstance(record.get("key"), str) or not isinstance(record.get("best_sha256"), str):
        raise DataFormatError(f"{path}: no key or best_sha256")
    return record


def materialize(entry: Entry, runs_dir: Path) -> Path:
    """Copy the store entry into ``runs_dir/models/<run_name>/`` (atomically: a copy beside it, then one rename;
    a folder already there with this entry's model is kept), so :func:`scp.training.runs.train_or_load` loads it.
    A folder there with another model is replaced; returns the run folder."""
    from scp.lineage import sha256

    dest = Path(runs_dir) / "models" / entry.run_name
    stored = read_lineage(entry.path)
    if stored is None:
        raise InputError(f"store entry {entry.key} of {entry.run_name} is not trained yet")
    best = dest / "best.safetensors"
    if best.is_file() and (dest / LINEAGE_FILE).is_file() and sha256(best) == stored["best_sha256"]:
        return dest
    staging = dest.parent / f".{dest.name}.incoming"
    if staging.exists():
        shutil.rmtree(staging)
    shutil.copytree(entry.path, staging)
    if dest.exists():
        old = dest.parent / f".{dest.name}.replaced"
        if old.exists():
            shutil.rmtree(old)
        os.replace(dest, old)
        os.replace(staging, dest)
        shutil.rmtree(old)
    else:
        os.replace(staging, dest)
    return dest
