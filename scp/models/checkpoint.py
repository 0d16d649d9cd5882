"""Checkpoints that are written whole, verified before anything is built from them, and never execute code.

A checkpoint is a standard `safetensors <https://huggingface.co/docs/safetensors>`_ file, written through
:func:`scp.io.atomic_open` (never half-written)::

    8 bytes   N, the header's length (little-endian u64)
    N bytes   the header, JSON: {"__metadata__": {...}, "<tensor key>": {"dtype", "shape", "data_offsets"}, ...}
    the rest  the raw bytes of every tensor

Every tensor of the (nested) payload — the weights, the optimizer's moments, RNG states — is a safetensors tensor
under a path-like key (``weights/psi.0.weight``, ``optimizer/state/0/exp_avg``).  Everything else goes as JSON into
``__metadata__``:

- ``scp_container``: :data:`CONTAINER` (what this layout is);
- ``scp``: the payload as JSON, each tensor replaced by ``{"$tensor": key}``; non-JSON values are tagged the same
  way: ``{"$tuple": [...]}``, ``{"$items": [[key, value], ...]}`` (a dict whose keys are not all plain strings, such
  as an optimizer's integer-keyed state), ``{"$float": "nan" | "inf" | "-inf"}``, ``{"$bytes": base64}``,
  ``{"$ndarray": key}``;
- ``scp_sha256``: sha256 of the whole file (length prefix, header and data) with these 64 hex digits read as
  zeros.

:func:`load` reads the file's bytes, parses the JSON header (nothing else), checks that the data are complete and
that the file's sha256 matches, and only then lets ``safetensors`` build the tensors; nothing is ever unpickled.
The reassembled payload also carries ``checksum`` = :func:`content_checksum` (sha256 of a canonical encoding of
every other entry), verified as well, so a payload read back is the one that was saved, to the bit.

The earlier format (a ``torch.save`` pickle, ``.pt``) is read only by ``torch.load(weights_only=True)``, which
refuses to call anything a file names, with a :class:`LegacyCheckpointWarning`; :func:`convert` (``scp
convert-checkpoint OLD NEW``) rewrites one as a safetensors file with the same content checksum.  A file named
``.safetensors`` is never handed to the pickle loader.  Every unreadable, foreign or altered file is one
:class:`CheckpointError` sentence naming the file and what to do.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import pickle
import re
import struct
import warnings
from pathlib import Path

import numpy as np
import torch

from scp.errors import DataFormatError, InputError, SCPError, warn_user
from scp.io import atomic_open, loads, read_json
from scp.lineage import note_read, note_write

__all__ = [
    "CheckpointError",
    "LegacyCheckpointWarning",
    "CONTAINER",
    "SUFFIX",
    "content_checksum",
    "save",
    "load",
    "convert",
]

CONTAINER = "scp-safetensors-v1"
SUFFIX = ".safetensors"
MAX_HEADER = 100_000_000  # safetensors' own limit on the header's size
_SHA_KEY = "scp_sha256"
_ZERO_SHA = "0" * 64
_REDO = "retrain it with `scp train` or restore a good copy"


class CheckpointError(SCPError, ValueError):
    """A checkpoint file is missing, unreadable, of another format, or altered since it was written."""


class LegacyCheckpointWarning(UserWarning):
    """A checkpoint in the old ``torch.save`` pickle format was read (safely, with ``weights_only=True``)."""


# ------------------------------------------------------------------------------------------ content checksum


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


# ------------------------------------------------------------------------------- payload <-> JSON + tensors


def _encode(obj, key: str, tensors: dict):
    """``obj`` as JSON-ready data; its tensors go into ``tensors`` under path-like keys."""

    def slot(name: str) -> str:
        name, n = name or "tensor", 1
        while name in tensors:
            n += 1
            name = f"{name.rsplit('#', 1)[0]}#{n}"
        return name

    if isinstance(obj, torch.Tensor):
        name = slot(key)
        tensors[name] = obj.detach().to("cpu", copy=True).contiguous()
        return {"$tensor": name}
    if isinstance(obj, np.ndarray):
        name = slot(key)
        tensors[name] = torch.from_numpy(np.array(obj, copy=True, order="C"))
        return {"$ndarray": name}
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(obj, bytes):
        return {"$bytes": base64.b64encode(obj).decode("ascii")}
    if isinstance(obj, tuple):
        return {"$tuple": [_encode(v, f"{key}/{i}", tensors) for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, f"{key}/{i}", tensors) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in obj):
            return {k: _encode(v, f"{key}/{k}" if key else k, tensors) for k, v in obj.items()}
        return {
            "$items": [
                [_encode(k, "", {}), _encode(v, f"{key}/{k}" if key else str(k), tensors)] for k, v in obj.items()
            ]
        }
    raise TypeError(f"cannot store a {type(obj).__name__} in a checkpoint (at {key or 'the top level'})")


_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _decode(obj, tensors: dict, used: set):
    """The payload value of JSON data written by :func:`_encode` (``ValueError`` on anything else)."""
    if isinstance(obj, list):
        return [_decode(v, tensors, used) for v in obj]
    if not isinstance(obj, dict):
        return obj  # str, int, float, bool, None
    if len(obj) == 1 and next(iter(obj)).startswith("$"):
        ((tag, value),) = obj.items()
        if tag in ("$tensor", "$ndarray"):
            if not isinstance(value, str) or value not in tensors:
                raise ValueError(f"it names a tensor {value!r} that the file does not hold")
            if value in used:
                raise ValueError(f"tensor {value!r} is named twice")
            used.add(value)
            return tensors[value] if tag == "$tensor" else tensors[value].numpy()
        if tag == "$tuple" and isinstance(value, list):
            return tuple(_decode(v, tensors, used) for v in value)
        if tag == "$float" and value in _FLOATS:
            return _FLOATS[value]
        if tag == "$bytes" and isinstance(value, str):
            return base64.b64decode(value.encode("ascii"), validate=True)
        if tag == "$items" and isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value):
            return {_decode(k, {}, set()): _decode(v, tensors, used) for k, v in value}
        raise ValueError(f"unknown entry {tag!r}")
    return {k: _decode(v, tensors, used) for k, v in obj.items()}


# ------------------------------------------------------------------------------------------------- writing


def _locate_sha(blob: bytes | bytearray, header_end: int, value: str) -> int:
    """Offset of the 64 hex digits of ``scp_sha256`` in the header (exactly one occurrence), or -1."""
    needle = f'"{_SHA_KEY}":"{value}"'.encode()
    at = blob.find(needle, 8, header_end)
    if at < 0 or blob.find(needle, at + 1, header_end) >= 0:
        return -1
    return at + len(_SHA_KEY) + 4


def to_bytes(payload: dict) -> tuple[bytes, str]:
    """(the safetensors file of ``payload`` plus its content ``checksum``, that checksum)."""
    from safetensors.torch import save as st_save

    checksum = content_checksum(payload)
    tensors: dict[str, torch.Tensor] = {}
    body = _encode({**payload, "checksum": checksum}, "", tensors)
    scp_json = json.dumps(body, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    blob = bytearray(st_save(tensors, metadata={"scp_container": CONTAINER, "scp": scp_json, _SHA_KEY: _ZERO_SHA}))
    header_end = 8 + struct.unpack("<Q", bytes(blob[:8]))[0]
    at = _locate_sha(blob, header_end, _ZERO_SHA)
    if at < 0:
        raise RuntimeError("safetensors wrote a header without exactly one checksum slot")
    blob[at : at + 64] = hashlib.sha256(blob).hexdigest().encode()
    return bytes(blob), checksum


def save(payload: dict, path: str | os.PathLike) -> str:
    """Write ``payload`` plus its ``checksum`` atomically to ``path`` (a safetensors file); returns the checksum."""
    blob, checksum = to_bytes(payload)
    with atomic_open(path) as f:
        f.write(blob)
    note_write(path, "model")
    return checksum


# ------------------------------------------------------------------------------------------------- reading


def _looks_like_safetensors(head: bytes, size: int) -> bool:
    if size < 10 or len(head) < 9:
        return False
    n = struct.unpack("<Q", head[:8])[0]
    return 2 <= n <= MAX_HEADER and head[8:9] == b"{"


def _unreadable(path: Path, reason: str) -> CheckpointError:
    return CheckpointError(f"checkpoint {path} cannot be read ({reason}); it is truncated or not a checkpoint: {_REDO}")


def _verify_content(payload, path: Path, fmt: str | None) -> dict:
    if not isinstance(payload, dict) or (fmt is not None and payload.get("format") != fmt):
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"{path} is not an SCP checkpoint of format {fmt} (found {found!r}): {_REDO}")
    if "checksum" not in payload:
        raise CheckpointError(f"checkpoint {path} carries no content checksum, so it cannot be verified: {_REDO}")
    try:
        actual = content_checksum(payload)
    except TypeError as error:
        raise CheckpointError(f"checkpoint {path} holds unexpected content ({error}): {_REDO}") from None
    if actual != payload["checksum"]:
        raise CheckpointError(
            f"checkpoint {path} is corrupted: its content does not match the checksum written with "
            f"it (damaged or modified since): {_REDO}"
        )
    return payload


def _load_safetensors(blob: bytes, path: Path, fmt: str | None) -> dict:
    """Header parsed and the whole file's sha256 verified from its bytes before safetensors builds any tensor."""
    size = len(blob)
    n = struct.unpack("<Q", blob[:8])[0]
    if n > min(MAX_HEADER, size - 8):
        raise _unreadable(path, f"its header claims {n} bytes, the file has {size - 8} after the length")
    try:
        header = loads(blob[8 : 8 + n].decode("utf-8"), "its header")
    except DataFormatError as error:  # a key given twice: read one way here, another by safetensors
        raise CheckpointError(f"checkpoint {path}: {error}: {_REDO}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise _unreadable(path, f"its header is not valid JSON: {str(error)[:120]}") from None
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    if not isinstance(meta, dict) or meta.get("scp_container") != CONTAINER:
        found = meta.get("scp_container") if isinstance(meta, dict) else None
        raise CheckpointError(
            f"{path} is a safetensors file but not an SCP checkpoint (container {found!r}, "
            f"expected {CONTAINER!r}): {_REDO}"
        )
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)):
            raise _unreadable(path, f"its header describes tensor {name!r} without valid data offsets")
        end = max(end, offsets[1])
    if size - 8 - n < end:
        raise _unreadable(path, f"its tensors need {end} data bytes, the file holds {size - 8 - n}")
    claimed = meta.get(_SHA_KEY)
    at = _locate_sha(blob, 8 + n, claimed) if isinstance(claimed, str) and len(claimed) == 64 else -1
    if at < 0:
        raise CheckpointError(f"checkpoint {path} carries no file checksum, so it cannot be verified: {_REDO}")
    h = hashlib.sha256()
    h.update(memoryview(blob)[:at])
    h.update(_ZERO_SHA.encode())
    h.update(memoryview(blob)[at + 64 :])
    if h.hexdigest() != claimed:
        raise CheckpointError(
            f"checkpoint {path} is corrupted: its bytes do not match the checksum written with it "
            f"(damaged or modified since): {_REDO}"
        )
    # verified: only now are tensors built and the payload reassembled
    from safetensors.torch import load as st_load

    try:
        tensors = st_load(blob)
    except Exception as error:  # a header safetensors rejects (a dtype it does not know, overlapping offsets, …)
        reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else ""
        raise _unreadable(path, f"{type(error).__name__}: {reason}") from None
    used: set = set()
    try:
        body = loads(meta.get("scp"), "its 'scp' metadata")
        payload = _decode(body, tensors, used)
        if set(tensors) - used:
            raise ValueError(f"tensors {sorted(set(tensors) - used)[:3]} belong to no entry")
    except (TypeError, ValueError, RecursionError) as error:
        raise CheckpointError(f"checkpoint {path} holds unexpected content ({str(error)[:160]}): {_REDO}") from None
    return _verify_content(payload, path, fmt)


