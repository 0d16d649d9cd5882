"""The suite's dependency graph: what each notebook reads, in which order notebooks run, and which are stale.

Each ``params/NAME.yaml`` declares its notebook's inputs in a ``suite:`` section (beside ``smoke:``)::

    suite:
      data: [hotpotqa, cases/table19_dose_protocol.json]  # under $SCP_DATA_DIR: dataset folders or files
      models: [models/scp-hotpotqa-best.safetensors]      # committed checkpoints it reads
      after: [02_reranking_auc]   # notebooks whose trained runs (runs/models, keyed by config) it reuses
      tolerance: {atol: 1.0e-6, rtol: 0.0, ignore: [n_evaluations]}   # what --check lets a rerun move

- :func:`declarations` reads them and :func:`check_graph` checks them against the checkout: every ``after``
  names a notebook, the graph has no cycle, every model is a file git tracks (a committed input: a notebook never
  writes ``models/``; ``scp ship`` does, see :mod:`scp.training.ship`), every data entry exists.
- :func:`uncovered_reads` checks a run's provenance against the declaration: every data file lies under a declared
  entry, every committed model is declared, and every trained run read from ``runs/models`` was written by the
  notebook itself or by another notebook's run (in the provenance of that run).
- :func:`status` says which notebooks are stale against the provenance their results folder holds: the notebook's
  code cells, its full-run parameters, the ``scp`` modules it imports (:func:`code_digests`, read from the source, so
  a change to one module marks only the notebooks that import it; the runner's own modules, :data:`ORCHESTRATION`,
  do not count), the data and committed models it read, the outputs it wrote (each file under ``figures/NAME``
  and ``results/NAME`` against the sha256 its provenance records, or, for a provenance written before those were
  recorded, the files git tracks there must exist), and the trained models it read against the sha256 their
  producer's run recorded (:func:`model_mismatches`).  An unreadable provenance, or a replacement of its folders
  that a killed run left unfinished, is one reason too.  Validity is by content: whatever commit made a run, it is
  up to date when these equal today's, so notebooks regenerated at different commits stand side by side.
- :func:`landing_problems` is the rule the committed results obey (``tests/test_committed_results.py``): clean
  runs at commits in HEAD's history, tables naming their run, and no model mismatch behind an up-to-date notebook.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from scp.errors import DataFormatError, InputError
from scp.io import jsonable
from scp.suite import sources
from scp.suite.sources import RunnerError, notebook_names, order, read_sections, resolve_params, swap_outlook

SCP_SOURCE = Path(__file__).resolve().parents[1]
"""The ``scp`` package folder whose modules :func:`code_digests` hashes."""

TIMING_COLUMNS = ("*seconds*", "*_s", "*_s_*", "*time*", "*per_second*", "*speed*up*", "*_ms", "ms_*")
"""Columns and record names :func:`scp.suite.check.compare` never compares: measured times move every run."""


def _dirs():
    """The notebooks/, params/ and checkout folders of :mod:`scp.suite.sources` (read at call time, so a test may
    point them elsewhere)."""
    return sources.NOTEBOOKS, sources.PARAMS, sources.ROOT


__all__ = [
    "Declared",
    "ORCHESTRATION",
    "TIMING_COLUMNS",
    "Tolerance",
    "check_graph",
    "code_digests",
    "declarations",
    "declared",
    "depends",
    "landing_problems",
    "made_clean",
    "model_mismatches",
    "module_imports",
    "notebook_digest",
    "read_provenance",
    "status",
    "uncovered_reads",
]


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """How far a rerun's number may lie from the committed one: ``|new − old| ≤ atol + rtol·|old|``; columns and
    record names matching an ``ignore`` pattern (and :data:`TIMING_COLUMNS`) are not compared."""

    atol: float = 0.0
    rtol: float = 0.0
    ignore: tuple[str, ...] = ()

    def ignores(self, column: str) -> bool:
        return any(fnmatch.fnmatchcase(column.lower(), p) for p in (*TIMING_COLUMNS, *self.ignore))

    def __str__(self) -> str:
        extra = f"; also ignored: {', '.join(self.ignore)}" if self.ignore else ""
        return f"|new − committed| ≤ {self.atol:g} + {self.rtol:g}·|committed| (timing columns ignored{extra})"


@dataclasses.dataclass(frozen=True)
class Declared:
    """The inputs one notebook declares (see the module docstring)."""

    name: str
    data: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    tolerance: Tolerance = Tolerance()


_KEYS = ("data", "models", "after", "tolerance")


def _strings(where: str, key: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise DataFormatError(f"{where}: suite.{key} must be a list of names, not {value!r}")
    return tuple(value)


def declared(name: str, params_dir: Path | None = None) -> Declared:
    """The ``suite:`` section of ``params/NAME.yaml`` as a :class:`Declared` (bad entries raise, naming them)."""
    _, params, root = _dirs()
    path = Path(params_dir or params) / f"{name}.yaml"
    section = read_sections(path, name)["suite"]
    where = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    unknown = sorted(set(section) - set(_KEYS))
    if unknown:
        raise DataFormatError(f"{where}: unknown suite key {', '.join(unknown)} (known: {', '.join(_KEYS)})")
    tol = section.get("tolerance") or {}
    if not isinstance(tol, dict) or set(tol) - {"atol", "rtol", "ignore"}:
        raise DataFormatError(f"{where}: suite.tolerance must be a mapping of atol, rtol and ignore, not {tol!r}")
    try:
        atol, rtol = float(tol.get("atol", 0.0)), float(tol.get("rtol", 0.0))
    except (TypeError, ValueError):
        raise DataFormatError(f"{where}: suite.tolerance atol and rtol must be numbers, not {tol!r}") from None
    if not (atol >= 0 and rtol >= 0):
        raise DataFormatError(f"{where}: suite.tolerance atol and rtol must be ≥ 0, not {tol!r}")
    return Declared(
        name=name,
        data=_strings(where, "data", section.get("data")),
        models=_strings(where, "models", section.get("models")),
        after=_strings(where, "after", section.get("after")),
        tolerance=Tolerance(atol, rtol, _strings(where, "tolerance.ignore", tol.get("ignore"))),
    )


def declarations(
    names: Iterable[str] | None = None, params_dir: Path | None = None, notebooks_dir: Path | None = None
) -> dict[str, Declared]:
    """``{name: Declared}`` for ``names`` (default: every notebook)."""
    return {n: declared(n, params_dir) for n in (notebook_names(notebooks_dir) if names is None else names)}


def depends(decls: Mapping[str, Declared]) -> dict[str, tuple[str, ...]]:
    """``{name: the notebooks it comes after}``: the edges :func:`scp.suite.runner.order` sorts by."""
    return {n: d.after for n, d in decls.items()}


def _tracked(root: Path) -> set[str] | None:
    import subprocess

    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return set(out.stdout.decode().split("\0")) if out.returncode == 0 else None


def check_graph(decls: Mapping[str, Declared], root: Path | None = None, data_dir: Path | None = None) -> list[str]:
    """Problems of the declared graph (empty when there are none): an ``after`` that names no notebook, a cycle,
    a model that is not a file git tracks under ``models/``, a data entry missing under ``data_dir``
    (default ``$SCP_DATA_DIR``; not checked when neither is set)."""
    from scp.data.datasets import DATA_DIR_ENV

    root = Path(root or _dirs()[2])
    problems = []
    for n, d in decls.items():
        problems += [f"{n}: after {a!r}, which is no notebook" for a in d.after if a not in decls]
    try:
        order(decls, depends(decls))
    except RunnerError as exc:
        problems.append(str(exc))
    tracked = _tracked(root)
    for n, d in decls.items():
        for m in d.models:
            if not m.startswith("models/"):
                problems.append(f"{n}: model {m!r} is not under models/ (trained runs are declared by after)")
            elif not (root / m).is_file():
                problems.append(f"{n}: model {m} does not exist")
            elif tracked is not None and m not in tracked:
                problems.append(f"{n}: model {m} is not committed (git does not track it)")
    data_dir = data_dir or (Path(os.environ[DATA_DIR_ENV]) if os.environ.get(DATA_DIR_ENV) else None)
    if data_dir is not None:
        for n, d in decls.items():
            problems += [f"{n}: data {e!r} is not under {data_dir}" for e in d.data if not (data_dir / e).exists()]
    return problems


TRAINED_PREFIXES = ("runs/", "store/")
"""How provenance names a trained model: a run folder under ``runs/models`` or an entry of the model store
(:mod:`scp.training.store`), as opposed to a committed checkpoint under ``models/``."""

SITE_PACKAGES = "site-packages"
"""How provenance names the folder of installed packages (the reader's GGUF file is one of theirs)."""


def site_packages() -> list[str]:
    """The folders installed packages live in (``purelib`` and ``platlib`` of this interpreter)."""
    import sysconfig

    return sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})


