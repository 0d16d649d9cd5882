"""One SCP model per embedder (the paper's Table 17): train or reuse it, with the embedder it reads.

:func:`train_with_embedder` returns an :class:`EmbedderRun` (checkpoint, the embedder to score with, training
seconds).  Embedders that :class:`scp.models.config.TrainConfig` knows (``minilm``, ``glove``, ``wordllama``,
``random``,
``bert-base``) go through :func:`scp.training.runs.train_or_load`, so a notebook that trains the same configuration
shares
the model.  ``tfidf`` (TF-IDF + truncated SVD, :class:`scp.data.embedders.TfidfSVDEmbedder`) has to be fitted on a
corpus
first, which ``train_or_load`` cannot do: :func:`fit_tfidf` fits it on the training split (the units as the
configuration reads them, and the questions), and the network is trained by :func:`scp.training.loop.train` on those
vectors, reused when a finished run of the same configuration and the same fitted embedder is there.

``TrainConfig`` accepts only its own embedder names or hub names (holding "/"), and a checkpoint's configuration
must pass that check to load, so a TF-IDF run records ``embedder = "tfidf-svd/d<dim>"`` (:func:`tfidf_config_name`)
in its configuration and the exact fitted embedder (dimension, seed, corpus hash) in its ``embedder_id``.  Load
such a checkpoint with the fitted embedder: ``ShapleyPruner.from_checkpoint(path, embedder=run.embedder)``.

:func:`embedding_seconds` times the embedders themselves (no cache), round-robin, so that a machine shared with other
jobs slows them alike.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scp.data.embedders import CachedEmbedder, Embedder, TfidfSVDEmbedder, get_embedder
from scp.errors import InputError
from scp.models.config import TrainConfig, config_from_preset
from scp.models.factory import read_checkpoint
from scp.training.loop import ids_hash, train
from scp.training.runs import prepare, run_name, split_examples_for, train_or_load

__all__ = [
    "EmbedderRun",
    "TFIDF",
    "embedding_seconds",
    "fit_tfidf",
    "tfidf_config_name",
    "train_with_embedder",
    "training_seconds",
]

TFIDF = "tfidf"
"""The name of the TF-IDF+SVD embedder in :func:`train_with_embedder` (as in
:func:`scp.data.embedders.get_embedder`)."""


@dataclasses.dataclass
class EmbedderRun:
    """A trained SCP model and the embedder it reads.

    Attributes:
        name: the embedder's name (``minilm``, ``glove``, ``wordllama``, ``tfidf``, ``random``, …).
        config: the training configuration.
        checkpoint: path of ``best.safetensors``.
        embedder: the embedder to score with (cached on disk, except TF-IDF, which is fitted in memory).
        train_seconds: training time of the whole run (every epoch, without embedding), from ``last.safetensors``.
        n_params: parameters of the value network.
    """

    name: str
    config: TrainConfig
    checkpoint: Path
    embedder: Embedder
    train_seconds: float
    n_params: int


def tfidf_config_name(dim: int) -> str:
    """The ``TrainConfig.embedder`` string of a TF-IDF+SVD run of dimension ``dim`` (see the module docstring)."""
    return f"tfidf-svd/d{dim}"


def fit_tfidf(config: TrainConfig, dim: int = 256, seed: int = 0) -> TfidfSVDEmbedder:
    """TF-IDF+SVD fitted on the training split of ``config``: its questions and its unit texts
    (``"Title: sentence"`` when ``config.unit_repr == "title"``).

    Args:
        config: the training configuration (datasets, ``max_train_examples``, unit representation).
        dim: SVD dimension (below the number of texts and of terms).
        seed: seed of the randomized SVD.

    Returns:
        The fitted embedder; its ``id`` names the dimension, the seed and a hash of the corpus.
    """
    examples, _ = split_examples_for(config)
    corpus = [ex.query for ex in examples] + [u for ex in examples for u in ex.unit_texts(config.with_title)]
    return TfidfSVDEmbedder(dim=dim, seed=seed).fit(corpus)


def training_seconds(best_path: str | Path) -> float:
    """Training seconds of the run that wrote ``best_path`` (all epochs, from the ``last.safetensors`` beside it)."""
    return float(read_checkpoint(Path(best_path).parent / "last.safetensors", ("seconds",))["seconds"])


def _train_tfidf(config: TrainConfig, embedder: Embedder, root: Path, progress: bool) -> Path:
    out = root / run_name(config)
    last, best = out / "last.safetensors", out / "best.safetensors"
    ids = [ex.id for ex in split_examples_for(config)[0]]
    resume = False
    if last.is_file():
        state = read_checkpoint(last, ("config", "data_hash", "embedder_id", "epoch"))
        resume = (
            state["config"] == dataclasses.asdict(config)
            and state["data_hash"] == ids_hash(ids)
            and state["embedder_id"] == embedder.id
        )
        if resume and state["epoch"] == config.epochs and best.is_file():
            return best
    train_ctx, val_ctx, ids = prepare(config, embedder)
    out.mkdir(parents=True, exist_ok=True)
    return train(config, train_ctx, val_ctx, out, embedder.id, resume=resume, progress=progress, data_ids=ids).best_path


def train_with_embedder(
    name: str,
    root: str | Path,
    preset: str = "best",
    tfidf_dim: int = 256,
    progress: bool = False,
    cache_dir: Any = None,
    **overrides: Any,
) -> EmbedderRun:
    """Train (or reuse) SCP with embedder ``name``: ``config_from_preset(preset, embedder=name, **overrides)``.

    Args:
        name: an embedder of :data:`scp.models.config.EMBEDDERS`, or ``"tfidf"``.
        root: folder of the runs, one sub-folder per configuration (:func:`scp.training.runs.run_name`).
        preset: the :mod:`scp.models.config` preset.
        tfidf_dim: dimension of the TF-IDF+SVD embedding (``tfidf`` only).
        progress: show training progress.
        cache_dir: embedding cache (default ``$SCP_CACHE_DIR``).
        **overrides: further ``TrainConfig`` fields (e.g. ``epochs=1`` for a smoke run).

    Returns:
        An :class:`EmbedderRun`.

    Raises:
        scp.errors.ModelUnavailableError: when the embedder cannot be loaded here (e.g. ``bert-base`` offline).
    """
    root = Path(root)
    if name == TFIDF:
        config = config_from_preset(preset, embedder=tfidf_config_name(tfidf_dim), **overrides)
        embedder: Embedder = fit_tfidf(config, tfidf_dim, seed=config.seed)
        best = _train_tfidf(config, embedder, root, progress)
    else:
        config = config_from_preset(preset, embedder=name, **overrides)
        best = train_or_load(config, root, progress=progress, cache_dir=cache_dir)
        embedder = CachedEmbedder(get_embedder(name), cache_dir)
    n_params = int(read_checkpoint(best, ("n_params",))["n_params"])
    return EmbedderRun(name, config, Path(best), embedder, training_seconds(best), n_params)


def embedding_seconds(embedders: Mapping[str, Embedder], texts: Sequence[str], repeats: int = 3) -> dict[str, list]:
    """Seconds each embedder takes to encode ``texts``, bypassing any cache, ``repeats`` times round-robin.

    Each embedder first encodes one text (loading its model, which is not timed); then every round times each
    embedder once, in turn, so slow and fast periods of a shared machine fall on all of them alike.

    Args:
        embedders: name → embedder; a :class:`scp.data.embedders.CachedEmbedder` is timed through the embedder it wraps.
        texts: the texts to encode (e.g. a few hundred unit texts).
        repeats: rounds.

    Returns:
        name → list of ``repeats`` wall-clock seconds.
    """
    if repeats < 1:
        raise InputError(f"repeats must be >= 1, got {repeats}")
    texts = list(texts)
    raw = {name: e.embedder if isinstance(e, CachedEmbedder) else e for name, e in embedders.items()}
    for e in raw.values():
        e.encode(texts[:1])
    seconds: dict[str, list] = {name: [] for name in raw}
    for _ in range(repeats):
        for name, e in raw.items():
            t0 = time.perf_counter()
            e.encode(texts, batch_size=256)
            seconds[name].append(time.perf_counter() - t0)
    return seconds
