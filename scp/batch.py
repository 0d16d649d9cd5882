"""Pruning a corpus: a JSONL file in, one JSON line out per record, locally or on Ray, resumable.

Input, one JSON object per line (blank lines are skipped, other keys are ignored):
``question`` (or ``query``), and either ``sentences`` (a list of strings, with an optional ``titles`` list of
the same length) or ``text`` (split by :func:`scp.text.split_sentences`, as :meth:`ShapleyPruner.prune` does;
``titles``, if given, must match the sentences it splits into); an optional ``id`` (string or integer; default
the line number, counted from 1).  Ids must be unique: resuming relies on them.

Output, one line per record in input order: ``id``, ``kept_indices``, ``removed_indices``, ``scores`` (one
Shapley value per sentence), ``kept_text``, ``tokens_before``, ``tokens_after`` and ``ratio`` (after/before,
``regex-words`` tokens), all from :meth:`ShapleyPruner.prune` on that record alone.

Bad records: the whole input is checked in one streaming pass before anything is pruned.  By default the
first bad record (not JSON, no question, empty context, titles of the wrong length, a repeated id …) stops the
job with a :class:`~scp.errors.DataFormatError` naming the file, the line and the problem (``scp prune``: exit
code 2) and nothing new is written.  With ``skip_bad`` each bad record is written as ``{"id": …, "error": …}``
and the job goes on.  A record that fails while being pruned is treated the same way; the records before it
stay written.

Resume: lines are appended and flushed one record at a time.  On start, a half-written last line (a job killed
mid-write) is cut off, and records whose ids are already in the output are skipped, so a rerun of the same
command finishes the file as one uninterrupted run would have written it.  The settings (checkpoint weights,
embedder, estimator, M, seed, criterion) are kept beside the output in ``OUTPUT.settings.json``: resuming with
other settings is an error rather than a file that mixes two runs.  An exclusive lock keeps two jobs from
writing the same output.

Each record is pruned on its own.  Pushing many records through the batched Deep Sets fast path was measured
to change the float32 rounding of some scores (by up to 3e-8: padding and batch shape change the kernels'
summation order), so it is not used: the scores equal ``ShapleyPruner.prune`` on the record exactly.  They also
depend, in the last bits, on the torch thread count: a Ray run writes the same file as a local run that uses as
many threads as each Ray worker has CPUs.
"""

from __future__ import annotations

import fcntl
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator

import numpy as np
from tqdm.auto import tqdm

from .errors import DataFormatError, InputError, MissingFileError, SCPError
from .io import atomic_open
from .prune import PruneResult, check_criterion
from .pruner import MAX_UNITS
from .text import split_sentences

__all__ = ["Record", "BatchSummary", "parse_line", "result_line", "error_line", "prune_record", "prune_jsonl",
           "prune_jsonl_ray"]

RAY_MISSING = "--ray needs Ray, which is not installed: pip install 'scp[ray]' (or pip install 'ray[data]')"


@dataclass(frozen=True)
class Record:
    """One input line: a question and its context (sentences, or a text to split), or what is wrong with it."""

    line: int
    id: str | int
    question: str = ""
    context: str | tuple[str, ...] = ()
    titles: tuple[str, ...] | None = None
    error: str | None = None


@dataclass
class BatchSummary:
    """What one run did: records in the input, already done before it, written now (of which errors)."""

    input: str
    output: str
    total: int = 0
    already_done: int = 0
    written: int = 0
    errors: int = 0
    seconds: float = 0.0
    dropped_partial_line: bool = False
    complete: bool = False

    def describe(self) -> str:
        parts = [f"{self.written} records written to {self.output} in {self.seconds:.1f}s"]
        if self.errors:
            parts.append(f"{self.errors} of them error records")
        if self.already_done:
            parts.append(f"{self.already_done} were already there")
        if self.dropped_partial_line:
            parts.append("a half-written last line was dropped first")
        if not self.complete:
            parts.append(f"{self.total - self.already_done - self.written} still to do (rerun to resume)")
        return "; ".join(parts)


# ------------------------------------------------------------------------------------------- records

def _str_list(value: Any, name: str) -> list[str]:
    if not isinstance(value, list):
        raise InputError(f"'{name}' must be a list of strings, not {type(value).__name__}")
    bad = [i for i, s in enumerate(value) if not isinstance(s, str)]
    if bad:
        raise InputError(f"'{name}' must hold strings; item {bad[0]} is {value[bad[0]]!r}")
    return value


