"""An output is never an input: before a command writes anything, each path it will write is compared
with every file it reads, and one that is such a file is refused in one line naming both.

"Is" means the same file once links are followed: equal ``(st_dev, st_ino)`` of :func:`os.stat`, so a symbolic
link to an input, a hard link to it, or the input named another way (``./x``, ``../dir/x``) are all that input.
A path that does not exist yet is no input.  Nothing here reads, creates or changes a file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from scp.errors import InputError

__all__ = ["same_file", "refuse_inputs_as_outputs"]

Named = tuple[str, "str | os.PathLike[str] | None"]
"""(how the command's message names the path, the path or ``None`` when there is none)."""


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` are one existing file (or folder), links followed: equal device and inode."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):  # absent, under a file, a dangling link, a name the system refuses
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def refuse_inputs_as_outputs(outputs: Iterable[Named], inputs: Iterable[Named]) -> None:
    """Raise :class:`~scp.errors.InputError` if any of ``outputs`` is (or links to) any of ``inputs``.

    Each entry is ``(words, path)``; the message reads ``"<output words> <path> is <input words> <path> …"``, for
    instance ``--out runs/x.json is --data runs/x.json, a file this command reads``."""
    given = [(words, Path(path)) for words, path in inputs if path is not None]
    for out_words, out in outputs:
        if out is None:
            continue
        for in_words, src in given:
            if same_file(out, src):
                how = "" if os.path.abspath(out) == os.path.abspath(src) else " (the same file under another name)"
                raise InputError(
                    f"{out_words} {out} is {in_words} {src}{how}, a file this command reads: an output never "
                    "replaces an input; write to another path"
                )
