"""Atomic file writes (nothing is ever left half-written: caches, checkpoints, result records) onto regular files
only (:func:`check_output_path`: a link, device, pipe or socket given as an output is refused, never replaced), the one
conversion of values to JSON data (:func:`jsonable`, :func:`write_json`), the one bounded JSON reader
(:func:`read_json`, :func:`parse_json`) and generated sections of a text file (:func:`replace_section`)."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

from scp.errors import DataFormatError, InputError, InputTypeError, SCPError

#: Deepest nesting of lists and objects any JSON file the package reads may have (records, settings, provenance,
#: cards); Python's own parser would raise RecursionError somewhere near 1000.
MAX_JSON_DEPTH = 64


_KINDS = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a named pipe",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _kind(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words (``"a named pipe"``)."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _link_words(path: Path) -> str:
    """``path``'s kind when it is a symbolic link, naming its target and whether that exists."""
    target = os.readlink(path)
    return f"a symbolic link to {target}" + ("" if path.exists() else ", which does not exist")


def _refusal(path: Path, mode: int, name: str) -> InputError:
    kind = _link_words(path) if stat.S_ISLNK(mode) else _kind(mode)
    return InputError(
        f"{name} is {kind}, not a regular file: scp writes a new file and renames it into place, which would "
        "replace it; give the path of a regular file (or a new one)"
    )


def _existing_mode(path: Path) -> int | None:
    """The permission bits of ``path`` when it is a regular file, ``None`` when nothing is there.

    Raises:
        InputError: ``path`` is a symbolic link (dangling or not), a folder, a device, a named pipe or a socket.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise _refusal(path, st.st_mode, str(path))
    return stat.S_IMODE(st.st_mode)


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success fsync it, give it the permissions of the regular file it
    replaces (a new file: 0644) and rename it over ``path`` (atomic on POSIX); on any error delete it and leave
    ``path`` untouched.  A ``path`` that is not a regular file (a symbolic link, a device such as ``/dev/null``,
    a named pipe, a socket, a folder) is refused with an :class:`~scp.errors.InputError` before anything is
    written: renaming over it would replace it."""
    with atomic_open_many([path], mode) as (f,):
        yield f


@contextmanager
def atomic_open_many(paths: Sequence[str | os.PathLike], mode: str = "wb") -> Iterator[list[IO]]:
    """:func:`atomic_open` of several files that change together (a model and its card): every temporary file is
    written and synced before the first rename, the renames follow one another in ``paths`` order, and on any
    error before them no ``path`` is touched."""
    paths = [Path(p) for p in paths]
    for path in paths:
        _existing_mode(path)  # refused before anything is written
    temps: list[str] = []
    try:
        with ExitStack() as stack:  # every temporary file closed however the block ends
            files = []
            for path in paths:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
                temps.append(tmp)
                files.append(stack.enter_context(os.fdopen(fd, mode)))
            yield files
            for f in files:
                f.flush()
                os.fsync(f.fileno())
        for tmp, path in zip(temps, paths):
            kept = _existing_mode(path)  # again: a file made a link or a pipe meanwhile is still refused
            os.chmod(tmp, 0o644 if kept is None else kept)
        for tmp, path in zip(temps, paths):
            os.replace(tmp, path)
    except BaseException:
        for tmp in temps:
            Path(tmp).unlink(missing_ok=True)
        raise


def check_output_path(path: str | os.PathLike, option: str, stream: bool = False) -> None:
    """Refuse, before any work, an output path that scp cannot write as a file of the user's: ``option`` (say
    ``--out``) names it in the one-line error.

    A regular file or a new path (under folders that are folders) is fine; so, with ``stream``, are the outputs a
    command streams to (``/dev/stdout``, ``/dev/fd/N``, a named pipe, a character device).  Anything else — a
    symbolic link (dangling or not), a folder, a device, a named pipe, a socket, a path under a file or a
    dangling link — is an :class:`~scp.errors.InputError`.
    """
    path = Path(path)
    name = f"{option} {path}"
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        blocker = file_above(path)
        if blocker is not None:
            what = _link_words(blocker) if blocker.is_symlink() else "a file"
            raise InputError(f"{name}: its folder {blocker} is {what}, so nothing can be written under it") from None
        return
    if stat.S_ISREG(st.st_mode):
        return
    if stream and (_STD_STREAM.fullmatch(os.path.abspath(path)) or _is_stream_node(path)):
        return
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{name} is a directory; give the path of the file to write")
    raise _refusal(path, st.st_mode, name)


#: Outputs named as a process's own streams: written to, never replaced.
_STD_STREAM = re.compile(r"/dev/(stdout|stderr|fd/\d+)|/proc/(self|\d+)/fd/\d+")


