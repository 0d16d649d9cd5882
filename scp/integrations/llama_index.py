"""SCP as a LlamaIndex node postprocessor (``pip install -e '.[llamaindex]'``, needs ``llama-index-core``).

:class:`SCPNodePostprocessor` is a :class:`llama_index.core.postprocessor.types.BaseNodePostprocessor`: given the
retrieved nodes and the query, it keeps the sentences with the highest Shapley values under one criterion (keep
ratio, top-k or token budget; :mod:`scp.integrations.documents` says how the joined and per-node games differ) and
returns copies of the text nodes with the kept text, the retriever's scores and, under ``metadata["scp"]``, the
kept and removed sentence indices and every sentence's score (excluded from what the LLM and the embedder read).
The retriever's score of each node stays its score; the kept sentences' summed Shapley values are in the record
(``relevance_score``).  A node whose sentences are all dropped is left out; a node that is not a plain text node
(an ``ImageNode``, an ``IndexNode``, which stands for another object, or any non-text node) passes through
unchanged; a text node with no text to prune (empty or blank) is dropped with a one-line warning (``empty="raise"``
refuses it, ``empty="keep"`` passes it through).  Identical nodes are scored once and come back alike.  Arguments
are checked as ``ShapleyPruner.prune`` checks them, each bad one an :class:`~scp.errors.SCPError` of one line that
speaks of nodes; progress bars show from :data:`~scp.integrations.documents.PROGRESS_FROM` nodes (``per_document``
mode) or :data:`~scp.integrations.documents.EMBED_PROGRESS_FROM` sentences to embed on (``progress``).

    postprocessor = SCPNodePostprocessor.from_checkpoint(keep_ratio=0.5)
    engine = index.as_query_engine(node_postprocessors=[postprocessor])
"""

from __future__ import annotations

from typing import Any

from scp.core.selection import CRITERIA
from scp.errors import InputError
from scp.integrations.documents import (
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
    from llama_index.core.bridge.pydantic import Field, field_validator, model_validator
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import ImageNode, IndexNode, MetadataMode, NodeWithScore, QueryBundle, TextNode
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"scp.integrations.llama_index needs llama-index-core ({error}): pip install -e '.[llamaindex]'"
    ) from error


class SCPNodePostprocessor(BaseNodePostprocessor):
    """Prune retrieved nodes to the sentences their query rests on, by Shapley values of a value network.

    ``pruner``: a :class:`~scp.pruning.pruner.ShapleyPruner` (:meth:`from_checkpoint` loads the shipped model);
    exactly one of ``keep_ratio`` (default 0.5 when none is given), ``top_k``, ``token_budget``, or a count chosen per
    query, ``threshold`` τ (φ_i ≥ τ) or ``value_fraction`` α (the shortest ranking prefix reaching a share α of the
    best prefix's gain over v(∅)); ``mode``
    ``"joined"`` (one game over all nodes' sentences) or ``"per_document"`` (one per node); ``empty``: what to do
    with a text node of no text, ``"drop"`` it with a warning (default), ``"raise"`` or ``"keep"`` it unchanged;
    ``title_key``: the metadata key whose value prefixes each sentence as "Title: sentence" (None: bare sentences);
    ``metadata_key``: where the record of what was kept goes; ``progress``: the bars (None: from 100 nodes in
    ``per_document`` mode, from 200 sentences to embed)."""

    pruner: Any = Field(exclude=True)
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
        check_fields(fields, "node")  # the values as given: pydantic would read top_k=True or 1.0 as 1
        super().__init__(**fields)

    @model_validator(mode="before")
    @classmethod
    def _given(cls, fields: Any) -> Any:
        check_fields(fields, "node")  # model_validate, which does not go through __init__
        return fields

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        return check_mode(value)

    @field_validator("empty")
    @classmethod
    def _empty(cls, value: str) -> str:
        return check_empty(value, "node")

    @model_validator(mode="after")
    def _criterion(self) -> SCPNodePostprocessor:
        criterion = criterion_of(**{k: getattr(self, k) for k in CRITERIA})
        object.__setattr__(self, "keep_ratio", criterion.get("keep_ratio"))
        return self

    @classmethod
    def class_name(cls) -> str:
        return "SCPNodePostprocessor"

    @classmethod
    def from_checkpoint(cls, path=SHIPPED_MODEL, *, pruner_options: dict | None = None, **fields: Any):
        """The postprocessor around ``ShapleyPruner.from_checkpoint(path, **pruner_options)``."""
        from scp.pruning.pruner import ShapleyPruner

        return cls(pruner=ShapleyPruner.from_checkpoint(path, **(pruner_options or {})), **fields)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if query_bundle is None or not isinstance(query_bundle.query_str, str):
            raise InputError("SCPNodePostprocessor needs the query: postprocess_nodes(nodes, query_str=...)")
        nodes = check_items(
            nodes, "nodes", NodeWithScore, "NodeWithScore", " (wrap a node as NodeWithScore(node=TextNode(text=...)))"
        )
        check_query(query_bundle.query_str)
        texts, contents, titles, blank = [], [], [], []
        for i, n in enumerate(nodes):
            if not isinstance(n.node, TextNode) or isinstance(n.node, (ImageNode, IndexNode)):
                continue  # not plain text: passed through
            content = n.node.get_content(metadata_mode=MetadataMode.NONE)
            title = title_of(check_metadata(n.node.metadata, f"nodes[{i}].node"), self.title_key, f"nodes[{i}].node")
            if not isinstance(content, str) or not has_text(content):
                blank.append(i)
                continue
            texts.append(i)
            contents.append(content)
            titles.append(title)
        dropped = sort_empty(blank, self.empty, "node")
        if not texts:
            return [n for i, n in enumerate(nodes) if i not in dropped]
        pruned = dict(
            zip(
                texts,
                prune_documents(
                    self.pruner,
                    query_bundle.query_str,
                    contents,
                    titles,
                    mode=self.mode,
                    progress=self.progress,
                    item="node",
                    positions=texts,
                    **criterion_of(**{k: getattr(self, k) for k in CRITERIA}),
                ),
            )
        )
        out = []
        for i, item in enumerate(nodes):
            if i in dropped:
                continue
            if i not in pruned:
                out.append(item)
            elif not pruned[i].empty:
                node = item.node.model_copy(deep=True)
                node.set_content(pruned[i].text)
                node.metadata[self.metadata_key] = pruned[i].record()
                for excluded in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
                    if self.metadata_key not in excluded:
                        excluded.append(self.metadata_key)
                out.append(NodeWithScore(node=node, score=item.score))
        return out


__all__ = ["SCPNodePostprocessor"]
