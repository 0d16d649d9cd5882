"""One interface to every Shapley estimator: ``estimate(game, method, budget, seed, **options) -> ShapleyResult``.

φ_i(v) = Σ_{S ⊆ N∖{i}} |S|!(n−|S|−1)!/n! · (v(S∪{i}) − v(S)) = E_π[v(P_i^π ∪ {i}) − v(P_i^π)], P_i^π the players
before i in a uniform random permutation π.  The estimators of that one quantity are entries of one registry,
:data:`ESTIMATORS` (name -> :class:`Estimator`):

- ``exact``: all 2^n coalitions (:func:`scp.core.enumeration.exact`);
- ``monte_carlo``: M permutations, the paper's Algorithm 1, with the Deep Sets fast path
  (:func:`scp.core.monte_carlo.monte_carlo`; batched: :func:`scp.core.monte_carlo.batched_monte_carlo`);
- ``adaptive``: M in doubling rounds until the Top-K set is certified
  (:func:`scp.core.adaptive.adaptive_monte_carlo`; batched: :func:`scp.core.adaptive.adaptive_deepsets_shapley`);
- ``leave_one_out`` (alias ``loo``): v(N) − v(N∖{i}), not a Shapley estimator
  (:func:`scp.core.enumeration.leave_one_out`).

``budget`` means the same for all of them: the most coalition evaluations v(S) the estimator may spend, the
``n_evaluations`` it reports (:class:`~scp.core.result.ShapleyResult`).  Each turns it into its own size (Monte Carlo:
M = ⌊(budget − 2)/(n − 1)⌋; adaptive: ``max_permutations``); exact and leave-one-out refuse a budget below what
they need.  Adding an estimator is one module with a function ``f(game, *, budget=None, seed=None, **options) ->
ShapleyResult`` and one :func:`register_estimator` call; the pruner (``ShapleyPruner(estimator=NAME)``), the batched
scorer (:func:`scp.models.scoring.score_contexts`) and ``scp eval --estimator NAME`` then take it by name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scp.core.adaptive import adaptive_deepsets_shapley, adaptive_monte_carlo
from scp.core.enumeration import exact, leave_one_out
from scp.core.games import Game, check_game
from scp.core.monte_carlo import batched_monte_carlo, monte_carlo
from scp.core.result import ShapleyResult, check_budget
from scp.core.selection import is_integer
from scp.errors import InputError, InputTypeError

__all__ = [
    "ESTIMATORS",
    "Estimator",
    "check_result",
    "estimate",
    "get_estimator",
    "register_estimator",
    "unregister_estimator",
]


@dataclass(frozen=True)
class Estimator:
    """One entry of :data:`ESTIMATORS`.

    ``function(game, *, budget=None, seed=None, **options) -> ShapleyResult`` estimates one game.  ``batched``,
    when given, does the same for a padded batch of value-network contexts without gradients:
    ``batched(net, units, query, mask, extra, *, seeds, budget=None, **options) -> list[ShapleyResult]`` (one seed
    and one result per context; an option given per context arrives as a sequence with one item per context).
    ``aliases`` are other names the registry knows the entry by.
    """

    name: str
    function: Callable[..., ShapleyResult]
    description: str
    batched: Callable[..., list[ShapleyResult]] | None = None
    aliases: tuple[str, ...] = ()


ESTIMATORS: dict[str, Estimator] = {}
"""Every registered estimator by name and by alias (an alias maps to the same :class:`Estimator`)."""


def register_estimator(
    name: str,
    function: Callable[..., ShapleyResult],
    description: str,
    batched: Callable[..., list[ShapleyResult]] | None = None,
    aliases: tuple[str, ...] = (),
) -> Estimator:
    """Add an estimator under ``name`` (and ``aliases``); a name already taken is an error."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"an estimator's name must be a non-empty str; got {name!r}")
    if not callable(function) or (batched is not None and not callable(batched)):
        raise InputTypeError(f"estimator {name!r}: function (and batched, when given) must be callable")
    taken = [n for n in (name, *aliases) if n in ESTIMATORS]
    if taken:
        raise InputError(
            f"estimator name(s) {taken} are taken (by {ESTIMATORS[taken[0]].name!r}); "
            "unregister_estimator first, or choose another name"
        )
    entry = Estimator(name=name, function=function, description=description, batched=batched, aliases=tuple(aliases))
    for key in (name, *entry.aliases):
        ESTIMATORS[key] = entry
    return entry