def _fields(obj: Any, max_units: int) -> tuple[str, str | tuple[str, ...], tuple[str, ...] | None]:
    """(question, context, titles) of a parsed record; a ValueError says what is wrong."""
    if not isinstance(obj, dict):
        raise InputError(f"a record must be a JSON object, not {type(obj).__name__}")
    if "question" in obj and "query" in obj:
        raise InputError("give 'question' or 'query', not both")
    question = obj.get("question", obj.get("query"))
    if question is None:
        raise InputError("missing 'question' (or 'query')")
    if not isinstance(question, str) or not question.strip():
        raise InputError(f"the question must be a non-empty string, not {question!r}")
    if "sentences" in obj and "text" in obj:
        raise InputError("give 'sentences' or 'text', not both")
    if "sentences" in obj:
        context: str | tuple[str, ...] = tuple(_str_list(obj["sentences"], "sentences"))
        if not context:
            raise InputError("empty context: 'sentences' is an empty list")
        blank = [i for i, s in enumerate(context) if not s.strip()]
        if blank:
            raise InputError(f"sentence {blank[0]} is empty")
        n, what = len(context), "sentences"
    elif "text" in obj:
        context = obj["text"]
        if not isinstance(context, str):
            raise InputError(f"'text' must be a string, not {type(context).__name__}")
        n, what = len(split_sentences(context)), "sentences the text splits into"
        if n == 0:
            raise InputError("empty context: 'text' holds no sentence")
    else:
        raise InputError("no context: give 'sentences' (a list of strings) or 'text' (a string)")
    if n > max_units:
        raise InputError(f"{n} sentences exceed max_units={max_units}; split the context into passages")
    titles = obj.get("titles")
    if titles is not None:
        titles = tuple(_str_list(titles, "titles"))
        if len(titles) != n:
            raise InputError(f"'titles' has {len(titles)} entries for the {n} {what}")
    return question, context, titles


def parse_line(text: str | bytes, line: int, max_units: int = MAX_UNITS) -> Record:
    """The record on input line ``line`` (1-based); never raises: a bad record carries ``error``."""
    try:
        obj = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except UnicodeDecodeError as error:
        return Record(line, line, error=f"not UTF-8 text (byte {error.start + 1})")
    except json.JSONDecodeError as error:
        return Record(line, line, error=f"not JSON ({error.msg} at column {error.colno})")
    rid = obj.get("id", line) if isinstance(obj, dict) else line
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        return Record(line, line, error=f"'id' must be a string or an integer, not {rid!r}")
    try:
        question, context, titles = _fields(obj, max_units)
    except ValueError as error:
        return Record(line, rid, error=str(error))
    return Record(line, rid, question, context, titles)


def id_key(rid: Any) -> str:
    """Ids compare as JSON: the string "3" and the integer 3 are different ids."""
    return json.dumps(rid)


def result_line(rid: str | int, result: PruneResult) -> str:
    """The output line of a pruned record (no newline)."""
    return json.dumps({"id": rid, "kept_indices": list(result.kept_indices),
                       "removed_indices": list(result.removed_indices), "scores": list(result.scores),
                       "kept_text": result.kept_text, "tokens_before": result.original_tokens,
                       "tokens_after": result.kept_tokens, "ratio": result.token_ratio},
                      ensure_ascii=False, allow_nan=False)


def error_line(rid: str | int, message: str) -> str:
    return json.dumps({"id": rid, "error": message}, ensure_ascii=False)


def prune_record(pruner, record: Record, criterion: dict) -> tuple[str, str | None]:
    """(output line, error message or None) of one record, through :meth:`ShapleyPruner.prune`."""
    if record.error is not None:
        return error_line(record.id, f"line {record.line}: {record.error}"), record.error
    try:
        result = pruner.prune(record.question, record.context if isinstance(record.context, str)
                              else list(record.context), titles=record.titles, **criterion)
    except ValueError as error:  # content the pruner refuses; anything else is a bug and propagates
        message = " ".join(str(error).split())
        return error_line(record.id, f"line {record.line}: {message}"), message
    return result_line(record.id, result), None


# ----------------------------------------------------------------------------------------------- files

