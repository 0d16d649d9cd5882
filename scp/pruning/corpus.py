"""Pruning a corpus: a JSONL file in, one JSON line out per record, locally or on Ray, resumable.

Input, one JSON object per line (blank lines are skipped, other keys are ignored):
``question`` (or ``query``), and either ``sentences`` (a list of strings, with an optional ``titles`` list of
the same length) or ``text`` (split by :func:`scp.data.text.split_sentences`, as :meth:`ShapleyPruner.prune` does;
``titles``, if given, must match the sentences it splits into); an optional ``id`` (string or integer; default
the line number, counted from 1).  Ids must be unique: resuming relies on them.

Output, one line per record in input order: ``id``, ``kept_indices``, ``removed_indices``, ``scores`` (one
Shapley value per sentence), ``kept_text``, ``tokens_before``, ``tokens_after`` and ``ratio`` (after/before,
``regex-words`` tokens), all from :meth:`ShapleyPruner.prune` on that record alone.

Bad records: the whole input is checked in one streaming pass before anything is pruned or any file is
touched.  By default the first bad record (not JSON, nested deeper than :data:`scp.io.MAX_JSON_DEPTH`, no
question, empty context, titles of the wrong length, a repeated id …) stops the job with a
:class:`~scp.errors.DataFormatError` naming the file, the line and the problem (``scp prune``: exit code 2) and
nothing is written.  With ``skip_bad`` each bad record is written as
``{"id": …, "error": …}`` and the job goes on.  A record that fails while being pruned is treated the same way;
the records before it stay written.

Only its own files: an existing output is resumed only if scp prune wrote it, i.e. its settings file
``OUTPUT.settings.json`` is beside it and every complete line is one of its records; anything else (a user's
notes, a JSON file, an output without settings, a damaged line) is an :class:`~scp.errors.SCPError` naming the
file, which is left byte for byte as it was.  The output and the settings file are created with the first
record written: a run that fails before (a bad record, other settings, no GPU …) creates neither, and never
leaves an empty output.

Resume: lines are appended and flushed one record at a time, so a rerun of the same command finishes the file as
one uninterrupted run on the (final) input would have written it.  The settings file holds the checkpoint
weights, embedder, estimator, M, seed and criterion, and the input's identity (path, size, sha256) with a
content hash of every record, and a checksum of all that (a settings file edited, truncated or nested too deep is
named as damaged); resuming with other settings, another input, or an input in which a record that was pruned
has changed or gone, is an error naming what differs, rather than a file that mixes two runs.  Each record read
for pruning is checked against the hash the validation pass took: an input rewritten during a run stops it (the
records written so far are the content checked, as the settings file says), and a rerun resumes on the new
content.  Records
already pruned are kept and skipped; error records (``skip_bad``) are retried, including records fixed in the
input since.  Once the input is validated, a half-written last line (a job killed mid-write) is cut off; where
retried records (or records to reorder or drop) lie between kept lines, the file is rewritten beside the output
and renamed over it, so a job killed at any point leaves a file a rerun finishes.  An exclusive lock keeps two
jobs from writing the same output.

Streams: an output named ``/dev/stdout``, ``/dev/stderr`` or ``/dev/fd/N``, a named pipe or a character device is
only written to, in input order: never read, no resume, no lock, no settings file.  Any other output that is not a
regular file or a new path — a symbolic link (dangling or not: nothing is created at its target), a socket, a
folder — is refused before any work (:func:`scp.io.check_output_path`), as is a settings file that is not one.

Progress: a bar on a terminal, and (``heartbeat``) a line on stderr every :data:`HEARTBEAT_SECONDS` while one
record takes longer than that to check or prune, on a terminal or not.

Each record is pruned on its own.  Pushing many records through the batched Deep Sets fast path was measured
to change the float32 rounding of some scores (by up to 3e-8: padding and batch shape change the kernels'
summation order), so it is not used: the scores equal ``ShapleyPruner.prune`` on the record exactly.  They also
depend, in the last bits, on the torch thread count: a Ray run writes the same file as a local run that uses as
many threads as each Ray worker has CPUs.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import stat
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

import numpy as np
from tqdm.auto import tqdm

from scp.core.selection import check_criterion
from scp.data.text import is_blank, split_sentences
from scp.errors import DataFormatError, InputError, MissingFileError, SCPError
from scp.io import atomic_open, check_output_path, is_stream, parse_json, read_json
from scp.overwrite import refuse_inputs_as_outputs
from scp.pruning.pruner import MAX_UNITS
from scp.pruning.result import PruneResult

__all__ = [
    "Record",
    "BatchSummary",
    "parse_line",
    "result_line",
    "error_line",
    "prune_record",
    "prune_jsonl",
    "prune_jsonl_ray",
    "is_stream",
]

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
    """What one run did: records in the input, already done before it, written now (of which errors), error
    records of an earlier run retried, and whether the output was a stream (no resume)."""

    input: str
    output: str
    total: int = 0
    already_done: int = 0
    written: int = 0
    errors: int = 0
    seconds: float = 0.0
    dropped_partial_line: bool = False
    complete: bool = False
    retried: int = 0
    streamed: bool = False

    def describe(self) -> str:
        if self.total == 0:  # an empty input: nothing to prune, and no empty output is made for it
            where = (
                f"nothing was streamed to {self.output}"
                if self.streamed
                else f"{self.output} holds none"
                if os.path.lexists(self.output)
                else f"{self.output} was not created"
            )
            return f"no record was written: the input {self.input} holds no records; {where}"
        parts = [f"{self.written} records written to {self.output} in {self.seconds:.1f}s"]
        if self.errors:
            parts.append(f"{self.errors} of them error records")
        if self.already_done:
            parts.append(f"{self.already_done} were already there")
        if self.retried:
            parts.append(f"{self.retried} error records of an earlier run retried")
        if self.dropped_partial_line:
            parts.append("a half-written last line was dropped first")
        if self.streamed:
            parts.append("streamed (no resume)")
        if not self.complete:
            parts.append(
                f"{self.total - self.already_done - self.written} still to do"
                + ("" if self.streamed else " (rerun to resume)")
            )
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
    if not isinstance(question, str) or is_blank(question):
        raise InputError(f"the question must be a non-empty string, not {question!r}")
    if "sentences" in obj and "text" in obj:
        raise InputError("give 'sentences' or 'text', not both")
    if "sentences" in obj:
        context: str | tuple[str, ...] = tuple(_str_list(obj["sentences"], "sentences"))
        if not context:
            raise InputError("empty context: 'sentences' is an empty list")
        blank = [i for i, s in enumerate(context) if is_blank(s)]
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
    """The record on input line ``line`` (1-based); never raises: a bad record (not UTF-8 JSON, nested deeper than
    :data:`scp.io.MAX_JSON_DEPTH`, missing fields …) carries ``error``."""
    try:
        obj = parse_json(text, "the record")
    except DataFormatError as error:
        return Record(line, line, error=str(error))
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
    return json.dumps(
        {
            "id": rid,
            "kept_indices": list(result.kept_indices),
            "removed_indices": list(result.removed_indices),
            "scores": list(result.scores),
            "kept_text": result.kept_text,
            "tokens_before": result.original_tokens,
            "tokens_after": result.kept_tokens,
            "ratio": result.token_ratio,
        },
        ensure_ascii=False,
        allow_nan=False,
    )


def error_line(rid: str | int, message: str) -> str:
    return json.dumps({"id": rid, "error": message}, ensure_ascii=False)


def prune_record(pruner, record: Record, criterion: dict) -> tuple[str, str | None]:
    """(output line, error message or None) of one record, through :meth:`ShapleyPruner.prune`."""
    if record.error is not None:
        return error_line(record.id, f"line {record.line}: {record.error}"), record.error
    try:
        result = pruner.prune(
            record.question,
            record.context if isinstance(record.context, str) else list(record.context),
            titles=record.titles,
            **criterion,
        )
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


def _digest(raw: bytes) -> str:
    """The content hash of one input record (its line without the surrounding whitespace)."""
    return hashlib.sha256(raw.strip()).hexdigest()[:16]


class _Entry(NamedTuple):
    """One input record as the scan saw it."""

    line: int
    offset: int
    id: str | int
    key: str
    digest: str
    error: str | None


@dataclass
class _Scan:
    """Every record of the input in order, where each one starts, and the input's identity."""

    path: Path
    records: list[_Entry] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)  # id key → position in records
    size: int = 0
    sha256: str = ""

    def identity(self) -> dict:
        return {"path": str(self.path.resolve()), "size": self.size, "sha256": self.sha256}


