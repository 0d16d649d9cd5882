"""The landscape of a small context: real contexts cut down to n ≤ 12–14 units, the exact games a trained value
network plays on them, and the cooperative-game objects read off those games.

Exact Shapley values, cores and Harsanyi dividends enumerate all 2^n coalitions, so they are computed on small
contexts: :func:`truncate_example` keeps the supporting paragraphs of a multi-hop example plus a few distractor
paragraphs and drops trailing non-supporting sentences until at most ``max_units`` remain.
:func:`value_games` turns examples into :class:`scp.models.game.ValueNetGame` objects read exactly as a checkpoint
reads them ("Title: sentence" units when it was trained so, the same per-unit features).

Value networks have v(∅) = B·σ(ρ(0)) ≠ 0, so the core is taken of the normalised game v₀(S) = v(S) − v(∅)
(:func:`normalised_table`), whose grand value v₀(N) = v(N) − v(∅) is what the Shapley values share out.
:func:`least_core_tight_sets` returns the least-core allocation and the coalitions binding at it;
:func:`pairwise_dividends` the matrix of pair dividends d({i, j}), the synergy of two units on their own, and
:func:`pairwise_interaction` the Shapley interaction index, that synergy averaged over every context the pair can
sit in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from scp.core import theory
from scp.core.games import Game
from scp.data.datasets import Example
from scp.errors import InputError
from scp.models.game import ValueNetGame

__all__ = [
    "LeastCoreTight",
    "least_core_tight_sets",
    "normalised_table",
    "pairwise_dividends",
    "pairwise_interaction",
    "truncate_example",
    "value_games",
]


def truncate_example(example: Example, max_units: int = 12, n_distractor_paragraphs: int = 1) -> Example | None:
    """A small context from ``example``: its supporting paragraphs plus distractor paragraphs, at most
    ``max_units`` units.

    Paragraphs holding a supporting unit (label 1) are all kept, with the first ``n_distractor_paragraphs``
    paragraphs without one (in context order).  While there are more than ``max_units`` units, the last
    non-supporting unit of the longest paragraph that still has one and more than one unit is dropped (ties: the
    later paragraph), so every kept paragraph keeps at least one unit and every supporting unit stays.

    Args:
        example: an :class:`~scp.data.datasets.Example` with ``paragraph_ids`` (e.g. HotpotQA at sentence granularity).
        max_units: the most units the result may have (≥ 1).
        n_distractor_paragraphs: distractor paragraphs to keep (≥ 0).

    Returns:
        A new Example with the same id, query and answers, units in their original order, and
        ``meta["n_units_original"]``; ``None`` when the supporting units alone exceed ``max_units`` or the example
        has no supporting unit.
    """
    if max_units < 1 or n_distractor_paragraphs < 0:
        raise InputError(
            f"need max_units ≥ 1 and n_distractor_paragraphs ≥ 0; got {max_units}, {n_distractor_paragraphs}"
        )
    pids = list(dict.fromkeys(example.paragraph_ids))
    gold = {p for p, y in zip(example.paragraph_ids, example.labels) if y}
    if not gold:
        return None
    distractors = [p for p in pids if p not in gold][:n_distractor_paragraphs]
    keep_pids = gold | set(distractors)
    kept = [i for i, p in enumerate(example.paragraph_ids) if p in keep_pids]
    while len(kept) > max_units:
        sizes = {p: sum(example.paragraph_ids[i] == p for i in kept) for p in keep_pids}
        candidates = [
            p
            for p in keep_pids
            if sizes[p] > 1 and any(example.paragraph_ids[i] == p and not example.labels[i] for i in kept)
        ]
        if not candidates:
            return None
        worst = max(candidates, key=lambda p: (sizes[p], pids.index(p)))
        drop = max(i for i in kept if example.paragraph_ids[i] == worst and not example.labels[i])
        kept.remove(drop)
    pick = lambda seq: tuple(seq[i] for i in kept)  # noqa: E731
    return replace(
        example,
        units=pick(example.units),
        labels=pick(example.labels),
        titles=pick(example.titles),
        paragraph_ids=pick(example.paragraph_ids),
        meta={**example.meta, "n_units_original": example.n_units},
    )


def value_games(pruner, examples: Sequence[Example]) -> list[ValueNetGame]:
    """The game v(S) = net(units[S], query) that ``pruner``'s network plays on each example.

    Args:
        pruner: a :class:`scp.pruning.pruner.ShapleyPruner` (its model, its training config's unit text and features,
            its embedder).
        examples: the contexts.

    Returns:
        One ψ-caching :class:`~scp.models.game.ValueNetGame` per example (values in [0, B]).
    """
    from scp.data.features import contexts_from_examples

    model, config = pruner.model, pruner.config
    contexts = contexts_from_examples(list(examples), pruner.embedder, config.features, config.with_title)
    return [ValueNetGame(model, c.units, c.query, c.extra, cache_psi=True) for c in contexts]


def normalised_table(game: Game | np.ndarray) -> np.ndarray:
    """All 2^n values of v₀(S) = v(S) − v(∅), indexed by bitmask (player i ↔ bit i)."""
    table = theory.as_table(game)[0]
    return table - table[0]


@dataclass(frozen=True, eq=False)
class LeastCoreTight:
    """The least core of a game and the coalitions binding at one least-core allocation.

    ``epsilon`` = ε*, the smallest ε with a non-empty ε-core (≤ 0 iff the core is non-empty); ``allocation`` = x*
    (a vertex of the least core); ``tight`` = every ∅ ≠ S ⊊ N with v(S) − x*(S) = ε* (up to ``tol``), in
    increasing bitmask order; ``shifted`` = the table of the game v_ε(S) = v(S) − ε* on proper coalitions, of
    whose core x* is a member and whose tight sets (:func:`scp.core.theory.tight_sets`) are ``tight`` plus N.
    """

    epsilon: float
    allocation: np.ndarray
    tight: list[tuple[int, ...]]
    shifted: np.ndarray


def least_core_tight_sets(game: Game | np.ndarray, tol: float = 1e-7) -> LeastCoreTight:
    """Solve the least-core LP (:func:`scp.core.theory.least_core`) and list the coalitions binding at its solution.

    Args:
        game: a game or its table of 2^n values (n ≤ :data:`scp.core.theory.MAX_PLAYERS`).
        tol: how close v(S) − x*(S) must come to ε* to count as binding (the LP is solved to about 1e-9).

    Returns:
        A :class:`LeastCoreTight`; pass its ``shifted`` table and ``allocation`` to
        :func:`scp.core.theory.context_tree` for the laminar tree of the binding coalitions.
    """
    table = theory.as_table(game)[0]
    lc = theory.least_core(table, tol=tol)
    shifted = table - lc.epsilon
    shifted[0], shifted[-1] = table[0], table[-1]
    tight = [s for s in theory.tight_sets(shifted, lc.allocation, tol=tol) if len(s) < shifted.size.bit_length() - 1]
    return LeastCoreTight(epsilon=lc.epsilon, allocation=lc.allocation, tight=tight, shifted=shifted)


def _pair_sums(weights: np.ndarray) -> np.ndarray:
    """(n, n) matrix Σ_T weights[T]·[i ∈ T][j ∈ T] over all bitmasks T (one matrix product)."""
    n = weights.size.bit_length() - 1
    bits = ((np.arange(weights.size)[:, None] >> np.arange(n)) & 1).astype(np.float64)
    return bits.T @ (weights[:, None] * bits)


def pairwise_dividends(game: Game | np.ndarray) -> np.ndarray:
    """(n, n) symmetric matrix of the pair dividends d({i, j}) = v({i, j}) − v({i}) − v({j}) + v(∅).

    Positive: i and j are worth more together than apart (complements, e.g. the two hops of a bridge
    question); negative: they overlap (substitutes, e.g. two sentences saying the same thing).  The diagonal
    holds the singleton dividends d({i}) = v({i}) − v(∅).  d({i, j}) looks at the pair on its own, next to the
    empty context only; :func:`pairwise_interaction` averages the pair's synergy over all contexts.
    """
    table = theory.as_table(game)[0]
    d = theory.harsanyi_dividends(table)
    sizes = np.bitwise_count(np.arange(d.size, dtype=np.uint64)).astype(np.int64)
    out = _pair_sums(np.where(sizes == 2, d, 0.0))
    np.fill_diagonal(out, d[1 << np.arange(out.shape[0])])
    return out


def pairwise_interaction(game: Game | np.ndarray) -> np.ndarray:
    """(n, n) symmetric matrix of the Shapley interaction index I_ij = Σ_{T ⊇ {i, j}} d(T) / (|T| − 1).

    Grabisch–Roubens (1999): I_ij is the second difference v(S+i+j) − v(S+i) − v(S+j) + v(S) averaged over
    S ⊆ N∖{i, j} with the Shapley weights (|S|!(n−|S|−2)!/(n−1)!), equivalently every dividend of a coalition
    holding both i and j shared equally among its |T| − 1 pairs through i.  The diagonal is left at 0.
    """
    table = theory.as_table(game)[0]
    d = theory.harsanyi_dividends(table)
    sizes = np.bitwise_count(np.arange(d.size, dtype=np.uint64)).astype(np.int64)
    out = _pair_sums(np.where(sizes >= 2, d / np.maximum(sizes - 1, 1), 0.0))
    np.fill_diagonal(out, 0.0)
    return out
