"""Every number a notebook's text quotes, found in what its last full run recorded (the markdown-number check).

:func:`quoted_numbers` reads the numbers of a markdown cell: decimals, integers with thousands separators,
scientific notation (``1.5e-11``, ``10⁻⁹``), percentages and ratios (``1.70×``), with a minus sign or ``−``.  It
skips what is no measured number: section numbers at the start of a heading, references to the paper (``Table
19``, ``Fig. 3a``, ``Theorem 3.1``, ``§4``), notebook numbers (``notebook 02``), years after ``et al.``, model
names (``MiniLM-L6-v2``, ``SmolLM2-135M``), citation years (``Shapley (1953)``), and anything inside backticks
(code, file names).

:func:`unmatched` returns the quoted numbers that none of the notebook's values gives at the printed precision: a
number printed with *d* decimals matches a value *v* when *v* rounded to *d* decimals equals it (also ``|v|``,
and ``100·v`` for a percentage); an integer matches an integral value or a value that rounds to it.  The values
are every number in ``results/NAME/records.json`` and the CSV tables beside it, the notebook's parameters, and a
notebook's listed constants (the paper's printed numbers and similar, each with a comment, in
``tests/quoted_constants.yaml``).  Integers from 0 to 10 are always allowed: they count things (seeds, datasets,
haystacks) far more often than they report a measurement.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "CLAIMS_HEADING",
    "Claim",
    "Quoted",
    "VERDICTS",
    "paper_claims",
    "quoted_numbers",
    "unmatched",
    "values_of",
    "verdict_of",
]

SMALL_INTEGERS = range(11)

_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_NUMBER = re.compile(
    r"(?<![\w.@/])(?P<sign>[−\-+]?)(?P<body>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?P<exp>[eE][−\-+]?\d+|\s?[×x·]\s?10(?P<sup>[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+))?"
    r"(?P<unit>\s?%|×)?(?!\w|[.,]\d)"
)
_POWER = re.compile(r"(?<![\w.×x·]\s)(?<![\w.×x·])10(?P<sup>[⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)")
_REFERENCE = re.compile(
    r"(?:Tables?|Figs?\.|Figures?|Theorems?|Lemmas?|Propositions?|Corollary|Eqs?\.|Equations?|Sections?|Appendix|"
    r"Algorithm|§|notebooks?|step|cells?)\s*(?:\d+[a-z]?(?:[.–\-]\d+[a-z]?)?(?:,\s*|\s*(?:and|or|–)\s*)?)*$",
    re.IGNORECASE,
)


@dataclasses.dataclass(frozen=True)
class Quoted:
    """A number as printed: its value, its decimals, whether it is a percentage, and the text around it."""

    value: float
    decimals: int
    percent: bool
    text: str
    context: str

    def __str__(self) -> str:
        return f"{self.text!r} in “…{self.context}…”"


def _strip(markdown: str) -> str:
    """The markdown with code spans, links' targets, HTML tags and heading numbers blanked out."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.DOTALL)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "] ", text)
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"^(#+\s*)\d+(\.\d+)*", r"\1", text, flags=re.MULTILINE)
    text = re.sub(r"\bet al\.,?\s*\(?\d{4}\)?", "et al.", text)
    text = re.sub(r"\((?:19|20)\d{2}[a-z]?\)", " ", text)  # a citation's year: Shapley (1953)
    # names with a digit: MiniLM-L6-v2, SmolLM2-135M, top-1, float64, L2 (a letter first, so 1.5e-11 stays)
    text = re.sub(r"(?<![\w.])[A-Za-z]\w*(?:-\w+)*", lambda m: " " if re.search(r"\d", m[0]) else m[0], text)
    return text


def quoted_numbers(markdown: str) -> Iterator[Quoted]:
    """The measured-looking numbers of one markdown cell (see the module docstring for what is skipped)."""
    text = _strip(markdown)
    for m in _POWER.finditer(text):  # 10⁻⁹ standing alone
        power = int(m["sup"].translate(_SUPERSCRIPT))
        context = text[max(0, m.start() - 30) : m.end() + 10].replace("\n", " ")
        yield Quoted(10.0**power, max(0, -power), False, m.group(0), context)
    text = _POWER.sub(" ", text)
    for m in _NUMBER.finditer(text):
        before = text[max(0, m.start() - 40) : m.start()]
        if _REFERENCE.search(before):
            continue
        body = m["body"].replace(",", "")
        decimals = len(body.partition(".")[2])
        value = float(body)
        if m["exp"]:
            power = m["exp"][1:] if m["exp"][0] in "eE" else m["sup"].translate(_SUPERSCRIPT)
            value *= 10 ** int(power.replace("−", "-"))
            digits = len(body.partition(".")[2])
            decimals = max(0, digits - int(power.replace("−", "-")))
        if m["sign"] in "−-" and m["sign"]:
            value = -value
        context = text[max(0, m.start() - 30) : m.end() + 10].replace("\n", " ")
        yield Quoted(value, decimals, bool(m["unit"] and "%" in m["unit"]), m.group(0).strip(), context)


