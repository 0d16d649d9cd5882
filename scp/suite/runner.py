"""Papermill runner: execute notebooks with their parameter files, in dependency order, incrementally.

``python -m scp.suite.runner NAME… | all [--smoke] [-p key=value …] [--out DIR] [--force] [--check] [-j N]
[--allow-dirty] [--status]``

- Parameters have one source: ``params/NAME.yaml`` holds the full-run values (equal to the defaults of the
  notebook's ``parameters`` cell, so "Run All" in JupyterLab gives the committed figure; a test keeps them
  equal), a ``smoke:`` section of tiny overrides, and a ``suite:`` section declaring the notebook's inputs and
  its ``--check`` tolerance (:mod:`scp.suite.graph`).  Keys that the notebook's ``parameters`` cell does not
  declare are an error, in the YAML as on the command line; ``-p`` values (and the file's) are plain YAML values
  (``-p seeds=[0,1]``, ``-p delta=0.01``, ``-p train_overrides={epochs: 1}``): no tags, binary, dates, sets or
  aliases (:class:`_ValueLoader`).
- Notebooks run in the order of the declared graph (a notebook after those whose trained runs it reuses); with
  ``-j`` above 1 the ready notebook on the longest chain (:func:`critical_paths`, by the committed runs' wall
  times) starts first.
- A full run into the checkout is incremental and pinned: it holds each of its notebooks' lock
  (``runs/.locks/NAME.lock``; a second run of a notebook is refused, one line), finishes a replacement a killed
  run left (:func:`_finish_swap`), refuses any uncommitted change (``git status``: ``*.md``, ``figures/`` and
  ``results/`` included; ``--allow-dirty`` overrides), skips every notebook whose inputs and outputs equal those
  its ``results/NAME/provenance.json`` records (``--force`` reruns), runs a notebook after one it comes after
  when that one's landing makes it stale (a trained model it read changed), runs each notebook into
  ``runs/scratch/NAME``, checks that it read only what it declares, records the sha256 of every file it wrote in
  its provenance, and then replaces ``figures/NAME`` and ``results/NAME`` whole, both in one journaled step
  (:func:`_swap_in`).  ``--check`` (under the same lock) reruns into ``runs/check/NAME`` and compares every table
  file and record with the committed ones (:mod:`scp.suite.check`).  ``-j 2`` runs independent notebooks side by side;
  a notebook whose parameters set ``torch_threads: 2`` takes both slots (:func:`thread_slots`).  Every kernel and
  stage worker computes with AVX2 kernels (:data:`PINNED_KERNELS`), so a machine with AVX-512 gives the same bits.
- A smoke run (``--smoke``) writes into a temporary folder (removed afterwards unless ``--out`` names one), so it
  never overwrites committed figures.  Executed copies go to ``runs/NAME.ipynb`` and ``runs/smoke/NAME.ipynb``
  (``<out>/runs/NAME.ipynb`` when an output folder is given).  Trained runs are shared through
  ``runs/models`` (``<out>/runs/models`` for a run with ``--out``), passed to the kernel as ``$SCP_RUNS_DIR``.
- Every notebook's parameters are checked before any kernel starts: the keys, and each value's type against the
  literal default in the ``parameters`` cell (an ``int`` default takes integers, a ``float`` one numbers, a
  ``bool`` one true/false, a ``str`` one text, a list or tuple one a list, a mapping one a mapping whose entries
  are checked against the default's; a ``None`` default takes null or the type :data:`NULL_DEFAULT_TYPES`
  declares, and only null without one).  Every value is plain data, and the cell papermill injects is written by
  :func:`python_literal`, so a parameter is a value, never code.  Bad input (an unknown notebook, a missing or
  unreadable parameter file, a bad ``-p``, an undeclared key, a value of the wrong type, a dirty tree, a notebook
  another run holds) is an :class:`~scp.errors.SCPError`: one line, exit status 2.
- A failing cell stops the run with one message: notebook, cell index and first line, the error, and where
  the executed copy is.  ``main`` then exits with status 1.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scp.errors import DataFormatError, InputError, MissingFileError, SCPError
from scp.io import exclusive_lock, file_above
from scp.paths import NOTEBOOKS as NOTEBOOKS  # re-exported, with PARAMS: read here by tests and scripts
from scp.paths import PARAMS as PARAMS
from scp.paths import ROOT, RUNS
from scp.suite import cli_args, sources
from scp.suite.cli_args import DESCRIPTION, configure
from scp.suite.phases import PHASES_ENV
from scp.suite.sources import NULL_DEFAULT_TYPES as NULL_DEFAULT_TYPES  # re-exported: documented here
from scp.suite.sources import RUNNER_KEYS as RUNNER_KEYS
from scp.suite.sources import (
    ParameterError,
    RunnerError,
    _journal,
    _notebook_path,
    _short,
    _show,
    check_params_in_sync,
    load_params,
    notebook_defaults,
    notebook_names,
    notebook_parameters,
    parse_overrides,
    python_literal,
    read_sections,
    resolve_params,
)
from scp.suite.sources import _literal_defaults as _literal_defaults
from scp.suite.sources import pending_swap as pending_swap

__all__ = [
    "PINNED_KERNELS",
    "NotebookFailed",
    "ParameterError",
    "RunnerError",
    "add_subparser",
    "check_params_in_sync",
    "critical_paths",
    "load_params",
    "main",
    "notebook_defaults",
    "notebook_names",
    "notebook_parameters",
    "order",
    "parse_overrides",
    "pinned_kernels",
    "read_sections",
    "resolve_params",
    "run",
    "run_notebook",
    "thread_slots",
]


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


def order(names: Iterable[str], depends: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """``names`` sorted so that each notebook comes after the notebooks it depends on (default: the ``after``
    entries that ``params/NAME.yaml`` declares, :mod:`scp.suite.graph`), and otherwise by name (their number).
    Dependencies outside ``names`` are not added (:func:`scp.suite.sources.order`)."""
    if depends is None:
        from scp.suite.graph import declarations
        from scp.suite.graph import depends as edges

        depends = edges(declarations())
    return sources.order(names, depends)


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


def _kernel_manager_class(cwd: Path, env: Mapping[str, str]):
    """A kernel manager that starts its kernel in ``cwd`` with ``env`` on top of the runner's environment, and
    talks to it over IPC sockets in the temporary folder (local only, and no "running over TCP without
    encryption" warning from ipykernel on every run).  The folder and variables go to the kernel's process alone:
    changing the runner's own working folder or ``os.environ`` would race when notebooks run side by side
    (``-j``), each thread restoring what another had set."""
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

        async def _async_pre_start_kernel(self, **kw):
            kw["cwd"] = str(cwd)
            kw["env"] = {**(kw.get("env") or os.environ), **env}
            if env.get(PHASES_ENV):  # time the phases (scp.suite.phases), binding no name in the notebook
                start = "--IPKernelApp.exec_lines=__import__('scp.suite.phases').suite.phases.install()"
                kw["extra_arguments"] = [*(kw.get("extra_arguments") or []), start]
            return await super()._async_pre_start_kernel(**kw)

    return IPCKernelManager


def _plain_translator() -> str:
    """Register (once) and name the papermill translator that writes the injected parameters cell: one
    ``name = literal`` line per parameter, each literal written by :func:`python_literal`, so a value can only be
    a value (papermill's own translator writes a ``bytes`` or other odd value as unescaped text)."""
    from papermill.translators import PythonTranslator, papermill_translators

    class PlainValues(PythonTranslator):
        @classmethod
        def codify(cls, parameters: Mapping[str, Any], comment: str = "Parameters") -> str:
            bad = [k for k in parameters if not re.fullmatch(r"[A-Za-z_]\w*", str(k))]
            if bad:
                raise ParameterError(f"parameter names must be identifiers, not {_short(bad)}")
            return f"# {comment}\n" + "".join(f"{k} = {python_literal(v)}\n" for k, v in parameters.items())

    language = "scp-plain-python"
    papermill_translators.register(language, PlainValues)
    return language


def run_notebook(
    name: str,
    smoke: bool = False,
    out_dir: str | Path | None = None,
    params: Mapping[str, Any] | None = None,
    executed: str | Path | None = None,
    log_output: bool = False,
    runs_dir: str | Path | None = None,
    phases_file: str | Path | None = None,
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
        runs_dir: the folder whose ``models/`` holds trained runs shared between notebooks (``$SCP_RUNS_DIR`` in
            the kernel); default ``<out_dir>/runs``, or the checkout's ``runs/`` for a full run into it.
        phases_file: where the kernel writes its seconds per phase (:mod:`scp.suite.phases`); none by default.

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
    from scp.suite.notebook import RUNS_DIR_ENV

    runs_dir = Path(runs_dir).resolve() if runs_dir is not None else RUNS if out == ROOT else out / "runs"
    env = {RUNS_DIR_ENV: str(runs_dir), **({PHASES_ENV: str(Path(phases_file).resolve())} if phases_file else {})}
    try:
        papermill.execute_notebook(
            str(source.resolve()),
            str(executed.resolve()),
            parameters={**values, "out_dir": str(out)},
            kernel_name="python3",
            language=_plain_translator(),
            progress_bar=False,
            log_output=log_output,
            kernel_manager_class=_kernel_manager_class(source.parent.resolve(), env),
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


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    """Set environment variables for the kernels started inside (they inherit the runner's environment)."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


PINNED_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "OPENBLAS_CORETYPE": "Haswell"}
"""The CPU kernels every kernel and stage worker of a run computes with (a variable already set wins): torch's,
oneDNN's and OpenBLAS's AVX2 code paths.  Their AVX-512 paths round differently, so on an AVX-512 machine the
embeddings' last bits change, and so every store key and, through training, the trained networks (measured on a
cold regeneration: SCP's AUC moved by up to 0.14); pinned, a model's store key on an AVX-512 machine equals the one
the committed results recorded on an AVX2 machine.  The provenance's ``machine.torch_cpu_capability`` and ``blas``
show what a run used."""


def pinned_kernels() -> dict[str, str]:
    """The variables of :data:`PINNED_KERNELS` this process's environment does not set already."""
    return {k: v for k, v in PINNED_KERNELS.items() if k not in os.environ}


OUTPUTS = ("figures", "results")
"""The folders of the checkout a run into it replaces, ``figures/NAME`` and ``results/NAME``, as one step."""


def _lock_file(name: str) -> Path:
    """The lock a run into the checkout (or a ``--check``) holds on one notebook: ``runs/.locks/NAME.lock``."""
    return RUNS / ".locks" / f"{name}.lock"


def _aside(kind: str, name: str) -> Path:
    return ROOT / kind / f".{name}.replaced"


def output_hashes(name: str, root: Path | None = None) -> dict[str, str]:
    """``{"figures/NAME/…" or "results/NAME/…": sha256}`` of every file under ``root``'s (default: the checkout's)
    ``figures/NAME`` and ``results/NAME``, except ``results/NAME/provenance.json``, which records them."""
    from scp.lineage import sha256

    root = Path(root or ROOT)
    out = {}
    for kind in OUTPUTS:
        folder = root / kind / name
        for path in sorted(folder.rglob("*")) if folder.is_dir() else ():
            shown = path.relative_to(root).as_posix()
            if path.is_file() and shown != f"results/{name}/provenance.json":
                out[shown] = sha256(path)
    return out


def _record_output_hashes(name: str, root: Path, backfilled: bool = False) -> None:
    """Write :func:`output_hashes` into ``root/results/NAME/provenance.json`` as ``outputs`` (``--status`` then
    finds a missing or changed output); ``backfilled``: hashed from the committed files after the run, which
    ``outputs_recorded`` then says (with the commit they were read at)."""
    from scp.io import read_json, write_json
    from scp.suite.notebook import _git

    path = root / "results" / name / "provenance.json"
    prov = read_json(path, f"results/{name}/provenance.json")
    prov["outputs"] = output_hashes(name, root)
    if backfilled:
        prov["outputs_recorded"] = {
            "by": "record_outputs, from the committed files",
            "commit": _git(root, "rev-parse", "HEAD").stdout.strip(),
        }
    write_json(prov, path)


def _swap_in(name: str, scratch: Path) -> None:
    """Replace ``figures/NAME`` and ``results/NAME`` by those staged under ``scratch`` as one recoverable step:
    a journal naming the swap is written first, then each old folder is moved aside and each new one into its
    place, then the journal and the old folders go.  A run killed in between leaves the journal, and the next
    run into the checkout finishes the swap (:func:`_finish_swap`); ``--status`` reports it meanwhile."""
    from scp.io import write_json

    for kind in OUTPUTS:  # the old folders of a swap that finished but was cut before removing them
        if _aside(kind, name).exists():
            shutil.rmtree(_aside(kind, name))
    write_json(
        {"notebook": name, "staged": {kind: (scratch / kind / name).is_dir() for kind in OUTPUTS}}, _journal(name)
    )
    _finish_swap(name)


def _finish_swap(name: str) -> bool:
    """Finish the swap of ``figures/NAME`` and ``results/NAME`` whose journal exists (moving each old folder aside
    unless it is already, and each staged one into place unless it is already), then remove the journal, the old
    folders and the scratch folder; True when there was one.  Without a journal, only old folders left aside by
    a finished swap are removed."""
    from scp.io import read_json

    journal = _journal(name)
    if not journal.exists():
        for kind in OUTPUTS:
            if _aside(kind, name).exists():
                shutil.rmtree(_aside(kind, name))
        return False
    staged = read_json(journal, f"the swap journal {_show(journal)}").get("staged")
    if not isinstance(staged, dict) or any(not isinstance(staged.get(kind), bool) for kind in OUTPUTS):
        raise DataFormatError(
            f"the swap journal {_show(journal)} names no staged folders; move it and the folders aside"
        )
    scratch = RUNS / "scratch" / name
    for kind in OUTPUTS:
        new, place, aside = scratch / kind / name, ROOT / kind / name, _aside(kind, name)
        if staged[kind] and not new.exists():
            continue  # already in place
        if place.exists():
            if aside.exists():
                raise RunnerError(
                    f"cannot finish the swap of {_show(journal)}: {_show(place)} and {_show(aside)} both exist; "
                    "keep the one you want as the first and remove the journal"
                )
            place.rename(aside)
        if staged[kind]:
            place.parent.mkdir(parents=True, exist_ok=True)
            new.rename(place)
    journal.unlink()
    for kind in OUTPUTS:
        if _aside(kind, name).exists():
            shutil.rmtree(_aside(kind, name))
    shutil.rmtree(scratch, ignore_errors=True)
    return True


def record_outputs(names: Sequence[str] | None = None) -> list[str]:
    """Write the sha256 of every file under ``figures/NAME`` and ``results/NAME`` into ``results/NAME/
    provenance.json`` (its ``outputs``), for results committed before a run recorded them; only from committed
    files: refuses (:class:`~scp.errors.InputError`) while git shows a change under those folders other than
    the provenance files.  ``names``: default every notebook with a provenance; returns those written."""
    names = (
        [n for n in notebook_names() if (ROOT / "results" / n / "provenance.json").is_file()]
        if names is None
        else list(names)
    )
    for n in names:
        _notebook_path(n)
        if not (ROOT / "results" / n / "provenance.json").is_file():
            raise MissingFileError(f"no results/{n}/provenance.json to record the outputs of: run the notebook")
    changed = [
        path
        for path in _uncommitted(ROOT, *(f"{kind}/{n}" for n in names for kind in OUTPUTS))
        if not path.endswith("/provenance.json")
    ]
    if changed:
        raise InputError(
            f"outputs with uncommitted changes ({_listed(changed)}): only committed outputs are recorded; commit or "
            "restore them first"
        )
    with ExitStack() as held:
        for n in names:
            held.enter_context(exclusive_lock(_lock_file(n), f"notebook {n}"))
        for n in names:
            _record_output_hashes(n, ROOT, backfilled=True)
    return names


@dataclass
class Plan:
    """What a full run into the checkout will do: the notebooks to run (in order) with the reasons each is
    stale, and those skipped because their inputs equal the ones their committed provenance records."""

    run: dict[str, list[str]]
    skip: list[str]


def plan(names: Sequence[str], force: bool = False) -> Plan:
    """Which of ``names`` a full run executes: the stale ones (:func:`scp.suite.graph.status`), or all with
    ``force``; refuses (:class:`~scp.errors.InputError`) when the declared graph has problems (a missing model or
    data file, a cycle).  A notebook after a stale one is not run for that alone: it runs when the other's landing
    changes a model it read (:func:`_now_stale`)."""
    from scp.suite.graph import check_graph, declarations, depends, status

    decls = declarations()
    problems = check_graph({n: decls[n] for n in names} | decls)
    if problems:
        raise InputError("the declared inputs do not hold: " + "; ".join(problems))
    todo = order(names, depends(decls))
    states = status(None)
    runs = {n: (states[n] or ["--force"]) for n in todo if force or states[n]}
    return Plan(run=runs, skip=[n for n in todo if n not in runs])


def _now_stale(finished: str, scheduled: Iterable[str]) -> dict[str, list[str]]:
    """The notebooks that come after ``finished`` and were not scheduled but are stale now that its results
    landed because a trained model they read is no longer the one its run wrote: ``{name: reasons}``."""
    from scp.suite.graph import declarations, status

    decls, seen = declarations(), set(scheduled)
    after = [n for n, d in decls.items() if finished in d.after and n not in seen]
    found = status(after) if after else {}
    return {n: why for n, why in found.items() if any(r.startswith("model changed") for r in why)}


def _listed(paths: Sequence[str], limit: int = 10) -> str:
    return ", ".join(paths[:limit]) + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def _uncommitted(root: Path, *pathspecs: str) -> list[str]:
    """Every path under ``pathspecs`` (default: the whole checkout) that ``git status`` reports: modified, deleted,
    renamed or staged tracked files and untracked files that are not ignored; empty when git is not available."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all", "--", *(pathspecs or (".",))],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [line[3:] for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def _check_dirty(allow_dirty: bool) -> None:
    """Refuse (:class:`~scp.errors.InputError`) a run into the checkout while git shows any uncommitted change:
    code, parameters, ``*.md`` text, an edited or deleted file under ``figures/`` or ``results/`` (an earlier
    run's uncommitted results too), an untracked file that is not ignored; unless ``allow_dirty``."""
    changed = _uncommitted(ROOT)
    if changed and not allow_dirty:
        raise InputError(
            f"the checkout has uncommitted changes ({_listed(changed)}): committed results are made from a clean "
            "tree, figures/, results/ and *.md included; commit or stash them (an earlier run's results too), or pass "
            "--allow-dirty (the provenance says dirty: true when the change is to code or parameters)"
        )


def _finished(name: str, results: Path, upstream_results: Path, required: bool) -> list[str]:
    """After a run that wrote ``results/NAME`` under ``results``: its provenance exists and every file it read is
    declared or was written by another notebook's run (their provenance under ``upstream_results``).  A run into
    the checkout or a ``--check`` (``required``) fails otherwise; any other run returns the undeclared reads,
    which the runner prints as a warning (``-p`` may well read another dataset)."""
    from scp.suite.graph import declared, read_provenance, uncovered_reads

    prov = read_provenance(name, results)
    if prov is None and not required:
        return []
    if prov is None:
        raise RunnerError(f"notebook {name} wrote no results/{name}/provenance.json (its last cell calls run.finish())")
    others = {n: read_provenance(n, upstream_results) for n in notebook_names() if n != name}
    problems = uncovered_reads(declared(name), prov, others)
    if problems and required:
        raise RunnerError(f"notebook {name} read inputs it does not declare: {'; '.join(problems)}")
    return problems


def orphan_runs(root: Path = ROOT, rerun: Iterable[str] = ()) -> list[str]:
    """The trained runs under ``runs/models`` that no committed run lists as written (its provenance's
    ``models_written``): left by a run that was stopped or failed, or by one at another commit whose results were
    replaced since.  A notebook that reuses one is refused when it ends (:func:`scp.suite.graph.uncovered_reads`),
    after all its work, so :func:`run` sets them aside before any kernel starts.

    Args:
        root: the checkout.
        rerun: notebooks about to run into the checkout; their committed records do not count, since the run
            replaces them (a notebook that reuses a run only its own old results wrote would be refused too).
    """
    from scp.suite.graph import read_provenance

    folder = root / "runs" / "models"
    if not folder.is_dir():
        return []
    replaced = set(rerun)
    written: set[str] = set()
    for path in sorted((root / "results").glob("*/provenance.json")):
        if path.parent.name in replaced:
            continue
        try:
            prov = read_provenance(path.parent.name, root / "results") or {}
        except DataFormatError:
            continue  # an unreadable record covers nothing; the run that reads through it says why
        written |= {e["path"] for e in prov.get("models_written", ())}
    from scp.suite.model_store import LINEAGE_FILE

    return sorted(
        d.name
        for d in folder.iterdir()
        if d.is_dir()
        and not d.name.startswith(".")
        and not (d / LINEAGE_FILE).is_file()  # from the model store: its key is its lineage
        and f"runs/models/{d.name}/best.safetensors" not in written
    )


def set_aside(root: Path, runs: Sequence[str]) -> Path:
    """Move the trained runs ``runs`` from ``runs/models`` into a new ``runs/set_aside/<UTC time>/`` (one
    rename each, nothing deleted), so the notebooks that need them retrain them; returns that folder."""
    stamp = _now().replace(":", "").replace("+0000", "Z")
    target = root / "runs" / "set_aside" / stamp
    k = 1
    while target.exists():
        k += 1
        target = root / "runs" / "set_aside" / f"{stamp}-{k}"
    target.mkdir(parents=True)
    for name in runs:
        os.replace(root / "runs" / "models" / name, target / name)
    return target


def _training_stage(todo, params_of, planner, priority, jobs: int, runs_dir: Path, store, echo) -> dict[str, Any]:
    """Train every model the notebooks ``todo`` plan that the model store lacks, then put each into
    ``runs_dir/models`` (:mod:`scp.suite.model_store`); plans again after each pass, since a plan may depend on
    models trained in the pass before (notebook 13's learning curve follows the variant validation chooses), until
    nothing new is planned.  Returns the stage's record (counts and seconds)."""
    from scp.suite import model_store

    t0, keyed, done, planned_by, hits, trained = time.perf_counter(), 0.0, {}, {}, 0, 0
    params = {n: resolve_params(n, False, params_of.get(n, {})) for n in todo}
    embedded: dict[tuple[str, str, bool], dict] = {}
    for _ in range(4):
        configs = {n: list(planner(n, params[n], runs_dir / "models")) for n in todo}
        _embedding_stage([c for cs in configs.values() for c in cs], jobs, embedded, echo)
        k0 = time.perf_counter()
        planned = [c for cs in configs.values() for c in cs]
        fresh = [e for e in model_store.entries(planned, store, priority) if e.key not in done]
        keyed += time.perf_counter() - k0
        planned_by = {n: len(c) for n, c in configs.items() if c}
        if not fresh:
            break
        echo(
            f"[train] {sum(planned_by.values())} models planned by {len(planned_by)} notebooks, {len(fresh)} new "
            f"distinct ones (store: {_show(model_store.store_dir(store))})",
            flush=True,
        )
        report = model_store.train_missing(fresh, jobs, echo=echo)
        hits, trained = hits + report.hits, trained + report.trained
        for entry in fresh:
            model_store.materialize(entry, runs_dir)
            done[entry.key] = entry
    echo(
        f"[train] {len(done)} models planned, {hits} found in the store, {trained} trained; stage "
        f"{time.perf_counter() - t0:.1f} s ({jobs} single-thread workers)",
        flush=True,
    )
    return {
        "embedding": {"/".join(map(str, k)): v for k, v in embedded.items()},
        "embedding_s": round(sum(v["seconds"] for v in embedded.values()), 3),
        "planned": planned_by,
        "distinct": len(done),
        "hits": hits,
        "trained": trained,
        "keyed_s": round(keyed, 3),
        "stage_s": round(time.perf_counter() - t0, 3),
        "jobs": jobs,
    }


def _embedding_stage(configs: Sequence[Any], jobs: int, done: dict, echo) -> None:
    """Embed, before any training, the texts the ``configs`` need, with each config's embedder and unit text,
    grouped by exact token length in ``jobs`` one-thread processes (:func:`scp.data.embed_stage.fill_cache`, bit
    for bit one text per pass): for a config that trains on whole datasets, every text of their files (training,
    validation and test examples, as the notebooks embed them); for one that keeps only the first examples, its
    training and validation texts.  ``done`` collects the counts per (embedder, data, unit text); what it holds
    is not redone."""
    from scp.data.embed_stage import dataset_texts, fill_cache
    from scp.suite.model_store import embedded_texts, training_examples

    for c in configs:
        whole = c.max_train_examples is None and c.max_val_examples is None
        names = sorted({*c.datasets, c.val_dataset or c.datasets[0]})
        data = "+".join(names) if whole else f"{'+'.join(c.datasets)}[{c.max_train_examples}]"
        key = (c.embedder, data, c.with_title)
        if key in done:
            continue
        if whole:
            texts = [t for d in names for t in dataset_texts(d, bool(c.with_title))]
        else:
            train, val, _ = training_examples(c)
            texts = embedded_texts([*train, *val], bool(c.with_title))
        done[key] = out = fill_cache(c.embedder, texts, jobs=jobs)
        echo(
            f"[embed] {key[1]} ({c.embedder}, {'titled' if c.with_title else 'bare'} units): {out['distinct']} texts, "
            f"{out['cached']} cached, {out['encoded']} embedded in {out['seconds']:.1f} s",
            flush=True,
        )


STAGE_RUN = "stages.json"
"""The file under ``runs/`` where a run into the checkout records its stages (:func:`_record_stage`)."""


def _record_stage(stage: Mapping[str, Any]) -> None:
    from scp.io import write_json

    RUNS.mkdir(parents=True, exist_ok=True)
    write_json({"training": dict(stage), "at": _now()}, RUNS / STAGE_RUN)


def _record_store_reads(name: str, results: Path, runs_dir: Path) -> None:
    """Add ``store`` to ``results/NAME/provenance.json``: for every trained run it read that came from the model
    store, ``{path: {"key", "sha256"}}`` (the key is the model's lineage; :func:`scp.suite.graph.uncovered_reads`
    accepts such a read without a producer)."""
    from scp.io import read_json, write_json
    from scp.suite.model_store import read_lineage

    path = results / name / "provenance.json"
    if not path.is_file():
        return
    prov = read_json(path, f"results/{name}/provenance.json")
    found = {}
    for entry in prov.get("models", []):
        shown = entry.get("path", "")
        if not shown.startswith("runs/models/"):
            continue
        folder = runs_dir / Path(shown).relative_to("runs").parent
        record = read_lineage(folder)
        if record is not None and record["best_sha256"] == entry.get("sha256"):
            found[shown] = {"key": record["key"], "sha256": record["best_sha256"]}
    if found:
        prov["store"] = found
        write_json(prov, path)


def _record_phases(name: str, results: Path, timing: Path) -> None:
    """Add ``phases`` to ``results/NAME/provenance.json``: the seconds per phase its kernel measured
    (:mod:`scp.suite.phases`), ``other`` the rest of its wall time."""
    from scp.io import read_json, write_json
    from scp.suite.phases import phases, read_totals

    path = results / name / "provenance.json"
    if not path.is_file():
        return
    prov = read_json(path, f"results/{name}/provenance.json")
    prov["phases"] = phases(read_totals(timing), float(prov.get("wall_time_s") or 0.0))
    write_json(prov, path)
    timing.unlink(missing_ok=True)


SUITE_RUN = "suite_run.json"
"""The file under ``runs/`` where a run into the checkout records itself (:func:`_record_suite_run`)."""


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


def _record_suite_run(started_at: str, wall_s: float, jobs: int, ran: list[str], skipped: list[str]) -> dict:
    """Write ``runs/``:data:`SUITE_RUN` (atomically): when the last run into the checkout started, its wall time, the
    notebooks it ran and those it skipped as up to date, at which commit; returns the record."""
    from scp.io import write_json
    from scp.suite.notebook import git_commit

    record = {
        "started_at": started_at,
        "wall_s": round(wall_s, 3),
        "jobs": jobs,
        "ran": ran,
        "up_to_date": skipped,
        "git": git_commit(ROOT),
    }
    RUNS.mkdir(parents=True, exist_ok=True)
    write_json(record, RUNS / SUITE_RUN)
    return record


def critical_paths(
    todo: Sequence[str], after: Mapping[str, set[str]], seconds: Mapping[str, float]
) -> dict[str, float]:
    """Each notebook's critical path: r(n) = t(n) + max(r(m) for the m of ``todo`` that come after n), 0 without
    any, with t(n) its expected seconds (``seconds``; 0 when unknown).  Starting the ready notebook of largest r
    first (list scheduling by critical path) keeps a long chain such as 02 → 13 from waiting behind short ones."""
    paths: dict[str, float] = {}

    def path(n: str) -> float:
        if n not in paths:
            paths[n] = float(seconds.get(n, 0.0)) + max((path(m) for m in todo if n in after[m]), default=0.0)
        return paths[n]

    return {n: path(n) for n in todo}


def _last_wall_times(names: Iterable[str]) -> dict[str, float]:
    """``{name: wall_time_s}`` of the committed provenance of each notebook that has a readable one."""
    from scp.suite.graph import read_provenance

    times = {}
    for n in names:
        try:
            prov = read_provenance(n)
        except (DataFormatError, OSError):
            prov = None
        if prov and isinstance(prov.get("wall_time_s"), int | float):
            times[n] = float(prov["wall_time_s"])
    return times


def thread_slots(names: Iterable[str], smoke: bool = False, overrides: Mapping[str, Mapping] | None = None) -> dict:
    """``{name: torch threads}`` of each notebook whose parameters set ``torch_threads`` (the file's value, its
    smoke section's for a smoke run, then ``overrides[name]``): the slots :func:`_schedule` gives it."""
    out = {}
    for n in names:
        value = resolve_params(n, smoke, (overrides or {}).get(n, {})).get("torch_threads")
        if isinstance(value, int) and not isinstance(value, bool):
            out[n] = value
    return out


def _schedule(todo: Sequence[str], jobs: int, work, echo, more=None, slots: Mapping[str, int] | None = None) -> None:
    """Run ``work(name)`` for ``todo``, up to ``jobs`` slots at once, each only after the notebooks it comes after
    (among ``todo``) finished, the ready one of longest :func:`critical_paths` (by the committed runs' wall
    times; ties in ``todo``'s order) first; the first failure stops new starts and is raised once the others end.
    A notebook takes ``slots[name]`` slots (its torch threads, :func:`thread_slots`; 1 when not given, at most
    ``jobs``): when the next one does not fit beside those running, nothing starts until it does, so two threads
    never share a core with a third (torch's thread pool waits at every operation for a thread the kernel parked).
    ``more(name)``, called when ``name`` finished, returns notebooks to run as well (appended to ``todo``)."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    from scp.suite.graph import declarations

    todo = list(todo)
    after = {n: {a for a in declarations([n])[n].after if a in todo} for n in todo}
    rank = critical_paths(todo, after, _last_wall_times(todo) if jobs > 1 else {})

    def width(n: str) -> int:
        return min(max(1, jobs), max(1, int((slots or {}).get(n, 1))))

    pending, done, running, failure = list(todo), set(), {}, None
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        while pending or running:
            while failure is None:
                ready = max((n for n in pending if after[n] <= done), key=lambda n: rank[n], default=None)
                if ready is None or sum(map(width, running.values())) + width(ready) > jobs:
                    break
                pending.remove(ready)
                running[pool.submit(work, ready)] = ready
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                name = running.pop(future)
                try:
                    future.result()
                    done.add(name)
                    for extra in more(name) if more is not None and failure is None else ():
                        if extra not in todo:
                            todo.append(extra)
                            pending.append(extra)
                            after[extra] = {a for a in declarations([extra])[extra].after if a in todo}
                            rank[extra] = 0.0
                except BaseException as exc:  # noqa: BLE001 - re-raised below, after the others end
                    failure = failure or exc
    if failure is not None:
        raise failure


def run(
    names: str | Sequence[str] = "all",
    smoke: bool = False,
    params: Mapping[str, Any] | None = None,
    out_dir: str | Path | None = None,
    echo=print,
    force: bool = False,
    check: bool = False,
    jobs: int = 1,
    allow_dirty: bool = False,
    planner: Callable[[str, Mapping[str, Any], Path], Sequence[Any]] | None = None,
    store: str | Path | None = None,
    priority: Callable[[Any], Any] | None = None,
) -> dict[str, Path]:
    """Run notebooks in dependency order, printing each one's name and time; stop at the first failure.

    A full run into the checkout (no ``out_dir``, no ``params``) is incremental: a notebook whose inputs equal
    those its committed ``results/NAME/provenance.json`` records is skipped (and said so), unless ``force``.  It
    holds each notebook's lock (another run of one is refused), finishes a swap a killed run left, and refuses
    any uncommitted change unless ``allow_dirty``.  Each notebook runs into ``runs/scratch/NAME`` and, when it
    succeeded and its reads are all declared, the sha256 of its outputs go into its provenance and its
    ``figures/NAME`` and ``results/NAME`` replace the old folders whole, in one journaled step.  With ``check``
    (under the same locks) nothing is replaced: each notebook reruns into ``runs/check/NAME`` and its tables
    and records are compared with the committed ones (:func:`scp.suite.check.compare`, the notebook's declared
    tolerance); a difference beyond it raises :class:`RunnerError` after every notebook was compared.

    Args:
        names: ``"all"``, one name, or a list of names (``"all"`` inside the list also means every notebook).
        smoke: use each notebook's ``smoke:`` parameters (never incremental, never into the checkout).
        params: ``-p`` overrides; each key must be declared by at least one of the notebooks run and is given
            to those that declare it.
        out_dir: where figures and results go; default the repository root, or for ``smoke`` a temporary
            folder that is deleted afterwards (pass one to keep the smoke outputs).
        echo: where progress lines go (``print``; ``None`` for silence).
        force: rerun notebooks that are up to date.
        check: rerun into a scratch folder and compare with the committed results instead of replacing them.
        jobs: notebooks run side by side when none comes after another (each kernel then gets
            ``OMP_NUM_THREADS = cores // jobs`` unless that is set).  Every kernel and worker computes with the
            CPU kernels :data:`PINNED_KERNELS` names.
        allow_dirty: write committed results from a tree with uncommitted changes (recorded as ``dirty: true``).
        planner: ``planner(name, parameters, models_root)`` lists the :class:`~scp.models.config.TrainConfig` of
            the models the notebook trains (``scp run`` passes :func:`scp.experiments.plan.staged_configs`); a run
            that is not a smoke run first trains what the model store lacks (:mod:`scp.suite.model_store`, ``jobs``
            single-thread workers, in ``priority`` order) and puts every planned model into the run's
            ``runs/models``, so the notebooks only load.
        store: the model store's folder (default :func:`scp.suite.model_store.store_dir`).
        priority: the order in which the stage trains what the store lacks, smallest ``priority(config)`` first
            (``scp run`` passes :func:`scp.experiments.plan.stage_priority`); ``None``: the planners' order.

    Returns:
        ``{name: executed copy}`` of the notebooks that ran, in the order they were started.
    """
    import threading

    lock, say = threading.Lock(), echo or (lambda *a, **k: None)

    def echo(*args, **kwargs) -> None:  # one line at a time, whichever notebook's thread says it
        with lock:
            say(*args, **kwargs)

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
    if out_dir is not None:
        _check_out_dir(Path(out_dir), store)
    committed = not smoke and out_dir is None and not check
    if check and (smoke or out_dir is not None):
        raise InputError("--check reruns with the full parameters into runs/check/ and compares; no --smoke or --out")
    if committed and params:
        raise InputError(
            "-p changes what a notebook computes: give --out DIR, so the committed results stay as they are"
        )
    locked: set[str] = set()
    with ExitStack() as held:
        held.enter_context(_environment(**pinned_kernels()))  # before the stage's workers and the kernels start
        if committed or check:  # one writer per notebook: a second run of it is refused while this one runs
            for n in todo:
                held.enter_context(exclusive_lock(_lock_file(n), f"notebook {n}"))
            locked.update(todo)
            for n in todo:
                if _finish_swap(n):
                    echo(f"[recover] {n}: finished replacing figures/{n} and results/{n} (a run was cut during it)")
        reasons = {n: [] for n in todo}
        started, started_at, skipped = time.perf_counter(), _now(), []
        if committed:
            _check_dirty(allow_dirty)
            chosen = plan(todo, force)
            skipped = chosen.skip
            for n in chosen.skip:
                echo(f"[skip] {n}: up to date (its inputs equal those results/{n}/provenance.json records)", flush=True)
            reasons = chosen.run
            todo = list(chosen.run)
            orphans = orphan_runs(ROOT, rerun=todo) if todo else []
            if orphans:
                shown = ", ".join(orphans[:3]) + (f" and {len(orphans) - 3} more" if len(orphans) > 3 else "")
                aside = set_aside(ROOT, orphans)
                echo(
                    f"[runs] set aside {len(orphans)} trained runs that no committed run outside this one wrote "
                    f"({shown}) into {_show(aside)}: a notebook that reused one would be refused when it ends, "
                    "so the notebooks that need them retrain them",
                    flush=True,
                )
        env = (
            {}
            if "OMP_NUM_THREADS" in os.environ or jobs <= 1
            else {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // jobs))}
        )
        tmp = tempfile.TemporaryDirectory(prefix="scp-smoke-") if smoke and out_dir is None else nullcontext(out_dir)
        executed: dict[str, Path] = {}
        reports: dict[str, Any] = {}
        with tmp as target:
            runs_dir = Path(target).resolve() / "runs" if target is not None else RUNS
            if planner is not None and not smoke and todo:
                stage = _training_stage(todo, mine_of, planner, priority, jobs, runs_dir, store, echo)
                if committed:
                    _record_stage(stage)

            def work(name: str) -> None:
                i, total = todo.index(name) + 1, len(todo)
                mine = mine_of.get(name, {})
                extra = "".join(f" {k}={v!r}" for k, v in mine.items())
                why = f"; stale: {'; '.join(reasons[name])}" if committed else ""
                mode = "smoke" if smoke else "check" if check else "full"
                echo(f"[{i}/{total}] running {name} ({mode} parameters{extra}{why}) ...", flush=True)
                t0 = time.perf_counter()
                scratch = RUNS / ("check" if check else "scratch") / name if (committed or check) else None
                if scratch is not None and scratch.exists():
                    shutil.rmtree(scratch)
                dest = scratch if scratch is not None else target
                copy = RUNS / "smoke" / f"{name}.ipynb" if smoke and out_dir is None else None
                if committed:
                    copy = RUNS / f"{name}.ipynb"
                timing = RUNS / ".phases" / f"{name}.json" if (committed or check) else None
                if timing is not None:
                    timing.parent.mkdir(parents=True, exist_ok=True)
                try:
                    executed[name] = run_notebook(
                        name,
                        smoke=smoke,
                        out_dir=dest,
                        params=mine,
                        executed=copy,
                        runs_dir=runs_dir,
                        phases_file=timing,
                    )
                    _record_store_reads(name, Path(dest) / "results", runs_dir)
                    if timing is not None:
                        _record_phases(name, Path(dest) / "results", timing)
                    undeclared = _finished(
                        name, Path(dest) / "results", Path(target or ROOT) / "results", committed or check
                    )
                    for problem in undeclared:
                        echo(f"[{i}/{total}] warning: {problem}", flush=True)
                    if committed:
                        _record_output_hashes(name, scratch)
                        _swap_in(name, scratch)
                except RunnerError:
                    echo(f"[{i}/{total}] {name} failed after {time.perf_counter() - t0:.1f} s", flush=True)
                    raise
                echo(
                    f"[{i}/{total}] {name} done in {time.perf_counter() - t0:.1f} s -> {_show(executed[name])}",
                    flush=True,
                )
                if check:
                    from scp.suite.check import compare
                    from scp.suite.graph import declared as declared_of

                    report = compare(ROOT / "results" / name, scratch / "results" / name, declared_of(name).tolerance)
                    reports[name] = report
                    echo(f"[check] {name}: {report.summary()}", flush=True)
                    moved = _machine_change(ROOT / "results" / name, scratch / "results" / name)
                    if moved:
                        echo(f"[check] {name}: {moved}", flush=True)

            def more(name: str) -> list[str]:  # committed runs: what became stale when name's results landed
                found = _now_stale(name, todo) if committed else {}
                for n in [n for n in found if n not in wanted]:
                    why = next(r for r in found.pop(n) if r.startswith("model changed"))
                    echo(f"[stale] {n}: now that {name} landed ({why}); scp run {n} reruns it", flush=True)
                for n, why in found.items():
                    if n not in locked:
                        held.enter_context(exclusive_lock(_lock_file(n), f"notebook {n}"))
                        locked.add(n)
                    reasons[n] = why
                    todo.append(n)
                    echo(f"[stale] {n}: now that {name} landed ({why[0]}); it runs too", flush=True)
                return list(found)

            with _environment(**env):
                _schedule(todo, jobs, work, echo, more, thread_slots(wanted, smoke, mine_of))
        if committed:
            record = _record_suite_run(started_at, time.perf_counter() - started, jobs, list(executed), skipped)
            echo(f"[suite] {len(executed)} run, {len(skipped)} up to date, in {record['wall_s']:.1f} s", flush=True)
        failed = [n for n, r in reports.items() if not r.ok]
        if failed:
            raise RunnerError(f"--check: {', '.join(failed)} differ from the committed results beyond their tolerance")
        return executed


def _check_out_dir(out: Path, store: str | Path | None = None) -> None:
    """Refuse (:class:`~scp.errors.InputError`) an ``--out`` folder whose ``figures/``, ``results/`` and ``runs/``
    would land on what a run reads or what the checkout holds: the checkout itself or a folder of it, the data
    folder (``$SCP_DATA_DIR``) or a folder inside it, the model store."""
    from scp.data.datasets import DATA_DIR_ENV
    from scp.suite.model_store import store_dir

    target = out.expanduser().resolve()
    guarded = [(ROOT.resolve(), "the checkout (its committed figures/ and results/ are written by scp run NAME alone)")]
    if os.environ.get(DATA_DIR_ENV):
        guarded.append((Path(os.environ[DATA_DIR_ENV]).expanduser().resolve(), f"the data folder ${DATA_DIR_ENV}"))
    guarded.append((store_dir(store).resolve(), "the model store"))
    for place, what in guarded:
        inside = target == place or place in target.parents
        if inside and not (what.startswith("the checkout") and target.is_relative_to(RUNS.resolve())):
            raise InputError(f"--out {out} is {'' if target == place else 'inside '}{what}: give a folder of its own")


def _machine_change(committed: Path, rerun: Path) -> str:
    """How the rerun's machine (its provenance ``machine``, :func:`scp.suite.notebook.machine_facts`) differs from
    the committed run's, or "" when they match; a training notebook retrains through other kernels there."""
    from scp.io import read_json

    def machine(folder: Path) -> dict | None:
        path = folder / "provenance.json"
        return read_json(path).get("machine") if path.is_file() else None

    before, after = machine(committed), machine(rerun)
    if before is None:
        return "the committed run recorded no machine, so whether this one differs is not known"
    changed = sorted(k for k in {*before, *(after or {})} if before.get(k) != (after or {}).get(k))
    if not changed:
        return ""
    shown = "; ".join(f"{k}: {before.get(k)!r} -> {(after or {}).get(k)!r}" for k in changed)
    return f"rerun on another machine than the committed run ({shown}); trained models may move there"


# --------------------------------------------------------------------------------------------------- CLI


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
    if args.jobs < 1:
        raise InputError(f"-j expects a positive number of notebooks at once, not {args.jobs}")
    if args.status:
        from scp.data.datasets import DATA_DIR_ENV
        from scp.suite.graph import status

        if not os.environ.get(DATA_DIR_ENV):
            print(
                f"note: {DATA_DIR_ENV} is not set, so no data file is checked: the loaders look for datasets under "
                f"${DATA_DIR_ENV} and, without it, only on the Hugging Face hub (make sets it to ../shared/data)"
            )
        wanted = None if "all" in names else names
        for name, reasons in status(wanted).items():
            print(f"{name}: {'stale: ' + '; '.join(reasons) if reasons else 'up to date'}")
        return 0
    try:
        run(
            names,
            smoke=args.smoke,
            params=parse_overrides(args.param),
            out_dir=args.out,
            force=args.force,
            check=args.check,
            jobs=args.jobs,
            allow_dirty=args.allow_dirty,
            planner=getattr(args, "planner", None),
            priority=getattr(args, "priority", None),
        )
    except SCPError:
        raise
    except RunnerError as exc:  # a notebook failed: where, and where its executed copy is
        print(f"{getattr(args, 'runner_prog', 'scp run')}: error: {exc}", file=sys.stderr)
        return 1
    return 0


def add_subparser(subparsers) -> argparse.ArgumentParser:
    """Add ``run`` to an ``argparse`` sub-command set with this runner's :func:`_cli` as its handler
    (:func:`scp.suite.cli_args.add_subparser`)."""
    return cli_args.add_subparser(subparsers, _cli)


def main(argv: list[str] | None = None) -> int:
    """``python -m scp.suite.runner NAME… | all [--smoke] [-p key=value …] [--out DIR]``; returns the exit status
    (2 and one line for bad input, as ``scp run``)."""
    parser = configure(argparse.ArgumentParser(prog="python -m scp.suite.runner", description=DESCRIPTION))
    args = parser.parse_args(argv)
    try:
        return _cli(args)
    except (SCPError, OSError) as exc:
        print(f"{parser.prog}: error: {' '.join(str(exc).split()) or type(exc).__name__}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
