"""Helpers the notebooks call: record values for the tests, resolve where outputs go, collect provenance.

- :func:`record` shows a value as a JSON output of the executed notebook (MIME type :data:`RECORD_MIME`),
  and :func:`read_records` reads all of them back from an executed ``.ipynb``.  This is the small route that
  microsoft/recommenders took after scrapbook (``store_metadata`` / ``read_notebook``).
- :func:`repo_root` and :func:`resolve_out_dir`: a notebook's ``out_dir = None`` means the root of the checkout it
  runs in, so "Run All" in JupyterLab writes ``figures/NAME/`` and ``results/NAME/`` exactly as ``make figures`` does.
- :func:`start` / :class:`NotebookRun` and :func:`provenance`: the parameters, seeds, package versions, git
  commit, data files (size, sha256) and wall time that :func:`scp.suite.plot.save_table` writes beside a table.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from scp.errors import InputError
from scp.io import jsonable
from scp.paths import ROOT
from scp.suite.graph import SITE_PACKAGES, code_digests, notebook_digest, site_packages

RECORD_MIME = "application/scp+json"
"""MIME type of a recorded value in a notebook's outputs (a JSON object ``{name: value}``)."""

RECORDS: dict[str, Any] = {}
"""Every value recorded in this process, by name (what :func:`record` stores outside IPython too)."""

PACKAGES = (
    "numpy",
    "scipy",
    "torch",
    "pandas",
    "matplotlib",
    "seaborn",
    "shapiq",
    "papermill",
    "sentence-transformers",
    "scp",
)
"""Packages whose versions :func:`provenance` reports (those not installed are reported as null)."""

__all__ = [
    "PACKAGES",
    "RECORDS",
    "RECORD_MIME",
    "NotebookRun",
    "data_file_info",
    "git_commit",
    "package_versions",
    "provenance",
    "read_records",
    "record",
    "checkout_of",
    "imported_versions",
    "machine_facts",
    "repo_root",
    "shown_path",
    "resolve_out_dir",
    "start",
]


# ------------------------------------------------------------------------------------------------- records


def _in_ipython() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None


