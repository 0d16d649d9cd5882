"""Pruning a context from per-sentence scores: top-K, keep ratio, average threshold, token budget.

Kept sentences always stay in their original order.  Token counts use a named tokenizer; the default
``regex-words`` counts lowercase ``\\w+`` words plus punctuation marks, so counts are reproducible without any
model download.  Any callable ``str -> list`` can be passed instead, with its name.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .errors import InputError, warn_user
from .text import as_text_list, is_blank

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
        return {"kept_text": self.kept_text, "kept_indices": list(self.kept_indices),
                "removed_indices": list(self.removed_indices), "scores": list(self.scores),
                "original_tokens": self.original_tokens, "kept_tokens": self.kept_tokens,
                "tokenizer": self.tokenizer, "criterion": self.criterion, "keep_rate": self.keep_rate,
                "token_ratio": self.token_ratio, "compression_rate": self.compression_rate}


def is_real(value) -> bool:
    """A real number, Python or NumPy (``np.float32(0.5)``, ``np.int64(3)``), but not a bool (NaN is a real)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def is_integer(value) -> bool:
    """An integer, Python or NumPy (``np.int64(3)``), but not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def check_criterion(*, top_k=None, keep_ratio=None, threshold=None, token_budget=None) -> str:
    """Validate that exactly one pruning criterion is given, with a valid value; returns its description.

    Cheap, so callers run it before any expensive ranking.
    """
    given = {k: v for k, v in dict(top_k=top_k, keep_ratio=keep_ratio, threshold=threshold,
                                    token_budget=token_budget).items() if v is not None}
    if len(given) != 1:
        raise InputError(f"give exactly one of top_k, keep_ratio, threshold, token_budget; got {sorted(given) or 'none'}")
    (name, value), = given.items()
    is_int = is_integer(value)
    if name == "top_k" and not (is_int and value >= 1):
        raise InputError(f"top_k must be an integer ≥ 1; got {value!r}")
    if name == "keep_ratio" and not (is_real(value) and 0 < value <= 1):  # NaN fails the comparison
        raise InputError(f"keep_ratio must be a number in (0, 1]; got {value!r} ({type(value).__name__})")
    if name == "threshold" and not ((isinstance(value, str) and value == "mean")
                                    or (is_real(value) and math.isfinite(value))):
        raise InputError(f"threshold must be 'mean' or a finite number; got {value!r}")
    if name == "token_budget" and not (is_int and value >= 0):
        raise InputError(f"token_budget must be a non-negative integer; got {value!r} ({type(value).__name__})")
    if isinstance(value, np.generic):  # described by the Python number it is: np.float32(0.1) is 0.10000000149…,
        value = value.item()           # which keeps more units than 0.1 and must not read "keep_ratio=0.1"
    return f"{name}={value}"


def select(scores: Sequence[float], *, top_k: int | None = None, keep_ratio: float | None = None,
           threshold: str | float | None = None, token_counts: Sequence[int] | None = None,
           token_budget: int | None = None) -> tuple[np.ndarray, str]:
    """Indices to keep (sorted) under exactly one criterion, and the criterion's description.

    - ``top_k``: the k highest scores;  ``keep_ratio``: the ceil(r·n) highest (at least one);
    - ``threshold="mean"``: φ_i ≥ mean(φ) (the paper's Algorithm 3), or a number: φ_i ≥ that number;
    - ``token_budget`` (needs ``token_counts``): greedily by decreasing score, keep each unit that still fits
      (a budget below every unit's length keeps nothing, with a warning).
    Ties are broken by original position (earlier first).
    """
    desc = check_criterion(top_k=top_k, keep_ratio=keep_ratio, threshold=threshold, token_budget=token_budget)
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    n = s.size
    if n == 0:
        raise InputError("empty context: nothing to prune")
    if not np.isfinite(s).all():
        raise InputError("scores contain NaN or inf")
    order = np.argsort(-s, kind="stable")
    if top_k is not None:
        keep = order[:min(top_k, n)]
    elif keep_ratio is not None:
        keep = order[:max(1, math.ceil(float(keep_ratio) * n - 1e-9))]  # in float64, as the description reads
    elif threshold is not None:
        keep = np.flatnonzero(s >= (s.mean() if threshold == "mean" else float(threshold)) - 1e-12)
    else:
        if token_counts is None or len(token_counts) != n:
            raise InputError("token_budget needs one token count per unit")
        counts, used, chosen = np.asarray(token_counts), 0, []
        for i in order:
            if used + counts[i] <= token_budget:
                chosen.append(i)
                used += counts[i]
        keep = np.asarray(chosen, dtype=np.int64)
        if not chosen:
            warn_user(f"token_budget={token_budget} keeps no unit: the shortest of the {n} units has "
                      f"{int(counts.min())} tokens, so the pruned text is empty")
    return np.sort(keep), desc


def prune(sentences: Sequence[str], scores: Sequence[float], *, top_k: int | None = None,
          keep_ratio: float | None = None, threshold: str | float | None = None, token_budget: int | None = None,
          tokenizer: Callable[[str], list] | None = None, tokenizer_name: str | None = None,
          separator: str = " ") -> PruneResult:
    """Keep the best-scoring sentences under one criterion (see :func:`select`) and report the savings."""
    sentences = as_text_list(sentences, "sentences")
    if not sentences:
        raise InputError("empty context: nothing to prune")
    if len(scores) != len(sentences):
        raise InputError(f"got {len(scores)} scores for {len(sentences)} sentences")
    blank = [i for i, t in enumerate(sentences) if is_blank(t)]
    if blank:
        raise InputError(f"sentence {blank[0]} is empty (only whitespace or invisible characters): "
                         f"{sentences[blank[0]]!r}; drop it before pruning")
    tokenize = tokenizer or regex_tokens
    name = tokenizer_name or ("regex-words" if tokenizer is None else getattr(tokenizer, "__name__", "custom"))
    counts = [len(tokenize(t)) for t in sentences]
    keep, desc = select(scores, top_k=top_k, keep_ratio=keep_ratio, threshold=threshold,
                        token_counts=counts, token_budget=token_budget)
    kept = set(keep.tolist())
    return PruneResult(
        kept_text=separator.join(sentences[i].strip() for i in keep),
        kept_indices=tuple(int(i) for i in keep),
        removed_indices=tuple(i for i in range(len(sentences)) if i not in kept),
        scores=tuple(float(x) for x in scores), original_tokens=int(sum(counts)),
        kept_tokens=int(sum(counts[i] for i in keep)), tokenizer=name, criterion=desc)
