"""Pruning a list of retrieved documents, the step both framework adapters share (no framework imported here).

Each document's text is split into sentences (:func:`split_text`: the rules of
:func:`scp.data.text.split_sentences`, then Chinese and Japanese sentence ends 。！？); a sentence becomes the unit
"Title: sentence" when its document has a title, as the shipped model was trained.  Two modes:

- ``"joined"`` (default): the sentences of all documents form ONE context, one cooperative game in which a
  sentence's Shapley value φ_i is its average marginal contribution to v(S) over every coalition S of sentences of
  any document; the criterion (keep ratio, top-k or token budget) applies to that context, so a document may lose
  all its sentences and be dropped;
- ``"per_document"``: one game per document, the criterion applied to each (every document keeps at least one
  sentence under a keep ratio or a top-k).  Each uncached document costs one network pass (about 20 ms on a
  CPU), so from :data:`PROGRESS_FROM` documents on a progress bar (tqdm, on stderr) counts them; ``progress=True``
  or ``False`` shows or hides it whatever the count.

Identical documents (the same sentences under the same title) are scored once: every copy gets the first copy's
kept sentences and scores (in ``joined`` mode the game holds one copy, so copies neither split a sentence's credit
nor count twice towards the criterion).  Text the embedding cache has not seen is embedded before the game, by
:func:`scp.data.embed_stage.embed_into_cache` (texts of one token length batched: bit for bit the vectors of one text
per forward pass, about twice as fast on one CPU thread), with a bar counting sentences from
:data:`EMBED_PROGRESS_FROM` new ones on.

A document with no text to prune (empty, or only whitespace) is handled as ``empty`` says (:data:`EMPTY`): dropped
with a one-line warning (default), refused, or passed through unchanged.  The shipped model was trained on English
(MiniLM, HotpotQA): a document that looks like another language (:func:`looks_english`) draws a one-line warning.
The adapters check their arguments as :meth:`~scp.pruning.pruner.ShapleyPruner.prune` does (the raw values, before
pydantic turns ``top_k=True`` or ``1.0`` into 1), each bad one an :class:`~scp.errors.SCPError` of one line.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from scp.core.selection import CRITERIA, check_criterion
from scp.data.text import as_text_list, is_blank, split_sentences
from scp.errors import InputError, InputTypeError, warn_user

Mode = Literal["joined", "per_document"]
MODES: tuple[str, ...] = ("joined", "per_document")
EMPTY: tuple[str, ...] = ("drop", "raise", "keep")
"""What an adapter does with a document of no text (empty or blank): ``"drop"`` it with a one-line warning (the
default), ``"raise"`` an :class:`~scp.errors.InputError` naming it, or ``"keep"`` it in the output unchanged."""
PROGRESS_FROM = 100
"""From this many documents on, ``per_document`` mode shows a progress bar unless told not to (``progress``)."""
EMBED_PROGRESS_FROM = 200
"""From this many sentences not yet embedded on, a bar counts them as they are embedded unless told not to
(``progress``): about 10 s on one CPU thread."""
ENGLISH_LETTERS = 0.5
"""A document looks English (:func:`looks_english`) when at least this share of its letters are a–z or A–Z."""
LANGUAGE_MIN_LETTERS = 20
"""A document with fewer letters than this is too short to judge its language and is taken as English."""

_CJK_ENDS = "。！？｡．"  # ideographic full stop, full-width ! ? and full stop, half-width ideographic full stop
_CJK_CLOSERS = "」』）】〕》〉”’\"')]"
_CJK_PAIRS = {"「": "」", "『": "』", "（": "）", "【": "】", "〔": "〕", "《": "》", "〈": "〉"}
_ASCII_LETTER = re.compile(r"[A-Za-z]")


def _split_cjk(sentence: str) -> list[str]:
    """``sentence`` cut after each Chinese or Japanese sentence end (:data:`_CJK_ENDS`, a run of them, and the
    closing quotes or brackets right after), except inside a bracket pair such as 「…」 (a quoted sentence stays in
    the sentence that quotes it) and at a full-width ． before a digit (a decimal point: ３．１４); an opening
    bracket with no closing one is ignored."""
    if not any(ch in _CJK_ENDS for ch in sentence):
        return [sentence]
    matched, stack = set(), []
    for i, ch in enumerate(sentence):
        if ch in _CJK_PAIRS:
            stack.append(i)
        elif stack and ch == _CJK_PAIRS[sentence[stack[-1]]]:
            matched.update((stack.pop(), i))
    pieces, start, depth, i = [], 0, 0, 0
    while i < len(sentence):
        ch = sentence[i]
        if i in matched:
            depth += 1 if ch in _CJK_PAIRS else -1
        elif ch in _CJK_ENDS and depth == 0 and not (ch == "．" and sentence[i + 1 : i + 2].isdigit()):
            while i + 1 < len(sentence) and (sentence[i + 1] in _CJK_ENDS or sentence[i + 1] in _CJK_CLOSERS):
                if i + 1 in matched:  # a closing bracket that belongs to an opening one before the cut
                    break
                i += 1
            pieces.append(sentence[start : i + 1])
            start = i + 1
        i += 1
    pieces.append(sentence[start:])
    return [p.strip() for p in pieces if not is_blank(p)]


def split_text(text: str) -> list[str]:
    """The sentences of a document: :func:`scp.data.text.split_sentences` (English punctuation followed by a space
    and a capital), each then cut after a Chinese or Japanese sentence end, which no space follows: 。, full-width
    ！ ？ ．, half-width ｡, with the closing quotes and brackets right after; not inside 「…」, 『…』, （…）
    and the like.  English text splits exactly as ``split_sentences`` splits it."""
    return [piece for sentence in split_sentences(text) for piece in _split_cjk(sentence)]


def looks_english(text: str) -> bool:
    """A cheap guess at whether ``text`` is English: at least :data:`ENGLISH_LETTERS` of its letters
    (``str.isalpha``) are ASCII a–z or A–Z, or it has fewer than :data:`LANGUAGE_MIN_LETTERS` letters.  It tells
    scripts apart (Chinese, Japanese, Arabic, Cyrillic, Greek… are not English), not languages written in Latin
    letters: French or German text passes as English."""
    letters = sum(ch.isalpha() for ch in text)
    if letters < LANGUAGE_MIN_LETTERS:
        return True
    return len(_ASCII_LETTER.findall(text)) >= ENGLISH_LETTERS * letters


@dataclass(frozen=True)
class PrunedDocument:
    """What pruning kept of one input document: its kept sentences joined by one space, their indices among the
    document's sentences, the removed ones, every sentence's score (φ_i, in units of v) and the game it was
    scored in (the joined context or the document alone)."""

    text: str
    sentences: tuple[str, ...]
    kept: tuple[int, ...]
    removed: tuple[int, ...]
    scores: tuple[float, ...]
    mode: str
    criterion: str

    @property
    def empty(self) -> bool:
        """True when no sentence of the document was kept."""
        return not self.kept

    @property
    def relevance_score(self) -> float:
        """The document's relevance to the query: the SUM of its kept sentences' Shapley values φ_i (in units of
        v; 0.0 when none is kept).  By Shapley's efficiency the φ_i of a game add up to v(all) − v(∅), so in
        ``joined`` mode this is the document's kept share of the whole context's value, comparable across the
        documents of one call; in ``per_document`` mode each document is its own game."""
        return float(sum(self.scores[i] for i in self.kept))

    def record(self) -> dict[str, Any]:
        """The JSON-able record a framework adapter stores in the document's metadata."""
        return {
            "kept_sentences": list(self.kept),
            "removed_sentences": list(self.removed),
            "scores": list(self.scores),
            "relevance_score": self.relevance_score,
            "n_sentences": len(self.sentences),
            "mode": self.mode,
            "criterion": self.criterion,
        }


