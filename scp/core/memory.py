"""How much memory a computation may ask for, checked before it allocates.

Estimators, tables and enumerations compute the bytes a request needs from its sizes (M permutations, n players,
2^n coalitions) and call :func:`check_memory` first, so an impossible request is one
:class:`~scp.errors.InputError` naming the bytes and the limit, instead of numpy's ``MemoryError`` or, when the
kernel overcommits, the process killed halfway.  The limit is the memory available now: on a GPU what torch can
still allocate there, otherwise psutil's ``virtual_memory().available`` when psutil is installed, else
``MemAvailable`` of ``/proc/meminfo``; where none of these can be read nothing is refused.
"""

from __future__ import annotations

from pathlib import Path

import torch

from scp.errors import InputError

__all__ = ["ALWAYS_ALLOWED_BYTES", "available_memory", "check_memory", "format_bytes"]

ALWAYS_ALLOWED_BYTES = 1 << 26
"""Requests up to this size (64 MiB) are never checked, so the usual small calls do not read the memory state."""


def available_memory(device: str | torch.device | None = None) -> int | None:
    """Bytes that can be allocated now on ``device`` (default: host memory); None when it cannot be read."""
    if device is not None and torch.device(device).type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        return int(psutil.virtual_memory().available)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def format_bytes(n_bytes: float) -> str:
    """``n_bytes`` in the largest binary unit that keeps it ≥ 1 (``"3.2 GiB"``)."""
    for unit, size in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= size:
            return f"{n_bytes / size:,.1f} {unit}"
    return f"{int(n_bytes)} bytes"


def check_memory(n_bytes: int, what: str, advice: str, device: str | torch.device | None = None) -> None:
    """Refuse ``what`` (e.g. "monte_carlo with M = 10⁹ permutations of n = 3 players") when the ``n_bytes`` it
    needs exceed :func:`available_memory` on ``device``; ``advice`` says what to do instead."""
    if n_bytes <= ALWAYS_ALLOWED_BYTES:
        return
    limit = available_memory(device)
    if limit is not None and n_bytes > limit:
        where = "GPU memory" if device is not None and torch.device(device).type == "cuda" else "memory"
        raise InputError(
            f"{what} needs about {format_bytes(n_bytes)} of {where}, more than the {format_bytes(limit)} available "
            f"here; {advice}"
        )
