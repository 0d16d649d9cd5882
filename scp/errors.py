"""Errors that experiments catch and record instead of crashing or silently skipping, user warnings, and the
one line the command line prints for a warning."""

import sys
import warnings
from pathlib import Path

_PACKAGE = str(Path(__file__).resolve().parent)


class SCPError(Exception):
    """Base class for SCP's own errors: the caller's input (a value, file or setting) is wrong or unavailable.

    The command line prints one line and exits with code 2 for these; any other exception is a bug (traceback,
    exit code 1).
    """


class InputError(SCPError, ValueError):
    """A value, setting or file content the caller gave is invalid; the message names it and what is allowed."""


class InputTypeError(SCPError, TypeError):
    """An argument of the wrong type (e.g. a dict where a list of sentences is expected)."""


class MissingFileError(SCPError, FileNotFoundError):
    """A file or folder the caller named does not exist."""


class DataUnavailableError(SCPError, FileNotFoundError):
    """A dataset could be found neither locally (path / SCP_DATA_DIR) nor on the Hugging Face hub."""


class ModelUnavailableError(SCPError, RuntimeError):
    """A model's weights cannot be loaded here (offline, or an optional package is missing).

    Experiments catch this and record the method as ``n/a`` with the message, never skip it silently.
    """


class DataFormatError(SCPError, ValueError):
    """A data file or record is unreadable, not in its dataset's layout, or has invalid content.

    The message is one line naming the file and the line (or record number) where known.
    """


class CacheDirectoryError(SCPError, NotADirectoryError):
    """The embedding cache directory (``SCP_CACHE_DIR`` or ``cache_dir``) is, or lies under, a regular file."""


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the first frame outside the ``scp`` package: the user's own line."""
    level, frame = 2, sys._getframe(1)  # stacklevel 2 is the caller of warn_user
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, category, stacklevel=level)


def format_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    """``warnings.formatwarning`` for the command line: ``scp: warning: <message>`` on one line, with no file, line
    number or source line; a warning that is no ``UserWarning`` (scp's own are) is named by its category first:
    ``scp: warning: RuntimeWarning: overflow encountered in exp``."""
    kind = "" if issubclass(category, UserWarning) else f"{category.__name__}: "
    return f"scp: warning: {kind}{' '.join(str(message).split())}\n"
