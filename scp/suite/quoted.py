"""Every number a notebook's text quotes, found in what its last full run recorded (the markdown-number check).

:func:`quoted_numbers` reads the numbers of a markdown cell: decimals, integers with thousands separators,
scientific notation (``1.5e-11``, ``10⁻⁹``), percentages and ratios (``1.70×``), with a minus sign or ``−``.  It
skips what is no measured number: section numbers at the start of a heading, references to the paper (``Table
19``, ``Fig. 3a``, ``Theorem 3.1``, ``§4``), notebook numbers (``notebook 02``), years after ``et al.``, model
names (``MiniLM-L6-v2``, ``SmolLM2-135M``), citation years (``Shapley (1953)``), anything inside backticks
(code, file names), and in a claims table (:data:`CLAIMS_HEADING`) the paper's quoted words and the ``n`` that would
decide an inconclusive claim (both checked by other means: :func:`find_quote`, :func:`n_to_decide`).

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
    "PAPER",
    "PAPERS",
    "Quoted",
    "VERDICTS",
    "claims_of",
    "find_quote",
    "misquotes",
    "n_to_decide",
    "normalise",
    "paper_claims",
    "tally",
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


def _paper_words(markdown: str) -> str:
    """A claims cell (:data:`CLAIMS_HEADING`) with the paper's quoted words in the first cell of each row blanked
    out (``tests/test_claims.py`` finds them in the paper's text instead), and the ``n`` an inconclusive verdict
    says would decide (:func:`claims_of` recomputes it from the interval beside it)."""
    if not markdown.lstrip().startswith(CLAIMS_HEADING):
        return markdown
    lines = []
    for line in markdown.splitlines():
        if line.lstrip().startswith("|"):
            body = line.lstrip()[1:]
            first, bar, rest = body.partition("|")
            line = "|" + _QUOTED.sub(" ", first) + bar + rest
        lines.append(_DECIDES.sub(r"\1 \2", line))
    return "\n".join(lines)


def _strip(markdown: str) -> str:
    """The markdown with code spans, links' targets, HTML tags, heading numbers and a claims table's quotes of the
    paper blanked out."""
    text = re.sub(r"```.*?```", " ", _paper_words(markdown), flags=re.DOTALL)
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

VERDICTS = ("reproduced", "contradicted", "inconclusive", "not tested here")
"""What a claim's verdict may say: *reproduced* (our interval supports the claim), *contradicted* (our interval
excludes it), *inconclusive* (our interval holds both; the verdict gives the estimate, its interval, its ``n`` and the
``n`` that would decide, see :func:`n_to_decide`: ``inconclusive: EST [LOW, HIGH] at n = N; n ≈ M would decide``, the
interval of a difference around 0, or ``… [LOW, HIGH] against R at n = N; …`` around a value ``R``, the paper's or
another method's), *not tested here* (followed by ``: why``)."""

PAPERS = {"11_maxshapley": "maxshapley-paper.txt", "12_entropic_context_shaping": "ecs-paper.txt"}
"""The paper a notebook's claims quote, by notebook (file names of ``../shared/paper``); every other notebook quotes
the SCP paper, :data:`PAPER`."""
PAPER = "scp-paper.txt"

_QUOTE = re.compile(r'^\s*(?:"[^"]+"|“[^”]+”)')
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”')
_NUM = r"[−\-+]?\d+(?:\.\d+)?"
_INCONCLUSIVE = re.compile(
    rf"inconclusive:\s*(?P<est>{_NUM})\s*\[(?P<low>{_NUM}),\s*(?P<high>{_NUM})\]\s*(?:against\s+(?P<ref>{_NUM})\s*)?"
    rf"at\s*\$?n\$?\s*=\s*(?P<n>[\d,]+)"
    rf"[^;]*;\s*(?:\$?n\$?\s*≈\s*(?P<need>[\d,]+)\s+would decide|(?P<never>no \$?n\$? would decide)).*",
    re.DOTALL,
)
_DECIDES = re.compile(r"(\$?n\$?\s*≈\s*)[\d,]+(\s+would decide)")
_INTERVAL = re.compile(rf"\[\s*{_NUM}\s*,\s*{_NUM}\s*\]")


@dataclasses.dataclass(frozen=True)
class Claim:
    """One row of a notebook's claims table: the paper's words (quoted), where the paper says it, our number(s)
    and the verdict."""

    claim: str
    where: str
    ours: str
    verdict: str

    def quotes(self) -> list[str]:
        """The paper's words in the claim cell: every passage in double quotes ("…" or “…”)."""
        return [a or b for a, b in _QUOTED.findall(self.claim)]


def _float(text: str) -> float:
    return float(text.replace("−", "-").replace(",", ""))


def n_to_decide(estimate: float, low: float, high: float, n: int) -> int | None:
    """The sample size at which an interval ``[low, high]`` around ``estimate``, measured on ``n``, would exclude 0,
    if its width shrinks as 1/√n and the estimate stays: ``n · ((estimate − bound) / estimate)²`` with the bound on
    the side of 0, rounded up.  None when the estimate is 0 (no ``n`` decides) and ``n`` when the interval already
    excludes 0."""
    if estimate == 0:
        return None
    bound = low if estimate > 0 else high
    if (estimate > 0 and bound > 0) or (estimate < 0 and bound < 0):
        return n
    return math.ceil(n * ((estimate - bound) / estimate) ** 2)


def _check_inconclusive(verdict: str, where: str) -> None:
    from scp.errors import DataFormatError

    m = _INCONCLUSIVE.fullmatch(verdict)
    if not m:
        raise DataFormatError(
            f"{where}: an inconclusive verdict reads 'inconclusive: EST [LOW, HIGH] at n = N; n ≈ M would decide' "
            f"(or '…; no n would decide' for an estimate of 0), not {verdict!r}"
        )
    ref = _float(m["ref"]) if m["ref"] else 0.0
    est, low, high = (round(_float(m[k]) - ref, 12) for k in ("est", "low", "high"))
    n = int(_float(m["n"]))
    if not low <= est <= high or low > 0 or high < 0:
        raise DataFormatError(
            f"{where}: {m['est']} [{m['low']}, {m['high']}] is no interval holding both sides of {m['ref'] or 0}"
        )
    need = n_to_decide(est, low, high, n)
    if m["never"]:
        if need is not None:
            raise DataFormatError(f"{where}: the estimate is not 0, so some n would decide (about {need})")
        return
    if need is None:
        raise DataFormatError(f"{where}: an estimate of 0 is decided by no n; say 'no n would decide'")
    stated = int(_float(m["need"]))
    if abs(stated - need) > 0.1 * need + 1:
        raise DataFormatError(f"{where}: n ≈ {stated} would decide, but the interval says about {need}")


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


def claims_of(cells: Iterable[dict], name: str = "notebook") -> list[Claim]:
    """The rows of the table under :data:`CLAIMS_HEADING` among a notebook's ``cells`` (none: ``[]``).

    Raises:
        DataFormatError: a row without four cells, a claim not in double quotes (the paper's own words), an empty
            ``where`` or ``ours``, a verdict other than :data:`VERDICTS` (``not tested here`` needs ``: why``), a
            reproduced or contradicted claim without an interval (or ``no CI`` and why), or an inconclusive verdict
            without the ``n`` that would decide, or with one its interval does not give (:func:`n_to_decide`).
    """
    from scp.errors import DataFormatError

    claims: list[Claim] = []
    for cell in cells:
        text = "".join(cell.get("source", ""))
        if cell.get("cell_type") != "markdown" or not text.lstrip().startswith(CLAIMS_HEADING):
            continue
        rows = [line for line in text.splitlines() if line.lstrip().startswith("|")][2:]  # past header, rule
        for row in rows:
            cells_ = _cells(row)
            where = f"{name}, claims row {len(claims) + 1}"
            if len(cells_) != 4:
                raise DataFormatError(f"{where}: {len(cells_)} cells, not claim | where | ours | verdict")
            claim = Claim(*cells_)
            if not _QUOTE.match(claim.claim):
                raise DataFormatError(f"{where}: the claim is not quoted in the paper's words: {claim.claim[:60]}")
            if not claim.where or not claim.ours:
                raise DataFormatError(f"{where}: says neither where the paper claims it nor what we measured")
            verdict = claim.verdict.strip("*_ ")
            kind = verdict.split(":")[0].strip()
            if kind == "inconclusive":
                _check_inconclusive(verdict, where)
            elif kind in VERDICTS[:2]:
                if verdict != kind:
                    raise DataFormatError(f"{where}: verdict {claim.verdict!r} is none of {', '.join(VERDICTS)}")
                if not (_INTERVAL.search(claim.ours) or "no CI" in claim.ours):
                    raise DataFormatError(f"{where}: a {kind} claim gives our interval, or says 'no CI' and why")
            elif not re.fullmatch(r"not tested here:\s*\S.*", verdict):
                raise DataFormatError(f"{where}: verdict {claim.verdict!r} is none of {', '.join(VERDICTS)}")
            claims.append(claim)
    return claims


def paper_claims(notebook: Path) -> list[Claim]:
    """The rows of the table under :data:`CLAIMS_HEADING` in ``notebook``'s markdown (none: ``[]``), checked as
    :func:`claims_of` says."""
    from scp.io import read_json

    return claims_of(read_json(notebook, f"notebook {notebook.name}").get("cells", []), notebook.name)


def verdict_of(claim: Claim) -> str:
    """The claim's verdict without its reason: one of :data:`VERDICTS`."""
    return claim.verdict.strip("*_ ").split(":")[0].strip()


# ------------------------------------------------------------------------------------ the paper's words, found

_LINK = re.compile(r"\[([^\]]*)\]\([^)\s]*\)")
_LATEX_AFTER_MATH = re.compile(r"\\\\[A-Za-z]+")
_MARKDOWN_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_ELISION = re.compile(r"\s*(?:\[…\]|…)\s*")


def normalise(text: str) -> str:
    """Text as compared with the paper: without whitespace (the paper's text file loses the space around every
    inline element: ``defaultM=50``), without its links' targets (``Table[20](https://…)`` reads ``Table20``), without
    the markdown escapes of its punctuation (``Monte\\-Carlo``) and
    without the LaTeX source it repeats after a rendered formula (``a∼\\\\sim3%``).  Words and characters are
    compared as they are: a changed word, letter, digit or symbol is a misquote."""
    text = _LINK.sub(r"\1", text)
    text = _LATEX_AFTER_MATH.sub("", text)
    text = _MARKDOWN_ESCAPE.sub(r"\1", text)
    return re.sub(r"\s+", "", text)


def find_quote(quote: str, paper: str) -> bool:
    """Whether ``quote`` is the paper's words: each of its parts (split at an elision "…") occurs in ``paper``,
    in order, after :func:`normalise`."""
    text, at = normalise(paper), 0
    for part in _ELISION.split(quote):
        part = normalise(part)
        if not part:
            continue
        found = text.find(part, at)
        if found < 0:
            return False
        at = found + len(part)
    return True


def misquotes(claims: Iterable[Claim], paper: str) -> list[str]:
    """The quoted passages of ``claims`` that are not the words of ``paper`` (:func:`find_quote`)."""
    return [quote for claim in claims for quote in claim.quotes() if not find_quote(quote, paper)]


def tally(claims: Iterable[Claim]) -> dict[str, int]:
    """Claims per verdict, in the order of :data:`VERDICTS`."""
    counts = dict.fromkeys(VERDICTS, 0)
    for claim in claims:
        counts[verdict_of(claim)] += 1
    return counts
