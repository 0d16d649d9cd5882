"""Compare a rerun's tables and records with the committed ones (``scp run NAME --check``).

Every table file of the committed ``results/NAME`` (each ``*.csv`` and ``*.json`` at any depth, ``records.json``
included, ``provenance.json`` not) must exist in the rerun with the same columns, rows, keys and text; numbers may
differ by the notebook's declared :class:`~scp.suite.graph.Tolerance` (``|new − old| ≤ atol + rtol·|old|``; NaN
equals NaN), and columns, keys or record names that hold measured times are not compared, nor the ``provenance``
a table's JSON carries (when and from which commit it was made).  Files only the rerun wrote are reported too.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from scp.suite.graph import Tolerance

__all__ = ["Difference", "Report", "compare"]


@dataclasses.dataclass(frozen=True)
class Difference:
    """One value (or one structural fact) that differs beyond the tolerance."""

    file: str
    where: str
    committed: Any
    new: Any

    def __str__(self) -> str:
        return f"{self.file} {self.where}: committed {self.committed!r}, rerun {self.new!r}"


@dataclasses.dataclass
class Report:
    """What :func:`compare` found: the files and numbers compared, the largest difference over all of them (and
    where it is), how many numbers lie beyond the tolerance, and every difference beyond it (numbers, text and
    structure)."""

    tolerance: Tolerance
    files: int = 0
    values: int = 0
    largest: float = 0.0
    largest_at: str = ""
    numbers_beyond: int = 0
    differences: list[Difference] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences

    def summary(self) -> str:
        at = f" ({self.largest_at})" if self.largest_at else ""
        head = (
            f"{self.files} files, {self.values} numbers compared; largest difference {self.largest:.3g}{at}; "
            f"{self.numbers_beyond} numbers beyond the tolerance, {self.tolerance}"
        )
        if self.ok:
            return f"equal within tolerance: {head}"
        shown = "\n  ".join(map(str, self.differences[:20]))
        more = f"\n  … and {len(self.differences) - 20} more" if len(self.differences) > 20 else ""
        return f"{len(self.differences)} differences beyond tolerance ({head}):\n  {shown}{more}"


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _values(report: Report, file: str, where: str, old: Any, new: Any) -> None:
    """Compare two JSON-like values recursively into ``report``."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new), key=str):
            if k not in old or k not in new:
                report.differences.append(
                    Difference(file, f"{where}[{k!r}]", old.get(k, "<absent>"), new.get(k, "<absent>"))
                )
            elif not report.tolerance.ignores(str(k)):
                _values(report, file, f"{where}[{k!r}]", old[k], new[k])
        return
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            report.differences.append(Difference(file, f"{where} length", len(old), len(new)))
            return
        for i, (a, b) in enumerate(zip(old, new)):
            _values(report, file, f"{where}[{i}]", a, b)
        return
    a, b = _number(old), _number(new)
    if a is None or b is None:
        if old != new and not (old in ("", None) and new in ("", None)):
            report.differences.append(Difference(file, where, old, new))
        return
    report.values += 1
    if math.isnan(a) or math.isnan(b):
        if math.isnan(a) != math.isnan(b):
            report.numbers_beyond += 1
            report.differences.append(Difference(file, where, old, new))
        return
    gap = abs(a - b)
    if gap > report.largest:
        report.largest, report.largest_at = gap, f"{file} {where}"
    if gap > report.tolerance.atol + report.tolerance.rtol * abs(a):
        report.numbers_beyond += 1
        report.differences.append(Difference(file, where, old, new))


def _table(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    import csv

    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _tables(folder: Path) -> set[str]:
    """The table files under ``folder`` (``*.csv`` and ``*.json`` at any depth, not ``provenance.json``), as
    paths relative to it."""
    return {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.suffix in (".csv", ".json") and p.is_file() and p.relative_to(folder).as_posix() != "provenance.json"
    }


def _json(path: Path, name: str) -> Any:
    """A table's JSON (:func:`scp.io.read_json`: bounded depth); a table's own ``provenance`` entry is left out."""
    from scp.io import read_json

    doc = read_json(path, f"{path.parent.name}/{name}", expect=None)
    if name != "records.json" and isinstance(doc, dict):
        doc = {k: v for k, v in doc.items() if k != "provenance"}
    return doc


def compare(committed: Path, rerun: Path, tolerance: Tolerance) -> Report:
    """Compare ``committed`` (``results/NAME``) with ``rerun`` (the same folder of a scratch run)."""
    report = Report(tolerance)
    committed, rerun = Path(committed), Path(rerun)
    old_files, new_files = _tables(committed), _tables(rerun)
    for name in sorted(old_files ^ new_files):
        report.differences.append(
            Difference(
                name, "file", "present" if name in old_files else "absent", "present" if name in new_files else "absent"
            )
        )
    for name in sorted(old_files & new_files):
        report.files += 1
        if name.endswith(".json"):
            _values(report, name, "", _json(committed / name, name), _json(rerun / name, name))
            continue
        (old_cols, old_rows), (new_cols, new_rows) = _table(committed / name), _table(rerun / name)
        if old_cols != new_cols:
            report.differences.append(Difference(name, "columns", old_cols, new_cols))
            continue
        if len(old_rows) != len(new_rows):
            report.differences.append(Difference(name, "rows", len(old_rows), len(new_rows)))
            continue
        for i, (a, b) in enumerate(zip(old_rows, new_rows)):
            for col in old_cols:
                if not tolerance.ignores(col):
                    _values(report, name, f"row {i} {col}", a[col], b[col])
    return report