# ------------------------------------------------------------------------------------------------ digests


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _cells(path: Path) -> list[dict]:
    """The cells of the notebook at ``path`` (its JSON read by :func:`scp.io.read_json`), each with a
    ``cell_type`` and a ``source``; an unreadable notebook is a :class:`~scp.errors.DataFormatError`."""
    from scp.io import read_json

    cells = read_json(path, f"notebook {path.name}").get("cells")
    fine = isinstance(cells, list) and all(
        isinstance(c, dict) and isinstance(c.get("cell_type"), str) and isinstance(c.get("source"), (str, list))
        for c in cells
    )
    if not fine:
        raise DataFormatError(f"notebook {path.name} has no list of cells, each with a cell_type and a source")
    return cells


def notebook_digest(name: str, notebooks_dir: Path | None = None) -> str:
    """sha256 of a notebook's code cells (their sources, in order): what its figures and tables are computed
    by.  Markdown, saved outputs, execution counts and metadata do not count, so fixing the text never reruns
    a notebook (the markdown-number test checks the text against the committed records instead)."""
    cells = _cells(Path(notebooks_dir or _dirs()[0]) / f"{name}.ipynb")
    code = [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in cells
        if c["cell_type"] == "code"
    ]
    return _sha(json.dumps(code, ensure_ascii=False).encode())


