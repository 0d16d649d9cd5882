"""The SCP ranker: units scored by a trained checkpoint through its pruner (below both the method registry, which
builds it, and the evaluation, which runs it)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scp.data.features import build_contexts
from scp.pruning.rankers import Ranker


class SCPRanker(Ranker):
    """Scores units by a trained checkpoint through its pruner's estimator (any registered one: Monte-Carlo
    Shapley values by default, an adaptive budget, exact, …; ``scp-loo``: leave-one-out), or the pointwise control's
    outputs; many contexts are batched through the fast path (:meth:`ShapleyPruner.score_contexts`)."""

    def __init__(self, pruner, loo: bool = False, batch_size: int = 32):
        self.pruner, self.loo, self.batch_size = pruner, loo, batch_size
        self.name = "scp-loo" if loo else "scp"
        self.certificates: list = []  # one per context scored with an adaptive budget (scp.core.adaptive)

    def _score(self, query: str, units: list[str]) -> np.ndarray:
        return self.score_many([query], [units])[0]

    def score_many(self, queries: Sequence[str], units_list: Sequence[Sequence[str]]) -> list[np.ndarray]:
        p = self.pruner
        contexts = build_contexts(list(queries), [list(u) for u in units_list], p.embedder, p.config.features)
        results = p.score_contexts(
            contexts, estimator="leave_one_out" if self.loo else None, batch_size=self.batch_size
        )
        self.certificates += [r.certificate for r in results if r.certificate is not None]
        return [self._checked(r.values, len(u)) for r, u in zip(results, units_list)]

    def prefix_values(
        self, queries: Sequence[str], units_list: Sequence[Sequence[str]], scores: Sequence[np.ndarray]
    ) -> list[np.ndarray]:
        """v(S_0), …, v(S_n) of the network's game on each context along its ranking (a set model only)."""
        p = self.pruner
        contexts = build_contexts(list(queries), [list(u) for u in units_list], p.embedder, p.config.features)
        return p.prefix_values(contexts, scores)

    def budget_summary(self) -> dict | None:
        """M used and what was certified, over the contexts scored with an adaptive budget (None otherwise)."""
        if not self.certificates:
            return None
        used = [c.n_permutations for c in self.certificates]
        c0 = self.certificates[0]
        return {
            "delta": c0.delta,
            "tolerance": c0.tolerance,
            "bound": c0.bound,
            "min_permutations": self.pruner.min_permutations,
            "max_permutations": self.pruner.max_permutations,
            "certify_keep": self.pruner.certify_keep,
            "control_variate": self.pruner.control_variate,
            "median_permutations": float(np.median(used)),
            "mean_permutations": float(np.mean(used)),
            "certified": float(np.mean([c.certified for c in self.certificates])),
            "separated": float(np.mean([c.separated for c in self.certificates])),
        }