def criterion_of(
    keep_ratio: float | None = None,
    top_k: int | None = None,
    token_budget: int | None = None,
    threshold: float | None = None,
    value_fraction: float | None = None,
) -> dict[str, Any]:
    """The one pruning criterion an adapter was given, as keyword arguments of
    :meth:`~scp.pruning.pruner.ShapleyPruner.prune` (a keep ratio of 0.5 when none is)."""
    given = dict(
        keep_ratio=keep_ratio,
        top_k=top_k,
        token_budget=token_budget,
        threshold=threshold,
        value_fraction=value_fraction,
    )
    given = {k: v for k, v in given.items() if v is not None} or {"keep_ratio": 0.5}
    check_criterion(**given)
    return given


def check_mode(mode: str) -> str:
    if not isinstance(mode, str) or mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    return mode


def check_empty(empty: str, item: str = "document") -> str:
    """``empty`` if it is one of :data:`EMPTY`, else one line."""
    if not isinstance(empty, str) or empty not in EMPTY:
        raise InputError(
            f"empty must be one of {', '.join(EMPTY)} (what to do with a {item} of no text); got {empty!r}"
        )
    return empty


def check_pruner(pruner: Any) -> Any:
    """``pruner`` if it has a ``prune`` method (a :class:`~scp.pruning.pruner.ShapleyPruner`), else one line."""
    if not callable(getattr(pruner, "prune", None)):
        raise InputTypeError(
            f"pruner must be a ShapleyPruner (ShapleyPruner.from_checkpoint(path), or the adapter's "
            f"from_checkpoint()); got {type(pruner).__name__}"
        )
    return pruner