def _module_file(module: str, source: Path) -> Path | None:
    parts = module.split(".")
    if parts[0] != "scp" or not all(part.isidentifier() for part in parts):
        return None
    base = source.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _lazy_table(package: str, source: Path) -> dict[str, str]:
    """``{name: module}`` of a package whose ``__init__`` binds ``lazy_exports(__name__, {module: names})``."""
    path = _module_file(package, source)
    if path is None or path.name != "__init__.py":
        return {}
    table: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_exports" and len(node.args) == 2:
            try:
                api = ast.literal_eval(node.args[1])
            except ValueError:
                continue
            table.update({name: module for module, names in api.items() for name in names})
    return table


def _imports_in(tree: ast.AST, package: str | None, source: Path) -> set[str]:
    """The ``scp`` modules an AST imports anywhere (also inside functions): ``import a.b``, ``from a import b``
    (``b`` a module, or a name a lazily exporting package maps to its module), ``import_module("scp.…")``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level and package:
                head = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*head, base] if base else head)
            found.add(base)
            lazy = _lazy_table(base, source)
            for a in node.names:
                found.add(lazy.get(a.name, f"{base}.{a.name}"))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return {m for m in found if _module_file(m, source) is not None}


@cache
def _module_imports(module: str, source: Path) -> frozenset[str]:
    path = _module_file(module, source)
    if path is None:
        return frozenset()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return frozenset(_imports_in(ast.parse(path.read_bytes()), package, source))


def module_imports(module: str, source: Path | None = None) -> frozenset[str]:
    """The ``scp`` modules ``module`` imports directly (including its parent packages' ``__init__``)."""
    return _module_imports(module, Path(source or SCP_SOURCE).resolve())


ORCHESTRATION = frozenset(
    {
        "scp.suite.runner",
        "scp.suite.sources",
        "scp.suite.graph",
        "scp.suite.check",
        "scp.suite.quoted",
        "scp.suite.gallery",
        "scp.suite.model_store",
        "scp.suite.phases",
    }
)
"""Modules that run, order, check and describe notebooks but compute nothing a notebook's tables or figures hold:
:func:`code_digests` leaves them out (and does not follow their imports), so fixing the runner reruns nothing."""


def _closure(roots: Iterable[str], source: Path) -> set[str]:
    seen: set[str] = set()
    todo = [r for r in roots if _module_file(r, source) is not None]
    while todo:
        m = todo.pop()
        if m in seen or m in ORCHESTRATION:
            continue
        seen.add(m)
        parents = [".".join(m.split(".")[:k]) for k in range(1, len(m.split(".")))]
        todo += [n for n in (*module_imports(m, source), *parents) if n not in seen]
    return seen


def code_digests(name: str, notebooks_dir: Path | None = None, source: Path | None = None) -> dict[str, str]:
    """``{module: sha256 of its source}`` for every ``scp`` module the notebook's code cells import, directly or
    through other modules (read from the source, not from a run)."""
    source = Path(source or SCP_SOURCE).resolve()
    path = Path(notebooks_dir or _dirs()[0]) / f"{name}.ipynb"
    roots: set[str] = set()
    for cell in _cells(path):
        if cell["cell_type"] != "code":
            continue
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        lines = [line for line in text.splitlines() if not line.lstrip().startswith(("%", "!"))]
        try:
            roots |= _imports_in(ast.parse("\n".join(lines)), None, source)
        except SyntaxError:
            continue
    return {m: _sha(_module_file(m, source).read_bytes()) for m in sorted(_closure(roots, source))}


# ----------------------------------------------------------------------------------------------- staleness


def _provenance_problem(prov: dict[str, Any]) -> str | None:
    """What in a provenance record is not of the type the runner reads (None when all is)."""

    def files(key: str) -> bool:
        entries = prov.get(key, [])
        return isinstance(entries, list) and all(
            isinstance(e, dict) and isinstance(e.get("path"), str) and isinstance(e.get("sha256"), str) for e in entries
        )

    inputs = prov.get("inputs") or {}
    checks = {
        "git": isinstance(prov.get("git"), (dict, type(None))),
        "parameters": isinstance(prov.get("parameters", {}), dict),
        "inputs": isinstance(prov.get("inputs"), (dict, type(None)))
        and isinstance(inputs.get("notebook", ""), (str, type(None)))
        and isinstance(inputs.get("code") or {}, dict)
        and all(isinstance(v, str) for v in (inputs.get("code") or {}).values()),
        "data_files": files("data_files"),
        "models": files("models"),
        "models_written": files("models_written"),
        "store": isinstance(prov.get("store", {}), dict)
        and all(
            isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("key"), str)
            for k, v in prov.get("store", {}).items()
        ),
        "outputs": isinstance(prov.get("outputs", {}), dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in prov.get("outputs", {}).items()),
    }
    bad = [key for key, fine in checks.items() if not fine]
    return f"its {', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not of the recorded form" if bad else None


