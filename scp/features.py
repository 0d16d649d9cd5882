"""Turning (query, unit texts) into value-network inputs, and padding contexts into batches.

Every input is computable from the query and the unit texts alone, so a trained model ranks any new context:
- unit and query embeddings e_c, e_q from one embedder (cached on disk);
- optional per-unit scalar features appended to ψ's input:
  ``cos`` = e_c·e_q / (|e_c||e_q|), ``bm25z`` = the unit's BM25 score z-scored within its context
  (0 when all scores tie), ``cos_z`` = cosine z-scored within its context.
How a unit reads ("Title: sentence" or the bare sentence) is chosen by the caller and recorded in checkpoints.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from .baselines import BM25Ranker
from .shapley import derive_seed

FEATURES = ("cos", "bm25z", "cos_z")


@dataclass
class Context:
    """One context's tensors: units (n, d), query (d,), extra (n, e), labels (n,) or None."""

    units: torch.Tensor
    query: torch.Tensor
    extra: torch.Tensor
    labels: torch.Tensor | None = None
    id: str = ""
    meta: dict | None = None
    key: str = ""  # context_key(query, unit texts): seeds this context's Monte-Carlo permutations

    @property
    def n_units(self) -> int:
        return self.units.shape[0]


def context_key(query: str, units: Sequence[str]) -> str:
    """sha256 of the query and the unit texts: names a context by its content, wherever it is scored."""
    text = "\0".join([query, *units])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def check_features(features: Sequence[str]) -> tuple[str, ...]:
    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        raise ValueError(f"unknown feature(s) {unknown}; choose from {FEATURES}")
    return tuple(features)


def _zscore(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    return (x - x.mean()) / sd if sd > 1e-12 else np.zeros_like(x)


def extra_features(query: str, units: Sequence[str], unit_emb: np.ndarray, query_emb: np.ndarray,
                   features: Sequence[str]) -> np.ndarray:
    """(n, len(features)) float32 per-unit scalar features (see the module docstring)."""
    cols = []
    if features:
        un = unit_emb / np.maximum(np.linalg.norm(unit_emb, axis=1, keepdims=True), 1e-12)
        qn = query_emb / max(float(np.linalg.norm(query_emb)), 1e-12)
        cos = un @ qn
    for name in features:
        if name == "cos":
            cols.append(cos)
        elif name == "cos_z":
            cols.append(_zscore(cos))
        elif name == "bm25z":
            cols.append(_zscore(BM25Ranker().score(query, units)))
    return np.stack(cols, 1).astype(np.float32) if cols else np.zeros((len(units), 0), np.float32)


def build_contexts(queries: Sequence[str], units_list: Sequence[Sequence[str]], embedder, features: Sequence[str],
                   labels_list: Sequence[Sequence[int]] | None = None, ids: Sequence[str] | None = None,
                   metas: Sequence[dict] | None = None, show_progress: bool = False) -> list[Context]:
    """Embed all queries and units in one batched (cached) call and build one :class:`Context` each."""
    features = check_features(features)
    if len(queries) != len(units_list):
        raise ValueError(f"{len(queries)} queries but {len(units_list)} unit lists")
    for i, units in enumerate(units_list):
        if len(units) == 0:
            raise ValueError(f"empty context: unit list {i} has no units")
    texts = list(queries) + [u for units in units_list for u in units]
    emb = embedder.encode(texts, batch_size=256, show_progress=show_progress)
    q_emb, offset, out = emb[:len(queries)], len(queries), []
    for i, (query, units) in enumerate(zip(queries, units_list)):
        u_emb = emb[offset:offset + len(units)]
        offset += len(units)
        labels = None if labels_list is None else torch.as_tensor(np.asarray(labels_list[i]), dtype=torch.float32)
        out.append(Context(units=torch.from_numpy(np.ascontiguousarray(u_emb)), query=torch.from_numpy(q_emb[i].copy()),
                           extra=torch.from_numpy(extra_features(query, units, u_emb, q_emb[i], features)),
                           labels=labels, id="" if ids is None else ids[i], meta=None if metas is None else metas[i],
                           key=context_key(query, units)))
    return out


def contexts_from_examples(examples, embedder, features: Sequence[str], with_title: bool,
                           show_progress: bool = False) -> list[Context]:
    """:func:`build_contexts` for :class:`scp.data.Example` objects (labels, ids and meta carried along)."""
    return build_contexts([ex.query for ex in examples], [ex.unit_texts(with_title=with_title) for ex in examples],
                          embedder, features, labels_list=[ex.labels for ex in examples],
                          ids=[ex.id for ex in examples], metas=[dict(ex.meta, dataset=ex.dataset) for ex in examples],
                          show_progress=show_progress)


@dataclass
class Batch:
    units: torch.Tensor  # (b, n, d)
    query: torch.Tensor  # (b, d)
    extra: torch.Tensor  # (b, n, e)
    mask: torch.Tensor  # (b, n) valid units
    labels: torch.Tensor  # (b, n); 0 on padding
    keys: tuple[str, ...] = ()  # each context's :func:`context_key`

    def seeds(self, seed: int) -> list[int]:
        """One Monte-Carlo seed per context, derived from ``seed`` and its key (independent of the batch)."""
        return [derive_seed(seed, key) for key in self.keys]


def collate(contexts: Sequence[Context], device: str | torch.device | None = None) -> Batch:
    """Pad contexts to the longest one (padding masked out, labelled 0), on ``device`` (default CPU)."""
    b, n = len(contexts), max(c.n_units for c in contexts)
    d, e = contexts[0].units.shape[1], contexts[0].extra.shape[1]
    units, extra = torch.zeros(b, n, d), torch.zeros(b, n, e)
    mask, labels = torch.zeros(b, n, dtype=torch.bool), torch.zeros(b, n)
    for i, c in enumerate(contexts):
        units[i, :c.n_units], extra[i, :c.n_units], mask[i, :c.n_units] = c.units, c.extra, True
        if c.labels is not None:
            labels[i, :c.n_units] = c.labels
    tensors = (units, torch.stack([c.query for c in contexts]), extra, mask, labels)
    if device is not None:
        tensors = tuple(t.to(device) for t in tensors)
    return Batch(*tensors, keys=tuple(c.key for c in contexts))