def _check_card(path: Path, blob: bytes) -> None:
    """A shipped model (``models/NAME.safetensors`` with its card ``NAME.json`` beside it) must still be the file
    its card describes: a card (an object with ``model`` or ``sha256``) naming another file than ``NAME.safetensors``,
    or a file swapped or edited after ``scp ship``, is a :class:`CheckpointError`."""
    card_path = path.with_suffix(".json")
    if path.suffix != SUFFIX or not card_path.is_file():
        return
    card = read_json(card_path, f"model card {card_path}")
    if "model" not in card and "sha256" not in card:  # a JSON file of another kind beside it
        return
    if card.get("model") != path.name:  # a card renamed, or its model field edited, to sit beside another model
        named = repr(card.get("model"))
        named = named if len(named) <= 80 else named[:80] + "…"
        raise CheckpointError(
            f"{path} is not the model its card {card_path} describes (the card is that of {named}): a model or card "
            f"was renamed or edited after shipping; restore both (git checkout -- {path} {card_path}), or ship the "
            "run you mean with `scp ship`"
        )
    actual = hashlib.sha256(blob).hexdigest()
    if card.get("sha256") != actual:
        raise CheckpointError(
            f"{path} is not the model its card {card_path} describes (the card records sha256 {card.get('sha256')}, "
            f"the file has {actual}): the file was changed after shipping; restore it (git checkout -- {path}), "
            "or ship the run you mean with `scp ship`"
        )