def read_provenance(name: str, results_dir: Path | None = None) -> dict[str, Any] | None:
    """The ``provenance.json`` of a notebook's results folder (:func:`scp.io.read_json`: an object, bounded
    depth, each entry the runner reads of its type), or ``None`` when there is none.

    Raises:
        DataFormatError: it is not valid JSON, too deep, not an object, or an entry has another type.
    """
    from scp.io import read_json

    path = Path(results_dir or _dirs()[2] / "results") / name / "provenance.json"
    if not path.exists():
        return None
    what = f"results/{name}/provenance.json"
    prov = read_json(path, what)
    problem = _provenance_problem(prov)
    if problem:
        raise DataFormatError(f"{what}: {problem}")
    return prov


def _resolve(shown: str, root: Path) -> Path | None:
    """The file a provenance path names now (``$SCP_DATA_DIR/…``, checkout-relative, or absolute)."""
    from scp.data.datasets import DATA_DIR_ENV

    if shown.startswith(f"{SITE_PACKAGES}/"):
        found = [Path(f) / shown[len(SITE_PACKAGES) + 1 :] for f in site_packages()]
        return next((f for f in found if f.is_file()), found[0])
    prefix = f"${DATA_DIR_ENV}/"
    if shown.startswith(prefix):
        data_dir = os.environ.get(DATA_DIR_ENV)
        return Path(data_dir) / shown[len(prefix) :] if data_dir else None
    p = Path(shown)
    return p if p.is_absolute() else root / p