def check_query(query: Any) -> str:
    """``query`` if it is a non-blank ``str`` (the check :meth:`ShapleyPruner.prune` makes), else one line."""
    if not isinstance(query, str) or is_blank(query):
        raise InputError(
            f"query must be a non-empty string (not only whitespace or invisible characters); got {query!r}"
        )
    return query


def check_fields(fields: Any, item: str = "document") -> None:
    """An adapter's constructor arguments, as given (before pydantic coerces them): the pruner, exactly one
    criterion checked as :meth:`ShapleyPruner.prune` checks it (``top_k=True`` or ``1.0`` refused, not read as 1),
    the mode, ``empty`` (:data:`EMPTY`), ``title_key`` (a str or None), ``metadata_key`` (a non-empty str) and
    ``progress`` (None or a bool); ``item`` is what the adapter prunes ("document", "node"), as its messages say."""
    if not isinstance(fields, Mapping):  # an instance given to model_validate: it was checked when built
        return
    check_pruner(fields.get("pruner"))
    criterion_of(**{k: fields.get(k) for k in CRITERIA})
    check_mode(fields.get("mode", "joined"))
    check_empty(fields.get("empty", "drop"), item)
    title_key, metadata_key, progress = (
        fields.get(k, d) for k, d in (("title_key", None), ("metadata_key", "scp"), ("progress", None))
    )
    if title_key is not None and not isinstance(title_key, str):
        raise InputTypeError(f"title_key must be a metadata key (str) or None; got {title_key!r}")
    if not isinstance(metadata_key, str) or not metadata_key:
        raise InputTypeError(f"metadata_key must be a non-empty str; got {metadata_key!r}")
    if progress is not None and not isinstance(progress, bool):
        raise InputTypeError(
            f"progress must be True, False or None (a bar from {PROGRESS_FROM} {item}s or "
            f"{EMBED_PROGRESS_FROM} new sentences); got {progress!r}"
        )


def check_items(items: Any, name: str, kind: type, described: str, hint: str = "") -> list:
    """``items`` (a list or other iterable, not a str or mapping) as a list, each a ``kind``, else one line naming
    the first that is not (``hint``: how to make one)."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InputTypeError(f"{name} must be a list of {described}, not a {type(items).__name__}")
    out = list(items)
    for i, item in enumerate(out):
        if not isinstance(item, kind):
            raise InputTypeError(f"{name}[{i}] is a {type(item).__name__}, not a {described}{hint}")
    return out


def check_metadata(metadata: Any, where: str) -> Mapping[str, Any]:
    """A document's metadata if it is a mapping, else one line naming the document."""
    if not isinstance(metadata, Mapping):
        raise InputTypeError(f"{where}.metadata must be a dict (empty if it has none); got {metadata!r}")
    return metadata


def has_text(text: str) -> bool:
    """Whether ``text`` has a sentence to prune (empty or blank text has none)."""
    return bool(split_text(text))


