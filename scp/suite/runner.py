"""Papermill runner: execute notebooks with their parameter files, in dependency order.

``python -m scp.suite.runner NAME… | all [--smoke] [-p key=value …] [--out DIR]``

- Parameters have one source: ``params/NAME.yaml`` holds the full-run values (equal to the defaults of the
  notebook's ``parameters`` cell, so "Run All" in JupyterLab gives the committed figure; a test keeps them
  equal) and a ``smoke:`` section of tiny overrides.  Keys that the notebook's ``parameters`` cell does not
  declare are an error, in the YAML as on the command line; ``-p`` values are read as YAML scalars
  (``-p seeds=[0,1]``, ``-p delta=0.01``).
- Every run gets ``out_dir``: the repository root for a full run (the notebook writes ``figures/NAME/`` and
  ``results/NAME/``), a temporary folder for ``--smoke`` (removed afterwards unless ``--out`` names one), so a
  smoke run never overwrites committed figures.  Executed copies go to ``runs/NAME.ipynb`` and
  ``runs/smoke/NAME.ipynb`` (``<out>/runs/NAME.ipynb`` when an output folder is given).
- Every notebook's parameters are checked before any kernel starts: the keys, and each value's type against the
  literal default in the ``parameters`` cell (an ``int`` default takes integers, a ``float`` one numbers, a
  ``bool`` one true/false, a ``str`` one text, a list or tuple one a list; a ``None`` or non-literal default
  takes anything).  Bad input (an unknown notebook, a missing or unreadable parameter file, a bad ``-p``, an
  undeclared key, a value of the wrong type) is an :class:`~scp.errors.SCPError`: one line, exit status 2.
- A failing cell stops the run with one message: notebook, cell index and first line, the error, and where
  the executed copy is.  ``main`` then exits with status 1.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scp.errors import DataFormatError, InputError, MissingFileError, SCPError
from scp.io import file_above
from scp.paths import NOTEBOOKS, PARAMS, ROOT, RUNS

DEPENDS: dict[str, tuple[str, ...]] = {}
"""Notebooks that must run before a notebook (its inputs), e.g. ``{"09_compression_and_transfer":
("02_reranking_auc",)}`` (09 reuses the models 02 trains).  None is declared yet: notebooks run in the order of their
number."""

RUNNER_KEYS = ("out_dir",)
"""Parameters the runner sets itself; they may not appear in parameter files or ``-p``."""

__all__ = [
    "DEPENDS",
    "NotebookFailed",
    "ParameterError",
    "RunnerError",
    "add_subparser",
    "check_params_in_sync",
    "load_params",
    "main",
    "notebook_defaults",
    "notebook_names",
    "notebook_parameters",
    "order",
    "parse_overrides",
    "resolve_params",
    "run",
    "run_notebook",
]


class RunnerError(Exception):
    """A problem the runner reports in its own words: a notebook that failed (``main`` exits with status 1)."""


class ParameterError(RunnerError, InputError):
    """A parameter file or ``-p`` override that does not fit the notebook's ``parameters`` cell (bad input:
    an :class:`~scp.errors.SCPError`, exit status 2)."""


@dataclass
class NotebookFailed(RunnerError):
    """A cell of a notebook raised: which notebook, which cell, which error, and where the executed copy is."""

    name: str
    cell_index: int | None
    cell_source: str
    ename: str
    evalue: str
    executed: Path

    def __str__(self) -> str:
        first = next((line for line in self.cell_source.splitlines() if line.strip()), "")
        cell = "a cell" if self.cell_index is None else f"cell {self.cell_index}"
        return (
            f"notebook {self.name} failed in {cell} ({first.strip()[:80]!r}): {self.ename}: {self.evalue}\n"
            f"  executed copy with the full traceback: {_show(self.executed)}"
        )


def _show(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


# ------------------------------------------------------------------------------------------ notebooks


def notebook_names(notebooks_dir: Path | None = None) -> list[str]:
    """Names (file stems) of all notebooks under ``notebooks/``, in reading order (by their number)."""
    return sorted(p.stem for p in Path(notebooks_dir or NOTEBOOKS).glob("*.ipynb"))


def _notebook_path(name: str, notebooks_dir: Path | None = None) -> Path:
    path = Path(notebooks_dir or NOTEBOOKS) / f"{name}.ipynb"
    if not path.is_file():
        known = ", ".join(notebook_names(notebooks_dir)) or "none yet"
        raise MissingFileError(f"no notebook {_show(path)} (known notebooks: {known})")
    return path


def _inspect(name: str, notebooks_dir: Path | None = None) -> dict[str, dict]:
    import papermill

    path = _notebook_path(name, notebooks_dir)
    try:
        params = papermill.inspect_notebook(str(path))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # not JSON, not a notebook (an edit broke it)
        message = " ".join(str(exc).split())[:200]
        raise DataFormatError(f"notebook {_show(path)} cannot be read ({type(exc).__name__}: {message})") from None
    if not params:
        raise ParameterError(
            f"notebook {name} has no cell tagged 'parameters' (or papermill could not parse it: "
            "no annotations, no '=' in comments)"
        )
    return params


def notebook_parameters(name: str, notebooks_dir: Path | None = None) -> list[str]:
    """The parameter names declared by the notebook's ``parameters`` cell (papermill's inspection), in order."""
    return list(_inspect(name, notebooks_dir))


def notebook_defaults(name: str, notebooks_dir: Path | None = None) -> dict[str, Any]:
    """The values written in the notebook's ``parameters`` cell (Python literals), by name."""
    out = {}
    for key, info in _inspect(name, notebooks_dir).items():
        try:
            out[key] = ast.literal_eval(info["default"])
        except (ValueError, SyntaxError) as exc:
            raise ParameterError(f"notebook {name}: parameter {key} = {info['default']} is not a literal") from exc
    return out


