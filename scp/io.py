"""Atomic file writes (nothing is ever left half-written: caches, checkpoints, result records), the one
conversion of values to JSON data (:func:`jsonable`, :func:`write_json`), the one bounded JSON reader
(:func:`read_json`, :func:`parse_json`) and generated sections of a text file (:func:`replace_section`)."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import math
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

from scp.errors import DataFormatError, InputError, InputTypeError, SCPError

#: Deepest nesting of lists and objects any JSON file the package reads may have (records, settings, provenance,
#: cards); Python's own parser would raise RecursionError somewhere near 1000.
MAX_JSON_DEPTH = 64


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success fsync it, make it readable (0644) and rename it over
    ``path`` (atomic on POSIX); on any error delete it and leave ``path`` untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_above(path: str | os.PathLike) -> Path | None:
    """The regular file (or other non-folder) among ``path``'s existing parent folders, if one is in the way of
    creating ``path``; ``None`` when nothing is (the nearest existing parent is a folder)."""
    for parent in Path(path).parents:
        if parent.exists():
            return None if parent.is_dir() else parent
        if parent.is_symlink():  # a dangling link: not a folder either
            return parent
    return None


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: numpy scalars and arrays, tuples, sets, paths and dataclasses
    (e.g. :class:`scp.core.result.ShapleyResult`) are converted; non-finite floats become ``None``.

    Args:
        value: a scalar, sequence, mapping, numpy object or dataclass instance.

    Returns:
        The same data built from ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``.

    Raises:
        InputTypeError: for anything else (say, a figure or a model).
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value + 0.0 if math.isfinite(value) else None  # + 0.0 turns -0.0 into 0.0
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v) for v in items]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:  # torch scalar
        return jsonable(value.item())
    raise InputTypeError(
        f"cannot write a {type(value).__name__} as JSON; give numbers, strings, lists, mappings or dataclasses of them"
    )


def write_json(obj: Any, path: str | os.PathLike) -> None:
    """Write ``obj`` as indented JSON, atomically (:func:`atomic_open`).  Python floats are written as they are
    (``NaN`` included); anything else JSON cannot write natively (numpy scalars and arrays, paths, dataclasses)
    goes through :func:`jsonable`."""
    with atomic_open(path, "w") as f:
        json.dump(obj, f, indent=1, default=jsonable)


def replace_section(path: str | os.PathLike, name: str, body: str) -> bool:
    """Rewrite the text between ``<!-- name -->`` and ``<!-- /name -->`` in ``path`` with ``body`` (atomically);
    True when the file changed.  A file without both markers is an :class:`~scp.errors.InputError`."""
    path = Path(path)
    text = path.read_text()
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    pattern = re.compile(re.escape(start) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise InputError(f"{path} has no {start} … {end} markers to put the {name} between")
    new = pattern.sub(lambda _: f"{start}\n{body}\n{end}", text)
    if new != text:
        with atomic_open(path, "w") as f:
            f.write(new)
    return new != text


def _depth_exceeds(text: str, limit: int) -> bool:
    """Whether the brackets of JSON ``text`` (outside strings) nest deeper than ``limit``: one linear scan, so a
    deeply nested document is refused before the recursive parser sees it."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def parse_json(
    text: str | bytes, what: str, expect: type | tuple[type, ...] | None = None, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """``text`` parsed as JSON, refused with one line naming ``what`` when it is not valid UTF-8 JSON, nests deeper
    than ``max_depth`` or (with ``expect``) its top level is not of that type.

    Raises:
        DataFormatError: naming ``what`` and the problem.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataFormatError(f"{what} is not UTF-8 text (byte {exc.start})") from None
    if _depth_exceeds(text, max_depth):
        raise DataFormatError(f"{what} nests lists or objects deeper than {max_depth} levels; no file of ours does")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if expect is not None and not isinstance(obj, expect):
        names = " or ".join(t.__name__ for t in (expect if isinstance(expect, tuple) else (expect,)))
        kinds = {"dict": "an object", "list": "a list", "str": "a string", "int": "an integer", "float": "a number"}
        wanted = " or ".join(kinds.get(n, n) for n in names.split(" or "))
        raise DataFormatError(
            f"{what} holds {kinds.get(type(obj).__name__, type(obj).__name__)} where {wanted} is expected"
        )
    return obj


def read_json(
    path: str | os.PathLike,
    what: str | None = None,
    expect: type | tuple[type, ...] | None = dict,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """The JSON document in the regular file ``path`` (:func:`parse_json`: bounded depth, top-level type
    ``expect``, by default an object); ``what`` names it in errors (default: the path).

    Raises:
        MissingFileError: ``path`` does not exist.
        DataFormatError: it is not a regular file, not valid JSON, too deep or of the wrong top-level type.
    """
    from scp.errors import MissingFileError

    path = Path(path)
    what = what or str(path)
    if not path.exists():
        raise MissingFileError(f"{what}: no such file")
    if not path.is_file():
        raise DataFormatError(f"{what} is not a regular file")
    return parse_json(path.read_bytes(), what, expect=expect, max_depth=max_depth)


@contextmanager
def exclusive_lock(lock_file: str | os.PathLike, what: str, wait: bool = False) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_file`` (created if missing; its content is never read) while the
    block runs: one writer of ``what`` at a time, across processes.  The lock dies with its process, so a killed
    writer never leaves a stale lock behind.

    Args:
        lock_file: the lock's file (say ``runs/.locks/NAME.lock``); its folder is created.
        what: names the guarded thing in the refusal, e.g. ``"notebook 00_cooperative_games_tutorial"``.
        wait: block until the other writer is done instead of refusing.

    Raises:
        SCPError: another process holds the lock (only when ``wait`` is false).
    """
    lock_file = Path(lock_file)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SCPError(
                f"{what} is being written by another process (it holds {lock_file}); wait for it to finish"
            ) from None
        yield
    finally:
        os.close(fd)
