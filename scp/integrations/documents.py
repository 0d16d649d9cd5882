"""Pruning a list of retrieved documents, the step both framework adapters share (no framework imported here).

Each document's text is split into sentences (:func:`scp.data.text.split_sentences`); a sentence becomes the unit
"Title: sentence" when its document has a title, as the shipped model was trained.  Two modes:

- ``"joined"`` (default): the sentences of all documents form ONE context, one cooperative game in which a
  sentence's Shapley value φ_i is its average marginal contribution to v(S) over every coalition S of sentences of
  any document; the criterion (keep ratio, top-k or token budget) applies to that context, so a document may lose
  all its sentences and be dropped;
- ``"per_document"``: one game per document, the criterion applied to each (every document keeps at least one
  sentence under a keep ratio or a top-k).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from scp.core.selection import check_criterion
from scp.data.text import as_text_list, is_blank, split_sentences
from scp.errors import InputError, InputTypeError

Mode = Literal["joined", "per_document"]
MODES: tuple[str, ...] = ("joined", "per_document")


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

    def record(self) -> dict[str, Any]:
        """The JSON-able record a framework adapter stores in the document's metadata."""
        return {
            "kept_sentences": list(self.kept),
            "removed_sentences": list(self.removed),
            "scores": list(self.scores),
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
    if mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    return mode


def title_of(metadata: Mapping[str, Any] | None, key: str | None) -> str:
    """The document's title from its metadata (``""`` when there is none, or when ``key`` is None)."""
    if key is None or not metadata:
        return ""
    title = metadata.get(key)
    if title is None:
        return ""
    if not isinstance(title, str):
        raise InputTypeError(f"metadata[{key!r}] must be a str title; got {type(title).__name__}")
    return title


def prune_documents(
    pruner,
    query: str,
    texts: Sequence[str],
    titles: Sequence[str] | None = None,
    *,
    mode: str = "joined",
    **criterion: Any,
) -> list[PrunedDocument]:
    """Prune ``texts`` (one str per document) for ``query`` with a :class:`~scp.pruning.pruner.ShapleyPruner`;
    one :class:`PrunedDocument` per text, in input order.  ``titles`` (``""``: none) name each document's
    sentences; when no document has one, the pruner scores bare sentences (and warns if its model read titles).
    A document with no sentence (empty or blank text) is refused with its position."""
    check_mode(mode)
    texts = as_text_list(texts, "documents", item="document text")
    titles = [""] * len(texts) if titles is None else as_text_list(titles, "titles", item="title")
    if len(titles) != len(texts):
        raise InputError(f"got {len(titles)} titles for {len(texts)} documents")
    split = [split_sentences(t) for t in texts]
    empty = [i for i, s in enumerate(split) if not s]
    if empty:
        raise InputError(f"document {empty[0]} has no text to prune (empty or only whitespace); drop it first")
    if not split:
        return []
    if mode == "per_document":
        return [_one_game(pruner, query, [s], [t], "per_document", criterion)[0] for s, t in zip(split, titles)]
    return _one_game(pruner, query, split, titles, "joined", criterion)


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
                scores=tuple(result.scores[i] for i in span),
                mode=mode,
                criterion=result.criterion,
            )
        )
        start += len(doc)
    return out
