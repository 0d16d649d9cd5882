"""The options of ``scp run`` and ``python -m scp.suite.runner``, apart from the runner: building and parsing them
(``--help`` included) imports the standard library alone, and ``scp run`` refuses an unknown notebook before the
runner (YAML, numpy, papermill) is loaded."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from scp.errors import MissingFileError
from scp.paths import NOTEBOOKS, ROOT

DESCRIPTION = "Papermill runner: execute notebooks with their parameter files, in dependency order, incrementally."
"""What ``scp run --help`` and ``python -m scp.suite.runner --help`` say the runner does."""


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the runner's options to ``parser`` (and ``runner_prog``, the name its error lines start with)."""
    parser.add_argument("names", nargs="*", metavar="NAME", help="notebook names (file stems under notebooks/), or all")
    parser.add_argument("--all", action="store_true", help="run every notebook (same as the name all)")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny parameters (the smoke: section) and a temporary output folder"
    )
    parser.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a parameter (value read as YAML); repeatable",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="write figures/ and results/ here instead (default: the repository, or a temporary folder with --smoke)",
    )
    parser.add_argument(
        "--force", action="store_true", help="rerun notebooks whose inputs equal those their provenance records"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="rerun into runs/check/ and compare every table with the committed one (the notebook's tolerance)",
    )
    parser.add_argument(
        "-j", "--jobs", type=int, default=1, metavar="N", help="run up to N independent notebooks side by side"
    )
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="write committed results from a tree with uncommitted changes (the provenance says dirty: true)",
    )
    parser.add_argument(
        "--status", action="store_true", help="say which notebooks are stale, and why, without running any"
    )
    parser.set_defaults(runner_prog=parser.prog)
    return parser


def add_subparser(subparsers, handler: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """Add ``run`` (the runner) to an ``argparse`` sub-command set: ``scp run NAME… | all [--smoke] [-p k=v]``.

    ``handler`` is stored as ``func`` and returns the exit status: ``args.func(args)`` (the caller gives it, so
    that this module, below the runner, never imports it: ``scp.cli`` loads the runner only after
    :func:`check_names`).
    """
    parser = configure(
        subparsers.add_parser(
            "run", help="execute notebooks with their parameter files (papermill)", description=DESCRIPTION
        )
    )
    parser.set_defaults(func=handler)
    return parser


def check_names(names: Sequence[str]) -> None:
    """Raise :class:`~scp.errors.MissingFileError` for the first name that is no notebook under ``notebooks/``
    (the runner's own check and message, by pathlib alone); ``all`` among them stands for every notebook."""
    if "all" in names:
        return
    for name in names:
        path = NOTEBOOKS / f"{name}.ipynb"
        if not path.is_file():
            known = ", ".join(sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))) or "none yet"
            try:
                shown = path.resolve().relative_to(ROOT)
            except ValueError:
                shown = path
            raise MissingFileError(f"no notebook {shown} (known notebooks: {known})")