_ANY = object()  # a default that is no literal: any value fits


def _literal_defaults(name: str, notebooks_dir: Path | None = None) -> dict[str, Any]:
    """Each name the notebook's ``parameters`` cell assigns → its literal default (``_ANY`` where the value is no
    Python literal); read with ``ast``, so a list over several lines is one value."""
    import nbformat

    nb = nbformat.read(str(_notebook_path(name, notebooks_dir)), as_version=4)
    cell = next((c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        return {}
    try:
        tree = ast.parse(cell.source)
    except SyntaxError as exc:
        raise ParameterError(
            f"notebook {name}: its parameters cell is not plain Python (line {exc.lineno}: {exc.msg})"
        ) from None
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        try:
            default = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            default = _ANY
        for target in targets:  # papermill declares plain names only (no ``a, b = 1, 2``)
            if isinstance(target, ast.Name):
                out[target.id] = default
    return out


def _kind(value: Any) -> str | None:
    """The kind of a default that a value must match: bool, int, float, str, list, dict, or None (anything)."""
    if value is None or value is _ANY:
        return None
    for kind, types in (
        ("bool", bool),
        ("int", int),
        ("float", float),
        ("str", str),
        ("list", (list, tuple)),
        ("dict", dict),
    ):
        if isinstance(value, types):
            return kind
    return type(value).__name__


def _element_kind(default: Sequence) -> str | None:
    """The kind every element of a list default shares (int and float mixed: float), or None."""
    kinds = {_kind(v) for v in default}
    if kinds <= {"int", "float"} and kinds:
        return "float" if "float" in kinds else "int"
    return next(iter(kinds)) if len(kinds) == 1 and kinds <= {"bool", "str"} else None


_WORDS = {
    "bool": "true or false",
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "list": "a list",
    "dict": "a mapping",
}
_PLURAL = {"bool": "true/false values", "int": "integers", "float": "numbers", "str": "strings"}
_SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")  # 1e-3: YAML 1.1 reads it as a string


def _fit(value: Any, kind: str | None) -> tuple[bool, Any]:
    """Whether ``value`` fits a default of ``kind``, and the value to use (``"1e-3"`` → 0.001 for a number)."""
    if kind is None:
        return True, value
    if kind == "float" and isinstance(value, str) and _SCIENTIFIC.fullmatch(value.strip()):
        return True, float(value)
    if kind == "bool":
        return isinstance(value, bool), value
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool), value
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool), value
    if kind == "str":
        return isinstance(value, str), value
    if kind == "list":
        return isinstance(value, (list, tuple)), value
    if kind == "dict":
        return isinstance(value, dict), value
    return True, value  # a literal of another kind (a set, bytes, a complex number): not checked


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _checked(name: str, where: str, key: str, value: Any, default: Any) -> Any:
    """``value`` if it fits the type of ``default`` (see the module docstring), else :class:`ParameterError`
    naming the notebook, the key, the expected type and the value."""
    kind = _kind(default)
    ok, value = _fit(value, kind)
    expected = _WORDS.get(kind or "", kind)
    if ok and kind == "list" and value and default:
        element = _element_kind(default)
        fitted = [_fit(v, element) for v in value]
        bad = next((v for (fits, _), v in zip(fitted, value) if not fits), _ANY)
        if bad is not _ANY:
            ok, expected = False, f"a list of {_PLURAL[element]}"
        else:
            value = type(value)(v for _, v in fitted)
    if ok:
        return value
    hint = " (quote it to pass text)" if kind == "str" and where == "-p" else ""
    raise ParameterError(
        f"{where}: parameter {key} of notebook {name} expects {expected} (its default is "
        f"{_short(default)}); got {_short(value)} ({type(value).__name__}){hint}"
    )