def _looks_like_legacy(head: bytes) -> bool:
    """A ``torch.save`` file: a zip archive (torch >= 1.6) or a bare pickle stream (protocol 2-5, older torch)."""
    return head[:4] == b"PK\x03\x04" or (len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5)


def _legacy_reason(error: Exception) -> str:
    """A short clause saying why ``torch.load(weights_only=True)`` refused a file in the legacy format."""
    text = str(error).strip()
    if isinstance(error, pickle.UnpicklingError) or "Weights only load failed" in text:
        found = re.search(r"GLOBAL ([\w.]+)", text)
        if found or "Unsupported global" in text:
            named = f" (such as {found.group(1)})" if found else ""
            return f"it holds objects other than tensors and plain containers{named}, which are never unpickled"
        detail = re.search(r"WeightsUnpickler error:\s*(\S[^\n]*)", text)
        return (
            "it is a pickle that torch's safe loader cannot read"
            + (f" ({detail.group(1).strip()[:80]})" if detail else "")
            + ", and it is never unpickled otherwise"
        )
    first = re.split(r"(?<=[.;])\s", text.splitlines()[0] if text else "", maxsplit=1)[0].rstrip(".;:")
    return f"it is a damaged or truncated torch file ({type(error).__name__}: {first[:120]})"


