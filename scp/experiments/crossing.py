"""Where a curve over budgets overtakes a flat reference: the crossing point M* of Shapley against LOO.

Monte-Carlo Shapley values get better with more permutations M, leave-one-out costs a fixed n + 1 evaluations
and does not depend on M.  :func:`crossing_point` reads, from a quality curve q(M) on a grid of budgets and the
reference's quality r, the budget M* from which the curve stays at or above r: the smallest grid budget with
q(M) ≥ r at it and at every larger budget, and the same point interpolated linearly in log M between that
budget and the one before it.  When the curve ends below r it "never" crosses on that grid (``budget is None``).

Why the two rules part (or do not) on redundant evidence: :func:`credit_of_originals` follows each original
supporting unit from its plain context into the copy of that context with its paraphrases added
(:func:`scp.data.synthetic.make_redundancy`) and measures how much of its score it keeps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scp.errors import InputError

__all__ = ["Crossing", "credit_of_originals", "credit_pairs", "crossing_point"]


@dataclass(frozen=True)
class Crossing:
    """The result of :func:`crossing_point`.

    ``budget``: the smallest grid budget from which the curve stays ≥ the reference (``None``: it never does).
    ``interpolated``: where the straight line in (log M, q) between the budget before and ``budget`` meets the
    reference (equal to ``budget`` when the curve is above already at the first budget; ``None`` with ``budget``).
    ``from_start``: the curve is at or above the reference at every budget of the grid.
    ``final_gap``: q(M_max) − r, the margin at the largest budget (negative when it never crosses).
    """

    budget: float | None
    interpolated: float | None
    from_start: bool
    final_gap: float

    @property
    def crosses(self) -> bool:
        """Whether the curve ends at or above the reference."""
        return self.budget is not None


def crossing_point(budgets: Sequence[float], curve: Sequence[float], reference: float) -> Crossing:
    """The budget M* from which ``curve`` stays at or above ``reference`` (see the module docstring).

    Args:
        budgets: increasing positive budgets M_1 < … < M_k (e.g. permutations).
        curve: the quality q(M_j) at each budget (e.g. mean recall of Monte-Carlo Shapley).
        reference: the flat reference quality r (e.g. mean recall of leave-one-out).

    Returns:
        A :class:`Crossing`.

    Raises:
        ValueError: budgets not strictly increasing and positive, lengths that differ, an empty grid, or a
            non-finite value.
    """
    m = np.asarray(budgets, dtype=np.float64).reshape(-1)
    q = np.asarray(curve, dtype=np.float64).reshape(-1)
    if m.size == 0 or m.shape != q.shape:
        raise InputError(f"need one curve value per budget; got {m.size} budgets and {q.size} values")
    if not (np.isfinite(m).all() and np.isfinite(q).all() and math.isfinite(reference)):
        raise InputError("budgets, curve and reference must be finite")
    if (m <= 0).any() or (np.diff(m) <= 0).any():
        raise InputError(f"budgets must be positive and strictly increasing; got {m.tolist()}")
    above = q >= reference
    final_gap = float(q[-1] - reference)
    if not above[-1]:
        return Crossing(None, None, False, final_gap)
    below = np.flatnonzero(~above)
    if below.size == 0:
        return Crossing(float(m[0]), float(m[0]), True, final_gap)
    j = int(below[-1]) + 1  # first budget of the final run at or above the reference
    lo, hi = math.log(m[j - 1]), math.log(m[j])
    t = (reference - q[j - 1]) / (q[j] - q[j - 1])  # q[j-1] < r ≤ q[j], so 0 < t ≤ 1
    return Crossing(float(m[j]), float(math.exp(lo + t * (hi - lo))), False, final_gap)


def credit_pairs(plain_scores: Sequence, augmented_scores: Sequence, augmented_examples: Sequence) -> np.ndarray:
    """(P, 2) array of (s_i, s'_j): the score of each original supporting unit i in its plain context and the score
    of the same unit, now at position j, in the context with its paraphrases added.

    Context k of ``augmented_examples`` comes from :func:`scp.data.synthetic.make_redundancy`, whose
    ``meta["copy_of"][j]`` is −1 for an original unit and ``meta["source_index"][j]`` is its index i in the plain
    context; the pairs are those j with ``copy_of[j]`` < 0 and label 1, contexts in order, units in order.

    Args:
        plain_scores: one score vector per plain context (scores of its n_k units).
        augmented_scores: one score vector per augmented context.
        augmented_examples: the augmented contexts (``labels``, ``meta["copy_of"]``, ``meta["source_index"]``).
    """
    if not len(plain_scores) == len(augmented_scores) == len(augmented_examples):
        raise InputError(
            f"need one plain and one augmented score vector per context; got {len(plain_scores)}, "
            f"{len(augmented_scores)} and {len(augmented_examples)} contexts"
        )
    pairs = [
        (plain[i], aug[j])
        for plain, aug, ex in zip(plain_scores, augmented_scores, augmented_examples)
        for j, (i, c) in enumerate(zip(ex.meta["source_index"], ex.meta["copy_of"]))
        if c < 0 and ex.labels[j] == 1
    ]
    if not pairs:
        raise InputError("no original supporting unit in the augmented contexts")
    return np.array(pairs)


def credit_of_originals(plain_scores: Sequence, augmented_scores: Sequence, augmented_examples: Sequence) -> dict:
    """How much of its credit an original supporting unit keeps once its paraphrases sit beside it.

    With the P pairs (s_p, s'_p) of :func:`credit_pairs`: ``"plain"`` = (1/P) Σ_p s_p, ``"with copies"`` =
    (1/P) Σ_p s'_p and ``"kept"`` = Σ_p s'_p / Σ_p s_p (1: nothing lost, 0: all credit gone).  In a max-like game
    leave-one-out's credit falls towards 0 (removing one copy loses nothing while another stays) and Shapley's is
    shared, to about 1/(copies + 1).
    """
    pairs = credit_pairs(plain_scores, augmented_scores, augmented_examples)
    return {
        "plain": pairs[:, 0].mean(),
        "with copies": pairs[:, 1].mean(),
        "kept": pairs[:, 1].sum() / pairs[:, 0].sum(),
    }