def _input_changes(prov: Mapping[str, Any], root: Path) -> list[str]:
    from scp.data.datasets import DATA_DIR_ENV
    from scp.lineage import sha256

    reasons = []
    for entry in (*prov.get("data_files", ()), *prov.get("models", ())):
        shown = entry["path"]
        if shown.startswith("runs/"):
            continue  # a trained run: a cache keyed by its config, rebuilt from code and data when absent
        if shown.startswith(f"${DATA_DIR_ENV}/") and not os.environ.get(DATA_DIR_ENV):
            unchecked = f"its data files are not checked ({DATA_DIR_ENV} is not set)"
            reasons += [] if unchecked in reasons else [unchecked]
            continue
        path = _resolve(shown, root)
        if path is None or not path.is_file():
            reasons.append(f"input {shown} is missing")
        elif sha256(path) != entry["sha256"]:
            reasons.append(f"input {shown} changed")
    return reasons


def _listed(what: str, paths: Sequence[str]) -> str:
    more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
    return f"{what} {', '.join(paths[:3])}{more}"


def _output_changes(name: str, prov: Mapping[str, Any], root: Path, tracked: set[str] | None) -> list[str]:
    """Its outputs under ``figures/NAME`` and ``results/NAME`` that are missing or differ from the sha256 the
    provenance records (``outputs``); a provenance written before outputs were recorded: the files git tracks
    there that are missing."""
    from scp.lineage import sha256

    recorded = prov.get("outputs")
    if recorded is None:
        folders = (f"figures/{name}/", f"results/{name}/")
        recorded = {path: None for path in sorted(tracked or ()) if path.startswith(folders)}
    missing = [path for path in recorded if not (root / path).is_file()]
    changed = [
        path for path, digest in recorded.items() if digest and path not in missing and sha256(root / path) != digest
    ]
    return [
        _listed(what, paths) for what, paths in (("outputs missing:", missing), ("outputs changed:", changed)) if paths
    ]


def _own_reasons(
    name: str,
    prov: Mapping[str, Any] | None,
    params_dir: Path | None,
    notebooks_dir: Path | None,
    root: Path,
    tracked: set[str] | None = None,
) -> list[str]:
    if prov is None:
        return ["no provenance.json (never run, or run before provenance was recorded)"]
    reasons = []
    git = prov.get("git") or {}
    if not made_clean(git):
        reasons.append("its results were made from a dirty tree" if git.get("dirty") else "its commit is unknown")
    current = jsonable(resolve_params(name, params_dir=params_dir, notebooks_dir=notebooks_dir))
    recorded = prov.get("parameters", {})
    changed = sorted(k for k in set(current) | set(recorded) if current.get(k) != recorded.get(k))
    if changed:
        reasons.append(f"parameters changed: {', '.join(changed)}")
    inputs = prov.get("inputs") or {}
    if inputs.get("notebook") != notebook_digest(name, notebooks_dir):
        reasons.append("the notebook changed")
    now = code_digests(name, notebooks_dir)
    then = {m: d for m, d in (inputs.get("code") or {}).items() if m not in ORCHESTRATION}
    modules = sorted(m for m in set(now) | set(then) if now.get(m) != then.get(m))
    if modules:
        shown = ", ".join(modules[:4]) + (f" and {len(modules) - 4} more" if len(modules) > 4 else "")
        reasons.append(f"code changed: {shown}")
    return reasons + _input_changes(prov, root) + _output_changes(name, prov, root, tracked)


def status(
    names: Sequence[str] | None = None,
    results_dir: Path | None = None,
    params_dir: Path | None = None,
    notebooks_dir: Path | None = None,
    root: Path | None = None,
) -> dict[str, list[str]]:
    """``{name: reasons it is stale}`` (an empty list: up to date with its committed provenance) for ``names``
    (default every notebook), in dependency order.  Up to date is by content: every input the provenance records
    equals the current one, whatever commit made it.  Besides its inputs, a notebook is stale when an output it
    wrote is missing or changed, when a trained model it read is not the one its producer's run recorded
    (:func:`model_mismatches`), when its provenance is unreadable (one reason, no traceback), and when a run was cut
    while replacing its folders.  A notebook after a stale one is not stale for that alone: what links them is the
    models they share, compared by sha256."""
    decls = declarations(None, params_dir, notebooks_dir)
    names = list(decls) if names is None else list(names)
    unknown = [n for n in names if n not in decls]
    if unknown:
        raise InputError(f"unknown notebook {', '.join(unknown)}")
    root = Path(root or _dirs()[2])
    tracked = _tracked(root)
    out: dict[str, list[str]] = {}
    provs: dict[str, Any] = {}
    for n in order(decls, depends(decls)):
        provs[n] = None
        try:
            provs[n] = read_provenance(n, results_dir)
            reasons = _own_reasons(n, provs[n], params_dir, notebooks_dir, root, tracked)
        except DataFormatError as exc:
            reasons = [f"its provenance.json is unreadable: {exc}"]
        outlook = swap_outlook(n)  # a run cut while replacing its folders: what the next run will do with it
        if outlook is not None:
            reasons.insert(0, outlook)
        out[n] = reasons
    for n, reasons in model_mismatches(provs).items():
        out[n] += reasons
    return {n: out[n] for n in order(names, depends(decls))}


