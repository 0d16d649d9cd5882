"""Okapi BM25 with the context's own units as the corpus (``rank_bm25.BM25Okapi``, k1 = 1.5, b = 0.75).

score(u) = Σ_{t ∈ q} idf(t) · f(t,u)(k1+1) / (f(t,u) + k1(1 − b + b·|u|/avgdl)),
idf(t) = ln((N − n_t + 0.5) / (n_t + 0.5)) over the N units, n_t of which contain t (query tokens
repeat).  Tokenizer: :func:`scp.data.text.word_tokens`, lower-case ``\\w+`` runs.
With few units idf goes negative for terms in more than half of them; BM25Okapi then uses the floor
ε·mean(idf) (ε = 0.25), which is itself negative when most terms are that common, so we clip idf at
0: matching a term never lowers a score.  Hence all scores are ≥ 0, and with N ≤ 2 units every idf
is ≤ 0 and BM25 cannot separate them (all scores tie at 0).  The value-network features
(:mod:`scp.data.features`) and the BM25 ranker (:class:`scp.pruning.rankers.BM25Ranker`) both score with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scp.data.text import word_tokens


def bm25_scores(
    query: str, units: Sequence[str], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
) -> np.ndarray:
    """float64 BM25 score of each unit for ``query`` (the module docstring); zeros when nothing can match."""
    from rank_bm25 import BM25Okapi

    corpus = [word_tokens(u) for u in units]
    terms = word_tokens(query)
    if not terms or not any(corpus):  # BM25Okapi divides by avgdl = 0 on an all-empty corpus
        return np.zeros(len(corpus))
    bm25 = BM25Okapi(corpus, k1=k1, b=b, epsilon=epsilon)
    bm25.idf = {t: max(v, 0.0) for t, v in bm25.idf.items()}
    return np.asarray(bm25.get_scores(terms), dtype=np.float64)
