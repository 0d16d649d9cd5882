"""The pruner a user meets first: a trained checkpoint ranks sentences by Shapley value and keeps the best.

>>> pruner = ShapleyPruner.from_checkpoint("checkpoints/best.pt")
>>> pruner.rank("Who founded X?", sentences).values          # one Shapley value per sentence
>>> pruner.prune("Who founded X?", text, keep_ratio=0.5).kept_text

Sentences are read as the checkpoint was trained: with ``unit_repr="title"`` pass ``titles=`` (one per
sentence) so units read "Title: sentence"; without titles the bare sentences are used (and a warning says so).
"""

from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np
import torch

from .features import build_contexts
from .games import ValueNetGame
from .prune import PruneResult, prune
from .shapley import ShapleyResult, exact, leave_one_out, monte_carlo
from .text import split_sentences
from .train import PointwiseScorer, TrainConfig, load_checkpoint

ESTIMATORS = ("monte_carlo", "exact", "loo")
MAX_UNITS = 4096


class ShapleyPruner:
    """Rank and prune sentences with a trained value network (or the pointwise control)."""

    def __init__(self, model, config: TrainConfig, embedder, estimator: str = "monte_carlo",
                 n_permutations: int = 50, antithetic: bool = False, seed: int | None = 0,
                 device: str | None = None, max_units: int = MAX_UNITS):
        if estimator not in ESTIMATORS:
            raise ValueError(f"unknown estimator {estimator!r}; choose one of {ESTIMATORS}")
        self.model, self.config, self.embedder = model.eval(), config, embedder
        self.estimator, self.n_permutations, self.antithetic, self.seed = estimator, n_permutations, antithetic, seed
        self.device, self.max_units = device, max_units

    @classmethod
    def from_checkpoint(cls, path, embedder=None, cache_dir=None, **kwargs) -> "ShapleyPruner":
        """Load a checkpoint and the embedder it was trained with (a mismatched embedder is an error)."""
        from .embed import CachedEmbedder, get_embedder

        if embedder is None:
            _, config, _ = load_checkpoint(path)
            embedder = CachedEmbedder(get_embedder(config.embedder), cache_dir)
        model, config, _ = load_checkpoint(path, embedder_id=embedder.id, embed_dim=embedder.dim)
        return cls(model, config, embedder, **kwargs)

    def units(self, sentences: Sequence[str], titles: Sequence[str] | None) -> list[str]:
        if titles is None:
            if self.config.with_title:
                warnings.warn("this checkpoint was trained on 'Title: sentence' units; no titles given, so bare "
                              "sentences are scored (expect lower quality)", stacklevel=3)
            return list(sentences)
        if len(titles) != len(sentences):
            raise ValueError(f"got {len(titles)} titles for {len(sentences)} sentences")
        return [f"{t}: {s}" if t else s for t, s in zip(titles, sentences)]

    def rank(self, query: str, sentences: Sequence[str], titles: Sequence[str] | None = None) -> ShapleyResult:
        """Per-sentence attributions: Shapley values (Monte Carlo / exact), LOO, or pointwise scores."""
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        sentences = list(sentences)
        if not sentences:
            raise ValueError("empty context: give at least one sentence")
        if not all(isinstance(s, str) and s.strip() for s in sentences):
            raise ValueError("every sentence must be a non-empty string")
        if len(sentences) > self.max_units:
            raise ValueError(f"context of {len(sentences)} sentences exceeds max_units={self.max_units}; split it into "
                             "passages or raise max_units (cost grows as M·n²)")
        units = self.units(sentences, titles)
        first: dict[str, int] = {}
        duplicates = []
        for i, unit in enumerate(units):
            j = first.setdefault(unit.strip(), i)
            if j != i:
                duplicates.append((j, i))
        if duplicates:
            warnings.warn(f"duplicate sentences (first, repeat) at {duplicates[:5]}: Shapley values split their credit "
                          "between copies (leave-one-out would give each ≈ 0)", stacklevel=2)
        ctx = build_contexts([query], [units], self.embedder, self.config.features)[0]
        if isinstance(self.model, PointwiseScorer):
            with torch.no_grad():
                scores = self.model(ctx.units[None], ctx.query[None], None, ctx.extra[None])[0]
            return ShapleyResult(values=scores.double().numpy(), n_evaluations=len(sentences), method="pointwise")
        game = ValueNetGame(self.model, ctx.units, ctx.query, ctx.extra if self.model.n_extra else None,
                            cache_psi=True)
        if self.estimator == "exact":
            return exact(game)
        if self.estimator == "loo":
            return leave_one_out(game)
        return monte_carlo(game, self.n_permutations, antithetic=self.antithetic, seed=self.seed, device=self.device)

    def prune(self, query: str, sentences_or_text: str | Sequence[str], *, keep_ratio: float | None = None,
              top_k: int | None = None, token_budget: int | None = None, titles: Sequence[str] | None = None,
              **kwargs) -> PruneResult:
        """Rank, then keep by exactly one of ``keep_ratio``, ``top_k`` or ``token_budget`` (text is sentence-split)."""
        sentences = split_sentences(sentences_or_text) if isinstance(sentences_or_text, str) else list(sentences_or_text)
        scores = self.rank(query, sentences, titles).values
        return prune(sentences, np.asarray(scores), keep_ratio=keep_ratio, top_k=top_k, token_budget=token_budget,
                     **kwargs)
