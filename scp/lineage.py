"""Which files a process read and wrote: the inputs a result depends on, for its provenance.

Loaders note what they open: the dataset readers and the case reader note ``"data"`` files, the checkpoint reader
and the LM reader note ``"model"`` files, and the checkpoint writer notes the ``"model"`` files it writes.  A
notebook's provenance (:meth:`scp.suite.notebook.NotebookRun.provenance`) lists every noted file with its size and
sha256, so no notebook has to remember which datasets and models it used, and the runner checks each read against
the inputs the notebook declares (:mod:`scp.suite.graph`).  A file written and then read in one process counts as
written.  Noting costs one ``Path.resolve``; hashing happens only when a description is asked for, once per
(path, size, modification time).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Literal

Kind = Literal["data", "model"]
KINDS: tuple[str, ...] = ("data", "model")

_READS: dict[str, str] = {}
_WRITES: dict[str, str] = {}
_DIGESTS: dict[tuple[str, int, int], str] = {}

__all__ = ["KINDS", "describe", "note_read", "note_write", "reads", "reset", "sha256", "writes"]


def _key(path: str | os.PathLike[str], kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"lineage kind must be one of {KINDS}, not {kind!r}")
    return str(Path(path).expanduser().resolve())


def note_read(path: str | os.PathLike[str], kind: Kind) -> None:
    """Note that this process read ``path`` (a ``"data"`` or ``"model"`` file)."""
    _READS.setdefault(_key(path, kind), kind)


def note_write(path: str | os.PathLike[str], kind: Kind) -> None:
    """Note that this process wrote ``path``."""
    _WRITES[_key(path, kind)] = kind


def reads(kind: str | None = None) -> list[Path]:
    """Files read (and not written) by this process, in the order first read; only ``kind`` when given."""
    return [Path(p) for p, k in _READS.items() if (kind is None or k == kind) and p not in _WRITES]


def writes(kind: str | None = None) -> list[Path]:
    """Files written by this process, in the order first written; only ``kind`` when given."""
    return [Path(p) for p, k in _WRITES.items() if kind is None or k == kind]


def reset() -> None:
    """Forget every noted file (a notebook's :func:`scp.suite.notebook.start` calls it)."""
    _READS.clear()
    _WRITES.clear()


def sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of a file's bytes (kept per path, size and modification time, so a rewritten file is rehashed)."""
    p = Path(path)
    stat = p.stat()
    key = (str(p.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def describe(path: str | os.PathLike[str], relative_to: Path | None = None) -> dict[str, Any]:
    """``{"path", "bytes", "sha256"}`` of a file; ``path`` relative to ``relative_to`` when it lies under it."""
    p = Path(path).expanduser().resolve()
    shown = str(p)
    if relative_to is not None:
        try:
            shown = str(p.relative_to(Path(relative_to).resolve()))
        except ValueError:
            pass
    return {"path": shown, "bytes": p.stat().st_size, "sha256": sha256(p)}
