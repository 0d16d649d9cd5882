"""Atomic file writes: nothing is ever left half-written (caches, checkpoints, result records)."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator


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
