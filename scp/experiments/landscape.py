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

Per-context statistics, one row (a dict) per context, as notebook 08 tabulates them: :func:`core_statistics` (is
the Shapley value in the core, the least-core ε*, supermodularity), :func:`tree_statistics` (the tight sets and the
laminar family of the context tree against the paragraphs) and :func:`pair_statistics` (pair dividends and
interaction indices by kind of pair, :data:`PAIR_KINDS`); :func:`pair_kind_summary` averages the last over contexts
with bootstrap CIs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from scp.core import theory
from scp.core.games import Game
from scp.core.metrics import aggregate, pairwise_auc
from scp.data.datasets import Example
from scp.errors import InputError
from scp.models.game import ValueNetGame

__all__ = [
    "PAIR_KINDS",
    "PAIR_MEASURES",
    "LeastCoreTight",
    "core_statistics",
    "least_core_tight_sets",
    "normalised_table",
    "pair_kind_summary",
    "pair_statistics",
    "pairwise_dividends",
    "pairwise_interaction",
    "tree_statistics",
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


# ------------------------------------------------------------------------------------- per-context statistics

PAIR_KINDS = ("distractor–distractor", "gold–distractor", "gold–gold")
"""The kinds of a pair {i, j} of units by how many of the two are supporting (0, 1, 2): index = y_i + y_j."""

PAIR_MEASURES = {"dividend": pairwise_dividends, "interaction": pairwise_interaction}
"""The pair measures :func:`pair_statistics` reads: the pair dividend d({i, j}) and the interaction index I_ij."""


def _table_players(table: np.ndarray, labels) -> tuple[np.ndarray, int]:
    y = np.asarray(labels).reshape(-1)
    n = table.size.bit_length() - 1
    if table.size != 1 << n or y.size != n:
        raise InputError(f"need a table of 2^n values and n labels; got {table.size} values and {y.size} labels")
    return y, n


def core_statistics(table, shapley, least: LeastCoreTight, tol: float = 1e-7) -> dict:
    """Where the Shapley value of one context's normalised game lies relative to its core.

    With v₀ the normalised table (v₀(∅) = 0), x = φ the Shapley values and e(x) = max_{∅≠S⊊N} v₀(S) − x(S) the
    largest excess (:func:`scp.core.theory.core_violation`), the row holds:

    - ``v0_grand`` = v₀(N), the worth the Shapley values share out;
    - ``shapley_excess`` = e(φ) and ``shapley_in_core`` = [e(φ) ≤ 0] (x is in the ε-core iff e(x) ≤ ε);
    - ``least_core_epsilon`` = ε* = min_{x(N) = v₀(N)} e(x) (``least.epsilon``, :func:`least_core_tight_sets`) and
      ``core_nonempty`` = [ε* ≤ ``tol``], so e(φ) ≥ ε* always;
    - ``supermodular``: v₀(S∪T) + v₀(S∩T) ≥ v₀(S) + v₀(T) for all S, T (:func:`scp.core.theory.check_supermodular`).

    Args:
        table: the 2^n values v₀(S) (:func:`normalised_table`).
        shapley: the n exact Shapley values φ of that game.
        least: its :class:`LeastCoreTight` (``least_core_tight_sets(table, tol)``).
        tol: the tolerance of ``core_nonempty``.
    """
    t = np.asarray(table, dtype=np.float64)
    cv = theory.core_violation(t, shapley)
    return dict(
        v0_grand=t[-1],
        shapley_excess=cv.violation,
        shapley_in_core=cv.in_core,
        least_core_epsilon=least.epsilon,
        core_nonempty=least.epsilon <= tol,
        supermodular=theory.check_supermodular(t).is_supermodular,
    )


def tree_statistics(example: Example, least: LeastCoreTight, tol: float = 1e-7) -> dict:
    """The coalitions binding at one context's least-core allocation, the laminar family the context tree keeps of
    them, and how that family sits against the context's paragraphs.

    With T the tight sets (``least.tight``: ∅ ≠ S ⊊ N with v₀(S) − x*(S) = ε*) and F ⊆ T the laminar family of the
    context tree (:func:`scp.core.theory.context_tree` on ``least.shifted`` and ``least.allocation``, root N left
    out), the row holds:

    - ``n_tight`` = |T| and ``n_laminar`` = |F|;
    - ``mean_laminar_size`` = (1/|F|) Σ_{S∈F} |S| (0 when F = ∅);
    - ``paragraph_aligned`` = the fraction of S ∈ F that are unions of whole paragraphs, S = ∪{P : P ∩ S ≠ ∅} over
      the paragraphs P of the context (1 when F = ∅);
    - ``gold_share_outside_largest`` = (1/|N∖S_max|) Σ_{i∉S_max} y_i with S_max the largest set of F (the first of
      the largest; S_max = ∅ when F = ∅), beside ``gold_share`` = (1/n) Σ_i y_i, the share of supporting units.

    Args:
        example: the context (``labels``, ``paragraph_ids``).
        least: the :class:`LeastCoreTight` of its normalised game.
        tol: the tolerance of the tree's binding test (as for :func:`least_core_tight_sets`).
    """
    if len(example.labels) != least.allocation.size:
        raise InputError(f"{example.n_units} units but an allocation of {least.allocation.size} players")
    tree = theory.context_tree(least.shifted, least.allocation, tol)
    family = [node.players for node in tree.iter_nodes()][1:] or [frozenset()]
    pid, y = np.array(example.paragraph_ids), np.array(example.labels)
    aligned = [set(np.flatnonzero(np.isin(pid, pid[sorted(S)]))) == set(S) for S in family]
    outside = sorted(set(range(example.n_units)) - max(family, key=len))
    return dict(
        n_tight=len(least.tight),
        n_laminar=len(family) if family[0] else 0,
        mean_laminar_size=np.mean([len(S) for S in family]),
        paragraph_aligned=np.mean(aligned),
        gold_share_outside_largest=y[outside].mean(),
        gold_share=y.mean(),
    )


def pair_statistics(labels, table) -> list[dict]:
    """Pair dividends and interaction indices of one context's game, by kind of pair: one row per measure.

    For each measure m ∈ :data:`PAIR_MEASURES` (m_ij = d({i, j}), :func:`pairwise_dividends`, or I_ij,
    :func:`pairwise_interaction`) over the n(n−1)/2 pairs i < j, with kind k_ij = y_i + y_j (2: gold–gold), the row
    holds:

    - ``base_rate`` = the share of gold–gold pairs, P(k_ij = 2), the rate a random pair would have;
    - ``top_is_gold_pair`` = [k = 2 at argmax m_ij], ``top_abs_is_gold_pair`` = [k = 2 at argmax |m_ij|],
      ``most_negative_is_gold_pair`` = [k = 2 at argmin m_ij] (the first pair in row-major order on ties);
    - ``auc_negative_gold_pair`` = the pairwise AUC of −m_ij for gold–gold pairs against the others,
      P(−m_gg > −m_other) + ½·P(tie) (:func:`scp.core.metrics.pairwise_auc`; ``nan`` without both kinds);
    - one column per kind of :data:`PAIR_KINDS`: the mean of m_ij over the pairs of that kind (``nan`` without one).

    Args:
        labels: the n unit labels y_i (1 supporting).
        table: the 2^n values of the game (normalised or not: the pair measures do not read v(∅)'s level).
    """
    t = theory.as_table(table)[0]
    y, n = _table_players(t, labels)
    iu = np.triu_indices(n, 1)
    kind = y[iu[0]] + y[iu[1]]
    rows = []
    for name, fn in PAIR_MEASURES.items():
        v = fn(t)[iu]
        rows.append(
            dict(
                measure=name,
                base_rate=(kind == 2).mean(),
                top_is_gold_pair=kind[v.argmax()] == 2,
                top_abs_is_gold_pair=kind[np.abs(v).argmax()] == 2,
                most_negative_is_gold_pair=kind[v.argmin()] == 2,
                auc_negative_gold_pair=pairwise_auc(-v, kind == 2),
                **{PAIR_KINDS[c]: v[kind == c].mean() if (kind == c).any() else np.nan for c in range(3)},
            )
        )
    return rows


def pair_kind_summary(rows: Sequence[dict], n_boot: int = 1000, seed: int = 0) -> list[dict]:
    """Means over contexts of the per-context means by kind of pair (rows of :func:`pair_statistics`).

    For each measure and kind: the mean over the contexts that have a pair of that kind of their mean m_ij, with
    the 95% percentile-bootstrap CI over contexts (:func:`scp.core.metrics.aggregate`, ``n_boot`` resamples seeded
    by ``seed``; contexts without that kind are left out).

    Returns:
        One row ``{"measure", "pair", "mean", "ci_low", "ci_high", "n_contexts"}`` per measure and kind, measures in
        the order of :data:`PAIR_MEASURES`, kinds in the order of :data:`PAIR_KINDS`.
    """
    out = []
    for measure in PAIR_MEASURES:
        for kind in PAIR_KINDS:
            agg = aggregate([r[kind] for r in rows if r["measure"] == measure], n_boot=n_boot, seed=seed)
            out.append(
                dict(
                    measure=measure,
                    pair=kind,
                    mean=agg.mean,
                    ci_low=agg.ci_low,
                    ci_high=agg.ci_high,
                    n_contexts=agg.n_used,
                )
            )
    return out
