"""Atomic file writes (nothing is ever left half-written: caches, checkpoints, result records), the one
conversion of values to JSON data (:func:`jsonable`, :func:`write_json`), and generated sections of a text file
(:func:`replace_section`)."""

from __future__ import annotations

import dataclasses
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

from scp.errors import InputError, InputTypeError


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
