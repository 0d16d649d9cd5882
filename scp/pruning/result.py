"""Pruning a context from per-sentence scores: top-K, keep ratio, a threshold, a token budget or a share of the value.

Kept sentences always stay in their original order.  Token counts use a named tokenizer; the default
``regex-words`` counts lowercase ``\\w+`` words plus punctuation marks, so counts are reproducible without any
model download.  Any callable ``str -> list`` can be passed instead, with its name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass

from scp.core.selection import is_real, select
from scp.data.text import as_text_list, is_blank
from scp.errors import InputError, InputTypeError

_TOKEN = re.compile(r"\w+|[^\w\s]")


def regex_tokens(text: str) -> list[str]:
    """The ``regex-words`` tokenizer: ``\\w+`` runs and single punctuation marks."""
    return _TOKEN.findall(text)


@dataclass(frozen=True)
class PruneResult:
    """What pruning kept, what it removed, and what it saved."""

    kept_text: str
    kept_indices: tuple[int, ...]
    removed_indices: tuple[int, ...]
    scores: tuple[float, ...]
    original_tokens: int
    kept_tokens: int
    tokenizer: str
    criterion: str

    @property
    def n_units(self) -> int:
        return len(self.scores)

    @property
    def keep_rate(self) -> float:
        """Fraction of units kept."""
        return len(self.kept_indices) / self.n_units

    @property
    def token_ratio(self) -> float:
        """kept tokens / original tokens."""
        return self.kept_tokens / self.original_tokens if self.original_tokens else 1.0

    @property
    def compression_rate(self) -> float:
        """Fraction of tokens removed: 1 − kept/original."""
        return 1.0 - self.token_ratio

    def as_dict(self) -> dict:
        return {
            "kept_text": self.kept_text,
            "kept_indices": list(self.kept_indices),
            "removed_indices": list(self.removed_indices),
            "scores": list(self.scores),
            "original_tokens": self.original_tokens,
            "kept_tokens": self.kept_tokens,
            "tokenizer": self.tokenizer,
            "criterion": self.criterion,
            "keep_rate": self.keep_rate,
            "token_ratio": self.token_ratio,
            "compression_rate": self.compression_rate,
        }


def as_scores(scores, n: int) -> list[float]:
    """``scores`` as a list of ``n`` floats: a list, tuple or 1-d array of finite real numbers (not bools), one
    per sentence.  A generator, str, bytes, dict, set or nested list is an :class:`InputTypeError`, a wrong
    count or a NaN / inf an :class:`InputError`, each naming ``scores`` and what it must be."""
    what = f"scores must be a list or tuple of {n} finite numbers, one per sentence"
    if getattr(scores, "ndim", None) == 1 and hasattr(scores, "tolist"):  # a 1-d numpy array or tensor
        scores = scores.tolist()
    if isinstance(scores, (str, bytes, Mapping, Set)) or not isinstance(scores, Sequence):
        raise InputTypeError(f"{what}; got a {type(scores).__name__}")
    if len(scores) != n:
        raise InputError(f"got {len(scores)} scores for {n} sentences")
    bad = next((i for i, x in enumerate(scores) if not is_real(x)), None)
    if bad is not None:
        raise InputTypeError(f"{what}; scores[{bad}] is a {type(scores[bad]).__name__}: {scores[bad]!r:.80}")
    bad = next((i for i, x in enumerate(scores) if not math.isfinite(x)), None)
    if bad is not None:
        raise InputError(f"{what}; scores[{bad}] is {scores[bad]!r} (NaN or inf)")
    return [float(x) for x in scores]


def prune(
    sentences: Sequence[str],
    scores: Sequence[float],
    *,
    top_k: int | None = None,
    keep_ratio: float | None = None,
    threshold: str | float | None = None,
    token_budget: int | None = None,
    value_fraction: float | None = None,
    prefix_values: Sequence[float] | None = None,
    tokenizer: Callable[[str], list] | None = None,
    tokenizer_name: str | None = None,
    separator: str = " ",
) -> PruneResult:
    """Keep the best-scoring sentences under one criterion (see :func:`select`) and report the savings.

    ``value_fraction`` needs ``prefix_values``, the game's values of the ranking's top-k prefixes
    (:meth:`scp.pruning.pruner.ShapleyPruner.prune` computes them from its value network)."""
    sentences = as_text_list(sentences, "sentences")
    if not sentences:
        raise InputError("empty context: nothing to prune")
    scores = as_scores(scores, len(sentences))
    blank = [i for i, t in enumerate(sentences) if is_blank(t)]
    if blank:
        raise InputError(
            f"sentence {blank[0]} is empty (only whitespace or invisible characters): "
            f"{sentences[blank[0]]!r}; drop it before pruning"
        )
    tokenize = tokenizer or regex_tokens
    name = tokenizer_name or ("regex-words" if tokenizer is None else getattr(tokenizer, "__name__", "custom"))
    counts = [len(tokenize(t)) for t in sentences]
    keep, desc = select(
        scores,
        top_k=top_k,
        keep_ratio=keep_ratio,
        threshold=threshold,
        token_counts=counts,
        token_budget=token_budget,
        value_fraction=value_fraction,
        prefix_values=prefix_values,
    )
    kept = set(keep.tolist())
    return PruneResult(
        kept_text=separator.join(sentences[i].strip() for i in keep),
        kept_indices=tuple(int(i) for i in keep),
        removed_indices=tuple(i for i in range(len(sentences)) if i not in kept),
        scores=tuple(float(x) for x in scores),
        original_tokens=int(sum(counts)),
        kept_tokens=int(sum(counts[i] for i in keep)),
        tokenizer=name,
        criterion=desc,
    )