#: A record that takes longer than this to check or prune gets a line on stderr, and another every as many seconds.
HEARTBEAT_SECONDS = 5.0


class _Heartbeat:
    """While one step of a run (a record being checked or pruned) lasts longer than :data:`HEARTBEAT_SECONDS`,
    a line on stderr every :data:`HEARTBEAT_SECONDS` saying which record and for how long (printed around a
    progress bar).  :meth:`step` is one assignment, cheap enough for every line of a large input."""

    def __init__(self, enabled: bool):
        self.enabled, self.every = enabled, HEARTBEAT_SECONDS
        self.current: tuple[str, int, Any, float] | None = None  # (doing, line, id, since), replaced whole
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def step(self, doing: str, line: int, rid: Any) -> None:
        """From now on the run is ``doing`` (``"checked"``, ``"pruned"``) the record on ``line``."""
        self.current = (doing, line, rid, time.monotonic())

    def idle(self) -> None:
        """No record is being worked on (the model loads, the output is finished)."""
        self.current = None

    def _beat(self) -> None:
        said = None
        while not self.stop.wait(min(self.every, 1.0) / 4):
            current = self.current
            if current is None:
                continue
            doing, line, rid, since = current
            seconds = time.monotonic() - since
            if seconds >= self.every and (said is None or said[0] is not current or seconds - said[1] >= self.every):
                what = f"line {line}" if rid is None else f"line {line} (id {rid!r})"
                tqdm.write(f"scp prune: {what} has been {doing} for {seconds:.0f}s", file=sys.stderr)
                said = (current, seconds)

    def __enter__(self) -> _Heartbeat:
        if self.enabled:
            self.thread = threading.Thread(target=self._beat, name="scp-prune-heartbeat", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()


def _scan(path: Path, skip_bad: bool, max_units: int, beat: _Heartbeat) -> _Scan:
    """Check every record (the first bad one raises unless ``skip_bad``; a repeated id always does), and note
    each record's line, byte offset, id and content hash, and the whole file's size and sha256."""
    scan, sha, offset = _Scan(path), hashlib.sha256(), 0
    with open(path, "rb") as f:
        for line, raw in enumerate(f, 1):
            sha.update(raw)
            if raw.strip():
                beat.step("checked", line, None)
                record = parse_line(raw, line, max_units)
                key = id_key(record.id)
                if key in scan.index:
                    raise DataFormatError(
                        f"{path} line {line}: id {record.id!r} repeats the id of line "
                        f"{scan.records[scan.index[key]].line}; ids must be unique (resuming relies "
                        "on them)"
                    )
                if record.error is not None and not skip_bad:
                    raise DataFormatError(
                        f"{path} line {line}: {record.error} (nothing was pruned in this run; fix "
                        "the record, or pass --skip-bad to write an error record for it and go on)"
                    )
                scan.index[key] = len(scan.records)
                scan.records.append(_Entry(line, offset, record.id, key, _digest(raw), record.error))
            offset += len(raw)
    beat.idle()
    scan.size, scan.sha256 = offset, sha.hexdigest()
    return scan


def _chunks(scan: _Scan, pending: list[int], chunk_records: int) -> list[tuple[int, int, int]]:
    """The pending records (positions in ``scan.records``) cut into runs of consecutive records (no finished one
    between them) of at most ``chunk_records``: (byte offset, first line, lines) of each run."""
    chunks, run, previous = [], 0, None
    for pos in pending:
        entry = scan.records[pos]
        if previous is None or pos != previous + 1 or run >= chunk_records:
            chunks.append((entry.offset, entry.line, 0))
            run = 0
        start, first, _ = chunks[-1]
        chunks[-1] = (start, first, entry.line - first + 1)
        run, previous = run + 1, pos
    return chunks


_RECORD_KEYS = (
    "id",
    "kept_indices",
    "removed_indices",
    "scores",
    "kept_text",
    "tokens_before",
    "tokens_after",
    "ratio",
)
_RUN_KEYS = ("weights", "embedder", "estimator", "n_permutations", "antithetic", "seed", "criterion")
_LEAVE = "scp prune leaves it as it is: give another output, or delete it to start over"


def _output_line(raw: bytes) -> tuple[str | int, bool] | None:
    """(id, is an error record) of a complete output line, or None if scp prune would not have written it."""
    try:
        obj = parse_json(raw, "an output line")
    except DataFormatError:
        return None
    if not isinstance(obj, dict) or tuple(obj) not in (_RECORD_KEYS, ("id", "error")):
        return None
    rid = obj["id"]
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        return None
    return rid, "error" in obj


def _checksum(settings: dict) -> str:
    """sha256 of a settings file's entries other than ``checksum`` (canonical JSON): edits show."""
    body = {k: v for k, v in settings.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive lock on a folder, held for the few calls that create a new output and its settings."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _same_file(f: IO, path: Path) -> bool:
    try:
        a, b = os.fstat(f.fileno()), os.stat(path)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class _Output:
    """The output: what it already holds, then the lines of this run, in input order.

    Entering locks an existing output and reads it without changing a byte: only a file scp prune wrote (its
    settings file beside it, every complete line one of its records) is accepted.  :meth:`plan` checks that it
    holds this input's records; nothing is created or modified before the first :meth:`write` (or
    :meth:`finish`), so a run that fails before leaves every file as it was and creates none.  Records are
    appended to the output when every pending one comes after the lines it keeps; otherwise (error records to
    retry, records to reorder or to drop) the file is rewritten beside it and renamed over it once the last kept
    line is in place, then appended to.  A stream output is only ever written, never read.
    """

    def __init__(self, path, stream: bool = False):
        self.path, self.stream = Path(path), stream
        self.settings_path = self.path.with_name(self.path.name + ".settings.json")
        self.rewrite_path = self.path.with_name(f".{self.path.name}.rewrite.tmp")
        self.old: IO[bytes] | None = None  # the existing output, opened for reading and locked
        self.f: IO[bytes] | None = None  # where this run's lines go
        self.lines: list[tuple[str, bool, int, int]] = []  # (id key, error record, offset, length), file order
        self.end = self.size = 0  # where the complete lines end; the file's size
        self.stored: dict | None = None  # its settings
        self.new_settings: dict | None = None
        self.exists = self.created = self.broken = False
        self.queue: deque | None = None  # rewriting: the kept lines (position, offset, length) still to copy
        self.cut = 0  # appending: the kept lines end here (what follows is dropped)
        self.kept = self.retried = self.written = 0
        self.dropped_partial_line = False

    # -- reading
    def __enter__(self) -> _Output:
        if self.stream or not self.path.exists():
            return self
        self.old = open(self.path, "rb")
        try:
            try:
                fcntl.flock(self.old, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SCPError(f"{self.path} is being written by another job (it holds the file's lock)") from None
            if not _same_file(self.old, self.path):
                raise SCPError(f"{self.path} is being written by another job (it was replaced while opening it)")
            self._read()
        except BaseException:
            self.old.close()
            raise
        self.exists = True
        return self

    def _read(self) -> None:
        if not self.settings_path.is_file():
            raise SCPError(
                f"{self.path} exists and is not an output of scp prune (there is no settings file "
                f"{self.settings_path.name} beside it); {_LEAVE}"
            )
        try:
            stored = read_json(self.settings_path, f"the settings file {self.settings_path}")
        except DataFormatError as error:
            raise SCPError(
                f"{error}: it is damaged (truncated or edited), so {self.path} cannot be resumed safely; {_LEAVE}"
            ) from None
        if not (
            all(k in stored for k in _RUN_KEYS + ("input", "records", "checksum"))
            and isinstance(stored["input"], dict)
            and {"path", "size", "sha256"} <= stored["input"].keys()
        ):
            raise SCPError(
                f"{self.settings_path} is not a settings file this version of scp prune writes (it lacks "
                f"entries: from an older version, or edited), so {self.path} cannot be resumed safely; {_LEAVE}"
            )
        if stored["checksum"] != _checksum(stored):
            raise SCPError(
                f"the settings file {self.settings_path} is damaged: its content does not match the checksum "
                f"written with it (edited or corrupted since), so {self.path} cannot be resumed safely; {_LEAVE}"
            )
        self.stored, seen, offset = stored, set(), 0
        for number, raw in enumerate(self.old, 1):
            if not raw.endswith(b"\n"):
                break  # a half-written last line (a job killed mid-write): cut off once this run writes
            parsed = _output_line(raw)
            key = None if parsed is None else id_key(parsed[0])
            if key is None or key in seen:
                raise DataFormatError(
                    f"{self.path} line {number} is not a record written by scp prune"
                    + ("" if key is None else " (its id repeats an earlier line's)")
                    + f"; {_LEAVE}"
                )
            seen.add(key)
            self.lines.append((key, parsed[1], offset, len(raw)))
            offset += len(raw)
        self.end, self.size = offset, os.fstat(self.old.fileno()).st_size

    def plan(self, scan: _Scan) -> list[int]:
        """Check that the output holds this input's records; the positions (in ``scan.records``) still to write:
        those without a pruned line, including every error record (retried).  Changes nothing."""
        self.scan = scan
        pending = list(range(len(scan.records)))
        if not self.lines:  # new, a stream, or nothing complete in it yet
            self.dropped_partial_line = self.size > 0
            return pending
        old = self.stored["input"]
        same = (old["size"], old["sha256"]) == (scan.size, scan.sha256)
        if not same and old["path"] != scan.identity()["path"]:
            raise SCPError(
                f"{self.path} holds the records of another input: it was started from {old['path']} "
                f"({old['size']} bytes, sha256 {str(old['sha256'])[:16]}…), this run reads "
                f"{scan.path.resolve()} ({scan.size} bytes, sha256 {scan.sha256[:16]}…); rerun with that "
                "input to resume, or write to another output"
            )
        digests = {}
        if not same:
            try:
                digests = {id_key(rid): digest for rid, digest in self.stored["records"]}
            except (TypeError, ValueError):
                raise SCPError(
                    f"{self.settings_path} is damaged (its 'records' list), so {self.path} cannot be "
                    f"resumed safely; {_LEAVE}"
                ) from None
        info = []  # (position in the input or None, kept) of each line
        for key, error, _, _ in self.lines:
            pos = scan.index.get(key)
            if not error:
                if pos is None:
                    raise SCPError(
                        f"{scan.path} no longer holds the record with id {json.loads(key)!r} that "
                        f"{self.path} has a pruned line for; restore it, or write to another output"
                    )
                entry = scan.records[pos]
                if not same and digests.get(key) != entry.digest:
                    raise SCPError(
                        f"{scan.path} line {entry.line}: the record with id {entry.id!r} changed since it "
                        f"was pruned into {self.path} (only records that failed may change between runs: "
                        "they are retried); restore it, or write to another output"
                    )
            info.append((pos, not error))
        self.retried = sum(1 for pos, kept in info if not kept and pos is not None)
        kept = sorted((pos, offset, length) for (pos, ok), (_, _, offset, length) in zip(info, self.lines) if ok)
        self.kept = len(kept)
        taken = {pos for pos, _, _ in kept}
        pending = [pos for pos in pending if pos not in taken]
        lead, last = 0, -1  # the leading lines that are kept, in input order
        while lead < len(info) and info[lead][1] and info[lead][0] > last:
            last, lead = info[lead][0], lead + 1
        if not any(ok for _, ok in info[lead:]) and (not pending or pending[0] > last):
            self.cut = self.lines[lead][2] if lead < len(self.lines) else self.end
        else:
            self.queue = deque(kept)
        self.dropped_partial_line = self.size > self.end
        return pending

    def check_settings(self, settings: dict) -> None:
        """Refuse to resume records written with other settings (nothing is written yet)."""
        if self.stream:
            return
        self.new_settings = {
            **settings,
            "input": self.scan.identity(),
            "records": [[entry.id, entry.digest] for entry in self.scan.records],
        }
        self.new_settings["checksum"] = _checksum(self.new_settings)
        if self.lines:
            changed = {k: (self.stored.get(k), v) for k, v in settings.items() if self.stored.get(k) != v}
            if changed:
                what = ", ".join(f"{k} {old!r} → {new!r}" for k, (old, new) in changed.items())
                raise SCPError(
                    f"{self.path} was written with other settings ({what}); rerun with the same "
                    "settings to resume, or write to another output"
                )

    # -- writing
    def _save_settings(self) -> None:
        if self.new_settings is not None and self.new_settings != self.stored:
            with atomic_open(self.settings_path, "w") as f:
                json.dump(self.new_settings, f, indent=None, separators=(",", ":"))
            self.stored = self.new_settings

    def _open(self) -> None:
        if self.stream:
            self.f = open(self.path, "ab")
        elif not self.exists:  # a new output: its settings first, then the file, created only if still absent
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with _folder_lock(self.path.parent):
                if self.path.exists():
                    raise SCPError(f"{self.path} is being written by another job (it appeared during this run)")
                self._save_settings()
                try:
                    self.f = os.fdopen(
                        os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o666), "ab"
                    )
                    fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BaseException:
                    self.settings_path.unlink(missing_ok=True)
                    raise
            self.created = True
        elif self.queue is None:  # append after the kept lines
            self._save_settings()
            self.f = open(self.path, "ab")
            if not _same_file(self.f, self.path) or not _same_file(self.old, self.path):
                raise SCPError(f"{self.path} was replaced during this run by another job")
            if self.cut < self.size:
                self.f.truncate(self.cut)
        else:  # rewrite beside it
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW  # a link put there is not followed
            self.f = os.fdopen(os.open(self.rewrite_path, flags, 0o600), "wb")

    def _copy_kept(self, before: int | None = None) -> None:
        while self.queue and (before is None or self.queue[0][0] < before):
            _, offset, length = self.queue.popleft()
            self.old.seek(offset)
            self.f.write(self.old.read(length))

    def _commit(self) -> None:
        """Put the rewritten file in the output's place (complete, synced, locked before it is visible)."""
        self._copy_kept()
        self.f.flush()
        os.fsync(self.f.fileno())
        fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.chmod(self.rewrite_path, stat.S_IMODE(os.fstat(self.old.fileno()).st_mode))
        self._save_settings()
        os.replace(self.rewrite_path, self.path)
        self.old.close()
        self.old, self.queue = None, None

    def write(self, pos: int, line: str) -> None:
        """Write the output line of the record at ``pos`` (records come in input order)."""
        if self.f is None:
            self._open()
        self.broken = True  # until the line is completely written
        if self.queue is not None:
            self._copy_kept(before=pos)
        self.f.write(line.encode("utf-8") + b"\n")
        self.f.flush()
        self.broken = False
        self.written += 1
        if self.queue is not None and not self.queue:
            self._commit()

    def finish(self) -> None:
        """The run is over (done, stopped early, or stopped by a bad record): leave the output complete."""
        if self.stream:
            return
        if self.queue is not None:
            if self.f is None:
                self._open()
            self._commit()
        elif self.exists and self.f is None and (self.cut < self.size or self.new_settings != self.stored):
            self._open()
        if self.exists or self.created:
            self.rewrite_path.unlink(missing_ok=True)  # left by a job killed while rewriting

    def __exit__(self, kind, error, tb) -> None:
        try:
            if kind is not None and self.queue is not None and self.f is not None:
                if issubclass(kind, (DataFormatError, KeyboardInterrupt)) and not self.broken:
                    self.finish()  # the lines written so far are sound: keep them
                else:
                    self.f.close()
                    self.f = None
                    self.rewrite_path.unlink(missing_ok=True)  # the output stays as it was
        finally:
            for f in (self.f, self.old):
                if f is not None:
                    f.close()
            if self.created and os.path.getsize(self.path) == 0:  # the first write failed: leave no empty file
                self.path.unlink()
                self.settings_path.unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------ settings


def _check_unchanged(src: Path, entry: _Entry, digest: str, written: int, dst: Path) -> None:
    """Refuse a record whose line (its content hash ``digest``) is not what the validation scan read: the input
    was rewritten since, and its output would not be what the settings file describes."""
    if digest != entry.digest:
        raise DataFormatError(
            f"{src} changed while it was being pruned: line {entry.line} is not what the check before pruning "
            f"read ({written} records written before it to {dst}, all from the content checked); rerun to "
            "resume with the file as it is now"
        )


def _criterion(given: dict, n_permutations: int, seed: int) -> dict:
    """The one pruning criterion given, as keyword arguments of ``prune``, after checking the run's settings."""
    check_criterion(**given)
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int) or n_permutations < 1:
        raise InputError(f"the number of permutations M must be an integer ≥ 1; got {n_permutations!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"seed must be a non-negative integer; got {seed!r}")
    return {
        k: v.item() if isinstance(v, np.generic) else v  # plain Python numbers, as written to the settings
        for k, v in given.items()
        if v is not None
    }


def _settings(
    model, embedder_id: str, estimator: str, n_permutations: int, antithetic: bool, seed: int | None, criterion: dict
) -> dict:
    from scp.models.factory import weights_fingerprint
    from scp.models.scoring import require_game

    if criterion.get("value_fraction") is not None:
        require_game(model)  # a pointwise model has no v(S): refused before any record is pruned
    return {
        "weights": weights_fingerprint(model),
        "embedder": embedder_id,
        "estimator": estimator,
        "n_permutations": n_permutations,
        "antithetic": antithetic,
        "seed": seed,
        "criterion": check_criterion(**criterion),
    }


def _paths(input_path, output_path, checkpoint=None) -> tuple[Path, Path, bool]:
    """(input, output, whether the output is a stream), checked before any work
    (:func:`scp.io.check_output_path`): the output and its settings file are regular files or new paths, or the
    output is a stream; a symbolic link (dangling or not), a socket or a folder is refused.  Neither is (or links
    to, hard links included) a file the job reads: the input, the checkpoint or its model card
    (:func:`scp.overwrite.refuse_inputs_as_outputs`)."""
    src, dst = Path(input_path), Path(output_path)
    if not src.is_file():
        raise MissingFileError(f"input {src} is not a file" if src.exists() else f"input {src} does not exist")
    check_output_path(dst, "output", stream=True)
    stream = is_stream(dst)
    outputs = [("the output", dst)]
    if not stream:
        settings = dst.with_name(dst.name + ".settings.json")
        check_output_path(settings, "the settings file of the output")
        outputs.append(("the settings file of the output", settings))
    inputs = [("the input", src)]
    if isinstance(checkpoint, str | os.PathLike):
        inputs += [("the checkpoint", Path(checkpoint)), ("its model card", Path(checkpoint).with_suffix(".json"))]
    refuse_inputs_as_outputs(outputs, inputs)
    return src, dst, stream


def _prepare(
    out: _Output, src: Path, skip_bad: bool, max_units: int, summary: BatchSummary, beat: _Heartbeat
) -> tuple[_Scan, list]:
    scan = _scan(src, skip_bad, max_units, beat)  # bad input: before any loading, and before the output is touched
    pending = out.plan(scan)
    summary.total, summary.already_done, summary.retried = len(scan.records), out.kept, out.retried
    summary.dropped_partial_line = out.dropped_partial_line
    return scan, pending


# ------------------------------------------------------------------------------------------------ local


def prune_jsonl(
    input_path,
    output_path,
    *,
    checkpoint=None,
    pruner=None,
    keep_ratio: float | None = None,
    top_k: int | None = None,
    token_budget: int | None = None,
    threshold: float | None = None,
    value_fraction: float | None = None,
    n_permutations: int = 50,
    seed: int = 0,
    skip_bad: bool = False,
    progress: bool = True,
    heartbeat: bool = True,
    max_records: int | None = None,
    cache_dir=None,
) -> BatchSummary:
    """Prune every record of ``input_path`` into ``output_path`` in this process (see the module docstring).

    Give ``checkpoint`` (loaded with ``n_permutations``, ``seed`` and ``cache_dir``) or a ready ``pruner`` (its
    own M and seed are used).  ``progress``: a progress bar; ``heartbeat``: a line on stderr every
    :data:`HEARTBEAT_SECONDS` while one record takes longer to check or prune.  ``max_records`` stops after
    that many new records (the rest is left for a rerun).  A record rewritten in the input after the check
    before pruning is an error: nothing of the new content is pruned.
    """
    criterion = _criterion(
        dict(
            keep_ratio=keep_ratio,
            top_k=top_k,
            token_budget=token_budget,
            threshold=threshold,
            value_fraction=value_fraction,
        ),
        n_permutations,
        seed,
    )
    if pruner is None and checkpoint is None:
        raise InputError("give a checkpoint (or a ShapleyPruner)")
    src, dst, stream = _paths(input_path, output_path, checkpoint)
    max_units = MAX_UNITS if pruner is None else pruner.max_units
    t0 = time.perf_counter()
    summary = BatchSummary(str(src), str(dst), streamed=stream)
    with _Output(dst, stream) as out, _Heartbeat(heartbeat) as beat:
        scan, pending = _prepare(out, src, skip_bad, max_units, summary, beat)
        if pruner is None:
            from scp.pruning.pruner import ShapleyPruner

            pruner = ShapleyPruner.from_checkpoint(
                checkpoint, cache_dir=cache_dir, n_permutations=n_permutations, seed=seed
            )
        out.check_settings(
            _settings(
                pruner.model,
                pruner.embedder.id,
                pruner.estimator,
                pruner.n_permutations,
                pruner.antithetic,
                pruner.seed,
                criterion,
            )
        )
        with (
            open(src, "rb") as f,
            tqdm(total=len(pending), desc="scp prune", unit="record", disable=not progress) as bar,
        ):
            for pos in pending:
                if max_records is not None and summary.written >= max_records:
                    break
                entry = scan.records[pos]
                f.seek(entry.offset)
                raw = f.readline()
                _check_unchanged(src, entry, _digest(raw), summary.written, dst)
                beat.step("pruned", entry.line, entry.id)
                output, error = prune_record(pruner, parse_line(raw, entry.line, max_units), criterion)
                beat.idle()
                if error is not None and not skip_bad:
                    raise DataFormatError(
                        f"{src} line {entry.line}: {error} ({summary.written} records written "
                        f"before it to {dst}; fix the record and rerun to resume, or pass "
                        "--skip-bad)"
                    )
                out.write(pos, output)
                summary.written += 1
                summary.errors += error is not None
                bar.update()
        out.finish()
    summary.complete = summary.already_done + summary.written == summary.total
    summary.seconds = time.perf_counter() - t0
    return summary


# -------------------------------------------------------------------------------------------------- Ray


class RayPruneWorker:
    """A Ray Data actor: loads the pruner once, then prunes chunks of input lines (offset, first line, count)."""

    def __init__(
        self,
        checkpoint: str,
        input_path: str,
        criterion: dict,
        n_permutations: int,
        seed: int,
        cache_dir: str | None,
        use_gpu: bool,
        threads: int,
    ):
        import torch

        from scp.pruning.pruner import ShapleyPruner

        torch.set_num_threads(max(1, threads))
        self.pruner = ShapleyPruner.from_checkpoint(
            checkpoint,
            cache_dir=cache_dir,
            n_permutations=n_permutations,
            seed=seed,
            device="cuda" if use_gpu else None,
        )
        self.input_path, self.criterion = input_path, criterion

    def __call__(self, batch: dict) -> dict:
        """The output line, error (or "") and content hash of every record the batch's chunks hold."""
        lines, errors, digests = [], [], []
        with open(self.input_path, "rb") as f:
            for offset, first, count in zip(batch["offset"], batch["first"], batch["count"]):
                f.seek(int(offset))
                for line, _, text in _input_lines(f, int(first), int(count)):
                    output, error = prune_record(
                        self.pruner, parse_line(text, line, self.pruner.max_units), self.criterion
                    )
                    lines.append(output)
                    errors.append("" if error is None else f"line {line}: {error}")
                    digests.append(_digest(text))
        return {
            "line": np.array(lines, dtype=object),
            "error": np.array(errors, dtype=object),
            "digest": np.array(digests, dtype=object),
        }


def _import_ray():
    try:
        import ray
        import ray.data
    except ImportError as error:
        raise SCPError(f"{RAY_MISSING} ({error})") from None
    return ray


def _check_resources(ray, where: str, num_workers: int, cpus_per_worker: int, gpus_per_worker: float) -> None:
    """Ray Data waits (forever) until all actors are placed: refuse at once what the cluster cannot hold."""
    have = ray.cluster_resources()
    for name, per, option in (("GPU", gpus_per_worker, "--ray-gpus"), ("CPU", cpus_per_worker, "--ray-cpus")):
        need, there = per * num_workers, have.get(name, 0)
        if need > there:
            raise SCPError(
                f"{num_workers} Ray worker(s) × {per:g} {name} each ({option}) need {need:g} {name}(s), "
                f"but {where} has {there:g}; nothing was pruned: "
                + (
                    "drop --ray-gpus to prune on CPUs, or use a cluster with GPUs"
                    if name == "GPU"
                    else "lower --ray-workers or --ray-cpus"
                )
            )


def prune_jsonl_ray(
    input_path,
    output_path,
    *,
    checkpoint,
    keep_ratio: float | None = None,
    top_k: int | None = None,
    token_budget: int | None = None,
    threshold: float | None = None,
    value_fraction: float | None = None,
    n_permutations: int = 50,
    seed: int = 0,
    skip_bad: bool = False,
    progress: bool = True,
    heartbeat: bool = True,
    address: str | None = None,
    num_workers: int = 1,
    cpus_per_worker: int = 1,
    gpus_per_worker: float = 0,
    batch_size: int = 16,
    cache_dir=None,
) -> BatchSummary:
    """:func:`prune_jsonl` on Ray: the same checks, output format, order and resume.

    Ray Data streams chunks of at most ``batch_size`` pending records (byte ranges of the input, which the
    workers read: the path must be readable on every node) through ``num_workers`` actors that each load the
    pruner once (``cpus_per_worker`` CPUs and torch threads, ``gpus_per_worker`` GPUs: > 0 prunes on the GPU);
    the driver writes their lines in input order.  ``address`` connects to a running cluster; without it a
    local instance with ``num_workers · cpus_per_worker`` CPUs is started (and stopped at the end), unless Ray
    is already initialised in this process.  GPUs asked for but not there (torch sees none for a local
    instance; the cluster's resources hold fewer than ``num_workers · gpus_per_worker``) are an
    :class:`~scp.errors.SCPError` before anything is pruned or written, as are too few CPUs.  ``heartbeat``:
    a line on stderr every :data:`HEARTBEAT_SECONDS` while the driver waits longer for one record.
    """
    ray = _import_ray()
    for name, value in dict(num_workers=num_workers, cpus_per_worker=cpus_per_worker, batch_size=batch_size).items():
        if not isinstance(value, int) or value < 1:
            raise InputError(f"{name} must be an integer ≥ 1; got {value!r}")
    if isinstance(gpus_per_worker, bool) or not (isinstance(gpus_per_worker, (int, float)) and gpus_per_worker >= 0):
        raise InputError(f"gpus_per_worker must be a number ≥ 0; got {gpus_per_worker!r}")
    criterion = _criterion(
        dict(
            keep_ratio=keep_ratio,
            top_k=top_k,
            token_budget=token_budget,
            threshold=threshold,
            value_fraction=value_fraction,
        ),
        n_permutations,
        seed,
    )
    if gpus_per_worker > 0 and not address and not ray.is_initialized():
        import torch

        if not torch.cuda.is_available():  # before the (slow) start of a local Ray instance
            raise SCPError(
                f"gpus_per_worker={gpus_per_worker:g} (--ray-gpus) but no GPU is visible here "
                "(torch.cuda.is_available() is False), so the local Ray instance would wait for one "
                "forever; nothing was pruned: drop --ray-gpus to prune on CPUs, or connect to a cluster "
                "with GPUs (--ray ADDRESS)"
            )
    src, dst, stream = _paths(input_path, output_path, checkpoint)
    t0 = time.perf_counter()
    summary = BatchSummary(str(src), str(dst), streamed=stream)
    with _Output(dst, stream) as out, _Heartbeat(heartbeat) as beat:
        scan, pending = _prepare(out, src, skip_bad, MAX_UNITS, summary, beat)
        from scp.models.factory import load_checkpoint

        model, _, ckpt = load_checkpoint(checkpoint)
        out.check_settings(_settings(model, ckpt["embedder_id"], "monte_carlo", n_permutations, False, seed, criterion))
        started, where = False, "the Ray cluster this process is connected to"
        if pending and not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
                where = f"the Ray cluster at {address}"
            else:
                ray.init(
                    num_cpus=num_workers * cpus_per_worker,
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.WARNING,
                )
                where = "the local Ray instance"
            started = True
        try:
            if pending:
                _check_resources(ray, where, num_workers, cpus_per_worker, gpus_per_worker)
                data_context = ray.data.DataContext.get_current()
                data_context.execution_options.preserve_order = True
                data_context.enable_progress_bars = False
                chunks = [
                    {"offset": o, "first": first, "count": n} for o, first, n in _chunks(scan, pending, batch_size)
                ]
                kwargs = dict(
                    checkpoint=str(Path(checkpoint).resolve()),
                    input_path=str(src.resolve()),
                    criterion=criterion,
                    n_permutations=n_permutations,
                    seed=seed,
                    cache_dir=None if cache_dir is None else str(cache_dir),
                    use_gpu=gpus_per_worker > 0,
                    threads=cpus_per_worker,
                )
                ds = ray.data.from_items(chunks, override_num_blocks=len(chunks)).map_batches(
                    RayPruneWorker,
                    batch_size=1,
                    batch_format="numpy",
                    concurrency=num_workers,
                    num_cpus=cpus_per_worker,
                    num_gpus=gpus_per_worker or None,
                    fn_constructor_kwargs=kwargs,
                )
                rows = iter(ds.iter_rows())
                with tqdm(total=len(pending), desc="scp prune (ray)", unit="record", disable=not progress) as bar:
                    for pos in pending:
                        entry = scan.records[pos]
                        beat.step("pruned", entry.line, entry.id)
                        row = next(rows)
                        beat.idle()
                        _check_unchanged(src, entry, row["digest"], summary.written, dst)
                        if row["error"] and not skip_bad:
                            raise DataFormatError(
                                f"{src} {row['error']} ({summary.written} records written before "
                                f"it to {dst}; fix the record and rerun to resume, or pass "
                                "--skip-bad)"
                            )
                        out.write(pos, row["line"])
                        summary.written += 1
                        summary.errors += bool(row["error"])
                        bar.update()
        finally:
            if started:
                ray.shutdown()
        out.finish()
    summary.complete = summary.already_done + summary.written == summary.total
    summary.seconds = time.perf_counter() - t0
    return summary
