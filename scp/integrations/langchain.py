"""SCP as a LangChain document compressor (``pip install -e '.[langchain]'``, needs ``langchain-core``).

:class:`SCPDocumentCompressor` is a :class:`langchain_core.documents.BaseDocumentCompressor`: given the retrieved
documents and the query, it keeps the sentences with the highest Shapley values under one criterion (keep ratio,
top-k or token budget; :mod:`scp.integrations.documents` says how the joined and per-document games differ) and
returns new documents with the kept text, the original metadata and, under ``metadata["scp"]``, the kept and
removed sentence indices and every sentence's score.  A document whose sentences are all dropped is left out.

    compressor = SCPDocumentCompressor.from_checkpoint(keep_ratio=0.5)
    docs = compressor.compress_documents(retriever.invoke(query), query)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scp.core.selection import CRITERIA
from scp.integrations.documents import MODES, check_mode, criterion_of, prune_documents, title_of
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
    ``"joined"`` (one game over all documents' sentences) or ``"per_document"``; ``title_key``: the metadata key
    whose value prefixes each sentence as "Title: sentence" (None: bare sentences); ``metadata_key``: where the
    record of what was kept goes."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    pruner: Any
    keep_ratio: float | None = None
    top_k: int | None = None
    token_budget: int | None = None
    threshold: float | None = None
    value_fraction: float | None = None
    mode: str = "joined"
    title_key: str | None = "title"
    metadata_key: str = "scp"

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        return check_mode(value)

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
        """The documents that keep at least one sentence, in input order, each with its kept text."""
        documents = list(documents)
        if not documents:
            return []
        pruned = prune_documents(
            self.pruner,
            query,
            [d.page_content for d in documents],
            [title_of(d.metadata, self.title_key) for d in documents],
            mode=self.mode,
            **criterion_of(**{k: getattr(self, k) for k in CRITERIA}),
        )
        return [
            Document(
                page_content=p.text,
                metadata={**d.metadata, self.metadata_key: p.record()},
                **({"id": d.id} if d.id is not None else {}),
            )
            for d, p in zip(documents, pruned)
            if not p.empty
        ]


__all__ = ["MODES", "SCPDocumentCompressor"]