def _is_stream_node(path: Path) -> bool:
    """Whether ``path`` (not followed if a link) is a named pipe or a character device."""
    mode = os.lstat(path).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def is_stream(path: str | os.PathLike) -> bool:
    """Whether an output ``path`` is a stream to write to in order, never read or replaced: ``/dev/stdout``,
    ``/dev/stderr``, ``/dev/fd/N``, or a named pipe or character device (such as ``/dev/null``)."""
    if _STD_STREAM.fullmatch(os.path.abspath(path)):
        return True
    try:
        return _is_stream_node(Path(path))
    except OSError:
        return False


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


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _depth_exceeds(text: str, limit: int) -> bool:
    """Whether the brackets of JSON ``text`` (outside strings) nest deeper than ``limit``: strings and everything
    but brackets are cut out by regular expressions and the depth is a running sum, so a deeply nested document
    is refused before the recursive parser sees it, and a 100 MB sentence costs no Python loop over its
    characters."""
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)).encode("ascii")
    steps = np.frombuffer(brackets, dtype=np.uint8)
    depth = np.cumsum(np.where((steps == ord("[")) | (steps == ord("{")), 1, -1))
    return bool(depth.size) and int(depth.max()) > limit


def unique_keys(what: str) -> Callable[[list[tuple[str, Any]]], dict]:
    """A ``json`` ``object_pairs_hook`` that builds each object as ``dict`` does but refuses a key given twice in
    one object (Python's parser keeps the last silently, so a forged first value would be read one way by us and
    another by a tool that keeps the first).

    Raises:
        DataFormatError: naming the key and ``what`` (the file or record), on one line.
    """

    def hook(pairs: list[tuple[str, Any]]) -> dict:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    shown = repr(key) if len(key) <= 80 else repr(key[:80]) + "…"
                    raise DataFormatError(
                        f"{what} gives the key {shown} twice in one object; JSON readers disagree on which one "
                        "counts, so scp reads neither: keep one"
                    )
                seen.add(key)
        return obj

    return hook


def loads(text: str | bytes, what: str) -> Any:
    """``json.loads(text)`` refusing a key given twice in one object (:func:`unique_keys`); other errors are
    ``json``'s own (``JSONDecodeError``, ``RecursionError``), for callers that word them.  Files and records are
    read with :func:`parse_json` / :func:`read_json`, which also bound the depth."""
    return json.loads(text, object_pairs_hook=unique_keys(what))


def parse_json(
    text: str | bytes, what: str, expect: type | tuple[type, ...] | None = None, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """``text`` parsed as JSON, refused with one line naming ``what`` when it is not valid UTF-8 JSON, gives a key
    twice in one object (:func:`unique_keys`), nests deeper than ``max_depth`` or (with ``expect``) its top level is
    not of that type.

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
        obj = loads(text, what)
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
        DataFormatError: it is not a regular file, not valid JSON, gives a key twice, is too deep or of the wrong
            top-level type.
    """
    from scp.errors import MissingFileError

    path = Path(path)
    what = what or str(path)
    if not path.exists():
        raise MissingFileError(f"{what}: no such file")
    if not path.is_file():
        raise DataFormatError(f"{what} is not a regular file")
    return parse_json(path.read_bytes(), what, expect=expect, max_depth=max_depth)


def _open_lock(lock_file: Path, what: str) -> int:
    """The descriptor of ``lock_file``, made with its folder if missing; one line naming the path and what it is
    when it or its folder is in the way (never a bare errno)."""
    blocker = file_above(lock_file)
    if blocker is not None:
        kind = _link_words(blocker) if blocker.is_symlink() else _kind(os.lstat(blocker).st_mode)
        kind = "a file" if kind == "not a regular file" else kind
        raise InputError(
            f"cannot lock {what}: {blocker}, where scp keeps the lock file {lock_file.name}, is {kind}, not a "
            "folder; move it away"
        )
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    try:
        st = os.lstat(lock_file)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISREG(st.st_mode):
            kind = _link_words(lock_file) if stat.S_ISLNK(st.st_mode) else _kind(st.st_mode)
            raise InputError(
                f"cannot lock {what}: its lock file {lock_file} is {kind}, not a regular file; remove it "
                "(scp makes the file itself)"
            )
    try:
        return os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as error:  # made a link or a folder meanwhile, or not writable
        raise InputError(f"cannot lock {what}: cannot open its lock file {lock_file} ({error.strerror})") from None


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
        InputError: the lock file is not a regular file (a symbolic link, a folder, …) or its folder is a file.
    """
    lock_file = Path(lock_file)
    fd = _open_lock(lock_file, what)
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
