"""Games with a meaning, for supervising a value network on coalitions rather than only through Shapley ranks.

For a context with supporting units labelled 1, let F be its distinct supporting facts (a unit and its
copies — ``meta["copy_of"]`` — are one fact) and P the paragraphs those facts come from:
- coverage:        c(S) = |{f ∈ F : S holds a unit of f}| / |F|  (a duplicate adds nothing);
- complementarity: k(S) = Π_{p∈P} 1[S holds a supporting unit of p] for bridge questions (the answer needs
  both hops), c(S) otherwise.
Both are monotone games with v(∅) = 0 and v(N) = 1; their Shapley values split credit equally between the
copies of a fact (coverage) and between the paragraphs of a bridge (complementarity).
Coalitions are drawn so that every size is likely: p ~ U(0, 1) per coalition, then each unit joins with
probability p.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from scp.errors import InputError

TARGETS = ("coverage", "complement")


def check_targets(targets: Sequence[str]) -> tuple[str, ...]:
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise InputError(f"unknown coalition target(s) {unknown}; choose from {TARGETS}")
    return tuple(targets)


def fact_ids(labels: np.ndarray, meta: dict | None) -> np.ndarray:
    """(n,) fact id of each supporting unit (its original's index for a copy), −1 for the others."""
    labels = np.asarray(labels) > 0.5
    copy_of = np.asarray((meta or {}).get("copy_of", [-1] * len(labels)))
    facts = np.where(copy_of >= 0, copy_of, np.arange(len(labels)))
    return np.where(labels, facts, -1)


def sample_coalitions(n_units: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """(k, n_units) boolean coalitions: p ~ U(0, 1) per row, then Bernoulli(p) per unit."""
    p = rng.random((k, 1))
    return rng.random((k, n_units)) < p


def coverage(coalitions: np.ndarray, facts: np.ndarray) -> np.ndarray:
    """c(S): share of distinct facts with at least one unit in S (rows of ``coalitions``)."""
    distinct = np.unique(facts[facts >= 0])
    if distinct.size == 0:
        raise InputError("coverage needs at least one supporting unit")
    held = np.stack([(coalitions & (facts == f)).any(1) for f in distinct], 1)
    return held.mean(1)


def complementarity(coalitions: np.ndarray, facts: np.ndarray, paragraphs: np.ndarray) -> np.ndarray:
    """k(S) = 1 when S holds a supporting unit from every supporting paragraph, else 0."""
    support = facts >= 0
    if not support.any():
        raise InputError("complementarity needs at least one supporting unit")
    held = np.stack([(coalitions & support & (paragraphs == p)).any(1) for p in np.unique(paragraphs[support])], 1)
    return held.all(1).astype(float)


def coalition_targets(
    labels: np.ndarray, meta: dict | None, coalitions: np.ndarray, targets: Sequence[str]
) -> np.ndarray:
    """Mean over ``targets`` of each game's value on each coalition (complementarity only for bridge
    questions, ``meta["type"] == "bridge"`` with ``meta["paragraph_ids"]``; coverage otherwise)."""
    meta = meta or {}
    facts = fact_ids(labels, meta)
    values = []
    for name in check_targets(targets):
        if name == "complement" and meta.get("type") == "bridge" and "paragraph_ids" in meta:
            values.append(complementarity(coalitions, facts, np.asarray(meta["paragraph_ids"])))
        else:
            values.append(coverage(coalitions, facts))
    return np.mean(values, 0)


def batch_targets(contexts, width: int, targets: Sequence[str], k: int, seed: Sequence[int]):
    """(b, k, width) coalitions (never padding) and (b, k) targets for a batch of contexts."""
    masks, values = torch.zeros(len(contexts), k, width, dtype=torch.bool), torch.zeros(len(contexts), k)
    for i, (c, s) in enumerate(zip(contexts, seed)):
        coal = sample_coalitions(c.n_units, k, np.random.default_rng(s))
        masks[i, :, : c.n_units] = torch.from_numpy(coal)
        values[i] = torch.from_numpy(coalition_targets(c.labels.numpy(), c.meta, coal, targets))
    return masks, values