def sort_empty(indices: Sequence[int], empty: str, item: str = "document") -> set[int]:
    """The documents (positions ``indices``, each of no text) to leave out of the output, as ``empty`` says: all of
    them with a one-line warning (``"drop"``), none (``"keep"``), or an :class:`~scp.errors.InputError` naming the
    first (``"raise"``)."""
    check_empty(empty, item)
    if not indices:
        return set()
    if empty == "raise":
        raise InputError(
            f"{item} {indices[0]} has no text to prune (empty or only whitespace); drop it first, or pass "
            "empty='drop' (leave it out) or empty='keep' (pass it through)"
        )
    if empty == "keep":
        return set()
    shown = ", ".join(map(str, indices[:10])) + (", …" if len(indices) > 10 else "")
    plural = "s" if len(indices) > 1 else ""
    warn_user(
        f"dropped {len(indices)} {item}{plural} with no text to prune (empty or only whitespace) at {shown}; "
        "empty='keep' passes them through, empty='raise' refuses them"
    )
    return set(indices)


def title_of(metadata: Mapping[str, Any] | None, key: str | None, where: str = "") -> str:
    """The document's title from its metadata (``""`` when there is none, or when ``key`` is None); ``where``
    names the document in the message of a title that is no str (``"documents[3]"``)."""
    if key is None or not metadata:
        return ""
    title = metadata.get(key)
    if title is None:
        return ""
    if not isinstance(title, str):
        prefix = f"{where}." if where else ""
        raise InputTypeError(f"{prefix}metadata[{key!r}] must be a str title; got {type(title).__name__}")
    return title


def warn_if_not_english(texts: Sequence[str], positions: Sequence[int] | None = None, item: str = "document") -> None:
    """One line when any of ``texts`` does not look English (:func:`looks_english`), naming them by ``positions``
    (default: their indices)."""
    positions = range(len(texts)) if positions is None else positions
    foreign = [p for p, t in zip(positions, texts) if not looks_english(t)]
    if foreign:
        shown = ", ".join(map(str, foreign[:10])) + (", …" if len(foreign) > 10 else "")
        warn_user(
            f"{len(foreign)} of {len(texts)} {item}s do not look English ({item} {shown}: under "
            f"{ENGLISH_LETTERS:.0%} of their letters are a-z); the model was trained on English text (MiniLM, "
            "HotpotQA), so expect weaker rankings"
        )


def prune_documents(
    pruner,
    query: str,
    texts: Sequence[str],
    titles: Sequence[str] | None = None,
    *,
    mode: str = "joined",
    progress: bool | None = None,
    item: str = "document",
    positions: Sequence[int] | None = None,
    **criterion: Any,
) -> list[PrunedDocument]:
    """Prune ``texts`` (one str per document) for ``query`` with a :class:`~scp.pruning.pruner.ShapleyPruner`;
    one :class:`PrunedDocument` per text, in input order.  ``titles`` (``""``: none) name each document's
    sentences; when no document has one, the pruner scores bare sentences (and warns if its model read titles).
    Identical documents (the same sentences and title) are scored once and share their result.  A document with no
    sentence (empty or blank text) is refused with its position, called ``item`` (the adapters sort such documents
    out first, :func:`sort_empty`); ``positions`` are the documents' positions in the adapter's input, for the
    messages (default: their indices here).  A document that does not look English draws one warning.  Text the
    pruner's embedding cache lacks is embedded first, batched (:func:`embed_new_text`).  ``progress``: the bars
    (None: the per-document bar from :data:`PROGRESS_FROM` documents, the embedding bar from
    :data:`EMBED_PROGRESS_FROM` new sentences on)."""
    check_mode(mode)
    check_pruner(pruner)
    texts = as_text_list(texts, f"{item}s", item=f"{item} text")
    titles = [""] * len(texts) if titles is None else as_text_list(titles, "titles", item="title")
    if len(titles) != len(texts):
        raise InputError(f"got {len(titles)} titles for {len(texts)} {item}s")
    positions = list(range(len(texts))) if positions is None else list(positions)
    split = [split_text(t) for t in texts]
    empty = [p for p, s in zip(positions, split) if not s]
    if empty:
        raise InputError(f"{item} {empty[0]} has no text to prune (empty or only whitespace); drop it first")
    if not split:
        return []
    warn_if_not_english(texts, positions, item)
    first: dict[tuple, int] = {}
    copy_of = [first.setdefault((tuple(s), t), i) for i, (s, t) in enumerate(zip(split, titles))]
    unique = sorted(set(copy_of))
    split, titles = [split[i] for i in unique], [titles[i] for i in unique]
    games = [[s for doc in split for s in doc]] if mode == "joined" else split
    embed_new_text(pruner, query, split, titles, games=games, progress=progress)
    if mode == "per_document":
        from tqdm.auto import tqdm

        show = len(split) >= PROGRESS_FROM if progress is None else progress
        games = tqdm(zip(split, titles), total=len(split), desc="scp per_document", unit=item, disable=not show)
        scored = [_one_game(pruner, query, [s], [t], "per_document", criterion)[0] for s, t in games]
    else:
        scored = _one_game(pruner, query, split, titles, "joined", criterion)
    result = dict(zip(unique, scored))
    return [result[i] for i in copy_of]


