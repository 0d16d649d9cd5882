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
import hashlib
import json
import platform
import subprocess
import time
import tomllib
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from scp.errors import InputError
from scp.io import jsonable
from scp.paths import ROOT

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
    "repo_root",
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


def package_versions(packages: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    """``{"python": …, package: version or None}`` for the installed distributions."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(root: str | Path | None = None) -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None}`` of the repository at ``root`` (default :func:`repo_root`).

    ``None`` when git or the repository is not available (e.g. an exported source tree).
    """
    try:
        cwd = Path(root) if root is not None else repo_root()
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return {"commit": None, "dirty": None}
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
        )
        dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
        return {"commit": sha.stdout.strip(), "dirty": dirty}
    except (OSError, RuntimeError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def data_file_info(path: str | Path) -> dict[str, Any]:
    """``{"path", "bytes", "sha256"}`` of a data file a result was computed from (path relative to the
    repository's parent folder when it lies under it, so records do not depend on where the checkout is)."""
    p = Path(path).expanduser().resolve()
    digest = hashlib.sha256()
    with p.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    try:
        shown = str(p.relative_to(repo_root().parent))
    except (ValueError, RuntimeError):
        shown = str(p)
    return {"path": shown, "bytes": p.stat().st_size, "sha256": digest.hexdigest()}


def provenance(
    parameters: Mapping[str, Any] | None = None,
    seeds: Any = None,
    data_files: Iterable = (),
    started: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """What a result was computed from, for the JSON beside a table (see :func:`scp.suite.plot.save_table`).

    Args:
        parameters: the notebook's parameter values (``out_dir`` is left out: it says where, not what).
        seeds: the seeds used; by default the ``seed``/``seeds`` entries of ``parameters``.
        data_files: paths of the data files read; each is listed with its size and sha256.
        started: a :func:`time.perf_counter` value taken at the start; gives ``wall_time_s``.
        **extra: further JSON-able entries (e.g. ``notebook="00_…"``).

    Returns:
        ``{"parameters", "seeds", "versions", "git", "data_files", "wall_time_s", …extra}``.
    """
    params = {k: v for k, v in (parameters or {}).items() if k != "out_dir"}
    if seeds is None:
        seeds = {k: params[k] for k in ("seed", "seeds") if k in params} or None
    return jsonable(
        {
            **extra,
            "parameters": params,
            "seeds": seeds,
            "versions": package_versions(),
            "git": git_commit(),
            "data_files": [data_file_info(p) for p in data_files],
            "wall_time_s": None if started is None else round(time.perf_counter() - started, 3),
        }
    )


@dataclasses.dataclass
class NotebookRun:
    """One run of a notebook: its name, parameter values, output folder and start time (see :func:`start`)."""

    name: str
    parameters: dict[str, Any]
    out_dir: Path
    started: float

    def provenance(self, data_files: Iterable = (), **extra: Any) -> dict[str, Any]:
        """:func:`provenance` of this run (parameters, seeds, versions, git, data files, wall time so far)."""
        return provenance(self.parameters, data_files=data_files, started=self.started, notebook=self.name, **extra)


def start(name: str, namespace: Mapping[str, Any]) -> NotebookRun:
    """Begin a notebook run: read its parameter values from ``namespace`` and resolve its ``out_dir``.

    Call it in the setup cell as ``run = start("00_cooperative_games_tutorial", globals())``.  The parameter
    names are those of the cell tagged ``parameters`` in ``notebooks/<name>.ipynb`` (read with papermill), so
    the values recorded are the ones the run used, whether papermill injected them or not.

    Args:
        name: the notebook's file name without ``.ipynb``.
        namespace: the notebook's ``globals()``.

    Returns:
        A :class:`NotebookRun`; its ``out_dir`` is the repository root when ``out_dir`` is ``None``.
    """
    from scp.suite.runner import notebook_parameters

    names = notebook_parameters(name)
    missing = [k for k in names if k not in namespace]
    if missing:
        raise RuntimeError(f"run the parameters cell of {name} first: {', '.join(missing)} not defined")
    params = {k: namespace[k] for k in names}
    return NotebookRun(
        name=name, parameters=params, out_dir=resolve_out_dir(params.get("out_dir")), started=time.perf_counter()
    )
