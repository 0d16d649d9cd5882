"""SCP as a LangChain document compressor (``pip install -e '.[langchain]'``, needs ``langchain-core``).

:class:`SCPDocumentCompressor` is a :class:`langchain_core.documents.BaseDocumentCompressor`: given the retrieved
documents and the query, it keeps the sentences with the highest Shapley values under one criterion (keep ratio,
top-k or token budget; :mod:`scp.integrations.documents` says how the joined and per-document games differ) and
returns new documents with the kept text, the original metadata, ``metadata["relevance_score"]`` (the sum of the
kept sentences' Shapley values, where LangChain's rerankers put their score, replacing any there before) and, under
``metadata["scp"]``, the kept and removed sentence indices and every sentence's score.  A document whose sentences
are all dropped is left out; one with no text to prune (empty or blank) is dropped with a one-line warning
(``empty="raise"`` refuses it, ``empty="keep"`` passes it through unchanged).  Identical documents are scored once
and come back alike.  Arguments are checked as ``ShapleyPruner.prune`` checks them, each bad one an
:class:`~scp.errors.SCPError` of one line; progress bars show from :data:`~scp.integrations.documents.PROGRESS_FROM`
documents (``per_document`` mode) or :data:`~scp.integrations.documents.EMBED_PROGRESS_FROM` sentences to embed on
(``progress``).  In a retriever (``ContextualCompressionRetriever`` is in ``langchain-classic``, which the extra
installs; it was in ``langchain.retrievers`` before LangChain 1.0)::

    from langchain_classic.retrievers import ContextualCompressionRetriever

    compressor = SCPDocumentCompressor.from_checkpoint(keep_ratio=0.5)
    retriever = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=base_retriever)
    docs = retriever.invoke(query)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scp.core.selection import CRITERIA
from scp.errors import InputTypeError
from scp.integrations.documents import (
    EMPTY,
    MODES,
    check_empty,
    check_fields,
    check_items,
    check_metadata,
    check_mode,
    check_query,
    criterion_of,
    has_text,
    prune_documents,
    sort_empty,
    title_of,
)
from scp.paths import SHIPPED_MODEL

try:
    from langchain_core.callbacks import Callbacks
    from langchain_core.documents import BaseDocumentCompressor, Document
    from pydantic import ConfigDict, field_validator, model_validator
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"scp.integrations.langchain needs langchain-core ({error}): pip install -e '.[langchain]'"
    ) from error


class SCPDocumentCompressor(BaseDocumentCompressor):
    """Prune retrieved documents to the sentences their query rests on, by Shapley values of a value network.

    ``pruner``: a :class:`~scp.pruning.pruner.ShapleyPruner` (:meth:`from_checkpoint` loads the shipped model);
    exactly one of ``keep_ratio`` (default 0.5 when none is given), ``top_k``, ``token_budget``, or a count chosen per
    query, ``threshold`` τ (φ_i ≥ τ) or ``value_fraction`` α (the shortest ranking prefix reaching a share α of the
    best prefix's gain over v(∅)); ``mode``
    ``"joined"`` (one game over all documents' sentences) or ``"per_document"``; ``empty``: what to do with a
    document of no text, ``"drop"`` it with a warning (default), ``"raise"`` or ``"keep"`` it unchanged;
    ``title_key``: the metadata key whose value prefixes each sentence as "Title: sentence" (None: bare sentences);
    ``metadata_key``: where the record of what was kept goes; ``progress``: the bars (None: from 100 documents in
    ``per_document`` mode, from 200 sentences to embed)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    pruner: Any
    keep_ratio: float | None = None
    top_k: int | None = None
    token_budget: int | None = None
    threshold: float | None = None
    value_fraction: float | None = None
    mode: str = "joined"
    empty: str = "drop"
    title_key: str | None = "title"
    metadata_key: str = "scp"
    progress: bool | None = None

    def __init__(self, **fields: Any) -> None:
        check_fields(fields)  # the values as given: pydantic would read top_k=True or 1.0 as 1
        super().__init__(**fields)

    @model_validator(mode="before")
    @classmethod
    def _given(cls, fields: Any) -> Any:
        check_fields(fields)  # model_validate, which does not go through __init__
        return fields

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        return check_mode(value)

    @field_validator("empty")
    @classmethod
    def _empty(cls, value: str) -> str:
        return check_empty(value)

    @model_validator(mode="after")
    def _criterion(self) -> SCPDocumentCompressor:
        criterion = criterion_of(**{k: getattr(self, k) for k in CRITERIA})
        object.__setattr__(self, "keep_ratio", criterion.get("keep_ratio"))
        return self

    @classmethod
    def from_checkpoint(cls, path=SHIPPED_MODEL, *, pruner_options: dict | None = None, **fields: Any):
        """The compressor around ``ShapleyPruner.from_checkpoint(path, **pruner_options)``."""
        from scp.pruning.pruner import ShapleyPruner

        return cls(pruner=ShapleyPruner.from_checkpoint(path, **(pruner_options or {})), **fields)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The documents that keep at least one sentence, in input order, each with its kept text and its
        ``relevance_score`` (the sum of its kept sentences' Shapley values, in units of v); a document with no text
        to prune (empty or blank) is dropped with a warning, refused or passed through unchanged (``empty``)."""
        documents = check_items(
            documents, "documents", Document, "langchain Document", " (wrap a text as Document(page_content=text))"
        )
        if not documents:
            return []
        check_query(query)
        titles = []
        for i, d in enumerate(documents):
            if not isinstance(d.page_content, str):
                raise InputTypeError(f"documents[{i}].page_content must be a str; got {type(d.page_content).__name__}")
            titles.append(title_of(check_metadata(d.metadata, f"documents[{i}]"), self.title_key, f"documents[{i}]"))
        prunable = [i for i, d in enumerate(documents) if has_text(d.page_content)]
        dropped = sort_empty(sorted(set(range(len(documents))) - set(prunable)), self.empty)
        pruned = dict(
            zip(
                prunable,
                prune_documents(
                    self.pruner,
                    query,
                    [documents[i].page_content for i in prunable],
                    [titles[i] for i in prunable],
                    mode=self.mode,
                    progress=self.progress,
                    positions=prunable,
                    **criterion_of(**{k: getattr(self, k) for k in CRITERIA}),
                ),
            )
        )
        out = []
        for i, d in enumerate(documents):
            if i in dropped:
                continue
            if i not in pruned:
                out.append(d)
            elif not pruned[i].empty:
                out.append(
                    Document(
                        page_content=pruned[i].text,
                        metadata={
                            **d.metadata,
                            "relevance_score": pruned[i].relevance_score,
                            self.metadata_key: pruned[i].record(),
                        },
                        **({"id": d.id} if d.id is not None else {}),
                    )
                )
        return out


__all__ = ["EMPTY", "MODES", "SCPDocumentCompressor"]