def _numbers(obj: Any) -> Iterator[float]:
    if isinstance(obj, bool):
        return
    if isinstance(obj, (int, float)):
        if math.isfinite(obj):
            yield float(obj)
    elif isinstance(obj, str):
        if obj.startswith("["):  # a table cell holding a list, e.g. a CI "[0.93, 0.96]"
            try:
                yield from _numbers(json.loads(obj))
            except ValueError:
                pass
            return
        try:
            value = float(obj)
        except ValueError:
            return
        if math.isfinite(value):
            yield value
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _numbers(v)


def values_of(results: Path, parameters: dict[str, Any] | None = None, constants: Iterable[float] = ()) -> list[float]:
    """Every number of ``results/NAME`` (``records.json`` and the CSV tables), the parameters and constants."""
    values: list[float] = list(_numbers(parameters or {})) + [float(c) for c in constants]
    records = results / "records.json"
    if records.is_file():
        values += _numbers(json.loads(records.read_text(encoding="utf-8")))
    for table in sorted(results.glob("*.csv")):
        with table.open(newline="", encoding="utf-8") as f:
            for row in csv.reader(f):
                values += _numbers(row)
    return values


def _matches(q: Quoted, values: Iterable[float]) -> bool:
    if q.decimals == 0 and q.value.is_integer() and abs(q.value) in SMALL_INTEGERS:
        return True
    scale = 10.0**q.decimals
    targets = {round(q.value * scale), round(abs(q.value) * scale)}
    for v in values:
        for candidate in (v, abs(v), 100 * v, 100 * abs(v)) if q.percent else (v, abs(v)):
            # round half away from zero at the printed precision, with a little slack for binary floats
            if round(candidate * scale + (1e-9 if candidate >= 0 else -1e-9)) in targets:
                return True
    return False


def unmatched(markdown: str, values: list[float]) -> list[Quoted]:
    """The numbers of ``markdown`` that no value gives at the printed precision."""
    return [q for q in quoted_numbers(markdown) if not _matches(q, values)]


# ------------------------------------------------------------------------------------------- the paper's claims

CLAIMS_HEADING = "## The paper's claims"
"""The heading of the markdown cell that confronts the paper's claims with this notebook's numbers."""

VERDICTS = ("reproduced", "not reproduced", "not tested here")
"""What a claim's verdict may say (``not tested here`` is followed by ``: why``)."""

_QUOTE = re.compile(r'^\s*(?:"[^"]+"|“[^”]+”)')


@dataclasses.dataclass(frozen=True)
class Claim:
    """One row of a notebook's claims table: the paper's words (quoted), where the paper says it, our number(s)
    and the verdict."""

    claim: str
    where: str
    ours: str
    verdict: str


def _cells(row: str) -> list[str]:
    """The cells of a markdown table row (``|`` inside backticks or math is no separator)."""
    cells, depth, current = [], {"`": False, "$": False}, ""
    for ch in row.strip().strip("|"):
        if ch in depth:
            depth[ch] = not depth[ch]
        if ch == "|" and not any(depth.values()):
            cells.append(current.strip())
            current = ""
        else:
            current += ch
    return [*cells, current.strip()]


def paper_claims(notebook: Path) -> list[Claim]:
    """The rows of the table under :data:`CLAIMS_HEADING` in ``notebook``'s markdown (none: ``[]``).

    Raises:
        DataFormatError: a row without four cells, a claim not in double quotes (the paper's own words), an empty
            ``where`` or ``ours``, or a verdict other than :data:`VERDICTS` (``not tested here`` needs ``: why``).
    """
    from scp.errors import DataFormatError
    from scp.io import read_json

    claims: list[Claim] = []
    for cell in read_json(notebook, f"notebook {notebook.name}").get("cells", []):
        text = "".join(cell.get("source", ""))
        if cell.get("cell_type") != "markdown" or not text.lstrip().startswith(CLAIMS_HEADING):
            continue
        rows = [line for line in text.splitlines() if line.lstrip().startswith("|")][2:]  # past header, rule
        for row in rows:
            cells = _cells(row)
            where = f"{notebook.name}, claims row {len(claims) + 1}"
            if len(cells) != 4:
                raise DataFormatError(f"{where}: {len(cells)} cells, not claim | where | ours | verdict")
            claim = Claim(*cells)
            if not _QUOTE.match(claim.claim):
                raise DataFormatError(f"{where}: the claim is not quoted in the paper's words: {claim.claim[:60]}")
            if not claim.where or not claim.ours:
                raise DataFormatError(f"{where}: says neither where the paper claims it nor what we measured")
            verdict = claim.verdict.strip("*_ ")
            if not (verdict in VERDICTS[:2] or re.fullmatch(r"not tested here:\s*\S.*", verdict)):
                raise DataFormatError(f"{where}: verdict {claim.verdict!r} is none of {', '.join(VERDICTS)}")
            claims.append(claim)
    return claims


def verdict_of(claim: Claim) -> str:
    """The claim's verdict without its reason: one of :data:`VERDICTS`."""
    return claim.verdict.strip("*_ ").split(":")[0]
