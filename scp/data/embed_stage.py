"""Embedding as a stage of its own: fill the embedding cache for many texts quickly, with the very bits a one-thread
:class:`~scp.data.embedders.CachedEmbedder` would store.

A "padded" embedder (:attr:`~scp.data.embedders.Embedder.padded`: MiniLM and the other sentence-transformers models,
WordLlama, the transformers mean embedder) pads a batch to its longest text, which changes a vector's last bits, so
:meth:`~scp.data.embedders.Embedder.encode` passes such texts one per forward pass.  Texts of exactly the same token
length need no padding: :func:`encode_by_length` groups them by exact token count and runs each group in batches
through the embedder's own forward path, which gives the same bits as one text at a time (checked bit for bit on real
HotpotQA units in ``tests/test_embed_stage.py``) at about twice the speed.  :func:`fill_cache` spreads the texts not
yet cached over ``jobs`` one-thread worker processes; :func:`dataset_texts` lists every text a dataset's contexts
embed, so a stage can prefill the cache before notebooks run; :func:`embed_into_cache` does the same in this process
for the few texts a pruning call has not seen (the framework adapters).  The cache keys and ``cache_id`` are those of
:class:`~scp.data.embedders.CachedEmbedder`: what is filled here is what it reads.

Command line::

    python -m scp.data.embed_stage --embedder minilm --dataset hotpotqa [--dataset musique …] -j 2
"""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from scp.data.datasets import _ALIASES, DATASET_KWARGS, load_dataset
from scp.data.embedders import (
    CachedEmbedder,
    Embedder,
    EmbeddingCache,
    SentenceTransformerEmbedder,
    TfidfSVDEmbedder,
    TransformerMeanEmbedder,
    WordLlamaEmbedder,
    _check_unicode,
    get_embedder,
    text_key,
)
from scp.data.text import as_text_list
from scp.errors import InputError, InputTypeError

PIECE_TEXTS = 2048
"""About how many texts one worker task encodes before the parent stores them (an interrupted fill keeps the rest)."""

VERIFIED_IDS = ("minilm:all-MiniLM-L6-v2",)
"""Ids of the sentence-transformers models whose grouped path was checked bit for bit against one text per pass."""

_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


# ---------------------------------------------------------------------------------------------------
# Grouped encoding


def _grouping_refused(embedder: Embedder) -> str | None:
    """Why ``embedder``'s texts cannot be grouped by token length with proven bit identity (``None``: they can)."""
    if isinstance(embedder, WordLlamaEmbedder):
        return None  # numpy: a row's sum over its own tokens does not depend on the other rows
    if isinstance(embedder, SentenceTransformerEmbedder):
        if embedder.id not in VERIFIED_IDS:
            return f"{embedder.id} was not checked bit for bit (VERIFIED_IDS)"
        device = getattr(embedder._load(), "device", None)
        if getattr(device, "type", "cpu") != "cpu":
            return f"it runs on {device}, where batched kernels may differ in their last bits (checked on CPU only)"
        return None
    if isinstance(embedder, TransformerMeanEmbedder):
        return "its grouped path was not checked bit for bit (no such model offline)"
    return f"{type(embedder).__name__} has no known tokenizer"


def token_lengths(embedder: Embedder, texts: Sequence[str], chunk: int = 512) -> np.ndarray:
    """Exact number of tokens the model of a padded ``embedder`` sees for each text (after its own truncation).

    SentenceTransformer: the attention mask of the model's own ``preprocess`` (max_seq_length truncation, special
    tokens); WordLlama: its tokenizer (no truncation, no special tokens); transformers mean: the tokenizer with
    ``truncation=True, max_length=embedder.max_length``.  Any other embedder: the text's length in characters."""
    texts = as_text_list(texts)
    out = np.zeros(len(texts), dtype=np.int64)
    for start in range(0, len(texts), chunk):
        part = texts[start : start + chunk]
        if isinstance(embedder, SentenceTransformerEmbedder):
            mask = embedder._load().preprocess(part)["attention_mask"]
            lengths = np.asarray(mask.sum(1), dtype=np.int64)
        elif isinstance(embedder, WordLlamaEmbedder):
            lengths = np.array([sum(e.attention_mask) for e in embedder._load().tokenize(part)], dtype=np.int64)
        elif isinstance(embedder, TransformerMeanEmbedder):
            tokenizer = embedder._load()[0]
            ids = tokenizer(part, truncation=True, max_length=embedder.max_length)["input_ids"]
            lengths = np.array([len(i) for i in ids], dtype=np.int64)
        else:
            lengths = np.array([len(t) for t in part], dtype=np.int64)
        out[start : start + len(part)] = lengths
    return out