def unregister_estimator(name: str) -> Estimator:
    """Remove the estimator ``name`` (or one of its aliases) with all its names; returns its entry."""
    entry = get_estimator(name)
    for key in (entry.name, *entry.aliases):
        ESTIMATORS.pop(key, None)
    return entry


def get_estimator(name: str) -> Estimator:
    """The entry of ``name`` (a name or an alias); an unknown name is an error listing the choices."""
    entry = ESTIMATORS.get(name) if isinstance(name, str) else None
    if entry is None:
        raise InputError(f"unknown estimator {name!r}; choose one of {sorted(ESTIMATORS)}")
    return entry


def estimate(
    game: Game, method: str = "monte_carlo", budget: int | None = None, seed: int | None = 0, **options
) -> ShapleyResult:
    """Shapley values of ``game`` by the registered estimator ``method`` (module docstring).

    ``budget``: the most coalition evaluations allowed (None: the estimator's own default size); ``seed``: the
    seed of its randomness (None: fresh entropy, recorded in the result; deterministic estimators ignore it);
    ``options`` go to the estimator (e.g. ``n_permutations``, ``antithetic``, ``control_variate`` for Monte Carlo;
    ``k``, ``delta``, ``bound``, ``tolerance`` for adaptive; ``max_players`` for exact).  What the estimator returns
    is checked (:func:`check_result`): one finite value per player, or one :class:`~scp.errors.InputError`.
    """
    entry = get_estimator(method)
    budget = check_budget(budget)
    n = check_game(game)
    try:
        inspect.signature(entry.function).bind(game, budget=budget, seed=seed, **options)
    except TypeError as error:  # a missing or unknown option, named by the signature
        raise InputError(f"estimator {entry.name!r}: {error}") from None
    return check_result(entry.function(game, budget=budget, seed=seed, **options), n, entry.name)


def check_result(result, n: int, name: str) -> ShapleyResult:
    """``result`` after checking that estimator ``name`` returned a :class:`ShapleyResult` of n finite real values
    (a NaN or inf would rank and prune as if it were a number) and an integer count of evaluations ≥ 0."""
    if not isinstance(result, ShapleyResult):
        raise InputTypeError(
            f"estimator {name!r} returned a {type(result).__name__}; an estimator returns a "
            "scp.core.result.ShapleyResult"
        )
    values = np.asarray(result.values)
    if values.shape != (n,):
        raise InputError(f"estimator {name!r} returned values of shape {values.shape} for a game of {n} players")
    if values.dtype.kind not in "biuf" or not np.isfinite(values).all():
        bad = np.flatnonzero(~np.isfinite(values)) if values.dtype.kind in "biuf" else np.arange(n)
        raise InputError(
            f"estimator {name!r} returned {'non-finite' if values.dtype.kind in 'biuf' else 'non-real'} values for "
            f"{bad.size} of {n} players (first: player {int(bad[0])} -> {values[bad[0]]!r}); an estimator returns "
            "one finite real value per player"
        )
    if not is_integer(result.n_evaluations) or result.n_evaluations < 0:
        raise InputError(
            f"estimator {name!r} reported n_evaluations = {result.n_evaluations!r}; it must be an integer ≥ 0"
        )
    return result


register_estimator("exact", exact, "all 2^n coalitions, exact Shapley values (refused above max_players = 16)")
register_estimator(
    "monte_carlo",
    monte_carlo,
    "M random permutations (Algorithm 1; the Deep Sets fast path on a value network)",
    batched=batched_monte_carlo,
)
register_estimator(
    "adaptive",
    adaptive_monte_carlo,
    "Monte Carlo in doubling rounds until the Top-K set is certified with probability ≥ 1 − δ",
    batched=adaptive_deepsets_shapley,
)
register_estimator(
    "leave_one_out", leave_one_out, "v(N) − v(N∖{i}), n + 1 evaluations (not a Shapley estimator)", aliases=("loo",)
)
