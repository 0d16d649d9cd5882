"""Where a notebook's time goes: seconds per phase (embedding, training, scoring, reader), measured in its kernel.

The runner starts each kernel with ``$SCP_PHASES_FILE`` set and :func:`install` run at its start (an
``IPKernelApp.exec_lines`` entry that binds no name in the notebook's namespace).  :func:`install` wraps, as each
module is first imported, the functions of :data:`TARGETS`, so the notebooks and the modules they import are not
changed (nor their digests).  Time is exclusive: a call inside another phase's call (the embedder inside training)
counts for the inner phase only, and the outer one resumes after it.  The totals are written to the file (atomically)
whenever an outermost call returns; :func:`phases` turns them and the notebook's wall time into the provenance's
``phases``: each phase's seconds and ``other``, the rest of the wall time, so the phases sum to it.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PHASES_ENV = "SCP_PHASES_FILE"
"""The file a kernel writes its phase totals to (set by the runner)."""

TARGETS: dict[str, tuple[str, ...]] = {
    "embedding": ("scp.data.embedders:Embedder.encode",),
    "training": ("scp.training.loop:train",),
    "scoring": ("scp.models.scoring:score_contexts", "scp.models.scoring:prefix_values"),
    "reader": (
        "scp.llm.readers:LocalReader.answer",
        "scp.llm.readers:answer_logprob",
        "scp.llm.readers:answer_and_logprob",
        "scp.llm.readers:token_distributions",
        "scp.llm.readers:prefix_tree_logprob",
        "scp.llm.readers:score_sequences",
        "scp.llm.lingua:LinguaCompressor.compress",
    ),
}
"""``{phase: ("module:qualified.name", …)}``: the calls whose time is the phase's."""

NAMES = (*TARGETS, "other")

__all__ = ["NAMES", "PHASES_ENV", "TARGETS", "install", "phases", "read_totals"]

_totals: dict[str, float] = {}
_stack: list[list[Any]] = []
_file: Path | None = None


def _flush() -> None:
    if _file is None:
        return
    tmp = _file.with_name(f".{_file.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(_totals))
    os.replace(tmp, _file)


def _wrap(phase: str, fn):
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        now = time.perf_counter()
        if _stack:  # pause the enclosing phase
            outer = _stack[-1]
            _totals[outer[0]] = _totals.get(outer[0], 0.0) + now - outer[1]
        _stack.append([phase, now])
        try:
            return fn(*args, **kwargs)
        finally:
            end = time.perf_counter()
            inner = _stack.pop()
            _totals[inner[0]] = _totals.get(inner[0], 0.0) + end - inner[1]
            if _stack:
                _stack[-1][1] = end
            else:
                _flush()

    timed.__scp_phase__ = phase
    return timed


def _patch(module) -> None:
    for phase, targets in TARGETS.items():
        for target in targets:
            name, _, qual = target.partition(":")
            if name != module.__name__:
                continue
            *path, attr = qual.split(".")
            owner = module
            for part in path:
                owner = getattr(owner, part, None)
            fn = getattr(owner, attr, None) if owner is not None else None
            if fn is not None and not hasattr(fn, "__scp_phase__"):
                setattr(owner, attr, _wrap(phase, fn))


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a target module, wraps the loader the other finders give so that the module is
    patched right after it executes (before any importer binds its names)."""

    modules = {t.partition(":")[0] for ts in TARGETS.values() for t in ts}

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def patched(module):
            exec_module(module)
            _patch(module)

        loader.exec_module = patched
        return spec


def install(path: str | os.PathLike[str] | None = None) -> bool:
    """Time the :data:`TARGETS` of this process into ``path`` (default ``$SCP_PHASES_FILE``; nothing without
    either); modules already imported are patched now, the others when imported.  Returns whether it installed."""
    global _file
    where = path or os.environ.get(PHASES_ENV)
    if not where or _file is not None:
        return False
    _file = Path(where)
    _totals.clear()
    _flush()
    for name in _Finder.modules:
        if name in sys.modules:
            _patch(sys.modules[name])
    sys.meta_path.insert(0, _Finder())
    return True


def read_totals(path: str | os.PathLike[str]) -> dict[str, float]:
    """The phase totals a kernel wrote (empty when it wrote none)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if k in TARGETS and isinstance(v, int | float)}


def phases(totals: Mapping[str, float], wall_s: float) -> dict[str, float]:
    """``{phase: seconds}`` for every phase and ``other`` (the wall time the phases leave), summing to ``wall_s``;
    when the measured phases exceed it (the notebook stopped its clock before its last call), they are scaled to
    it and ``other`` is 0."""
    measured = {p: max(0.0, float(totals.get(p, 0.0))) for p in TARGETS}
    spent = sum(measured.values())
    if spent > wall_s > 0:
        measured = {p: s * wall_s / spent for p, s in measured.items()}
        spent = wall_s
    out = {p: round(s, 3) for p, s in measured.items()}
    out["other"] = round(max(0.0, wall_s - sum(out.values())), 3)
    return out