def _units(pruner, sentences: list[str], title: str) -> list[str]:
    """The unit texts the pruner embeds for one document's sentences (its own :meth:`units`, silenced: the
    pruner says it again when it scores them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(pruner.units(sentences, None if is_blank(title) else [title] * len(sentences)))


def embed_new_text(
    pruner,
    query: str,
    split: Sequence[Sequence[str]],
    titles: Sequence[str],
    *,
    games: Sequence[Sequence[str]] | None = None,
    progress: bool | None = None,
) -> int:
    """Put the vectors of the query and of every unit the pruner will embed into its embedding cache before the
    games, when its embedder is a :class:`~scp.data.embedders.CachedEmbedder` (as
    :meth:`~scp.pruning.pruner.ShapleyPruner.from_checkpoint` makes it): the texts not cached yet go through
    :func:`scp.data.embed_stage.embed_into_cache`, batched by exact token length, which stores the very bits one
    text per forward pass would, so the scores are those the pruner gives alone, only sooner.  Nothing is embedded
    when a game (``games``: the sentences of each game to be played) or a unit would fail the pruner's own checks
    (too many sentences, a sentence above ``max_unit_chars``, exact Shapley's player limit): the pruner refuses it
    before embedding anything, as it would alone.  Any other pruner or embedder is left to embed its text itself.
    Returns how many texts were embedded."""
    from scp.data.embedders import CachedEmbedder
    from scp.errors import SCPError

    embedder = getattr(pruner, "embedder", None)
    if not isinstance(embedder, CachedEmbedder) or not callable(getattr(pruner, "units", None)):
        return 0
    check = getattr(pruner, "_check", None)  # ShapleyPruner's checks of a game, made before it embeds anything
    try:
        for game in games if games is not None else split:
            if callable(check):
                check(query, list(game))
    except SCPError:
        return 0
    units = [u for sentences, title in zip(split, titles) for u in _units(pruner, list(sentences), title)]
    if max(map(len, units), default=0) > getattr(pruner, "max_unit_chars", float("inf")):
        return 0
    from scp.data.embed_stage import embed_into_cache

    return embed_into_cache(embedder, [query, *units], progress=progress, progress_from=EMBED_PROGRESS_FROM)


def _one_game(pruner, query, split, titles, mode, criterion) -> list[PrunedDocument]:
    sentences = [s for doc in split for s in doc]
    unit_titles = [t for doc, t in zip(split, titles) for _ in doc]
    named = None if all(is_blank(t) for t in unit_titles) else unit_titles
    result = pruner.prune(query, sentences, titles=named, **criterion)
    kept, out, start = set(result.kept_indices), [], 0
    for doc in split:
        span = range(start, start + len(doc))
        keep = tuple(i - start for i in span if i in kept)
        out.append(
            PrunedDocument(
                text=" ".join(doc[i] for i in keep),
                sentences=tuple(doc),
                kept=keep,
                removed=tuple(i - start for i in span if i not in kept),
                scores=tuple(float(result.scores[i]) for i in span),
                mode=mode,
                criterion=result.criterion,
            )
        )
        start += len(doc)
    return out
