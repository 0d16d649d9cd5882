"""Pruning a list of retrieved documents, the step both framework adapters share (no framework imported here).

Each document's text is split into sentences (:func:`scp.data.text.split_sentences`); a sentence becomes the unit
"Title: sentence" when its document has a title, as the shipped model was trained.  Two modes:

- ``"joined"`` (default): the sentences of all documents form ONE context, one cooperative game in which a
  sentence's Shapley value φ_i is its average marginal contribution to v(S) over every coalition S of sentences of
  any document; the criterion (keep ratio, top-k or token budget) applies to that context, so a document may lose
  all its sentences and be dropped;
- ``"per_document"``: one game per document, the criterion applied to each (every document keeps at least one
  sentence under a keep ratio or a top-k).  Each uncached document costs one network pass (about 20 ms on a
  CPU), so from :data:`PROGRESS_FROM` documents on a progress bar (tqdm, on stderr) counts them; ``progress=True``
  or ``False`` shows or hides it whatever the count.

A document with no text to prune (empty, or only whitespace) passes through unchanged, as a framework's non-text
node does; the adapters check their arguments as :meth:`~scp.pruning.pruner.ShapleyPruner.prune` does (the raw
values, before pydantic turns ``top_k=True`` or ``1.0`` into 1), each bad one an :class:`~scp.errors.SCPError` of
one line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from scp.core.selection import CRITERIA, check_criterion
from scp.data.text import as_text_list, is_blank, split_sentences
from scp.errors import InputError, InputTypeError

Mode = Literal["joined", "per_document"]
MODES: tuple[str, ...] = ("joined", "per_document")
PROGRESS_FROM = 100
"""From this many documents on, ``per_document`` mode shows a progress bar unless told not to (``progress``)."""


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
    if not isinstance(mode, str) or mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    return mode


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


def check_fields(fields: Any) -> None:
    """An adapter's constructor arguments, as given (before pydantic coerces them): the pruner, exactly one
    criterion checked as :meth:`ShapleyPruner.prune` checks it (``top_k=True`` or ``1.0`` refused, not read as 1),
    the mode, ``title_key`` (a str or None), ``metadata_key`` (a non-empty str) and ``progress`` (None or a bool)."""
    if not isinstance(fields, Mapping):  # an instance given to model_validate: it was checked when built
        return
    check_pruner(fields.get("pruner"))
    criterion_of(**{k: fields.get(k) for k in CRITERIA})
    check_mode(fields.get("mode", "joined"))
    title_key, metadata_key, progress = (
        fields.get(k, d) for k, d in (("title_key", None), ("metadata_key", "scp"), ("progress", None))
    )
    if title_key is not None and not isinstance(title_key, str):
        raise InputTypeError(f"title_key must be a metadata key (str) or None; got {title_key!r}")
    if not isinstance(metadata_key, str) or not metadata_key:
        raise InputTypeError(f"metadata_key must be a non-empty str; got {metadata_key!r}")
    if progress is not None and not isinstance(progress, bool):
        raise InputTypeError(
            f"progress must be True, False or None (a bar from {PROGRESS_FROM} documents); got {progress!r}"
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
    """Whether ``text`` has a sentence to prune (empty or blank text has none: it passes through unchanged)."""
    return bool(split_sentences(text))


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


def prune_documents(
    pruner,
    query: str,
    texts: Sequence[str],
    titles: Sequence[str] | None = None,
    *,
    mode: str = "joined",
    progress: bool | None = None,
    item: str = "document",
    **criterion: Any,
) -> list[PrunedDocument]:
    """Prune ``texts`` (one str per document) for ``query`` with a :class:`~scp.pruning.pruner.ShapleyPruner`;
    one :class:`PrunedDocument` per text, in input order.  ``titles`` (``""``: none) name each document's
    sentences; when no document has one, the pruner scores bare sentences (and warns if its model read titles).
    A document with no sentence (empty or blank text) is refused with its position, called ``item`` (the adapters
    pass such documents through instead, :func:`has_text`).  ``progress``: the bar of ``per_document`` mode
    (None: from :data:`PROGRESS_FROM` documents on)."""
    check_mode(mode)
    check_pruner(pruner)
    texts = as_text_list(texts, "documents", item="document text")
    titles = [""] * len(texts) if titles is None else as_text_list(titles, "titles", item="title")
    if len(titles) != len(texts):
        raise InputError(f"got {len(titles)} titles for {len(texts)} documents")
    split = [split_sentences(t) for t in texts]
    empty = [i for i, s in enumerate(split) if not s]
    if empty:
        raise InputError(f"{item} {empty[0]} has no text to prune (empty or only whitespace); drop it first")
    if not split:
        return []
    if mode == "per_document":
        from tqdm.auto import tqdm

        show = len(split) >= PROGRESS_FROM if progress is None else progress
        games = tqdm(zip(split, titles), total=len(split), desc="scp per_document", unit=item, disable=not show)
        return [_one_game(pruner, query, [s], [t], "per_document", criterion)[0] for s, t in games]
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