def model_mismatches(provs: Mapping[str, Mapping[str, Any] | None]) -> dict[str, list[str]]:
    """``{name: reasons}`` for every notebook whose run read a trained model (a ``runs/`` or store file) with another
    sha256 than the run that wrote it recorded (``models_written`` of any notebook's run), or than a run that read
    it from the model store (its ``store`` entry: the key is the lineage); with neither, than another reader:
    results that rest on another model than the one their producer's results rest on.  Validity is by content,
    so this, not the commit a run was made at, links notebooks."""
    written: dict[str, tuple[str, str]] = {}
    for n, prov in provs.items():
        for e in (prov or {}).get("models_written", ()):
            written[e["path"]] = (n, e["sha256"])
    read: dict[str, dict[str, str]] = {}
    stored: dict[str, tuple[str, str]] = {}  # path -> (a notebook whose run read it from the model store, sha256)
    for n, prov in provs.items():
        for e in (prov or {}).get("models", ()):
            if e["path"].startswith(TRAINED_PREFIXES):
                read.setdefault(e["path"], {})[n] = e["sha256"]
        for path, entry in ((prov or {}).get("store") or {}).items():
            stored.setdefault(path, (n, entry["sha256"]))
    out: dict[str, list[str]] = {}
    for path, readers in sorted(read.items()):
        for n, digest in readers.items():
            producer = written.get(path) or stored.get(path)
            if producer is not None and producer[0] != n and producer[1] != digest:
                out.setdefault(n, []).append(
                    f"model changed: {path} is not the one {producer[0]}'s run "
                    f"{'wrote' if path in written else 'read from the model store'} "
                    f"(sha256 {digest[:12]} read, {producer[1][:12]} there)"
                )
            elif producer is None:
                others = sorted(m for m, d in readers.items() if m != n and d != digest)
                if others:
                    out.setdefault(n, []).append(
                        f"model changed: {path} is not the one {others[0]}'s run read "
                        f"(sha256 {digest[:12]} against {readers[others[0]][:12]})"
                    )
    return out


# ------------------------------------------------------------------------------------------------ coverage


def _under(shown: str, entries: Iterable[str], prefix: str) -> bool:
    return any(shown == f"{prefix}{e}" or shown.startswith(f"{prefix}{e.rstrip('/')}/") for e in entries)


def uncovered_reads(
    decl: Declared, prov: Mapping[str, Any], others: Mapping[str, Mapping[str, Any] | None] | None = None
) -> list[str]:
    """What a run read that no declaration or earlier run provides (empty when everything is covered): a data
    file outside the declared ``data``, a committed model not in ``models``, a trained run under ``runs/`` that
    neither this run nor another notebook's run wrote (by the provenance of each), or another file of the
    checkout.  Trained runs are a cache keyed by their config, so any notebook may have trained one; ``after``
    orders the runs (and makes a notebook stale with the one it reuses).

    Args:
        decl: the notebook's :class:`Declared`.
        prov: the provenance of its run (``results/NAME/provenance.json``).
        others: ``{name: provenance}`` of the other notebooks' runs (``None`` for one not run).
    """
    from scp.data.datasets import DATA_DIR_ENV

    written = {e["path"] for e in prov.get("models_written", ())} | set(prov.get("store") or {})
    for other in (others or {}).values():
        written |= {e["path"] for e in (other or {}).get("models_written", ())}
    problems = []
    for entry in prov.get("data_files", ()):
        shown = entry["path"]
        if not _under(shown, decl.data, f"${DATA_DIR_ENV}/"):
            problems.append(f"{decl.name} read data {shown}, which its suite.data does not declare")
    for entry in prov.get("models", ()):
        shown = entry["path"]
        if shown.startswith("models/"):
            if shown not in decl.models:
                problems.append(f"{decl.name} read {shown}, which its suite.models does not declare")
        elif shown.startswith("runs/"):
            if shown not in written:
                problems.append(
                    f"{decl.name} read the trained run {shown}, which no notebook's run wrote (by their provenance)"
                )
        elif not Path(shown).is_absolute() and not shown.startswith("site-packages/"):
            problems.append(f"{decl.name} read {shown} from the checkout, which no declaration provides")
    return problems


