"""Rule-based sentence splitting and the word tokenizer shared by BM25 and token counts.

:func:`split_sentences` is deterministic and dependency-free.  The choices it makes:

* A blank line (two newlines, possibly with spaces between) always ends a sentence; any other run of
  whitespace, single newlines included, is collapsed to one space.
* A sentence ends after ``.``, ``!``, ``?``, a run of them (``?!``, ``...``) or ``…``, optionally
  followed by closing quotes or brackets (``"Stop."`` / ``(see above.)``), *when* whitespace follows
  and the next word starts with an upper-case letter or a digit (possibly behind opening quotes or
  brackets).  So ``wait... what`` stays one sentence and ``He paused... Then`` is two.
* A single ``.`` does not end a sentence after a known abbreviation (titles such as ``Mr.``/``Dr.``/
  ``St.``, months such as ``Jan.``, ``vs.``, ``cf.``, ``et al.``), after a single letter (initials:
  ``J. R. R. Tolkien``), or after a dotted acronym (``U.S.``, ``e.g.``, ``i.e.``, ``a.m.``); ``No.``,
  ``Vol.``, ``p.``, ``Fig.`` and the like only when a number follows.  The price: a sentence that
  really ends in ``U.S.`` or an initial is joined to the next one.  ``etc.``, ``Inc.`` and ``Jr.``
  are ordinary words (they end a sentence when a capitalised word follows).
* Decimals and amounts (``3.14``, ``$1.5``) never split, since no whitespace follows their dot.
* A sentence that is blank (:func:`is_blank`: only whitespace and invisible characters such as U+200B) is
  dropped, like an empty one.

:func:`is_blank` is the one definition of an *empty* text in ``scp``: every check that a unit, sentence,
question or answer is non-empty uses it, so ``""``, ``"   "`` and ``"\\u200b"`` are refused (or dropped) alike.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence, Set
from typing import Any

WORD_TOKENIZER = "regex-words"
"""Name of the tokenizer implemented by :func:`word_tokens` (recorded with results)."""

_ABBREVIATIONS = frozenset(
    """mr mrs ms messrs dr prof rev gen col capt cpt lt sgt maj cmdr adm gov sen rep hon pres supt
    st ste mt ft jan feb mar apr jun jul aug sep sept oct nov dec vs cf al approx ca est dept univ
    assn bros""".split()
)
_NUMERIC_ABBREVIATIONS = frozenset("no nos vol vols p pp fig figs art sec ch eq ref op".split())

_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")
_SPACES = re.compile(r"\s+")
_BOUNDARY = re.compile(r"""(?P<punct>[.!?]+|…)["'”’»)\]]*(?= (?P<next>["'“‘«(\[]*[A-Z0-9]))""")
_OPENERS = "\"'“‘«(["
_DOTTED_ACRONYM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
_WORD = re.compile(r"\w+")
INVISIBLE_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})
"""Unicode categories that show nothing: space, line and paragraph separators, control and format characters
(U+200B zero-width space, U+200C/D joiners, U+2060 word joiner, U+FEFF byte-order mark, soft hyphen, …)."""


def as_text_list(value: Any, name: str = "texts", item: str | None = None) -> list[str]:
    """``value`` (a list, tuple or other ordered sequence of ``str``, or a 1-d numpy array of them) as a list.

    A ``str`` (``list("abc")`` is its letters), bytes, a dict (``list(d)`` is its keys), a set (no order) or any
    other non-sequence, and any item that is not a ``str``, is an :class:`~scp.errors.InputTypeError` naming
    ``name`` (and a bad item as ``name[i]``, or ``item i`` where ``item`` is given): the one check of a list of
    texts for every public entry point."""
    from scp.errors import InputTypeError

    if getattr(value, "ndim", None) == 1 and hasattr(value, "tolist"):  # a 1-d numpy array
        value = value.tolist()
    if isinstance(value, (str, bytes)):
        raise InputTypeError(
            f"{name} must be a list or tuple of str (one per unit), not a {type(value).__name__}: a "
            "single string would be read letter by letter"
        )
    if isinstance(value, (Mapping, Set)) or not isinstance(value, Sequence):
        raise InputTypeError(f"{name} must be a list or tuple of str (one per unit), not a {type(value).__name__}")
    out = list(value)
    bad = next((i for i, item in enumerate(out) if not isinstance(item, str)), None)
    if bad is not None:
        where = f"{name}[{bad}]" if item is None else f"{item} {bad}"
        raise InputTypeError(
            f"{name} must be a list or tuple of str; {where} is a {type(out[bad]).__name__}: {out[bad]!r}"
        )
    return out


def is_blank(text: str) -> bool:
    """Whether ``text`` shows nothing: it is empty or holds only whitespace and invisible characters
    (:data:`INVISIBLE_CATEGORIES`).  The one definition of "empty" for units, sentences, questions and answers."""
    return not any(not ch.isspace() and unicodedata.category(ch) not in INVISIBLE_CATEGORIES for ch in text)


def _is_abbreviation(word: str, next_token: str) -> bool:
    """Whether ``word`` followed by a single dot (and then ``next_token``) is not a sentence end."""
    word = word.lstrip(_OPENERS)
    lower = word.lower()
    if lower in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()) or _DOTTED_ACRONYM.fullmatch(word):
        return True
    return lower in _NUMERIC_ABBREVIATIONS and next_token.lstrip(_OPENERS)[:1].isdigit()


def _split_block(block: str) -> list[str]:
    sentences, start = [], 0
    for match in _BOUNDARY.finditer(block):
        if match.group("punct") == ".":
            word = block[block.rfind(" ", 0, match.start()) + 1 : match.start()]
            if _is_abbreviation(word, match.group("next")):
                continue
        sentences.append(block[start : match.end()].strip())
        start = match.end()
    sentences.append(block[start:].strip())
    return [s for s in sentences if not is_blank(s)]


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (see the module docstring for the rules); never returns empty or blank
    strings (:func:`is_blank`)."""
    sentences: list[str] = []
    for block in _BLANK_LINE.split(text):
        sentences.extend(_split_block(_SPACES.sub(" ", block).strip()))
    return sentences


def word_tokens(text: str) -> list[str]:
    """Lower-cased ``\\w+`` runs: the ``"regex-words"`` tokenizer used for BM25 and token counts."""
    return _WORD.findall(text.lower())