def encode_by_length(
    embedder: Embedder, texts: Sequence[str], batch_size: int = 64, *, lengths: Sequence[int] | None = None
) -> np.ndarray:
    """``embedder.encode(texts)`` (float32, shape (len(texts), dim), input order), bit for bit, but faster for a
    padded embedder: texts are grouped by exact token count (:func:`token_lengths`) and each group goes in batches of
    up to ``batch_size`` through the embedder's own forward path (its ``_encode``: the same model call, pooling and
    normalisation as for one text), so no batch is ever padded.

    Batching unpadded texts is not always enough: MiniLM on this CPU (MKL, AVX-512, one thread) gives other last bits
    in a batch for texts of fewer than 16 tokens (a one-text matrix product of under 16 rows takes another kernel),
    while texts of 16 tokens or more keep theirs; other CPUs and libraries may draw that line elsewhere.  So each batch
    shape is checked before it is trusted: the first text of a batch of a (token length, batch size) not seen yet is
    also encoded alone, and when its bits differ the whole group is encoded one text at a time, as
    :meth:`~scp.data.embedders.Embedder.encode` does, and that token length is not batched again in this process (at
    this thread count).  A check costs one one-text pass per token length and batch size, once per process.

    Grouped (bit identity checked on real HotpotQA units in ``tests/test_embed_stage.py``): MiniLM
    (``minilm:all-MiniLM-L6-v2``) on CPU and WordLlama.  One text at a time (no faster, but the same bits): other
    sentence-transformers models, MiniLM on a GPU, and :class:`~scp.data.embedders.TransformerMeanEmbedder`
    (bert-base), whose grouped path could not be checked here.  A non-padded embedder is just
    ``embedder.encode(texts, batch_size=batch_size)``.  ``lengths`` (the texts' :func:`token_lengths`) may be passed
    when already known.  Input checks and errors are those of ``encode``.
    """
    texts = as_text_list(texts)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be an int >= 1, got {batch_size!r}")
    if not embedder.padded or not texts or _grouping_refused(embedder) is not None:
        return embedder.encode(texts, batch_size=batch_size)
    if embedder.needs_unicode:
        _check_unicode(texts, embedder.id)
    lengths = token_lengths(embedder, texts) if lengths is None else np.asarray(lengths, dtype=np.int64)
    if lengths.shape != (len(texts),):
        raise InputError(f"lengths has shape {lengths.shape}, expected ({len(texts)},)")
    out = np.empty((len(texts), embedder.dim), dtype=np.float32)
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        out[rows] = _encode_group(embedder, [texts[i] for i in rows], int(length), batch_size)
    bad = ~np.isfinite(out).all(axis=1)
    if bad.any():
        raise FloatingPointError(
            f"embedder {embedder.id} produced non-finite (NaN/inf) vectors for {int(bad.sum())} of {len(texts)} "
            f"texts (first: row {int(np.flatnonzero(bad)[0])})"
        )
    return out


_SAME_BITS: set[tuple[str, int, int, int]] = set()  # (id, threads, tokens, batch rows) equal to one text per pass
_NOT_BATCHED: set[tuple[str, int, int]] = set()  # (id, threads, tokens) whose batches gave other bits


def _threads() -> int:
    """torch's intra-op thread count (kernels, and so last bits, may depend on it); 1 without torch."""
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else 1


