"""Worked cases printed in the paper, read from the shared data folder (never copied into the project).

A case file ``$SCP_DATA_DIR/cases/<name>.json`` holds one question, its sentences with their roles, and the
scores the paper printed for them::

    {"source": "...", "question": "...", "answer": "...", "note": "...",
     "sentences": [{"id": "S1", "text": "...", "role": "distractor (old)", "paper_loo": -1.0, "paper_scp": -0.8},
                   ...]}

:func:`load_case` turns it into an :class:`~scp.data.datasets.Example`: the sentences are the units (no titles), a unit
is
labelled 1 when its role names an evidence group (``"G1 (duplicated)"``, ``"G3"``, …) and 0 otherwise
(distractors, noise), and ``meta`` keeps the ids, roles, the paper's printed columns (``paper_<name>`` keys, as
lists in sentence order), the source line, the note and the file's path.  The paper's columns come from the
paper's own value network: they are a reference to compare against, not numbers this project produces.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from scp.data.datasets import DATA_DIR_ENV, Example
from scp.errors import DataFormatError, DataUnavailableError
from scp.io import loads
from scp.lineage import note_read

__all__ = ["CASES_FOLDER", "EVIDENCE_ROLE", "TABLE19", "case_path", "load_case"]

CASES_FOLDER = "cases"
"""Folder under ``$SCP_DATA_DIR`` that holds the case files."""
TABLE19 = "table19_dose_protocol"
"""The paper's Table 19 case (Appendix C.4.2): a dose protocol with duplicated evidence and a stale distractor."""
EVIDENCE_ROLE = re.compile(r"^G\d+\b")
"""A role that names an evidence group (``G1``, ``G2 (duplicated)``, …); such units get label 1."""


def case_path(name: str = TABLE19, path: str | os.PathLike[str] | None = None) -> Path:
    """Where case ``name`` is read from: ``path`` when given, else ``$SCP_DATA_DIR/cases/<name>.json``.

    Raises:
        DataUnavailableError: the file does not exist, or ``SCP_DATA_DIR`` is unset and no ``path`` is given;
            the message says which file was looked for and how to point at it.
    """
    if path is not None:
        p = Path(path).expanduser()
    else:
        root = os.environ.get(DATA_DIR_ENV)
        if not root:
            raise DataUnavailableError(
                f"case {name!r}: {DATA_DIR_ENV} is not set; point it at the shared data folder that holds "
                f"{CASES_FOLDER}/{name}.json (e.g. export {DATA_DIR_ENV}=../shared/data), or pass path="
            )
        p = Path(root).expanduser() / CASES_FOLDER / f"{name}.json"
    if not p.is_file():
        raise DataUnavailableError(
            f"case {name!r}: no file {p}; the paper's cases live in $SCP_DATA_DIR/{CASES_FOLDER}/ "
            f"({DATA_DIR_ENV}={os.environ.get(DATA_DIR_ENV)!r}) and are not shipped with the project"
        )
    return p


def load_case(name: str = TABLE19, path: str | os.PathLike[str] | None = None) -> Example:
    """The paper's case ``name`` as an :class:`~scp.data.datasets.Example` (see the module docstring).

    Args:
        name: the case's file stem under ``$SCP_DATA_DIR/cases/`` (default: :data:`TABLE19`).
        path: read this file instead.

    Returns:
        An Example with ``units`` = the sentences in file order, ``labels`` = 1 on evidence-group roles,
        ``titles`` all ``""``, ``answers`` = (the answer,), ``dataset = "case"``, and ``meta`` holding ``ids``,
        ``roles``, ``paper_<column>`` lists (e.g. ``paper_loo``, ``paper_scp``), ``source``, ``note``, ``path``.

    Raises:
        DataUnavailableError: the file is missing (see :func:`case_path`).
        DataFormatError: the file is not JSON, or lacks ``question`` / ``sentences`` / a sentence's ``id``,
            ``text`` or ``role``, or the sentences disagree on which ``paper_*`` columns they carry.
    """
    p = case_path(name, path)
    note_read(p, "data")
    try:
        doc = loads(p.read_text(encoding="utf-8"), str(p))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataFormatError(f"{p}: not a JSON case file ({exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("question"), str) or not doc.get("sentences"):
        raise DataFormatError(f"{p}: a case file needs a 'question' string and a non-empty 'sentences' list")
    sentences = doc["sentences"]
    for k, s in enumerate(sentences):
        missing = [f for f in ("id", "text", "role") if not (isinstance(s, dict) and isinstance(s.get(f), str))]
        if missing:
            raise DataFormatError(f"{p}: sentence {k} lacks {', '.join(missing)}")
    columns = sorted({key for s in sentences for key in s if key.startswith("paper_")})
    gaps = [(s["id"], c) for s in sentences for c in columns if not isinstance(s.get(c), (int, float))]
    if gaps:
        raise DataFormatError(f"{p}: sentence {gaps[0][0]} has no number in column {gaps[0][1]}")
    n = len(sentences)
    return Example(
        id=f"case-{name}",
        query=doc["question"].strip(),
        units=tuple(s["text"].strip() for s in sentences),
        labels=tuple(int(bool(EVIDENCE_ROLE.match(s["role"]))) for s in sentences),
        titles=("",) * n,
        paragraph_ids=(0,) * n,
        answers=(doc["answer"],) if isinstance(doc.get("answer"), str) else (),
        dataset="case",
        granularity="sentence",
        meta={
            "ids": [s["id"] for s in sentences],
            "roles": [s["role"] for s in sentences],
            **{c: [float(s[c]) for s in sentences] for c in columns},
            "source": doc.get("source", ""),
            "note": doc.get("note", ""),
            "path": str(p),
        },
    )
