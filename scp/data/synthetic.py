"""Synthetic contexts with known evidence: needle-in-a-haystack (in RULER's spirit) and redundancy.

* :func:`make_niah` hides 1+ needles "The special magic number for <key> is <value>." (label 1) at a
  requested depth in a haystack of label-0 filler sentences; :func:`niah_grid` sweeps lengths,
  depths and needle counts.
* :func:`make_redundancy` duplicates the supporting units of an example in rule-based paraphrase;
  :func:`dose_protocol_example` is a hand-written clinical case where the key dosing sentence
  appears twice.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from scp.data.datasets import Example
from scp.data.text import is_blank, split_sentences
from scp.errors import InputError, MissingFileError

# --------------------------------------------------------------------------- needle in a haystack

_KEY_ADJECTIVES = """amber brisk cobalt dusky eager fabled gilded hollow ivory jaunty keen lucid
    mellow nimble opal placid quaint russet silent tawny umber velvet wistful zesty""".split()
_KEY_NOUNS = """anchor badger canyon dynamo ember falcon glacier harbor igloo jackal kettle lagoon
    marble nectar orchid pepper quarry raven saddle tundra urchin violin walrus zephyr""".split()

_NOISE_NOUNS = """grass sky sun moon river meadow hill cloud stone forest road garden valley breeze
    field lake path tree bird wind rain shore bridge village""".split()
_NOISE_ADJECTIVES = """green blue yellow quiet gentle wide tall calm bright old small warm soft
    distant narrow steady pale""".split()
_NOISE_VERBS = """rests waits lies stands drifts turns shines sleeps glows leans""".split()
_NOISE_PREPOSITIONS = """near beside behind under above beyond across along""".split()
_NOISE_ADVERBS = """Slowly Quietly Again Meanwhile Later Still Today Often""".split()
_NOISE_TEMPLATES = (
    "The {n1} is {a1}.",
    "The {a1} {n1} {v} {p} the {n2}.",
    "{adv}, the {n1} {v} {p} the {a2} {n2}.",
    "The {n1} is {a1} and the {n2} is {a2}.",
    "Here we go, past the {a1} {n1} and there and back again.",
)

NEEDLE_TEMPLATE = "The special magic number for {key} is {value}."
_NEEDLE_MARKER = "magic number"


def noise_sentences(count: int, rng: random.Random) -> list[str]:
    """``count`` filler sentences from a small template grammar; they contain no digits."""
    out = []
    for _ in range(count):
        n1, n2 = rng.sample(_NOISE_NOUNS, 2)
        a1, a2 = rng.sample(_NOISE_ADJECTIVES, 2)
        template = rng.choice(_NOISE_TEMPLATES)
        verb, prep, adv = rng.choice(_NOISE_VERBS), rng.choice(_NOISE_PREPOSITIONS), rng.choice(_NOISE_ADVERBS)
        out.append(template.format(n1=n1, n2=n2, a1=a1, a2=a2, v=verb, p=prep, adv=adv))
    return out


def needle_indices(n_sentences: int, depth: float, n_needles: int) -> list[int]:
    """Where the needles go.

    One needle sits at ``round(depth * (n - 1))``.  ``m > 1`` needles form an arithmetic progression
    with gap ``g = max(1, (n - 1) // (4 (m - 1)))`` (so they span at most about a quarter of the
    context), starting ``(m - 1) g // 2`` before that centre and shifted as a block to fit in
    ``[0, n - 1]``.
    """
    if not 0.0 <= depth <= 1.0:
        raise InputError(f"depth must lie in [0, 1], not {depth}")
    if not 1 <= n_needles <= n_sentences:
        raise InputError(f"need 1 <= n_needles <= n_sentences; got {n_needles} needles for {n_sentences} sentences")
    centre = round(depth * (n_sentences - 1))
    gap = 1 if n_needles == 1 else max(1, (n_sentences - 1) // (4 * (n_needles - 1)))
    span = (n_needles - 1) * gap
    start = min(max(centre - span // 2, 0), n_sentences - 1 - span)
    return [start + j * gap for j in range(n_needles)]


def _haystack_pool(
    haystack: str | os.PathLike[str] | Sequence[str], examples: Sequence[Example] | None
) -> tuple[str, list[str]]:
    """(kind, candidate sentences) for a real-text haystack; sentences mentioning a magic number are dropped."""
    if isinstance(haystack, str) and haystack == "distractors":
        if not examples:
            raise InputError(
                "haystack='distractors' needs examples=... (e.g. scp.data.datasets.load_dataset('hotpotqa'))"
            )
        kind = "distractors"
        pool = [unit for ex in examples for unit, label in zip(ex.units, ex.labels) if label == 0]
    elif isinstance(haystack, (str, os.PathLike)):
        path = Path(haystack)
        if not path.is_file():
            raise MissingFileError(
                f"haystack must be 'noise', 'distractors', a text file or a list of sentences; {path} is no file"
            )
        kind, pool = f"file:{path.name}", split_sentences(path.read_text(encoding="utf-8"))
    else:
        kind, pool = "list", [s.strip() for s in haystack if not is_blank(s)]
    pool = [s for s in dict.fromkeys(pool) if _NEEDLE_MARKER not in s.lower()]
    return kind, pool


def _draw_keys_values(n: int, forbidden_text: str, rng: random.Random) -> tuple[list[str], list[str]]:
    """``n`` distinct keys (adjective-noun) and 7-digit values, none occurring in ``forbidden_text``.

    No key is a substring of another; values all have 7 digits, so none is part of another.
    """
    candidates = [key for a in _KEY_ADJECTIVES for b in _KEY_NOUNS if (key := f"{a}-{b}") not in forbidden_text]
    keys: list[str] = []
    for key in rng.sample(candidates, len(candidates)):
        if len(keys) == n:
            break
        if not any(key in k or k in key for k in keys):
            keys.append(key)
    values: list[str] = []
    for _ in range(10_000 * n):
        if len(values) == n:
            break
        value = str(rng.randrange(1_000_000, 10_000_000))
        if value not in forbidden_text and value not in values:
            values.append(value)
    if len(keys) < n or len(values) < n:
        raise RuntimeError(f"could not draw {n} keys and values that the haystack does not contain")
    return keys, values


def make_niah(
    n_sentences: int,
    depth: float,
    n_needles: int = 1,
    haystack: str | os.PathLike[str] | Sequence[str] = "noise",
    seed: int = 0,
    examples: Sequence[Example] | None = None,
) -> Example:
    """A needle-in-a-haystack :class:`Example` of exactly ``n_sentences`` units.

    ``haystack``: ``"noise"`` (seeded template grammar, no digits), ``"distractors"`` (label-0 units
    of ``examples``, sampled without replacement), a path to a text file (split into sentences) or a
    list of sentences (used as given); a file or list gives a contiguous window from a seeded offset,
    wrapping around.  Real-text pools drop sentences mentioning a "magic number" and must hold
    ``n_sentences - n_needles`` sentences.  Needles go to :func:`needle_indices`.  Keys and values
    are drawn so that no haystack sentence contains any key or value: the query is answerable only
    from the needles.  ``answers`` are the values in needle order; ``meta`` records ``depth``,
    ``needle_indices``, ``keys``, ``values`` and ``haystack``.
    """
    positions = needle_indices(n_sentences, depth, n_needles)
    rng = random.Random(seed)
    n_fill = n_sentences - n_needles
    if isinstance(haystack, str) and haystack == "noise":
        kind, filler = "noise", noise_sentences(n_fill, rng)
    else:
        kind, pool = _haystack_pool(haystack, examples)
        if len(pool) < n_fill:
            raise InputError(f"haystack {kind!r} has {len(pool)} usable sentences; {n_fill} are needed")
        if kind == "distractors":
            filler = rng.sample(pool, n_fill)
        else:
            offset = rng.randrange(len(pool))
            filler = [pool[(offset + i) % len(pool)] for i in range(n_fill)]
    keys, values = _draw_keys_values(n_needles, "\n".join(filler).lower(), rng)

    needles = iter(zip(keys, values))
    fill = iter(filler)
    units, labels = [], []
    for i in range(n_sentences):
        if i in positions:
            key, value = next(needles)
            units.append(NEEDLE_TEMPLATE.format(key=key, value=value))
            labels.append(1)
        else:
            units.append(next(fill))
            labels.append(0)
    if n_needles == 1:
        query = f"What is the special magic number for {keys[0]} mentioned in the provided text?"
    else:
        named = f"{', '.join(keys[:-1])} and {keys[-1]}"
        query = f"What are the special magic numbers for {named} mentioned in the provided text?"
    return Example(
        id=f"niah-{kind}-n{n_sentences}-d{depth:g}-m{n_needles}-s{seed}",
        query=query,
        units=tuple(units),
        labels=tuple(labels),
        titles=("",) * n_sentences,
        paragraph_ids=tuple(range(n_sentences)),
        answers=tuple(values),
        dataset="niah",
        granularity="sentence",
        meta={
            "depth": depth,
            "needle_indices": tuple(positions),
            "keys": tuple(keys),
            "values": tuple(values),
            "haystack": kind,
        },
    )


def niah_grid(
    lengths: Iterable[int],
    depths: Iterable[float],
    n_needles: Iterable[int] = (1,),
    *,
    haystack: str | os.PathLike[str] | Sequence[str] = "noise",
    seeds: Iterable[int] = (0,),
    examples: Sequence[Example] | None = None,
) -> Iterator[Example]:
    """:func:`make_niah` over the grid lengths × depths × needle counts × seeds (in that nesting order).

    For a fixed length, needle count and seed, every depth shares the same haystack, keys and values:
    only the needles' positions change.
    """
    depths, n_needles, seeds = list(depths), list(n_needles), list(seeds)
    for n in lengths:
        for depth in depths:
            for m in n_needles:
                for seed in seeds:
                    yield make_niah(n, depth, m, haystack=haystack, seed=seed, examples=examples)


# --------------------------------------------------------------------------- redundancy

_SYNONYM_PAIRS = (
    ("administered", "given"),
    ("began", "started"),
    ("begin", "start"),
    ("big", "large"),
    ("approximately", "about"),
    ("located", "situated"),
    ("film", "movie"),
    ("films", "movies"),
    ("founded", "established"),
    ("company", "firm"),
    ("song", "track"),
    ("award", "prize"),
    ("won", "earned"),
    ("wrote", "authored"),
    ("main", "principal"),
    ("used", "employed"),
    ("help", "assist"),
    ("buy", "purchase"),
    ("shows", "demonstrates"),
    ("rapid", "fast"),
    ("dose", "dosage"),
    ("receive", "get"),
    ("recommended", "advised"),
    ("patients", "individuals"),
    ("quickly", "rapidly"),
    ("however", "nevertheless"),
    ("famous", "renowned"),
    ("married", "wed"),
)
_SYNONYMS = {a: b for a, b in _SYNONYM_PAIRS} | {b: a for a, b in _SYNONYM_PAIRS}
_SYNONYM_RE = re.compile(r"\b(" + "|".join(sorted(_SYNONYMS, key=len, reverse=True)) + r")\b", re.IGNORECASE)
_LEADING_PHRASE = re.compile(r"^(In|On|At|During|After|Before|Since|For|By|Under|With) ([^,]{1,60}), (.+?)([.!?])$")
_TRAILING_PHRASE = re.compile(r"^(.+?),? (in|on|during|after|before|since) ([^,]{1,40})([.!?])$")
_LOWERABLE = frozenset(
    """The A An It Its This These Those They Their He His She Her We Our
    In On At During After Before Since For By Under With""".split()
)
_WRAPPERS = (
    "In other words, {s}",
    "It is stated that {s}",
    "As noted, {s}",
    "Put differently, {s}",
    "To restate, {s}",
    "Notably, {s}",
)


def _decap(s: str) -> str:
    """Lower-case the first word when it is a determiner, pronoun or preposition (never a name)."""
    first = s.split(" ", 1)[0]
    return s[0].lower() + s[1:] if first in _LOWERABLE else s


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _synonyms(s: str) -> str:
    def swap(m: re.Match[str]) -> str:
        word = _SYNONYMS[m.group(0).lower()]
        return _cap(word) if m.group(0)[0].isupper() else word

    return _SYNONYM_RE.sub(swap, s)


def _reorder(s: str) -> str:
    """Move a leading prepositional phrase to the end, or a trailing one to the front."""
    m = _LEADING_PHRASE.match(s)
    if m:
        prep, phrase, rest, punct = m.groups()
        return f"{_cap(rest)} {prep.lower()} {phrase}{punct}"
    m = _TRAILING_PHRASE.match(s)
    if m:
        main, prep, phrase, punct = m.groups()
        return f"{prep.capitalize()} {phrase}, {_decap(main)}{punct}"
    return s


def paraphrases(sentence: str, n: int, seed: int = 0) -> list[str]:
    """``n`` distinct rule-based paraphrases of ``sentence``, all different from it.

    Candidates, in order: clause reordering of the synonym-substituted sentence, synonym
    substitution alone, reordering alone, then the wrapper templates ("In other words, ..." etc., in
    a seeded order) around the synonym-substituted and the plain sentence.  Raises ``ValueError``
    when fewer than ``n`` distinct candidates exist.
    """
    syn = _synonyms(sentence)
    wrappers = list(_WRAPPERS)
    random.Random(seed).shuffle(wrappers)
    candidates = [_reorder(syn), syn, _reorder(sentence)]
    candidates += [w.format(s=_decap(base)) for base in (syn, sentence) for w in wrappers]
    out = [c for c in dict.fromkeys(candidates) if c != sentence]
    if len(out) < n:
        raise InputError(f"only {len(out)} distinct paraphrases of {sentence!r}; {n} requested")
    return out[:n]


def make_redundancy(example: Example | None = None, n_copies: int = 1, seed: int = 0) -> Example:
    """``example`` with ``n_copies`` paraphrases (:func:`paraphrases`) of every supporting unit added.

    Copies carry label 1 and their original's title and paragraph id, and are inserted at seeded
    random positions.  ``meta["copy_of"][i]`` is the index of unit ``i``'s original when unit ``i``
    is a copy, else -1; ``meta["source_index"][i]`` is the unit's (or its original's) index in
    ``example``.  ``example=None`` uses :func:`dose_protocol_example` without its hand-written copy.
    """
    if n_copies < 1:
        raise InputError("n_copies must be >= 1")
    base = _dose_protocol_base() if example is None else example
    rng = random.Random(seed)
    # (text, label, title, paragraph id, source index, is copy)
    rows = zip(base.units, base.labels, base.titles, base.paragraph_ids)
    items = [(u, y, t, p, i, False) for i, (u, y, t, p) in enumerate(rows)]
    for i in (i for i, y in enumerate(base.labels) if y == 1):
        for text in paraphrases(base.units[i], n_copies, seed=seed + i):
            items.insert(rng.randint(0, len(items)), (text, 1, base.titles[i], base.paragraph_ids[i], i, True))
    new_index = {src: j for j, (*_, src, is_copy) in enumerate(items) if not is_copy}
    return Example(
        id=f"{base.id}-redundant{n_copies}-s{seed}",
        query=base.query,
        units=tuple(it[0] for it in items),
        labels=tuple(it[1] for it in items),
        titles=tuple(it[2] for it in items),
        paragraph_ids=tuple(it[3] for it in items),
        answers=base.answers,
        dataset="redundancy",
        granularity=base.granularity,
        meta={
            **base.meta,
            "source_id": base.id,
            "source_dataset": base.dataset,
            "n_copies": n_copies,
            "copy_of": tuple(new_index[it[4]] if it[5] else -1 for it in items),
            "source_index": tuple(it[4] for it in items),
        },
    )


_DOSE_QUERY = "What maintenance dose of zelvorin should an adult with normal renal function receive?"
_DOSE_TITLE = "Zelvorin dosing protocol"
_DOSE_SENTENCES = (
    ("This protocol covers the use of zelvorin in adult inpatients with confirmed bacterial pneumonia.", 0),
    ("A loading dose of 1 g is infused intravenously before the first maintenance dose.", 0),
    (
        "For adults with normal renal function, the maintenance dose of zelvorin is 500 mg intravenously "
        "every 12 hours.",
        1,
    ),
    ("Patients with a creatinine clearance below 30 mL/min receive 250 mg every 24 hours instead.", 0),
    ("Trough levels are measured before the fourth dose and should stay between 10 and 15 mg/L.", 0),
    ("Children under 12 years are dosed by body weight and are not covered by this protocol.", 0),
    ("Zelvorin must not be mixed with calcium-containing solutions in the same line.", 0),
    ("Each dose is infused over at least 60 minutes to reduce the risk of infusion reactions.", 0),
    ("Treatment usually lasts 7 to 10 days, depending on the clinical response.", 0),
    ("Unopened vials are stored at room temperature, away from light.", 0),
    ("Any rash, hearing change or sign of kidney injury is reported to the prescribing physician.", 0),
)
_DOSE_PARAPHRASE = (
    6,
    "Adults whose kidney function is normal are given 500 mg of zelvorin by IV infusion twice a day, "
    "12 hours apart, as maintenance therapy.",
)
_DOSE_KEY = 2


def _dose_example(sentences: Sequence[tuple[str, int]], copy_of: Sequence[int], ex_id: str) -> Example:
    n = len(sentences)
    return Example(
        id=ex_id,
        query=_DOSE_QUERY,
        units=tuple(s for s, _ in sentences),
        labels=tuple(y for _, y in sentences),
        titles=(_DOSE_TITLE,) * n,
        paragraph_ids=(0,) * n,
        answers=("500 mg every 12 hours", "500 mg"),
        dataset="redundancy",
        granularity="sentence",
        meta={"copy_of": tuple(copy_of), "n_copies": int(any(c >= 0 for c in copy_of))},
    )


def _dose_protocol_base() -> Example:
    """The dose protocol with the key sentence once (the input :func:`make_redundancy` defaults to)."""
    return _dose_example(_DOSE_SENTENCES, [-1] * len(_DOSE_SENTENCES), "dose-protocol-base")


def dose_protocol_example() -> Example:
    """A clinical dose-protocol context mirroring the paper's Table 19 (fictional drug "zelvorin").

    Twelve sentences from one protocol: the key dosing sentence (unit 2) and its hand-written
    paraphrase (unit 6) are both labelled 1 (``meta["copy_of"][6] == 2``); the ten distractors
    include other doses (loading dose, renal impairment, trough levels) so that a pruner keeping the
    wrong number fails.  The question asks for the maintenance dose.
    """
    at, text = _DOSE_PARAPHRASE
    sentences = list(_DOSE_SENTENCES)
    sentences.insert(at, (text, 1))
    copy_of = [-1] * len(sentences)
    copy_of[at] = _DOSE_KEY
    return _dose_example(sentences, copy_of, "dose-protocol")


# --------------------------------------------------------------------------- redundancy-augmented real contexts

_NUMBER = re.compile(r"\d+")
_STALE_PREFIX = "An outdated record claimed that "


def _stale_version(
    sentence: str, answers: Sequence[str], other_titles: Sequence[str], rng: random.Random
) -> str | None:
    """``sentence`` with its fact made wrong — the answer replaced by another paragraph's title, else every
    number shifted — wrapped as an outdated claim; ``None`` when it holds neither."""
    for answer in sorted(answers, key=len, reverse=True):
        if len(answer) >= 2 and other_titles:
            pattern = re.compile(rf"(?<!\w){re.escape(answer)}(?!\w)", re.IGNORECASE)
            if pattern.search(sentence):
                wrong = rng.choice(list(other_titles))
                return _STALE_PREFIX + _decap(pattern.sub(lambda _, wrong=wrong: wrong, sentence))
    if _NUMBER.search(sentence):
        return _STALE_PREFIX + _decap(_NUMBER.sub(lambda m: str(int(m.group(0)) + rng.randint(1, 9)), sentence))
    return None


def inject_redundancy(example: Example, n_copies: int = 1, n_stale: int = 1, seed: int = 0) -> Example:
    """``example`` with, inside each supporting unit's own paragraph, ``n_copies`` paraphrases of it (label 1,
    the same fact) and, for up to ``n_stale`` supporting units, a stale distractor: the unit with its answer or
    numbers changed, phrased as an outdated claim (label 0) — the paper's Table 19 pattern on real contexts.

    New units go at seeded random positions after their paragraph's first unit, so the paragraph's structure
    (title, first sentence) is kept.  ``meta["copy_of"][i]`` is the new index of unit i's original when it is
    a copy (else −1), ``meta["stale_of"][i]`` likewise for stale distractors, ``meta["source_index"][i]`` the
    unit's (or its original's) index in ``example``.  Raises ``ValueError`` for an example without support.
    """
    if n_copies < 0 or n_stale < 0:
        raise InputError(f"n_copies and n_stale must be ≥ 0; got {n_copies}, {n_stale}")
    support = [i for i, y in enumerate(example.labels) if y == 1]
    if not support:
        raise InputError(f"example {example.id!r} has no supporting unit to duplicate")
    rng = random.Random(f"{seed}:{example.id}")
    # rows: (text, label, source index, kind) with kind "orig" / "copy" / "stale"
    rows = [(u, y, i, "orig") for i, (u, y) in enumerate(zip(example.units, example.labels))]
    titles_all = list(dict.fromkeys(example.titles))
    added = []
    for i in support:
        texts = paraphrases(example.units[i], n_copies, seed=seed + i) if n_copies else []
        added += [(t, 1, i, "copy") for t in texts]
    stale = 0
    for i in rng.sample(support, len(support)):
        if stale == n_stale:
            break
        others = [t for t in titles_all if t and t != example.titles[i]]
        text = _stale_version(example.units[i], example.answers, others, rng)
        if text is not None:
            added.append((text, 0, i, "stale"))
            stale += 1
    for row in added:
        para = example.paragraph_ids[row[2]]
        slots = [j + 1 for j, r in enumerate(rows) if example.paragraph_ids[r[2]] == para]
        rows.insert(rng.choice(slots), row)
    index_of = {r[2]: j for j, r in enumerate(rows) if r[3] == "orig"}
    return Example(
        id=f"{example.id}-redundant{n_copies}-stale{n_stale}-s{seed}",
        query=example.query,
        units=tuple(r[0] for r in rows),
        labels=tuple(r[1] for r in rows),
        titles=tuple(example.titles[r[2]] for r in rows),
        paragraph_ids=tuple(example.paragraph_ids[r[2]] for r in rows),
        answers=example.answers,
        dataset=example.dataset,
        granularity=example.granularity,
        meta={
            **example.meta,
            "source_id": example.id,
            "n_copies": n_copies,
            "n_stale": stale,
            "copy_of": tuple(index_of[r[2]] if r[3] == "copy" else -1 for r in rows),
            "stale_of": tuple(index_of[r[2]] if r[3] == "stale" else -1 for r in rows),
            "source_index": tuple(r[2] for r in rows),
        },
    )