def order(names: Iterable[str], depends: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """``names`` sorted so that each notebook comes after the notebooks it depends on (:data:`DEPENDS`), and
    otherwise by name (their number).  Dependencies outside ``names`` are not added."""
    depends = DEPENDS if depends is None else depends
    todo = sorted(dict.fromkeys(names))
    done: list[str] = []
    visiting: set[str] = set()

    def visit(n: str) -> None:
        if n in done:
            return
        if n in visiting:
            raise RunnerError(f"dependency cycle through notebook {n}")
        visiting.add(n)
        for d in sorted(depends.get(n, ())):
            if d in todo:
                visit(d)
        visiting.discard(n)
        done.append(n)

    for n in todo:
        visit(n)
    return done


# ----------------------------------------------------------------------------------------- parameters


def _read_params(path: Path, name: str) -> tuple[dict, dict]:
    """(full-run values, smoke overrides) of a parameter file; a missing, unreadable or malformed file raises an
    :class:`~scp.errors.SCPError` naming it."""
    if not path.is_file():
        raise MissingFileError(f"no parameter file {_show(path)} for notebook {name!r}")
    try:
        params = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ParameterError(f"{_show(path)}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
        raise ParameterError(f"{_show(path)}{line}: not valid YAML ({problem})") from None
    params = {} if params is None else params
    if not isinstance(params, dict):
        raise ParameterError(
            f"{_show(path)} must hold a mapping of parameter names to values, not a {type(params).__name__}"
        )
    params = dict(params)
    smoke_values = params.pop("smoke", None)
    smoke_values = {} if smoke_values is None else smoke_values
    if not isinstance(smoke_values, dict):
        raise ParameterError(
            f"{_show(path)}: the smoke section must be a mapping of parameter names to values, "
            f"not a {type(smoke_values).__name__}"
        )
    return params, smoke_values


def load_params(name: str, smoke: bool = False, params_dir: Path | None = None) -> dict:
    """The full-run parameters of a notebook from ``params/NAME.yaml``, or its ``smoke`` overrides applied on top."""
    params, smoke_values = _read_params(Path(params_dir or PARAMS) / f"{name}.yaml", name)
    return {**params, **smoke_values} if smoke else params


def parse_overrides(pairs: Iterable[str]) -> dict[str, Any]:
    """``["key=value", …]`` → ``{key: value}``, each value read as a YAML scalar or flow list (``3``, ``0.5``,
    ``true``, ``null``, ``[0, 1]``, ``hotpotqa``)."""
    out = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*", key):
            raise ParameterError(f"-p expects key=value with a parameter name as key; got {pair!r}")
        try:
            out[key] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise ParameterError(f"-p {key}: cannot read {raw!r} as a YAML value ({exc.problem})") from exc
    return out


def resolve_params(
    name: str,
    smoke: bool = False,
    overrides: Mapping[str, Any] | None = None,
    params_dir: Path | None = None,
    notebooks_dir: Path | None = None,
) -> dict[str, Any]:
    """The parameters of one run: ``params/NAME.yaml`` (with ``smoke:`` applied for a smoke run), then ``overrides``.

    Every value (of the file, both sections, and ``overrides``) is checked against the type of its default in the
    notebook's ``parameters`` cell (see the module docstring); nothing is executed.

    Raises:
        ParameterError: a key in the file, its smoke section or ``overrides`` that the notebook's ``parameters``
            cell does not declare, one the runner sets itself (``out_dir``), a value of the wrong type, or an
            unreadable parameter file.
        MissingFileError: no such notebook, or no ``params/NAME.yaml``.
    """
    declared = notebook_parameters(name, notebooks_dir)
    if "out_dir" not in declared:
        raise ParameterError(f"notebook {name}: its parameters cell must declare out_dir = None")
    path = Path(params_dir or PARAMS) / f"{name}.yaml"
    full, smoke_values = _read_params(path, name)
    sections = [(_show(path), full), (f"{_show(path)} (smoke section)", smoke_values), ("-p", dict(overrides or {}))]
    for where, values in sections:
        keys = list(values)
        unknown = [k for k in keys if k not in declared]
        if unknown:
            raise ParameterError(
                f"{where}: unknown parameter {', '.join(map(repr, unknown))} for notebook {name} "
                f"(its parameters cell declares {', '.join(declared)})"
            )
        reserved = [k for k in keys if k in RUNNER_KEYS]
        if reserved:
            raise ParameterError(
                f"{where}: {', '.join(reserved)} is set by the runner (use --out for the output folder)"
            )
    defaults = _literal_defaults(name, notebooks_dir)
    full, smoke_values, given = (
        {k: _checked(name, where, k, v, defaults.get(k, _ANY)) for k, v in values.items()} for where, values in sections
    )
    return {**full, **(smoke_values if smoke else {}), **given}


def check_params_in_sync(name: str, params_dir: Path | None = None, notebooks_dir: Path | None = None) -> None:
    """Raise :class:`ParameterError` unless ``params/NAME.yaml``'s full-run values equal the defaults written in
    the notebook's ``parameters`` cell (the same keys, apart from ``out_dir``, with the same values)."""
    defaults = {k: v for k, v in notebook_defaults(name, notebooks_dir).items() if k not in RUNNER_KEYS}
    full = load_params(name, False, params_dir)
    if set(full) != set(defaults):
        raise ParameterError(
            f"{name}: params file keys {sorted(full)} differ from the parameters cell's {sorted(defaults)}"
        )
    differ = [f"{k}: yaml {full[k]!r} vs notebook {defaults[k]!r}" for k in defaults if full[k] != defaults[k]]
    if differ:
        raise ParameterError(
            f"{name}: its params file and parameters cell disagree ({'; '.join(differ)}); keep them equal"
        )


# ------------------------------------------------------------------------------------------------ runs


def _source_cell_index(executed: Path, index: int | None) -> int | None:
    """Map a cell index of the executed copy (which has papermill's injected cell) to the source notebook's."""
    if index is None:
        return None
    try:
        import nbformat

        nb = nbformat.read(str(executed), as_version=4)
        injected = [i for i, c in enumerate(nb.cells) if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
        return index - sum(1 for i in injected if i < index)
    except Exception:  # the copy is unreadable: report papermill's index
        return index


def _kernel_manager_class():
    """A kernel manager that talks to the kernel over IPC sockets in the temporary folder (local only, and no
    "running over TCP without encryption" warning from ipykernel on every run)."""
    from uuid import uuid4

    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class IPCKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self):
            return "ipc"

        @default("ip")
        def _ip_default(self):
            return str(Path(tempfile.gettempdir()) / f"scp-kernel-{uuid4().hex[:12]}")

    return IPCKernelManager


def run_notebook(
    name: str,
    smoke: bool = False,
    out_dir: str | Path | None = None,
    params: Mapping[str, Any] | None = None,
    executed: str | Path | None = None,
    log_output: bool = False,
    **overrides,
) -> Path:
    """Execute ``notebooks/NAME.ipynb`` with papermill and return the executed copy's path.

    Args:
        name: the notebook's file stem.
        smoke: use the ``smoke:`` section of ``params/NAME.yaml``.
        out_dir: where the notebook writes ``figures/`` and ``results/``; ``None``: the repository root for a
            full run; a smoke run requires a folder (use :func:`run`, which makes a temporary one).
        params: overrides on top of the parameter file (also accepted as keyword arguments).
        executed: path of the executed copy; default ``runs/[smoke/]NAME.ipynb``, or ``<out_dir>/runs/NAME.ipynb``
            when ``out_dir`` is given and is not the repository root.
        log_output: stream the notebook's output to the terminal.

    Raises:
        ParameterError: unknown parameter names.
        NotebookFailed: a cell raised.
    """
    import papermill
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    source = _notebook_path(name)
    values = resolve_params(name, smoke, {**(params or {}), **overrides})
    if out_dir is None and smoke:
        raise RunnerError("a smoke run needs an out_dir (a temporary folder), never the repository's figures/")
    out = ROOT if out_dir is None else Path(out_dir).expanduser().resolve()
    if smoke and out == ROOT:
        raise RunnerError(
            "a smoke run may not write into the repository's figures/ and results/; give it another folder"
        )
    if executed is None:
        executed = (RUNS / "smoke" if smoke else RUNS) if out == ROOT else out / "runs"
        executed = Path(executed) / f"{name}.ipynb"
    executed = Path(executed)
    executed.parent.mkdir(parents=True, exist_ok=True)
    try:
        papermill.execute_notebook(
            str(source),
            str(executed),
            parameters={**values, "out_dir": str(out)},
            cwd=str(source.parent),
            kernel_name="python3",
            progress_bar=False,
            log_output=log_output,
            kernel_manager_class=_kernel_manager_class(),
        )
    except PapermillExecutionError as exc:
        raise NotebookFailed(
            name, _source_cell_index(executed, exc.cell_index), exc.source or "", exc.ename, str(exc.evalue), executed
        ) from None
    except (DeadKernelError, CellTimeoutError) as exc:
        raise NotebookFailed(
            name, None, "", type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc) else "", executed
        ) from None
    return executed


def run(
    names: str | Sequence[str] = "all",
    smoke: bool = False,
    params: Mapping[str, Any] | None = None,
    out_dir: str | Path | None = None,
    echo=print,
) -> dict[str, Path]:
    """Run notebooks in dependency order, printing each one's name and time; stop at the first failure.

    Args:
        names: ``"all"``, one name, or a list of names (``"all"`` inside the list also means every notebook).
        smoke: use each notebook's ``smoke:`` parameters.
        params: ``-p`` overrides; each key must be declared by at least one of the notebooks run and is given
            to those that declare it.
        out_dir: where figures and results go; default the repository root, or for ``smoke`` a temporary
            folder that is deleted afterwards (pass one to keep the smoke outputs).
        echo: where progress lines go (``print``; ``None`` for silence).

    Returns:
        ``{name: executed copy}`` in the order the notebooks ran.
    """
    echo = echo or (lambda *a, **k: None)
    wanted = [names] if isinstance(names, str) else list(names)
    if "all" in wanted:
        wanted = notebook_names()
    for n in wanted:
        _notebook_path(n)
    todo = order(wanted)
    params = dict(params or {})
    declared = {n: notebook_parameters(n) for n in todo}
    for key in params:
        if not any(key in d for d in declared.values()):
            if len(todo) == 1:
                resolve_params(todo[0], smoke, {key: params[key]})  # raises, naming the declared parameters
            raise ParameterError(f"-p {key}: no notebook among {', '.join(todo)} declares a parameter {key!r}")
    mine_of = {n: {k: v for k, v in params.items() if k in declared[n]} for n in todo}
    for name in todo:  # every notebook's parameters (files and -p) are checked before any kernel starts
        resolve_params(name, smoke, mine_of[name])
    tmp = tempfile.TemporaryDirectory(prefix="scp-smoke-") if smoke and out_dir is None else nullcontext(out_dir)
    executed: dict[str, Path] = {}
    with tmp as target:
        for i, name in enumerate(todo, 1):
            mine = mine_of[name]
            extra = "".join(f" {k}={v!r}" for k, v in mine.items())
            echo(f"[{i}/{len(todo)}] running {name} ({'smoke' if smoke else 'full'} parameters{extra}) ...", flush=True)
            t0 = time.perf_counter()
            try:
                copy = RUNS / "smoke" / f"{name}.ipynb" if smoke and out_dir is None else None
                executed[name] = run_notebook(name, smoke=smoke, out_dir=target, params=mine, executed=copy)
            except RunnerError:
                echo(f"[{i}/{len(todo)}] {name} failed after {time.perf_counter() - t0:.1f} s", flush=True)
                raise
            echo(
                f"[{i}/{len(todo)}] {name} done in {time.perf_counter() - t0:.1f} s -> {_show(executed[name])}",
                flush=True,
            )
    return executed


# --------------------------------------------------------------------------------------------------- CLI


def _configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
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
    parser.set_defaults(func=_cli, runner_prog=parser.prog)
    return parser


def add_subparser(subparsers) -> argparse.ArgumentParser:
    """Add ``run`` (this runner) to an ``argparse`` sub-command set: ``scp run NAME… | all [--smoke] [-p k=v]``.

    Its handler is stored as ``func`` and returns the exit status: ``args.func(args)``.
    """
    return _configure(
        subparsers.add_parser(
            "run", help="execute notebooks with their parameter files (papermill)", description=__doc__.splitlines()[0]
        )
    )


def _cli(args: argparse.Namespace) -> int:
    """Run the named notebooks: 0 when all ran, 1 when one failed (its message on stderr).  Bad input raises an
    :class:`~scp.errors.SCPError` (the caller prints one line and exits with status 2) before any kernel starts."""
    names = ["all"] if args.all else args.names
    if not names:
        raise InputError("name the notebooks to run, or all")
    if names == ["all"] and not notebook_names():
        print("No notebooks under notebooks/ yet: nothing to run.")
        return 0
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise InputError(f"--out {args.out} is a file; give a folder for figures/, results/ and runs/")
    if args.out is not None and file_above(args.out) is not None:
        raise InputError(
            f"--out {args.out}: its folder {file_above(args.out)} is a file, so nothing can be written under it"
        )
    try:
        run(names, smoke=args.smoke, params=parse_overrides(args.param), out_dir=args.out)
    except SCPError:
        raise
    except RunnerError as exc:  # a notebook failed: where, and where its executed copy is
        print(f"{getattr(args, 'runner_prog', 'scp run')}: error: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m scp.suite.runner NAME… | all [--smoke] [-p key=value …] [--out DIR]``; returns the exit status
    (2 and one line for bad input, as ``scp run``)."""
    parser = _configure(argparse.ArgumentParser(prog="python -m scp.suite.runner", description=__doc__.splitlines()[0]))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (SCPError, OSError) as exc:
        print(f"{parser.prog}: error: {' '.join(str(exc).split()) or type(exc).__name__}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
