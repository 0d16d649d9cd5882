"""Checkpoints that are written whole and verified on load.

A checkpoint is a dict saved with ``torch.save`` through :func:`scp.io.atomic_open` (never half-written).
:func:`save` adds ``checksum`` = sha256 of a canonical encoding of every other entry (tensor dtypes, shapes
and bytes; numbers; strings; nested dicts and lists), so a flipped byte anywhere in the weights, the optimizer
state or the metadata is caught by :func:`load`, which reports every unreadable or altered file as one
:class:`CheckpointError` sentence naming the file and what to do.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

import numpy as np
import torch

from .errors import SCPError
from .io import atomic_open

__all__ = ["CheckpointError", "content_checksum", "save", "load"]


class CheckpointError(SCPError, ValueError):
    """A checkpoint file is missing, unreadable, of another format, or altered since it was written."""


def _update(h, obj) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(b"T" + f"{t.dtype}{tuple(t.shape)}".encode() + t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, np.ndarray):
        h.update(b"A" + f"{obj.dtype}{obj.shape}".encode() + np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, dict):
        h.update(b"D%d" % len(obj))
        for key in sorted(obj, key=repr):
            _update(h, key)
            _update(h, obj[key])
    elif isinstance(obj, (list, tuple)):
        h.update(b"L%d" % len(obj))
        for item in obj:
            _update(h, item)
    elif isinstance(obj, bool) or obj is None:
        h.update(b"B" + repr(obj).encode())
    elif isinstance(obj, (int, np.integer)):
        h.update(b"I" + str(int(obj)).encode())
    elif isinstance(obj, (float, np.floating)):
        h.update(b"F" + struct.pack("<d", float(obj)))
    elif isinstance(obj, str):
        h.update(b"S" + obj.encode("utf-8", "surrogatepass") + b"\0")
    elif isinstance(obj, bytes):
        h.update(b"Y%d:" % len(obj) + obj)
    else:
        raise TypeError(f"cannot checksum a {type(obj).__name__} in a checkpoint")


def content_checksum(payload: dict) -> str:
    """sha256 (hex) of the canonical encoding of ``payload`` without its ``checksum`` entry."""
    h = hashlib.sha256()
    _update(h, {k: v for k, v in payload.items() if k != "checksum"})
    return h.hexdigest()


def save(payload: dict, path: str | os.PathLike) -> str:
    """Write ``payload`` plus its ``checksum`` atomically to ``path``; returns the checksum."""
    checksum = content_checksum(payload)
    with atomic_open(path) as f:
        torch.save({**payload, "checksum": checksum}, f)
    return checksum


def load(path: str | os.PathLike, fmt: str | None = None) -> dict:
    """The verified payload of checkpoint ``path`` (``fmt``: the ``format`` entry it must carry)."""
    path = Path(path)
    redo = "retrain it with `scp train` or restore a good copy"
    if not path.exists():
        raise CheckpointError(f"no checkpoint at {path}")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} is not a file")
    if path.stat().st_size == 0:
        raise CheckpointError(f"checkpoint {path} is empty (0 bytes): {redo}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as error:  # truncated zip, random bytes, pickle errors: all mean "not readable"
        reason = str(error).splitlines()[0][:160] if str(error) else type(error).__name__
        raise CheckpointError(f"checkpoint {path} cannot be read ({type(error).__name__}: {reason}); it is truncated "
                              f"or not a checkpoint: {redo}") from None
    if not isinstance(payload, dict) or (fmt is not None and payload.get("format") != fmt):
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"{path} is not an SCP checkpoint of format {fmt} (found {found!r}): {redo}")
    if "checksum" not in payload:
        raise CheckpointError(f"checkpoint {path} carries no content checksum, so it cannot be verified: {redo}")
    try:
        actual = content_checksum(payload)
    except TypeError as error:
        raise CheckpointError(f"checkpoint {path} holds unexpected content ({error}): {redo}") from None
    if actual != payload["checksum"]:
        raise CheckpointError(f"checkpoint {path} is corrupted: its content does not match the checksum written with "
                              f"it (damaged or modified since): {redo}")
    return payload