# ------------------------------------------------------------------------------------------------- landing


def _is_ancestor(root: Path, commit: str) -> bool | None:
    """Whether ``commit`` is an ancestor of HEAD in ``root`` (None when git cannot say: no such object, no git)."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=root, capture_output=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {0: True, 1: False}.get(out.returncode)


RUN_WRITES = ("book/executed/",)
"""Tracked paths a suite run itself writes besides ``figures/`` and ``results/`` (which
:func:`scp.suite.notebook.git_commit` never counts): the executed copies ``python -m scp.suite.book collect`` keeps.
No notebook reads them, so a tree that differs from its commit only there ran the commit's code."""


def made_clean(git: Mapping[str, Any]) -> bool:
    """Whether a run's ``git`` record (:func:`scp.suite.notebook.git_commit`) says it ran the commit's files: not
    dirty, or dirty only in :data:`RUN_WRITES` (every changed path listed: fewer than the ten it keeps)."""
    if git.get("dirty") is False:
        return True
    changed = git.get("changed")
    return (
        git.get("dirty") is True
        and isinstance(changed, list)
        and 0 < len(changed) < 10
        and all(isinstance(p, str) and p.startswith(RUN_WRITES) for p in changed)
    )


def landing_problems(names: Sequence[str] | None = None, root: Path | None = None) -> list[str]:
    """What keeps a checkout's committed results from standing (empty when nothing does).  Results are valid by their
    content, whatever commit made them, so results of different commits stand side by side; what they must be:

    - each notebook has a ``results/NAME/provenance.json``, made from a clean tree (:func:`made_clean`) at a commit
      that is an ancestor of HEAD (so the code that made it is in the history, and :func:`status` compares it with
      today's);
    - every table JSON in ``results/NAME`` names that same run;
    - a notebook up to date by its own inputs read the trained models its producers' runs recorded
      (:func:`model_mismatches`): a mismatch is a failure there, where it would otherwise pass as up to date.

    Staleness by code, parameters or inputs is a status, not a problem: README's suite line names it."""
    from scp.io import read_json

    root = Path(root or _dirs()[2])
    names = list(declarations()) if names is None else list(names)
    problems = []
    provs: dict[str, Any] = {}
    for n in names:
        try:
            provs[n] = read_provenance(n, root / "results")
        except DataFormatError as exc:
            problems.append(f"{n}: {exc}")
            continue
        prov = provs[n]
        if prov is None:
            problems.append(f"{n}: no results/{n}/provenance.json (run it: scp run {n})")
            continue
        git = prov.get("git") or {}
        commit = git.get("commit")
        if not made_clean(git):
            problems.append(
                f"{n}: its results were not made from a clean tree (git.dirty is {git.get('dirty')!r}, changed: "
                f"{', '.join(git.get('changed') or []) or 'not recorded'})"
            )
        if not isinstance(commit, str) or not commit:
            problems.append(f"{n}: its provenance names no commit")
        elif (ancestor := _is_ancestor(root, commit)) is not True:
            where = "not in this clone's history" if ancestor is None else "not an ancestor of HEAD"
            problems.append(f"{n}: its run's commit {commit[:12]} is {where}")
        for path in sorted((root / "results" / n).glob("*.json")):
            if path.name in ("records.json", "provenance.json"):
                continue
            table = (read_json(path, f"results/{n}/{path.name}").get("provenance") or {}).get("git") or {}
            if table.get("commit") != commit or not made_clean(table):
                problems.append(f"{n}: results/{n}/{path.name} names another run ({table.get('commit')!s:.12})")
    current = status(names, root / "results", root=root)
    for n, reasons in model_mismatches(provs).items():
        if n in current and not [r for r in current[n] if r not in reasons]:
            problems += [f"{n}: {r}" for r in reasons]
    return problems
