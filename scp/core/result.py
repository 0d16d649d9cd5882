"""The one result type of every Shapley estimator, and the Top-K certificate an adaptive run attaches to it.

An estimator returns φ̂ ∈ R^n (one value per player), what it spent (``n_evaluations``, coalition values v(S)
computed), how it got there (``method``, ``seed``, ``n_permutations``, ``metadata``) and, for the certified
adaptive budget (:mod:`scp.core.adaptive`), what it certified about the estimated Top-K set.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from scp.errors import InputError

__all__ = ["ShapleyResult", "TopKCertificate", "check_budget", "refuse_budget_below"]


@dataclass(frozen=True)
class TopKCertificate:
    """What an adaptive run certified about its Top-K set K̂ (see :mod:`scp.core.adaptive`).

    With confidence radii r_i, margin = min_{i∈K̂}(φ̂_i − r_i) − max_{j∉K̂}(φ̂_j + r_j).  ``gap`` = φ̂_(K) − φ̂_(K+1)
    (estimated), ``radius`` = gap − margin (what the confidence intervals cost at the boundary), ``certified`` =
    margin ≥ −tolerance, ``separated`` = margin > 0, ``rigorous`` = the intervals are finite-sample bounds (not the
    asymptotic Student interval).  With K = n nothing is dropped: margin = gap = +inf.
    """

    k: int
    delta: float
    tolerance: float
    bound: str
    n_permutations: int
    rounds: int
    gap: float
    radius: float
    margin: float
    certified: bool
    separated: bool
    stopped_at_max: bool
    rigorous: bool = True

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ShapleyResult:
    """Estimated Shapley values of one game, with the budget spent and how they were obtained.

    ``n_evaluations`` is the budget in one convention for every estimator (the ``budget`` of
    :func:`scp.core.estimators.estimate` bounds it): the number of coalition values v(S) actually computed for this
    game (a coalition valued twice counts twice; ∅ and N count once each).  Exact: 2^n.  Leave-one-out: n + 1.
    Monte Carlo with M permutations, on either path: M·(n − 1) + 2 (every permutation's n − 1 interior prefixes,
    plus ∅ and N shared by all), plus 2·n·P ρ evaluations with the position control variate.  Adaptive: the sum over
    its rounds.  A pointwise model's scores: n (one output per unit, no game).  ``seed`` is the seed the
    permutations were drawn from (for a context scored through :func:`scp.core.permutations.derive_seed`, the
    derived one; None for deterministic estimators).  ``certificate`` is the :class:`TopKCertificate` of an
    adaptive run (None otherwise).
    """

    values: np.ndarray
    n_evaluations: int
    method: str
    std_errors: np.ndarray | None = None
    seed: int | None = None
    n_permutations: int | None = None
    metadata: dict = field(default_factory=dict)
    certificate: TopKCertificate | None = None

    @property
    def n_players(self) -> int:
        return self.values.shape[0]

    def ranking(self) -> np.ndarray:
        """Players by decreasing value (ties by index)."""
        return np.argsort(-self.values, kind="stable")


def check_budget(budget) -> int | None:
    """``budget`` (the most coalition evaluations an estimator may spend) as an int ≥ 1, or None (no budget)."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
        raise InputError(
            f"budget (the number of coalition evaluations allowed) must be an integer ≥ 1 or None; got {budget!r}"
        )
    return int(budget)


def refuse_budget_below(budget: int | None, need: int, method: str, n: int, what: str) -> None:
    """Refuse a ``budget`` below the ``need`` evaluations of ``method`` on n players (``what`` says why)."""
    budget = check_budget(budget)
    if budget is not None and budget < need:
        raise InputError(
            f"{method} on n = {n} players needs {what} = {need:,} coalition evaluations; "
            f"budget = {budget:,} is below that (raise the budget or choose another estimator)"
        )
