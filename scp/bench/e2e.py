"""End-to-end times a user waits for: ``python -m scp.bench.e2e [--quick] [--out FILE] [--threads N]``
(also ``python -m scp.bench endtoend``).

(a) pruning one ~40-sentence HotpotQA context given as raw text (split, embed, score, select) with the shipped
    checkpoint: cold (a new embedding cache on an empty temporary folder, the models already loaded) and warm
    (its embeddings cached); loading the checkpoint and the embedder is timed separately (imports done first);
(b) embedding throughput in sentences/s: cold (the model encodes, in batches of 256 as the pruner asks, and of
    16) and cached (a new cache object reads the vectors back from disk);
(c) training throughput (contexts/s) of the shipped preset (``scp.models.config.SHIPPED_PRESET``) and the wall time of
    one epoch on the HotpotQA train split (embeddings precomputed from the cache beforehand; the epoch includes its
    validation pass and
    checkpoint writes);
(d) ``scp prune`` throughput (records/s) in this process on a 50-record HotpotQA corpus, cold and warm cache.

Every number is the median of ``--repeats`` runs (default 5; ``--quick``: 2 runs, smaller sizes) with its min
and max.  The torch thread count, CPU affinity and load average are recorded: on a shared machine read the
times as upper bounds.  A Markdown table goes to stdout, JSON to ``--out`` (default
``results/bench/endtoend.json``, written atomically).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from scp.errors import InputError
from scp.paths import SHIPPED_MODEL

CHECKPOINT = SHIPPED_MODEL
DEFAULT_OUT = "results/bench/endtoend.json"
M = 50  # Monte-Carlo permutations, the default of ShapleyPruner and `scp prune`


def timing_summary(what: str, unit: str, values: list[float], note: str = "") -> dict:
    """One table row: median, min and max of the repeats."""
    return {
        "what": what,
        "unit": unit,
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "repeats": len(values),
        "values": values,
        "note": note,
    }


def repeat(fn: Callable[[], float], n: int) -> list[float]:
    """``n`` results of ``fn`` (each call measures and returns its own number, so set-up stays out)."""
    return [fn() for _ in range(n)]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def format_table(result: dict) -> str:
    """The Markdown table of a result (``rows`` and ``meta`` as :func:`run` returns them)."""
    meta = result["meta"]
    lines = [
        f"End-to-end, torch threads = {meta['torch_threads']}, CPUs usable = {meta['cpus_usable']}, "
        f"load average {meta['loadavg_start'][0]:.2f} → {meta['loadavg_end'][0]:.2f}"
        + (" (quick)" if meta["quick"] else ""),
        "",
        "| measurement | median | min | max | unit | repeats | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['what']} | {_fmt(row['median'])} | {_fmt(row['min'])} | {_fmt(row['max'])} | "
            f"{row['unit']} | {row['repeats']} | {row['note']} |"
        )
    return "\n".join(lines)


def _shown(path) -> str:
    """``path`` relative to the repository when inside it (results carry no machine-specific prefix)."""
    path = Path(path).resolve()
    root = CHECKPOINT.parents[1]
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _examples(split: str, limit: int | None = None):
    from scp.data.datasets import load_dataset

    return load_dataset("hotpotqa", split=split, limit=limit)


def run(quick: bool = False, repeats: int | None = None, checkpoint=CHECKPOINT) -> dict:
    """Measure (a)–(d) (see the module docstring); returns ``{"meta": …, "rows": […]}``."""
    with warnings.catch_warnings():  # per-context warnings of the pruner (no titles for raw text) are expected
        warnings.filterwarnings("ignore", message="this checkpoint was trained on 'Title: sentence' units")
        warnings.filterwarnings("ignore", message="duplicate sentences")
        return _run(quick, repeats, checkpoint)


def _run(quick: bool, repeats: int | None, checkpoint) -> dict:
    from scp.data.embedders import CachedEmbedder
    from scp.data.text import split_sentences
    from scp.models.config import SHIPPED_PRESET, config_from_preset
    from scp.pruning.corpus import prune_jsonl
    from scp.pruning.pruner import ShapleyPruner
    from scp.training.loop import train
    from scp.training.runs import prepare

    repeats = repeats or (2 if quick else 5)
    if repeats < 1:
        raise InputError(f"repeats must be ≥ 1; got {repeats}")
    n_sentences, n_records = (64, 6) if quick else (512, 50)
    meta = {
        "quick": quick,
        "repeats": repeats,
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "loadavg_start": list(os.getloadavg()),
        "checkpoint": _shown(checkpoint),
        "n_permutations": M,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    rows = []
    import sentence_transformers  # noqa: F401  (imports are a per-process cost, kept out of the load time)

    with tempfile.TemporaryDirectory(prefix="scp-bench-") as tmp:
        tmp = Path(tmp)
        counter = iter(range(1 << 30))

        def fresh() -> Path:
            path = tmp / f"cache{next(counter)}"
            path.mkdir()
            return path

        def load() -> float:
            start = time.perf_counter()
            p = ShapleyPruner.from_checkpoint(checkpoint, cache_dir=fresh(), n_permutations=M, seed=0)
            getattr(p.embedder.embedder, "_load", lambda: None)()  # the weights themselves load lazily
            return time.perf_counter() - start

        rows.append(timing_summary("load checkpoint + MiniLM", "s", repeat(load, repeats)))
        loaded = ShapleyPruner.from_checkpoint(checkpoint, cache_dir=fresh(), n_permutations=M, seed=0)
        model, config, inner = loaded.model, loaded.config, loaded.embedder.embedder

        def pruner() -> ShapleyPruner:
            return ShapleyPruner(model, config, CachedEmbedder(inner, fresh()), n_permutations=M, seed=0)

        # (a) one ~40-sentence context from raw text
        ex = next(e for e in _examples("test") if 38 <= e.n_units <= 45)
        text = " ".join(ex.units)
        n_split = len(split_sentences(text))
        warm_pruner = pruner()

        def cold_prune() -> float:
            p = pruner()
            return _timed(lambda: p.prune(ex.query, text, keep_ratio=0.5))

        rows.append(
            timing_summary(
                f"(a) prune one context from raw text, cold cache ({n_split} sentences)",
                "s",
                repeat(cold_prune, repeats),
                f"M = {M}; split, embed, score, select",
            )
        )
        warm_pruner.prune(ex.query, text, keep_ratio=0.5)
        rows.append(
            timing_summary(
                f"(a) prune one context from raw text, warm cache ({n_split} sentences)",
                "s",
                repeat(lambda: _timed(lambda: warm_pruner.prune(ex.query, text, keep_ratio=0.5)), repeats),
                f"M = {M}; embeddings in memory",
            )
        )

        # (b) embedding throughput
        sentences = list(dict.fromkeys(u for e in _examples("test") for u in e.units))[:n_sentences]
        folders = []

        def cold_embed() -> float:
            folders.append(fresh())
            return len(sentences) / _timed(lambda: CachedEmbedder(inner, folders[-1]).encode(sentences, batch_size=256))

        def cached_embed() -> float:
            return len(sentences) / _timed(lambda: CachedEmbedder(inner, folders[0]).encode(sentences, batch_size=256))

        rows.append(
            timing_summary(
                f"(b) embed {len(sentences)} sentences, cold",
                "sentences/s",
                repeat(cold_embed, repeats),
                "MiniLM, batch 256 as scp.data.features.build_contexts asks",
            )
        )
        rows.append(
            timing_summary(
                f"(b) embed {len(sentences)} sentences, cold, batch 16",
                "sentences/s",
                repeat(
                    lambda: (
                        len(sentences) / _timed(lambda: CachedEmbedder(inner, fresh()).encode(sentences, batch_size=16))
                    ),
                    repeats,
                ),
                "each batch is padded to its longest text",
            )
        )
        rows.append(
            timing_summary(
                f"(b) embed {len(sentences)} sentences, cached",
                "sentences/s",
                repeat(cached_embed, repeats),
                "a new cache object reads the shards from disk",
            )
        )

        # (c) training the shipped preset
        overrides = dict(epochs=1, max_train_examples=32, max_val_examples=16) if quick else dict(epochs=1)
        train_config = config_from_preset(SHIPPED_PRESET, **overrides)
        embedder = CachedEmbedder(inner)  # the user's cache (SCP_CACHE_DIR): training inputs, not embedding, timed
        start = time.perf_counter()
        train_ctx, val_ctx, ids = prepare(train_config, embedder)
        prep = time.perf_counter() - start
        meta.update(
            train_contexts=len(train_ctx),
            val_contexts=len(val_ctx),
            prepare_seconds=prep,
            prepare_encoded_texts=embedder.n_encoded,
        )
        epochs = []

        def one_epoch() -> float:
            out = fresh()
            epochs.append(
                _timed(lambda: train(train_config, train_ctx, val_ctx, out, embedder.id, progress=False, data_ids=ids))
            )
            return len(train_ctx) / epochs[-1]

        rows.append(
            timing_summary(
                f"(c) training throughput, preset {SHIPPED_PRESET} ({len(train_ctx)} train contexts)",
                "contexts/s",
                repeat(one_epoch, repeats),
                f"M = {train_config.n_permutations}, batch {train_config.batch_size}",
            )
        )
        rows.append(
            timing_summary(
                "(c) one epoch on the HotpotQA train split",
                "s",
                epochs,
                f"+ validation on {len(val_ctx)} contexts and checkpoint writes",
            )
        )

        # (d) `scp prune` on a corpus
        corpus = tmp / "corpus.jsonl"
        with open(corpus, "w") as f:
            for e in _examples("test", n_records):
                f.write(
                    json.dumps({"id": e.id, "question": e.query, "sentences": list(e.units), "titles": list(e.titles)})
                    + "\n"
                )
        outputs = iter(range(1 << 30))
        warm_corpus = pruner()
        prune_jsonl(corpus, tmp / "warmup.jsonl", pruner=warm_corpus, keep_ratio=0.5, progress=False)

        def prune_corpus(p: ShapleyPruner) -> float:
            out = tmp / f"out{next(outputs)}.jsonl"
            return n_records / _timed(lambda: prune_jsonl(corpus, out, pruner=p, keep_ratio=0.5, progress=False))

        rows.append(
            timing_summary(
                f"(d) scp prune, {n_records} records, cold cache",
                "records/s",
                repeat(lambda: prune_corpus(pruner()), repeats),
                f"M = {M}, in-process, models loaded",
            )
        )
        rows.append(
            timing_summary(
                f"(d) scp prune, {n_records} records, warm cache",
                "records/s",
                repeat(lambda: prune_corpus(warm_corpus), repeats),
                f"M = {M}",
            )
        )
    meta["loadavg_end"] = list(os.getloadavg())
    return {"meta": meta, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scp.bench.e2e", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 repeats and smaller sizes (a smoke run)")
    parser.add_argument("--repeats", type=int, help="repeats per number (default 5; --quick: 2)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"JSON file to write (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error(f"--repeats must be ≥ 1, got {args.repeats}")
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be ≥ 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    if Path(args.out).is_dir():
        parser.error(f"--out {args.out} is a directory; give the path of the JSON file to write")
    result = run(quick=args.quick, repeats=args.repeats)
    print(format_table(result))
    from scp.io import atomic_open

    with atomic_open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