def _input_lines(f: IO[bytes], first_line: int = 1, count: int | None = None) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset, bytes) of the non-blank lines of a binary file from its current position
    (``count`` lines at most, blank ones included)."""
    offset, line = f.tell(), first_line
    for i, raw in enumerate(f):
        if count is not None and i >= count:
            return
        if raw.strip():
            yield line, offset, raw
        offset += len(raw)
        line += 1


@dataclass
class _Scan:
    total: int = 0
    pending: int = 0
    chunks: list[tuple[int, int, int]] = field(default_factory=list)  # (byte offset, first line, lines)


def _scan(path: Path, done: set[str], skip_bad: bool, max_units: int, chunk_records: int) -> _Scan:
    """Check every record (the first bad one raises unless ``skip_bad``), count them and the pending ones,
    and cut the pending ones into runs of consecutive lines of at most ``chunk_records`` records."""
    scan, seen, run = _Scan(), {}, 0  # run: records in the current chunk (0: start a new one)
    with open(path, "rb") as f:
        for line, offset, text in _input_lines(f):
            record = parse_line(text, line, max_units)
            key = id_key(record.id)
            if key in seen:
                raise DataFormatError(f"{path} line {line}: id {record.id!r} repeats the id of line {seen[key]}; "
                                      "ids must be unique (resuming relies on them)")
            seen[key] = line
            scan.total += 1
            if key in done:
                run = 0
                continue
            if record.error is not None and not skip_bad:
                raise DataFormatError(f"{path} line {line}: {record.error} (nothing was pruned in this run; fix the "
                                      "record, or pass --skip-bad to write an error record for it and go on)")
            scan.pending += 1
            if run == 0 or run >= chunk_records:
                scan.chunks.append((offset, line, 0))
                run = 0
            start, first, _ = scan.chunks[-1]
            scan.chunks[-1] = (start, first, line - first + 1)
            run += 1
    return scan


class _Output:
    """The output file, locked, its half-written last line cut off, with the ids it already holds."""

    def __init__(self, path: Path):
        self.path = path
        self.settings_path = path.with_name(path.name + ".settings.json")

    def __enter__(self) -> "_Output":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.created = not self.path.exists()
        self.f = open(self.path, "ab")
        try:
            fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.f.close()
            raise SCPError(f"{self.path} is being written by another job (it holds the file's lock)") from None
        try:
            self.done, self.dropped_partial_line = self._read()
        except BaseException:
            self.f.close()
            raise
        return self

    def _read(self) -> tuple[set[str], bool]:
        done, end = set(), 0
        with open(self.path, "rb") as f:
            for number, raw in enumerate(f, 1):
                if not raw.endswith(b"\n"):
                    break  # killed mid-write: cut off below
                try:
                    rid = json.loads(raw)["id"]
                except (ValueError, TypeError, KeyError):
                    raise DataFormatError(f"{self.path} line {number} is not a record written by scp prune; delete "
                                          "the file or write to another output") from None
                done.add(id_key(rid))
                end += len(raw)
        dropped = end < self.path.stat().st_size
        if dropped:
            self.f.truncate(end)
        return done, dropped

    def check_settings(self, settings: dict) -> None:
        """Refuse to resume records written with other settings; store these settings beside the output."""
        if self.done:
            try:
                stored = json.loads(self.settings_path.read_text())
            except (OSError, ValueError):
                raise SCPError(f"{self.path} holds {len(self.done)} records but its settings file "
                               f"{self.settings_path} is missing or unreadable, so they cannot be resumed safely; "
                               "delete the output or write to another file") from None
            changed = {k: (stored.get(k), v) for k, v in settings.items() if stored.get(k) != v}
            if changed:
                what = ", ".join(f"{k} {old!r} → {new!r}" for k, (old, new) in changed.items())
                raise SCPError(f"{self.path} was written with other settings ({what}); rerun with the same "
                               "settings to resume, or write to another output")
        with atomic_open(self.settings_path, "w") as f:
            json.dump(settings, f, indent=1)

    def write(self, line: str) -> None:
        self.f.write(line.encode("utf-8") + b"\n")
        self.f.flush()

    def __exit__(self, *exc) -> None:
        self.f.close()
        if self.created and self.path.stat().st_size == 0:  # stopped before any record: leave no empty file
            self.path.unlink()


# ------------------------------------------------------------------------------------------ settings

def _criterion(keep_ratio: float | None, top_k: int | None, token_budget: int | None, n_permutations: int,
               seed: int) -> dict:
    """The one pruning criterion given, as keyword arguments of ``prune``, after checking the run's settings."""
    check_criterion(keep_ratio=keep_ratio, top_k=top_k, token_budget=token_budget)
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int) or n_permutations < 1:
        raise InputError(f"the number of permutations M must be an integer ≥ 1; got {n_permutations!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"seed must be a non-negative integer; got {seed!r}")
    return {k: v for k, v in dict(keep_ratio=keep_ratio, top_k=top_k, token_budget=token_budget).items()
            if v is not None}


def _settings(model, embedder_id: str, estimator: str, n_permutations: int, antithetic: bool, seed: int | None,
              criterion: dict) -> dict:
    from .train import weights_fingerprint

    return {"weights": weights_fingerprint(model), "embedder": embedder_id, "estimator": estimator,
            "n_permutations": n_permutations, "antithetic": antithetic, "seed": seed,
            "criterion": check_criterion(**criterion)}


def _paths(input_path, output_path) -> tuple[Path, Path]:
    src, dst = Path(input_path), Path(output_path)
    if not src.is_file():
        raise MissingFileError(f"input {src} is not a file" if src.exists() else f"input {src} does not exist")
    if dst.is_dir():
        raise IsADirectoryError(f"output {dst} is a directory; give the path of the JSONL file to write")
    if dst.exists() and dst.resolve() == src.resolve():
        raise InputError(f"the output {dst} is the input; write to another file")
    return src, dst


# ------------------------------------------------------------------------------------------------ local

def prune_jsonl(input_path, output_path, *, checkpoint=None, pruner=None, keep_ratio: float | None = None,
                top_k: int | None = None, token_budget: int | None = None, n_permutations: int = 50,
                seed: int = 0, skip_bad: bool = False, progress: bool = True, max_records: int | None = None,
                cache_dir=None) -> BatchSummary:
    """Prune every record of ``input_path`` into ``output_path`` in this process (see the module docstring).

    Give ``checkpoint`` (loaded with ``n_permutations``, ``seed`` and ``cache_dir``) or a ready ``pruner`` (its
    own M and seed are used).  ``max_records`` stops after that many new records (the rest is left for a rerun).
    """
    criterion = _criterion(keep_ratio, top_k, token_budget, n_permutations, seed)
    if pruner is None and checkpoint is None:
        raise InputError("give a checkpoint (or a ShapleyPruner)")
    src, dst = _paths(input_path, output_path)
    max_units = MAX_UNITS if pruner is None else pruner.max_units
    t0 = time.perf_counter()
    summary = BatchSummary(str(src), str(dst))
    with _Output(dst) as out:
        scan = _scan(src, out.done, skip_bad, max_units, chunk_records=1 << 30)  # bad input: before any loading
        summary.total, summary.already_done = scan.total, scan.total - scan.pending
        summary.dropped_partial_line = out.dropped_partial_line
        if pruner is None:
            from .pruner import ShapleyPruner

            pruner = ShapleyPruner.from_checkpoint(checkpoint, cache_dir=cache_dir, n_permutations=n_permutations,
                                                   seed=seed)
        out.check_settings(_settings(pruner.model, pruner.embedder.id, pruner.estimator, pruner.n_permutations,
                                     pruner.antithetic, pruner.seed, criterion))
        with open(src, "rb") as f, tqdm(total=scan.pending, desc="scp prune", unit="record",
                                         disable=not progress) as bar:
            for line, _, text in _input_lines(f):
                if max_records is not None and summary.written >= max_records:
                    break
                record = parse_line(text, line, max_units)
                if id_key(record.id) in out.done:
                    continue
                output, error = prune_record(pruner, record, criterion)
                if error is not None and not skip_bad:
                    raise DataFormatError(f"{src} line {line}: {error} ({summary.written} records written before it "
                                          f"to {dst}; fix the record and rerun to resume, or pass --skip-bad)")
                out.write(output)
                summary.written += 1
                summary.errors += error is not None
                bar.update()
    summary.complete = summary.already_done + summary.written == summary.total
    summary.seconds = time.perf_counter() - t0
    return summary


# -------------------------------------------------------------------------------------------------- Ray

class RayPruneWorker:
    """A Ray Data actor: loads the pruner once, then prunes chunks of input lines (offset, first line, count)."""

    def __init__(self, checkpoint: str, input_path: str, criterion: dict, n_permutations: int, seed: int,
                 cache_dir: str | None, use_gpu: bool, threads: int):
        import torch

        from .pruner import ShapleyPruner

        torch.set_num_threads(max(1, threads))
        self.pruner = ShapleyPruner.from_checkpoint(checkpoint, cache_dir=cache_dir, n_permutations=n_permutations,
                                                    seed=seed, device="cuda" if use_gpu else None)
        self.input_path, self.criterion = input_path, criterion

    def __call__(self, batch: dict) -> dict:
        lines, errors = [], []
        with open(self.input_path, "rb") as f:
            for offset, first, count in zip(batch["offset"], batch["first"], batch["count"]):
                f.seek(int(offset))
                for line, _, text in _input_lines(f, int(first), int(count)):
                    output, error = prune_record(self.pruner, parse_line(text, line, self.pruner.max_units),
                                                 self.criterion)
                    lines.append(output)
                    errors.append("" if error is None else f"line {line}: {error}")
        return {"line": np.array(lines, dtype=object), "error": np.array(errors, dtype=object)}


def _import_ray():
    try:
        import ray
        import ray.data
    except ImportError as error:
        raise SCPError(f"{RAY_MISSING} ({error})") from None
    return ray


def prune_jsonl_ray(input_path, output_path, *, checkpoint, keep_ratio: float | None = None,
                    top_k: int | None = None, token_budget: int | None = None, n_permutations: int = 50,
                    seed: int = 0, skip_bad: bool = False, progress: bool = True, address: str | None = None,
                    num_workers: int = 1, cpus_per_worker: int = 1, gpus_per_worker: float = 0,
                    batch_size: int = 16, cache_dir=None) -> BatchSummary:
    """:func:`prune_jsonl` on Ray: the same checks, output format, order and resume.

    Ray Data streams chunks of at most ``batch_size`` pending records (byte ranges of the input, which the
    workers read: the path must be readable on every node) through ``num_workers`` actors that each load the
    pruner once (``cpus_per_worker`` CPUs and torch threads, ``gpus_per_worker`` GPUs: > 0 prunes on the GPU);
    the driver writes their lines in input order.  ``address`` connects to a running cluster; without it a
    local instance with ``num_workers · cpus_per_worker`` CPUs is started (and stopped at the end), unless Ray
    is already initialised in this process.
    """
    ray = _import_ray()
    for name, value in dict(num_workers=num_workers, cpus_per_worker=cpus_per_worker, batch_size=batch_size).items():
        if not isinstance(value, int) or value < 1:
            raise InputError(f"{name} must be an integer ≥ 1; got {value!r}")
    if not (isinstance(gpus_per_worker, (int, float)) and gpus_per_worker >= 0):
        raise InputError(f"gpus_per_worker must be a number ≥ 0; got {gpus_per_worker!r}")
    criterion = _criterion(keep_ratio, top_k, token_budget, n_permutations, seed)
    src, dst = _paths(input_path, output_path)
    t0 = time.perf_counter()
    summary = BatchSummary(str(src), str(dst))
    with _Output(dst) as out:
        scan = _scan(src, out.done, skip_bad, MAX_UNITS, chunk_records=batch_size)
        summary.total, summary.already_done = scan.total, scan.total - scan.pending
        summary.dropped_partial_line = out.dropped_partial_line
        from .train import load_checkpoint

        model, _, ckpt = load_checkpoint(checkpoint)
        out.check_settings(_settings(model, ckpt["embedder_id"], "monte_carlo", n_permutations, False, seed,
                                     criterion))
        started = False
        if scan.pending and not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            else:
                ray.init(num_cpus=num_workers * cpus_per_worker, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.WARNING)
            started = True
        try:
            if scan.pending:
                data_context = ray.data.DataContext.get_current()
                data_context.execution_options.preserve_order = True
                data_context.enable_progress_bars = False
                chunks = [{"offset": o, "first": first, "count": n} for o, first, n in scan.chunks]
                kwargs = dict(checkpoint=str(Path(checkpoint).resolve()), input_path=str(src.resolve()),
                              criterion=criterion, n_permutations=n_permutations, seed=seed,
                              cache_dir=None if cache_dir is None else str(cache_dir), use_gpu=gpus_per_worker > 0,
                              threads=cpus_per_worker)
                ds = ray.data.from_items(chunks, override_num_blocks=len(chunks)).map_batches(
                    RayPruneWorker, batch_size=1, batch_format="numpy", concurrency=num_workers,
                    num_cpus=cpus_per_worker, num_gpus=gpus_per_worker or None, fn_constructor_kwargs=kwargs)
                with tqdm(total=scan.pending, desc="scp prune (ray)", unit="record", disable=not progress) as bar:
                    for row in ds.iter_rows():
                        if row["error"] and not skip_bad:
                            raise DataFormatError(f"{src} {row['error']} ({summary.written} records written before "
                                                  f"it to {dst}; fix the record and rerun to resume, or pass "
                                                  "--skip-bad)")
                        out.write(row["line"])
                        summary.written += 1
                        summary.errors += bool(row["error"])
                        bar.update()
        finally:
            if started:
                ray.shutdown()
    summary.complete = summary.already_done + summary.written == summary.total
    summary.seconds = time.perf_counter() - t0
    return summary
