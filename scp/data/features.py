"""Turning (query, unit texts) into value-network inputs, and padding contexts into batches.

Every input is computable from the query and the unit texts alone, so a trained model ranks any new context:
- unit and query embeddings e_c, e_q from one embedder (cached on disk);
- optional per-unit scalar features appended to ψ's input:
  ``cos`` = e_c·e_q / (|e_c||e_q|), ``bm25z`` = the unit's BM25 score z-scored within its context
  (0 when all scores tie), ``cos_z`` = cosine z-scored within its context;
- structural features (:data:`STRUCTURAL`), which only the whole context can give.  They read units as
  "Title: sentence" (the title is the text before the first ": "; a paragraph is a run of consecutive units
  with the same title), so they need ``unit_repr="title"``:
  ``pos_inv`` = 1 / (1 + the unit's position in its paragraph), ``first`` = 1 for a paragraph's first unit,
  ``para_bm25z`` = its paragraph's BM25 score (title + sentences) z-scored over the context's paragraphs,
  ``para_cos_z`` = the paragraph's best unit cosine z-scored over paragraphs, ``title_q`` = share of the
  title's words that occur in the query, ``names_title`` = max over the other paragraphs p whose title the
  unit's sentence names of 1 / (1 + rank of p by paragraph BM25) (a bridge: this unit points at p),
  ``title_named`` = 1 when the unit's title is named in a sentence of one of the 3 best other paragraphs
  (by paragraph BM25).
How a unit reads ("Title: sentence" or the bare sentence) is chosen by the caller and recorded in checkpoints.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from scp.core.permutations import derive_seed
from scp.data.bm25 import bm25_scores
from scp.errors import InputError

STRUCTURAL = ("pos_inv", "first", "para_bm25z", "para_cos_z", "title_q", "names_title", "title_named")
FEATURES = ("cos", "bm25z", "cos_z", *STRUCTURAL)
_WORD = re.compile(r"\w+")


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
        raise InputError(f"unknown feature(s) {unknown}; choose from {FEATURES}")
    return tuple(features)


def _zscore(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    return (x - x.mean()) / sd if sd > 1e-12 else np.zeros_like(x)


def split_title(unit: str) -> tuple[str, str]:
    """("Title", "sentence") of a "Title: sentence" unit; ("", unit) when it has no ": "."""
    title, sep, sentence = unit.partition(": ")
    return (title, sentence) if sep and title else ("", unit)


def _name_pattern(title: str) -> re.Pattern | None:
    """Whole-word, case-insensitive match of a title without its parenthetical ("X (film)" names X)."""
    core = re.sub(r"\s*\(.*?\)\s*", " ", title).strip()
    return re.compile(rf"(?<!\w){re.escape(core)}(?!\w)", re.IGNORECASE) if len(core) >= 3 else None


def structural_features(query: str, units: Sequence[str], cos: np.ndarray) -> dict[str, np.ndarray]:
    """Every :data:`STRUCTURAL` column (n,) for one context of "Title: sentence" units (module docstring)."""
    parsed = [split_title(u) for u in units]
    titles = [t for t, _ in parsed]
    para = np.zeros(len(units), np.int64)
    pos = np.zeros(len(units), np.int64)
    for i in range(1, len(units)):
        same = titles[i] == titles[i - 1]
        para[i] = para[i - 1] + (not same)
        pos[i] = pos[i - 1] + 1 if same else 0
    n_para = int(para[-1]) + 1
    members = [np.flatnonzero(para == p) for p in range(n_para)]
    para_title = [titles[m[0]] for m in members]
    para_text = [" ".join([para_title[p], *(parsed[i][1] for i in m)]) for p, m in enumerate(members)]
    para_bm25 = bm25_scores(query, para_text) if n_para > 1 else np.zeros(1)
    rank = np.empty(n_para, np.int64)
    rank[np.argsort(-para_bm25, kind="stable")] = np.arange(n_para)
    para_cos = np.array([cos[m].max() for m in members])
    q_words = set(_WORD.findall(query.lower()))
    title_q = np.array(
        [np.mean([w in q_words for w in ws]) if (ws := _WORD.findall(t.lower())) else 0.0 for t in para_title]
    )
    patterns = [_name_pattern(t) for t in para_title]
    names = np.zeros(len(units))
    named_in = [set() for _ in range(n_para)]  # paragraphs whose sentences name paragraph p
    for i, (_, sentence) in enumerate(parsed):
        for p, pat in enumerate(patterns):
            if p != para[i] and pat is not None and pat.search(sentence):
                names[i] = max(names[i], 1.0 / (1.0 + rank[p]))
                named_in[p].add(int(para[i]))
    order = np.argsort(-para_bm25, kind="stable")
    top3 = [set([int(q) for q in order if q != p][:3]) for p in range(n_para)]
    title_named = np.array([float(bool(named_in[p] & top3[p])) for p in range(n_para)])
    return {
        "pos_inv": 1.0 / (1.0 + pos),
        "first": (pos == 0).astype(float),
        "para_bm25z": _zscore(para_bm25)[para],
        "para_cos_z": _zscore(para_cos)[para],
        "title_q": title_q[para],
        "names_title": names,
        "title_named": title_named[para],
    }


def extra_features(
    query: str, units: Sequence[str], unit_emb: np.ndarray, query_emb: np.ndarray, features: Sequence[str]
) -> np.ndarray:
    """(n, len(features)) float32 per-unit scalar features (see the module docstring)."""
    cols = []
    if features:
        un = unit_emb / np.maximum(np.linalg.norm(unit_emb, axis=1, keepdims=True), 1e-12)
        qn = query_emb / max(float(np.linalg.norm(query_emb)), 1e-12)
        cos = un @ qn
    if any(name in STRUCTURAL for name in features):
        structure = structural_features(query, units, cos)
    for name in features:
        if name in STRUCTURAL:
            cols.append(structure[name])
        elif name == "cos":
            cols.append(cos)
        elif name == "cos_z":
            cols.append(_zscore(cos))
        elif name == "bm25z":
            cols.append(_zscore(bm25_scores(query, units)))
    return np.stack(cols, 1).astype(np.float32) if cols else np.zeros((len(units), 0), np.float32)


def build_contexts(
    queries: Sequence[str],
    units_list: Sequence[Sequence[str]],
    embedder,
    features: Sequence[str],
    labels_list: Sequence[Sequence[int]] | None = None,
    ids: Sequence[str] | None = None,
    metas: Sequence[dict] | None = None,
    show_progress: bool = False,
) -> list[Context]:
    """Embed all queries and units in one batched (cached) call and build one :class:`Context` each."""
    features = check_features(features)
    if len(queries) != len(units_list):
        raise InputError(f"{len(queries)} queries but {len(units_list)} unit lists")
    for i, units in enumerate(units_list):
        if len(units) == 0:
            raise InputError(f"empty context: unit list {i} has no units")
    texts = list(queries) + [u for units in units_list for u in units]
    emb = embedder.encode(texts, batch_size=256, show_progress=show_progress)
    q_emb, offset, out = emb[: len(queries)], len(queries), []
    for i, (query, units) in enumerate(zip(queries, units_list)):
        u_emb = emb[offset : offset + len(units)]
        offset += len(units)
        labels = None if labels_list is None else torch.as_tensor(np.asarray(labels_list[i]), dtype=torch.float32)
        out.append(
            Context(
                units=torch.from_numpy(np.ascontiguousarray(u_emb)),
                query=torch.from_numpy(q_emb[i].copy()),
                extra=torch.from_numpy(extra_features(query, units, u_emb, q_emb[i], features)),
                labels=labels,
                id="" if ids is None else ids[i],
                meta=None if metas is None else metas[i],
                key=context_key(query, units),
            )
        )
    return out


def contexts_from_examples(
    examples, embedder, features: Sequence[str], with_title: bool, show_progress: bool = False
) -> list[Context]:
    """:func:`build_contexts` for :class:`scp.data.datasets.Example` objects (labels, ids and meta carried along)."""
    return build_contexts(
        [ex.query for ex in examples],
        [ex.unit_texts(with_title=with_title) for ex in examples],
        embedder,
        features,
        labels_list=[ex.labels for ex in examples],
        ids=[ex.id for ex in examples],
        metas=[dict(ex.meta, dataset=ex.dataset, paragraph_ids=ex.paragraph_ids) for ex in examples],
        show_progress=show_progress,
    )


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

    def length_groups(self) -> list[tuple[list[int], Batch]]:
        """The batch split by exact context length: (rows, the batch of those rows cut to their length, so
        without padding), in order of first appearance."""
        lengths = self.mask.sum(1).tolist()
        groups: dict[int, list[int]] = {}
        for row, n in enumerate(lengths):
            groups.setdefault(int(n), []).append(row)
        out = []
        for n, rows in groups.items():
            idx = torch.tensor(rows, device=self.mask.device)
            out.append(
                (
                    rows,
                    Batch(
                        self.units[idx, :n],
                        self.query[idx],
                        self.extra[idx, :n],
                        self.mask[idx, :n],
                        self.labels[idx, :n],
                        tuple(self.keys[r] for r in rows) if self.keys else (),
                    ),
                )
            )
        return out


def collate(contexts: Sequence[Context], device: str | torch.device | None = None) -> Batch:
    """Pad contexts to the longest one (padding masked out, labelled 0), on ``device`` (default CPU)."""
    b, n = len(contexts), max(c.n_units for c in contexts)
    d, e = contexts[0].units.shape[1], contexts[0].extra.shape[1]
    units, extra = torch.zeros(b, n, d), torch.zeros(b, n, e)
    mask, labels = torch.zeros(b, n, dtype=torch.bool), torch.zeros(b, n)
    for i, c in enumerate(contexts):
        units[i, : c.n_units], extra[i, : c.n_units], mask[i, : c.n_units] = c.units, c.extra, True
        if c.labels is not None:
            labels[i, : c.n_units] = c.labels
    tensors = (units, torch.stack([c.query for c in contexts]), extra, mask, labels)
    if device is not None:
        tensors = tuple(t.to(device) for t in tensors)
    return Batch(*tensors, keys=tuple(c.key for c in contexts))
