"""Baseline rankers: score the units of a context for a query, one float per unit, higher = more relevant.

:class:`Ranker` is the one interface: ``score(query, units)`` and ``score_many(queries, units_list)``
(a loop by default; rankers that batch override it).  Model-backed rankers load their model on first
use; a missing package, or weights neither in the local Hugging Face cache nor downloadable (offline),
raise :class:`~scp.errors.ModelUnavailableError` within seconds (see :func:`scp.data.embedders.load_hub_model`).
"""

from __future__ import annotations

import abc
import hashlib
import string
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from scp.data.bm25 import bm25_scores
from scp.data.embedders import (
    Embedder,
    l2_normalize,
    load_hf_model,
    load_hub_model,
    quiet_weight_loading,
    require_package,
)
from scp.data.text import WORD_TOKENIZER, as_text_list, is_blank, word_tokens
from scp.devices import default_device
from scp.errors import InputError, InputTypeError


class Ranker(abc.ABC):
    """Scores context units for a query.  Subclasses implement :meth:`_score` on a non-empty unit list."""

    name: str

    def score(self, query: str, units: Sequence[str]) -> np.ndarray:
        """float64 array with one score per unit (higher = more relevant); empty for no units.  A blank query or
        unit (nothing visible, :func:`scp.data.text.is_blank`) is an error: there is nothing to rank it by or for."""
        query, units = _check_query(query), as_text_list(units)
        blank = next((i for i, unit in enumerate(units) if is_blank(unit)), None)
        if blank is not None:
            raise InputError(f"unit {blank} is empty (nothing visible: {units[blank]!r}); drop it before ranking")
        if not units:
            return np.zeros(0)
        return self._checked(self._score(query, units), len(units))

    def score_many(self, queries: Sequence[str], units_list: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """``[score(q, u) for q, u in zip(queries, units_list)]``; batching rankers override it."""
        _check_pairs(queries, units_list)
        return [self.score(q, u) for q, u in zip(queries, units_list)]

    @abc.abstractmethod
    def _score(self, query: str, units: list[str]) -> np.ndarray:
        """Scores of a non-empty list of units."""

    def prefix_values(
        self, queries: Sequence[str], units_list: Sequence[Sequence[str]], scores: Sequence[np.ndarray]
    ) -> list[np.ndarray]:
        """v(S_0), …, v(S_n) of each context's game along the ranking ``scores`` (what the value-fraction
        criterion reads); only a ranker that plays a game on sets of units has them."""
        raise InputError(
            f"ranker {self.name!r} scores units without a game v(S) on sets of them, so value_fraction does not "
            "apply to it: use threshold, keep_ratio or top_k"
        )

    def _checked(self, scores: Any, n: int) -> np.ndarray:
        scores = np.asarray(scores, dtype=np.float64).reshape(-1)
        if scores.shape != (n,):
            raise RuntimeError(f"ranker {self.name} returned {scores.shape[0]} scores for {n} units")
        if not np.isfinite(scores).all():
            raise FloatingPointError(f"ranker {self.name} returned non-finite scores")
        return scores

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _check_query(query: Any) -> str:
    if not isinstance(query, str):
        raise InputTypeError(f"query must be a str, got {type(query).__name__}")
    if is_blank(query):
        raise InputError(f"the query is empty (nothing visible: {query!r})")
    return query


def _check_pairs(queries: Sequence[str], units_list: Sequence[Sequence[str]]) -> None:
    if isinstance(queries, str):
        raise InputTypeError("queries must be a sequence of strings, not a single string")
    if len(queries) != len(units_list):
        raise InputError(f"{len(queries)} queries but {len(units_list)} unit lists")


class BM25Ranker(Ranker):
    """Okapi BM25 with the context's own units as the corpus: :func:`scp.data.bm25.bm25_scores` (k1 = 1.5,
    b = 0.75, idf clipped at 0, so all scores are ≥ 0 and N ≤ 2 units all tie at 0)."""

    tokenizer = WORD_TOKENIZER

    def __init__(self, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> None:
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.name = "bm25"

    def _score(self, query: str, units: list[str]) -> np.ndarray:
        return bm25_scores(query, units, self.k1, self.b, self.epsilon)


class CosineRanker(Ranker):
    """Bi-encoder relevance: cos(e(q), e(u)) = e(q)·e(u) / (|e(q)| |e(u)|), 0 for a zero vector.

    Wrap the embedder in :class:`scp.data.embedders.CachedEmbedder` to reuse vectors across runs;
    :meth:`score_many` embeds all distinct texts of all queries in one batched call.
    """

    def __init__(self, embedder: Embedder, batch_size: int = 256) -> None:
        self.embedder = embedder
        self.batch_size = batch_size
        self.name = f"cosine:{embedder.id}"

    def _score(self, query: str, units: list[str]) -> np.ndarray:
        x = l2_normalize(self.embedder.encode([query, *units], batch_size=self.batch_size))
        return x[1:] @ x[0]

    def score_many(self, queries: Sequence[str], units_list: Sequence[Sequence[str]]) -> list[np.ndarray]:
        _check_pairs(queries, units_list)
        queries = [_check_query(q) for q in queries]
        units_list = [as_text_list(u) for u in units_list]
        texts = list(dict.fromkeys([*queries, *(u for units in units_list for u in units)]))
        row = {t: i for i, t in enumerate(texts)}
        x = l2_normalize(self.embedder.encode(texts, batch_size=self.batch_size))
        return [
            self._checked(x[[row[u] for u in units]] @ x[row[q]], len(units)) if units else np.zeros(0)
            for q, units in zip(queries, units_list)
        ]


class CrossEncoderRanker(Ranker):
    """Cross-encoder relevance: the model's score of the pair (query, unit) (sentence-transformers
    ``CrossEncoder.predict``).  Hub model, loaded on first use; :meth:`score_many` predicts all pairs at once."""

    def __init__(
        self, model: str = "cross-encoder/ms-marco-MiniLM-L6-v2", batch_size: int = 64, device: str | None = None
    ) -> None:
        require_package("sentence_transformers", "sentence-transformers", f"the cross-encoder '{model}'")
        self.model_name, self.batch_size, self.device = model, batch_size, device
        self.name = f"cross-encoder:{model}"
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            from sentence_transformers import CrossEncoder

            def load(local: bool) -> Any:
                with quiet_weight_loading():  # no "Loading weights" bar on stderr
                    return CrossEncoder(self.model_name, device=self.device or default_device(), local_files_only=local)

            self._model = load_hub_model(self.model_name, load, "cross-encoder")
        return self._model

    def _predict(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        return np.asarray(
            self._load().predict(pairs, batch_size=self.batch_size, show_progress_bar=False), dtype=np.float64
        )

    def _score(self, query: str, units: list[str]) -> np.ndarray:
        return self._predict([(query, u) for u in units])

    def score_many(self, queries: Sequence[str], units_list: Sequence[Sequence[str]]) -> list[np.ndarray]:
        _check_pairs(queries, units_list)
        units_list = [as_text_list(u) for u in units_list]
        pairs = [(_check_query(q), u) for q, units in zip(queries, units_list) for u in units]
        flat = self._predict(pairs) if pairs else np.zeros(0)
        bounds = np.cumsum([0, *(len(u) for u in units_list)])
        return [self._checked(flat[a:b], b - a) for a, b in zip(bounds[:-1], bounds[1:])]


def unit_token_means(
    tokenizer: Any, prefix: str, units: list[str], max_length: int, token_probs: Callable[[dict[str, Any]], np.ndarray]
) -> np.ndarray:
    """Mean per-token probability of each unit, for token classifiers that score a whole passage.

    The units, joined by single spaces after ``prefix``, are packed greedily into windows of at most
    ``max_length`` tokens (a unit is never split across windows).  Each window is tokenized (fast
    tokenizer, character offsets) and ``token_probs(encoding)`` gives one probability per token; a token
    belongs to the unit containing its last character, and prefix and special tokens to none.  Packing
    counts one spare token per unit; a unit longer than a whole window is scored on its first tokens, and
    a unit with no token (empty) scores 0.
    """
    prefix_len = len(tokenizer(prefix, add_special_tokens=False)["input_ids"]) if prefix else 0
    budget = max(max_length - prefix_len - 8, 1)  # room for special tokens and joining differences
    windows: list[list[int]] = [[]]
    used = 0
    for i, unit in enumerate(units):
        n = len(tokenizer(unit, add_special_tokens=False)["input_ids"])
        if windows[-1] and used + n > budget:
            windows.append([])
            used = 0
        windows[-1].append(i)
        used += n + 1
    sums, counts = np.zeros(len(units)), np.zeros(len(units))
    for window in windows:
        starts = np.cumsum([len(prefix), *(len(units[i]) + 1 for i in window[:-1])])
        ends = starts + np.array([len(units[i]) for i in window])
        encoding = tokenizer(
            prefix + " ".join(units[i] for i in window),
            return_offsets_mapping=True,
            truncation=True,
            max_length=max_length,
            return_tensors="pt",
        )
        offsets = encoding.pop("offset_mapping")[0].numpy()
        probs = np.asarray(token_probs(encoding), dtype=np.float64).reshape(-1)
        last = offsets[:, 1] - 1
        j = np.searchsorted(starts, last, side="right") - 1
        inside = (offsets[:, 1] > offsets[:, 0]) & (j >= 0) & (last < ends[np.clip(j, 0, None)])
        unit = np.asarray(window)[j[inside]]
        np.add.at(sums, unit, probs[inside])
        np.add.at(counts, unit, 1)
    return np.divide(sums, counts, out=np.zeros(len(units)), where=counts > 0)


class LLMLingua2Ranker(Ranker):
    """LLMLingua-2 token-keep probabilities, averaged per unit: score(u) = mean_{tok ∈ u} P(keep | tok).

    The model (XLM-RoBERTa token classifier, label 1 = keep) reads the units joined as one passage, in
    windows of ≤ 512 tokens (:func:`unit_token_means`).  Query-agnostic: LLMLingua-2 does not see the
    query.  Loaded with transformers (the ``llmlingua`` package wraps the same model and is not needed).
    """

    def __init__(
        self,
        model: str = "microsoft/llmlingua-2-xlm-roberta-large-meetingbank",
        max_length: int = 512,
        device: str | None = None,
    ) -> None:
        require_package("transformers", "transformers", f"LLMLingua-2 ('{model}')")
        self.model_name, self.max_length, self.device = model, max_length, device
        self.name = f"llmlingua2:{model}"
        self._loaded: tuple[Any, Any] | None = None

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            self._loaded = load_hf_model(
                self.model_name, "AutoModelForTokenClassification", self.device or default_device(), "LLMLingua-2 model"
            )
        return self._loaded

    def _score(self, query: str, units: list[str]) -> np.ndarray:
        import torch

        tokenizer, model = self._load()

        def keep_probs(encoding: dict[str, Any]) -> np.ndarray:
            with torch.inference_mode():
                logits = model(**{k: v.to(model.device) for k, v in encoding.items()}).logits
            return torch.softmax(logits.float(), dim=-1)[0, :, 1].cpu().numpy()

        return unit_token_means(tokenizer, "", units, self.max_length, keep_probs)


class ProvenceRanker(Ranker):
    """Provence (DeBERTa-v3 reranker + context pruner) per-unit keep scores.

    Input ``"<question> [SEP] <units joined by spaces>"``, the question lower-cased, stripped of ASCII
    punctuation and whitespace-collapsed as Provence does; score(u) = mean over u's tokens of
    softmax(compression_logits)[keep] — the sentence-level average Provence thresholds to prune
    (:func:`unit_token_means`, windows of ≤ 512 tokens).  Loaded with ``trust_remote_code``.
    """

    def __init__(
        self, model: str = "naver/provence-reranker-debertav3-v1", max_length: int = 512, device: str | None = None
    ) -> None:
        require_package("transformers", "transformers", f"Provence ('{model}')")
        self.model_name, self.max_length, self.device = model, max_length, device
        self.name = f"provence:{model}"
        self._loaded: tuple[Any, Any] | None = None

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            self._loaded = load_hf_model(
                self.model_name, "AutoModel", self.device or default_device(), "Provence model", trust_remote_code=True
            )
        return self._loaded

    def _score(self, query: str, units: list[str]) -> np.ndarray:
        import torch

        tokenizer, model = self._load()
        question = " ".join(query.lower().translate(str.maketrans("", "", string.punctuation)).split())

        def keep_probs(encoding: dict[str, Any]) -> np.ndarray:
            with torch.inference_mode():
                out = model(
                    input_ids=encoding["input_ids"].to(model.device),
                    attention_mask=encoding["attention_mask"].to(model.device),
                )
            return torch.softmax(out.compression_logits.float(), dim=-1)[0, :, 1].cpu().numpy()

        return unit_token_means(tokenizer, f"{question} {tokenizer.sep_token} ", units, self.max_length, keep_probs)


class TfidfRanker(Ranker):
    """TF-IDF cosine of each unit with the query: the vectorizer is fit on the context's units and the query
    (sklearn ``TfidfVectorizer``: smoothed idf, l2-normalised rows) with BM25's tokens
    (:func:`scp.data.text.word_tokens`), so scores lie in [0, 1], 0 when a unit shares no word with the query
    (all 0 when no text has a word)."""

    tokenizer = WORD_TOKENIZER

    def __init__(self) -> None:
        self.name = "tfidf"

    def _score(self, query: str, units: list[str]) -> np.ndarray:
        from sklearn.feature_extraction.text import TfidfVectorizer

        vectorizer = TfidfVectorizer(tokenizer=word_tokens, lowercase=False, token_pattern=None)
        try:
            x = vectorizer.fit_transform(units + [query])
        except ValueError:  # an empty vocabulary: no word anywhere
            return np.zeros(len(units))
        return np.asarray((x[:-1] @ x[-1].T).toarray(), dtype=np.float64).reshape(-1)


class RandomRanker(Ranker):
    """Uniform(0, 1) scores, a deterministic function of (seed, query, number of units)."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.name = f"random:seed{seed}"

    def _score(self, query: str, units: list[str]) -> np.ndarray:
        digest = hashlib.sha256(f"{self.seed}\0{len(units)}\0{query}".encode()).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], "little")).random(len(units))