def _run(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """``texts`` through the embedder's forward path as one batch (all of one token length: nothing is padded)."""
    x = np.asarray(embedder._encode(texts, len(texts), False), dtype=np.float32)
    if x.shape != (len(texts), embedder.dim):
        raise RuntimeError(f"embedder {embedder.id} returned shape {x.shape}, expected {(len(texts), embedder.dim)}")
    return x


def _encode_group(embedder: Embedder, group: list[str], length: int, batch_size: int) -> np.ndarray:
    """Vectors of ``group`` (texts of ``length`` tokens each): batched where the batch shape gives the bits of one
    text per pass (checked on the batch's first text), else one text at a time."""
    refused = (embedder.id, _threads(), length)
    if len(group) == 1 or refused in _NOT_BATCHED:
        return np.concatenate([_run(embedder, [t]) for t in group])
    out = np.empty((len(group), embedder.dim), dtype=np.float32)
    for start in range(0, len(group), batch_size):
        batch = group[start : start + batch_size]
        out[start : start + len(batch)] = _run(embedder, batch)
        shape = (*refused, len(batch))
        if len(batch) > 1 and shape not in _SAME_BITS:
            if _run(embedder, batch[:1]).tobytes() != out[start].tobytes():
                _NOT_BATCHED.add(refused)
                return np.concatenate([_run(embedder, [t]) for t in group])
            _SAME_BITS.add(shape)
    return out


def embed_into_cache(
    embedder: CachedEmbedder,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    progress: bool | None = None,
    progress_from: int = 200,
    chunk: int = 256,
) -> int:
    """Store in ``embedder``'s cache the vectors of the distinct ``texts`` it lacks, in this process: what
    ``embedder.encode(texts)`` would store, bit for bit, sooner.  Returns how many texts were encoded.

    For a padded embedder whose texts can be grouped (:func:`encode_by_length`: MiniLM on CPU, WordLlama), the
    missing texts are sorted by exact token length and encoded ``chunk`` at a time by :func:`encode_by_length`;
    for another padded one (MiniLM on a GPU, …) one text per forward pass as ``encode`` does; a non-padded embedder
    (batching does not change its bits, and it is fast) is left to ``encode`` itself (0 is returned).  Each chunk is
    stored as soon as it is encoded (an interrupted call keeps what it did).  A tqdm bar on stderr counts the texts
    when there are at least ``progress_from`` to encode (``progress=True`` or ``False``: always or never)."""
    from tqdm.auto import tqdm

    if not isinstance(embedder, CachedEmbedder):
        raise InputTypeError(f"embedder must be a CachedEmbedder (its cache is filled); got {type(embedder).__name__}")
    texts = as_text_list(texts)
    inner = embedder.embedder
    if not inner.padded or not texts:
        return 0
    keys = [text_key(t) for t in texts]
    missing = {k: t for k, t, v in zip(keys, texts, embedder.cache.get(keys)) if v is None}
    if not missing:
        return 0
    todo_keys, todo = list(missing), list(missing.values())
    if inner.needs_unicode:
        _check_unicode(todo, inner.id)
    grouped = _grouping_refused(inner) is None
    lengths = token_lengths(inner, todo) if grouped else np.zeros(len(todo), dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    show = len(todo) >= progress_from if progress is None else bool(progress)
    with tqdm(total=len(todo), desc=f"embedding new text ({inner.id})", unit="text", disable=not show) as bar:
        for start in range(0, len(todo), chunk):
            rows = order[start : start + chunk]
            part = [todo[i] for i in rows]
            if grouped:
                vectors = encode_by_length(inner, part, batch_size, lengths=lengths[rows])
            else:
                vectors = inner.encode(part, batch_size=batch_size)  # padded: one text per pass
            embedder.cache.put([todo_keys[i] for i in rows], vectors)
            embedder.n_encoded += len(rows)
            bar.update(len(rows))
    return len(todo)


# ---------------------------------------------------------------------------------------------------
# Worker processes

_WORKER: dict[str, Any] = {}


def _one_thread() -> None:
    """This process computes on one thread: BLAS/OpenMP variables first, then torch (when installed)."""
    for var in _THREAD_VARS:
        os.environ[var] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set or parallel work started: the intra-op setting above is what counts
        pass


def _worker_init(embedder_name: str, batch_size: int) -> None:
    _one_thread()
    _WORKER["embedder"] = get_embedder(embedder_name)
    _WORKER["batch_size"] = batch_size


def _ready() -> None:
    """A no-op task: submitting one per worker starts them (and loads their model) early."""


def _worker_encode(texts: list[str], lengths: list[int]) -> tuple[str, np.ndarray]:
    embedder = _WORKER["embedder"]
    return embedder.cache_id, encode_by_length(embedder, texts, _WORKER["batch_size"], lengths=lengths)


def _pieces(lengths: np.ndarray, n_pieces: int) -> list[np.ndarray]:
    """Indices of the texts in ``n_pieces`` contiguous runs of length order with about equal token totals."""
    order = np.argsort(lengths, kind="stable")
    cost = np.cumsum(lengths[order] + 1)  # + 1: an empty text still costs a row
    bounds = np.searchsorted(cost, cost[-1] * np.arange(1, n_pieces) / n_pieces, side="right")
    return [piece for piece in np.split(order, bounds) if len(piece)]


def _check_jobs(jobs: Any) -> int:
    if isinstance(jobs, bool) or not isinstance(jobs, int):
        raise InputTypeError(f"jobs must be an int >= 1 (the number of worker processes), not {type(jobs).__name__}")
    if jobs < 1:
        raise InputError(f"jobs must be >= 1 (the number of worker processes), got {jobs}")
    return jobs


def fill_cache(
    embedder_name: str,
    texts: Sequence[str],
    jobs: int = 1,
    cache_dir: str | os.PathLike[str] | None = None,
    batch_size: int = 64,
) -> dict[str, Any]:
    """Encode the distinct ``texts`` not yet in ``get_embedder(embedder_name)``'s cache and store them there.

    The missing texts are sorted by exact token length and cut into pieces of about equal token count (at least
    ``4 * jobs``, at most ~2048 texts each); ``jobs`` worker processes (spawn; each sets OMP/MKL/OpenBLAS threads and
    ``torch.set_num_threads`` to 1 before loading the model) take pieces as they free up and encode them with
    :func:`encode_by_length`.  Only this (parent) process writes the cache: it stores each piece as one shard as soon
    as a worker returns it (:meth:`~scp.data.embedders.EmbeddingCache.put`, an atomic write of a uniquely named
    file), so an interrupted fill keeps what was done, and other processes reading or writing the same cache at the
    same time are safe as the cache itself allows (each shard is written whole and renamed into place).  The vectors
    stored equal bit for bit those a one-thread ``CachedEmbedder(get_embedder(embedder_name)).encode(texts)`` stores.
    Workers are spawned, so they import the main module: a script calling this needs the usual
    ``if __name__ == "__main__":`` guard (notebooks and ``python -m scp.data.embed_stage`` need nothing).  Each worker
    start costs some seconds (imports and model load, overlapped with this process counting tokens).

    Returns ``{"embedder", "cache_id", "texts", "distinct", "cached", "encoded", "seconds", "jobs", "workers"}``:
    ``texts`` given, ``distinct`` among them, ``cached`` distinct ones found in the cache, ``encoded`` distinct ones
    encoded now, wall ``seconds``, the ``jobs`` asked for and the worker processes started (0 when all were cached).
    """
    start = time.perf_counter()
    if not isinstance(embedder_name, str):
        raise InputTypeError(f"embedder_name must be a str (an embedder name such as 'minilm'), not {embedder_name!r}")
    texts = as_text_list(texts)
    jobs = _check_jobs(jobs)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be an int >= 1, got {batch_size!r}")
    embedder = get_embedder(embedder_name)
    if isinstance(embedder, TfidfSVDEmbedder):
        raise InputError("the tfidf embedder must be fitted on a corpus first; fill_cache cannot build it by name")
    if embedder.needs_unicode:
        _check_unicode(texts, embedder.id)
    cache = EmbeddingCache(embedder.cache_id, embedder.dim, cache_dir)
    distinct = {text_key(t): t for t in texts}
    found = cache.get(list(distinct))
    missing = [(k, t) for (k, t), v in zip(distinct.items(), found) if v is None]
    workers = 0
    if missing:
        keys, todo = [k for k, _ in missing], [t for _, t in missing]
        n_pieces = min(len(todo), max(4 * jobs, math.ceil(len(todo) / PIECE_TEXTS)))
        workers = min(jobs, n_pieces)
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=context, initializer=_worker_init, initargs=(embedder_name, batch_size)
        ) as pool:
            for _ in range(workers):  # the workers start and load the model while this process counts tokens
                pool.submit(_ready)
            grouped = embedder.padded and _grouping_refused(embedder) is None
            lengths = token_lengths(embedder, todo) if grouped else np.array([len(t) for t in todo], dtype=np.int64)
            futures = {
                pool.submit(_worker_encode, [todo[i] for i in piece], lengths[piece].tolist()): piece
                for piece in _pieces(lengths, n_pieces)
            }
            try:
                for future in concurrent.futures.as_completed(futures):
                    cache_id, vectors = future.result()
                    if cache_id != embedder.cache_id:
                        raise RuntimeError(f"a worker encoded with {cache_id}, not {embedder.cache_id}")
                    cache.put([keys[i] for i in futures[future]], vectors)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    return {
        "embedder": embedder_name,
        "cache_id": embedder.cache_id,
        "texts": len(texts),
        "distinct": len(distinct),
        "cached": len(distinct) - len(missing),
        "encoded": len(missing),
        "seconds": time.perf_counter() - start,
        "jobs": jobs,
        "workers": workers,
    }


# ---------------------------------------------------------------------------------------------------
# The texts a dataset's contexts embed


def dataset_texts(dataset: str, with_title: bool = True, **unit_options: Any) -> list[str]:
    """Every distinct text :func:`scp.data.features.contexts_from_examples` embeds for the examples of ``dataset``:
    each query, then each unit as ``ex.unit_texts(with_title)`` ("Title: sentence" where the unit has a title), in
    the order ``build_contexts`` embeds them (all queries, then all units), each text once.

    The examples are every example of the file :func:`~scp.data.datasets.load_dataset` reads for ``dataset`` (all
    splits: train, validation and test are drawn from that one file by hashing ids), read with the dataset's
    :data:`~scp.data.datasets.DATASET_KWARGS` (MuSiQue by sentence) updated by ``unit_options`` (``path`` to read
    another file, ``granularity``, FEVER's ``n_negatives``/``seed`` …).
    """
    if not isinstance(dataset, str):
        raise InputTypeError(f"dataset must be a str (a dataset name such as 'hotpotqa'), not {dataset!r}")
    key = _ALIASES.get(dataset.lower(), dataset.lower())
    if "split" in unit_options or "limit" in unit_options:
        raise InputError("dataset_texts lists every example of the dataset: it takes no split or limit")
    examples = load_dataset(dataset, **{**DATASET_KWARGS.get(key, {}), **unit_options})
    texts = [ex.query for ex in examples] + [u for ex in examples for u in ex.unit_texts(with_title=with_title)]
    return list(dict.fromkeys(texts))


# ---------------------------------------------------------------------------------------------------
# Command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scp.data.embed_stage",
        description="Fill the embedding cache ($SCP_CACHE_DIR) for every text of the given datasets' contexts.",
    )
    parser.add_argument("--embedder", default="minilm", help="embedder name (default: minilm)")
    parser.add_argument("--dataset", action="append", required=True, help="dataset name; repeat for several")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="worker processes (default: 1)")
    parser.add_argument("--batch-size", type=int, default=64, help="texts per forward pass (default: 64)")
    parser.add_argument("--no-title", action="store_true", help="units as bare sentences, not 'Title: sentence'")
    parser.add_argument("--cache-dir", default=None, help="cache folder (default: $SCP_CACHE_DIR or ~/.cache/…)")
    args = parser.parse_args(argv)
    texts = [t for name in args.dataset for t in dataset_texts(name, with_title=not args.no_title)]
    counts = fill_cache(args.embedder, texts, jobs=args.jobs, cache_dir=args.cache_dir, batch_size=args.batch_size)
    rate = counts["encoded"] / counts["seconds"] if counts["seconds"] > 0 else 0.0
    print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in counts.items()))
    print(f"{rate:.1f} texts/s encoded")
    return 0


if __name__ == "__main__":
    from scp.errors import SCPError

    try:
        sys.exit(main())
    except SCPError as error:
        print(f"scp: error: {error}", file=sys.stderr)
        sys.exit(2)