def record(name: str, value: Any) -> Any:
    """Record ``value`` under ``name``: shown as a JSON output of the running notebook and kept in :data:`RECORDS`.

    Args:
        name: snake_case, with its unit or statistic in it (``auc_mean``, ``seconds_train``).
        value: a scalar or a short list (converted by :func:`scp.io.jsonable`).

    Returns:
        The JSON form of ``value`` (what :func:`read_records` will return for ``name``).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise InputError(f"record names must be identifiers (snake_case); got {name!r}")
    data = jsonable(value)
    RECORDS[name] = data
    if _in_ipython():
        from IPython.display import display

        display({RECORD_MIME: {name: data}, "text/plain": f"{name} = {json.dumps(data)}"}, raw=True)
    return data


def read_records(path: str | Path) -> dict[str, Any]:
    """All values recorded by :func:`record` in an executed notebook, by name (a later record of a name wins).

    Args:
        path: an executed ``.ipynb`` (the runner returns its path).

    Returns:
        ``{name: value}`` in recording order.
    """
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    out: dict[str, Any] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {}) if output.get("output_type") in ("display_data", "execute_result") else {}
            if RECORD_MIME in data:
                payload = data[RECORD_MIME]
                out.update(json.loads(payload) if isinstance(payload, str) else payload)
    return out


# ------------------------------------------------------------------------------------------------- paths


def repo_root() -> Path:
    """The repository this package was imported from (the folder above ``scp/`` holding ``pyproject.toml``).

    Raises:
        RuntimeError: when ``scp`` is installed without its repository (a wheel), so there is no default
            place for figures; pass ``out_dir`` explicitly then.
    """
    root = ROOT
    if not (root / "pyproject.toml").is_file():
        raise RuntimeError(
            f"scp is not imported from its repository ({root} has no pyproject.toml); "
            "pass out_dir to say where figures and results go"
        )
    return root


def checkout_of(path: str | Path) -> Path | None:
    """The checkout of this project at or above ``path``: the nearest folder holding ``notebooks/`` and a
    ``pyproject.toml`` of the project ``scp``; ``None`` when there is none."""
    for folder in (Path(path).resolve(), *Path(path).resolve().parents):
        project = folder / "pyproject.toml"
        if (folder / "notebooks").is_dir() and project.is_file():
            try:
                name = tomllib.loads(project.read_text()).get("project", {}).get("name")
            except (OSError, tomllib.TOMLDecodeError):
                continue
            if name == "scp":
                return folder
    return None


def resolve_out_dir(out_dir: str | Path | None = None) -> Path:
    """``out_dir`` as an absolute path.  ``None`` (a notebook's default) means the checkout the notebook runs in
    (JupyterLab starts a kernel in the notebook's folder), else :func:`repo_root`: a kernel started in a second
    clone writes that clone's figures, whichever clone ``scp`` was imported from."""
    if out_dir is None:
        return checkout_of(Path.cwd()) or repo_root()
    return Path(out_dir).expanduser().resolve()


# ---------------------------------------------------------------------------------------------- provenance

OUTPUTS = ("figures", "results")
"""Folders of a checkout that runs write; changes there (and to ``*.md`` text) do not make the tree dirty."""


def package_versions(packages: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    """``{"python": …, package: version or None}`` for the named distributions."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


_ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")


def machine_facts() -> dict[str, Any]:
    """What a run's floating-point results depend on beyond code, inputs and package versions: the CPU (vendor,
    model name, family/model/stepping, its vector-instruction flags), the logical cores, torch's CPU kernel set and
    the BLAS libraries loaded.  A training notebook's numbers reproduce bit for bit where these match; elsewhere its
    models retrain through other kernels and move (README, "Reproducibility")."""
    info: dict[str, str] = {}
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if not key:
                    break  # the first processor's block is enough
                if key == "flags":
                    flags = set(value.split())
                elif key in ("vendor_id", "model name", "cpu family", "model", "stepping"):
                    info[key] = value.strip()
    except OSError:
        pass
    torch = sys.modules.get("torch")
    capability = torch.backends.cpu.get_cpu_capability() if torch is not None else None
    try:
        from threadpoolctl import threadpool_info

        blas = sorted(
            {
                f"{p['internal_api']} {p['version']} {p.get('architecture') or ''}".strip()
                for p in threadpool_info()
                if p.get("user_api") == "blas"
            }
        )
    except ImportError:
        blas = []
    return {
        "platform": platform.machine(),
        "cpu": info.get("model name") or platform.processor() or None,
        "vendor": info.get("vendor_id"),
        "family_model_stepping": "/".join(info.get(k, "?") for k in ("cpu family", "model", "stepping")),
        "isa": [f for f in _ISA_FLAGS if f in flags],
        "logical_cores": os.cpu_count(),
        "torch_cpu_capability": capability,
        "blas": blas,
    }


def imported_versions() -> dict[str, str | None]:
    """``{"python": …, distribution: version}`` of every installed distribution this process imported a module of
    (read from ``sys.modules``; the standard library has no distribution and is not listed), sorted by name."""
    import sys

    owners = metadata.packages_distributions()
    names = {dist for top in {m.partition(".")[0] for m in list(sys.modules)} for dist in owners.get(top, ())}
    names.add("scp")
    versions = package_versions(sorted(names, key=str.lower))
    return {k: v for k, v in versions.items() if v is not None or k == "scp"}


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)


def git_commit(root: str | Path | None = None) -> dict[str, Any]:
    """``{"commit", "dirty", "changed"}`` of the checkout at ``root`` (default :func:`repo_root`).

    ``dirty`` is true when a tracked file differs from the commit or an untracked file is not ignored, outside the
    folders runs write (:data:`OUTPUTS`) and ``*.md`` text; ``changed`` names the first ten such paths.  Every
    entry is ``None`` when git or the repository is not available (e.g. an exported source tree).
    """
    try:
        cwd = Path(root) if root is not None else repo_root()
        sha = _git(cwd, "rev-parse", "HEAD")
        if sha.returncode != 0:
            return {"commit": None, "dirty": None, "changed": None}
        excludes = [f":(exclude){folder}" for folder in OUTPUTS] + [":(exclude,glob)**/*.md"]
        status = _git(cwd, "status", "--porcelain", "--", ".", *excludes)
        if status.returncode != 0:
            return {"commit": sha.stdout.strip(), "dirty": None, "changed": None}
        changed = [line[3:] for line in status.stdout.splitlines() if line.strip()]
        return {"commit": sha.stdout.strip(), "dirty": bool(changed), "changed": changed[:10]}
    except (OSError, RuntimeError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None, "changed": None}


def shown_path(path: str | Path, root: Path | None = None) -> str:
    """How a file is named in provenance: ``$SCP_DATA_DIR/…`` under the data folder, ``site-packages/…`` in an
    installed package, relative to the checkout (``models/…``, ``runs/models/…``) under it, else absolute; so
    records do not depend on where things are."""
    import os

    from scp.data.datasets import DATA_DIR_ENV

    p = Path(path).expanduser().resolve()
    data_dir = os.environ.get(DATA_DIR_ENV)
    bases = [(f"${DATA_DIR_ENV}", Path(data_dir))] if data_dir else []
    bases += [(SITE_PACKAGES, Path(folder)) for folder in site_packages()]
    if os.environ.get(RUNS_DIR_ENV):
        bases.append(("runs", Path(os.environ[RUNS_DIR_ENV])))
    bases.append(("", root or ROOT))
    for prefix, base in bases:
        try:
            rel = p.relative_to(base.expanduser().resolve())
        except ValueError:
            continue
        return str(Path(prefix) / rel) if prefix else str(rel)
    return str(p)


def data_file_info(path: str | Path, root: Path | None = None) -> dict[str, Any]:
    """``{"path", "bytes", "sha256"}`` of a file a result was computed from (``path`` as :func:`shown_path`)."""
    from scp.lineage import describe

    return {**describe(path), "path": shown_path(path, root)}


def provenance(
    parameters: Mapping[str, Any] | None = None,
    seeds: Any = None,
    data_files: Iterable = (),
    started: float | None = None,
    git: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """What a result was computed from, for the JSON beside a table (see :func:`scp.suite.plot.save_table`).

    Args:
        parameters: the notebook's parameter values (``out_dir`` is left out: it says where, not what).
        seeds: the seeds used; by default the ``seed``/``seeds`` entries of ``parameters``.
        data_files: paths of data files read besides those the loaders noted (:mod:`scp.lineage`); every data
            file is listed with its size and sha256.
        started: a :func:`time.perf_counter` value taken at the start; gives ``wall_time_s``.
        git: the checkout's state (:func:`git_commit`) when the run started; default: now.
        **extra: further JSON-able entries (e.g. ``notebook="00_…"``).

    Returns:
        ``{"parameters", "seeds", "versions", "git", "data_files", "models", "models_written", "wall_time_s",
        …extra}``: ``models`` are the checkpoints and LM files read, ``models_written`` those written (trained).
    """
    from scp import lineage

    params = {k: v for k, v in (parameters or {}).items() if k != "out_dir"}
    if seeds is None:
        seeds = {k: params[k] for k in ("seed", "seeds") if k in params} or None
    data = list(dict.fromkeys([*(Path(p).resolve() for p in data_files), *lineage.reads("data")]))
    models = [p for p in lineage.reads("model") if p.suffix != ".safetensors" or p.name != "last.safetensors"]
    return jsonable(
        {
            **extra,
            "parameters": params,
            "seeds": seeds,
            "versions": imported_versions(),
            "machine": machine_facts(),
            "git": dict(git) if git is not None else git_commit(),
            "data_files": [data_file_info(p) for p in data if p.is_file() and p.suffix != ".safetensors"],
            "models": [data_file_info(p) for p in models if p.is_file()],
            "models_written": [data_file_info(p) for p in lineage.writes("model") if p.is_file()],
            "wall_time_s": None if started is None else round(time.perf_counter() - started, 3),
        }
    )


class Saved(list):
    """The paths :func:`scp.suite.plot.save`, :func:`~scp.suite.plot.save_table` and :meth:`NotebookRun.finish`
    wrote (a list), shown in a notebook as one short line rather than a list of ``PosixPath`` objects, and with no
    machine path: the folder from its last ``figures/`` or ``results/`` part on (where the repository keeps it)."""

    def __repr__(self) -> str:
        if not self:
            return "saved nothing"
        stems = sorted({p.with_suffix("").name for p in self})
        kinds = ", ".join(p.suffix.lstrip(".") for p in self)
        parts = self[0].parent.parts
        tops = [i for i, part in enumerate(parts) if part in ("figures", "results")]
        folder = "/".join(parts[tops[-1] :]) if tops else self[0].parent.name
        return f"saved {', '.join(stems)} ({kinds}) in {folder}"

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # IPython's display of a cell's last value
        printer.text(repr(self))


RUNS_DIR_ENV = "SCP_RUNS_DIR"
"""Environment variable naming the folder of trained runs (``<it>/models``): the runner sets it, so a notebook
run into a scratch folder still shares the checkout's ``runs/models``."""


@dataclasses.dataclass
class NotebookRun:
    """One run of a notebook (see :func:`start`): its name, parameter values, output folder, start time, the
    checkout's git state at the start, and the folder of trained runs it shares with other notebooks."""

    name: str
    parameters: dict[str, Any]
    out_dir: Path
    started: float
    git: dict[str, Any] = dataclasses.field(default_factory=dict)
    started_at: str = ""
    models_dir: Path = Path("runs/models")
    notebooks_dir: Path | None = None

    def provenance(self, data_files: Iterable = (), **extra: Any) -> dict[str, Any]:
        """:func:`provenance` of this run (parameters, seeds, versions, git at the start, data files and models
        read so far, wall time so far)."""
        return provenance(
            self.parameters, data_files=data_files, started=self.started, git=self.git, notebook=self.name, **extra
        )

    def finish(self) -> Saved:
        """Write ``results/NAME/records.json`` (every value :func:`record` kept in this run) and
        ``results/NAME/provenance.json`` (:meth:`provenance` plus the inputs :mod:`scp.suite.graph` compares for
        staleness: the notebook's digest and the digests of the ``scp`` modules it imports); the notebook's last
        code cell calls it."""
        from scp.io import write_json

        folder = self.out_dir / "results" / self.name
        folder.mkdir(parents=True, exist_ok=True)
        doc = self.provenance(
            started_at=self.started_at,
            inputs={
                "notebook": notebook_digest(self.name, self.notebooks_dir),
                "code": code_digests(self.name, self.notebooks_dir),
            },
        )
        paths = [folder / "records.json", folder / "provenance.json"]
        write_json(dict(RECORDS), paths[0])
        write_json(doc, paths[1])
        if doc["git"].get("dirty"):
            print(
                f"note: the checkout was dirty when this run started ({', '.join(doc['git']['changed'])}); "
                "its provenance says dirty: true"
            )
        return Saved(paths)


def _models_dir(out_dir: Path) -> Path:
    import os

    if os.environ.get(RUNS_DIR_ENV):
        return Path(os.environ[RUNS_DIR_ENV]).expanduser().resolve() / "models"
    return out_dir / "runs" / "models"


def start(name: str, namespace: Mapping[str, Any]) -> NotebookRun:
    """Begin a notebook run: read its parameter values from ``namespace``, resolve its ``out_dir``, take the
    checkout's git state, and forget earlier records and noted files (:mod:`scp.lineage`).

    Call it in the setup cell as ``run = start("00_cooperative_games_tutorial", globals())``.  The parameter
    names are those of the cell tagged ``parameters`` in ``notebooks/<name>.ipynb`` (read with papermill), so
    the values recorded are the ones the run used, whether papermill injected them or not.

    Args:
        name: the notebook's file name without ``.ipynb``.
        namespace: the notebook's ``globals()``.

    Returns:
        A :class:`NotebookRun`; its ``out_dir`` is the checkout the notebook runs in when ``out_dir`` is
        ``None``, and its ``models_dir`` is ``$SCP_RUNS_DIR/models`` (set by the runner), else
        ``<out_dir>/runs/models``.
    """
    from datetime import UTC, datetime

    from scp import lineage
    from scp.suite.sources import notebook_parameters

    here = Path.cwd() if (Path.cwd() / f"{name}.ipynb").is_file() else None  # the kernel runs in its folder
    names = notebook_parameters(name, here)
    missing = [k for k in names if k not in namespace]
    if missing:
        raise RuntimeError(f"run the parameters cell of {name} first: {', '.join(missing)} not defined")
    params = {k: namespace[k] for k in names}
    out_dir = resolve_out_dir(params.get("out_dir"))
    RECORDS.clear()
    lineage.reset()
    return NotebookRun(
        name=name,
        parameters=params,
        out_dir=out_dir,
        started=time.perf_counter(),
        git=git_commit(checkout_of(Path.cwd()) or repo_root()),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        models_dir=_models_dir(out_dir),
        notebooks_dir=here,
    )