def _load_legacy(path: Path, fmt: str | None, warn: bool) -> dict:
    """The old ``torch.save`` format, through torch's restricted unpickler only (it calls nothing a file names)."""
    try:
        with warnings.catch_warnings():  # torch's note on a pickle protocol other than 2 is no concern of the user's
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated zip, a pickle that wants to call something: not readable
        raise CheckpointError(f"checkpoint {path} cannot be read: {_legacy_reason(error)}: {_REDO}") from None
    payload = _verify_content(payload, path, fmt)
    if warn:
        warn_user(
            f"checkpoint {path} is in the legacy torch pickle format (read safely with weights_only=True); "
            f"convert it once: scp convert-checkpoint {path} {path.with_suffix(SUFFIX)}",
            LegacyCheckpointWarning,
        )
    return payload


def load(path: str | os.PathLike, fmt: str | None = None, *, warn_legacy: bool = True) -> dict:
    """The verified payload of checkpoint ``path`` (``fmt``: the ``format`` entry it must carry).

    A safetensors file is verified from its bytes before any tensor is built, and, when its card lies beside it (a
    model shipped into ``models/``), against the sha256 the card records.  A file in the legacy pickle format
    (not named ``.safetensors``) is read with ``torch.load(weights_only=True)`` and a
    :class:`LegacyCheckpointWarning` (``warn_legacy=False``: none).  Any other file (a JSONL or text file, random
    bytes: neither a safetensors header nor torch's zip or pickle magic) is refused before ``torch.load`` sees it.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"no checkpoint at {path}")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} is not a file")
    size = path.stat().st_size
    if size == 0:
        raise CheckpointError(f"checkpoint {path} is empty (0 bytes): {_REDO}")
    note_read(path, "model")
    with open(path, "rb") as f:
        head = f.read(9)
        if _looks_like_safetensors(head, size):
            f.seek(0)
            blob = f.read()
            _check_card(path, blob)
            return _load_safetensors(blob, path, fmt)
    if path.suffix == SUFFIX:
        pickled = head[:2] == b"PK" or head[:1] == b"\x80"  # a torch zip archive or a bare pickle stream
        kind = "a zip or pickle file (such as a renamed .pt)" if pickled else "not a safetensors file"
        raise _unreadable(path, f"it is {kind}; a .safetensors checkpoint is never unpickled")
    if not _looks_like_legacy(head):  # a JSONL or text file, random bytes: never handed to torch.load
        raise CheckpointError(
            f"{path} is not an SCP checkpoint (neither a safetensors file nor a legacy torch "
            f"checkpoint): give the .safetensors file `scp train` wrote, e.g. "
            f"models/scp-hotpotqa-best.safetensors"
        )
    return _load_legacy(path, fmt, warn_legacy)


def convert(old: str | os.PathLike, new: str | os.PathLike, fmt: str | None = None) -> str:
    """Rewrite checkpoint ``old`` (legacy ``.pt`` or safetensors) as the safetensors file ``new``.

    ``old`` is read with the safe loader and verified; ``new`` is written atomically, read back and checked to
    carry the same content checksum (so its weights fingerprint is unchanged).  Returns that checksum.
    """
    old, new = Path(old), Path(new)
    if new.suffix != SUFFIX:
        raise InputError(f"the converted checkpoint {new} must be named *{SUFFIX}")
    if new.exists() and old.exists() and new.resolve() == old.resolve():
        raise InputError(f"{new} is the file to convert; give another output path")
    payload = load(old, fmt, warn_legacy=False)
    checksum = save({k: v for k, v in payload.items() if k != "checksum"}, new)
    back = load(new, fmt)
    if checksum != payload["checksum"] or back["checksum"] != checksum:
        raise CheckpointError(
            f"converting {old} to {new} changed its content (checksum {payload['checksum']} became "
            f"{back['checksum']}); {new} should not be used"
        )
    return checksum
