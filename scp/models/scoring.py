"""The one batched scorer: every context's unit scores from a model, through the estimator registry.

A pointwise model's scores are its outputs (one pass, exact per unit).  A set model's scores are the Shapley
values of the game it plays on each context, v(S) = net(units[S], query), estimated by a registered estimator
(:data:`scp.core.estimators.ESTIMATORS`): one with a batched implementation (``monte_carlo``, ``adaptive``) scores
padded batches of ``batch_size`` contexts through the Deep Sets fast path; any other one values each context's
:class:`~scp.models.game.ValueNetGame` through :func:`scp.core.estimators.estimate`.  Context i's randomness is
seeded by ``derive_seed(seed, key_i)`` (:meth:`scp.data.features.Batch.seeds`), so its scores are the same whatever
it is batched with, here, in :class:`scp.pruning.pruner.ShapleyPruner`, ``scp eval`` and training's validation AUC.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import torch

from scp.core.estimators import check_result, estimate, get_estimator
from scp.core.permutations import derive_seed
from scp.core.result import ShapleyResult
from scp.core.selection import is_integer
from scp.data.features import Context, collate
from scp.devices import eval_mode, resolve_device
from scp.errors import InputError, InputTypeError
from scp.models.game import ValueNetGame
from scp.models.pointwise import PointwiseScorer

__all__ = ["prefix_values", "require_game", "score_contexts"]


def _as_contexts(contexts) -> list[Context]:
    """``contexts`` as a list, each a :class:`~scp.data.features.Context`, else an :class:`InputTypeError` naming
    the first that is not."""
    what = "contexts must be a list of scp.data.features.Context (from build_contexts)"
    if isinstance(contexts, (str, bytes, Mapping)) or not isinstance(contexts, Iterable):
        raise InputTypeError(f"{what}; got a {type(contexts).__name__}")
    contexts = list(contexts)
    bad = next((i for i, c in enumerate(contexts) if not isinstance(c, Context)), None)
    if bad is not None:
        raise InputTypeError(f"{what}; contexts[{bad}] is a {type(contexts[bad]).__name__}: {contexts[bad]!r:.80}")
    return contexts


def score_contexts(
    model,
    contexts: Sequence[Context],
    estimator: str = "monte_carlo",
    *,
    budget: int | None = None,
    seed: int | None = 0,
    batch_size: int = 32,
    device: str | torch.device | None = None,
    per_context: Sequence[Mapping] | None = None,
    by_length: bool = False,
    **options,
) -> list[ShapleyResult]:
    """One :class:`~scp.core.result.ShapleyResult` per context, in the given order, without gradients.

    Args:
        model: a pointwise model (its outputs are the scores; ``estimator`` and its options do not apply) or a set
            value network.
        contexts: the contexts (:func:`scp.data.features.build_contexts`).
        estimator: a name (or alias) of :data:`scp.core.estimators.ESTIMATORS`.
        budget: coalition evaluations allowed per context (None: the estimator's own size).
        seed: the run seed; context i's is ``derive_seed(seed, key_i)`` (None: fresh entropy).
        batch_size: contexts per batched call.
        device: where to score (the model is moved there; default: where the model is).
        per_context: options of each context (e.g. ``{"k": 3}`` for ``adaptive``), merged over ``options``.
        by_length: batch contexts of similar length (sorted by n: less padding, the same values up to float
            rounding).
        **options: the estimator's options (e.g. ``n_permutations``, ``antithetic``, ``control_variate``).

    Returns:
        One result per context (adaptive: with its ``certificate``); a pointwise model's are ``method="pointwise"``.
    """
    contexts = _as_contexts(contexts)
    entry = get_estimator(estimator)
    if not is_integer(batch_size) or batch_size < 1:
        raise InputError(f"batch_size (contexts per batched call) must be an integer ≥ 1; got {batch_size!r}")
    if per_context is not None and len(per_context) != len(contexts):
        raise InputError(f"got {len(per_context)} per-context option sets for {len(contexts)} contexts")
    if device is not None:
        model.to(resolve_device(device))
    dev = next(model.parameters()).device
    order = sorted(range(len(contexts)), key=lambda i: contexts[i].n_units) if by_length else list(range(len(contexts)))
    out: list[ShapleyResult | None] = [None] * len(contexts)
    pointwise = isinstance(model, PointwiseScorer)
    batched = entry.batched is not None and not pointwise and hasattr(model, "rho_first_layer")
    with eval_mode(model), torch.no_grad():
        for s in range(0, len(order), batch_size):
            idx = order[s : s + batch_size]
            chunk = [contexts[i] for i in idx]
            if pointwise:
                b = collate(chunk, dev)
                scores = model(b.units, b.query, b.mask, b.extra)
                for row, (i, c) in enumerate(zip(idx, chunk)):
                    out[i] = ShapleyResult(
                        values=scores[row, : c.n_units].double().cpu().numpy(),
                        n_evaluations=c.n_units,
                        method="pointwise",
                    )
            elif batched:
                b = collate(chunk, dev)
                results = entry.batched(
                    model,
                    b.units,
                    b.query,
                    b.mask,
                    b.extra,
                    seeds=b.seeds(seed),
                    budget=budget,
                    **{**options, **_gathered(per_context, idx)},
                )
                if len(results) != len(idx):
                    raise InputError(
                        f"estimator {entry.name!r} returned {len(results)} results for a batch of {len(idx)} contexts"
                    )
                for i, result in zip(idx, results):
                    out[i] = check_result(result, contexts[i].n_units, entry.name)
            else:
                for i, c in zip(idx, chunk):
                    game = ValueNetGame(model, c.units.to(dev), c.query.to(dev), c.extra.to(dev), cache_psi=True)
                    own = dict(per_context[i]) if per_context is not None else {}
                    out[i] = estimate(
                        game, estimator, budget=budget, seed=derive_seed(seed, c.key), **{**options, **own}
                    )
    return out


def _gathered(per_context: Sequence[Mapping] | None, idx: Sequence[int]) -> dict:
    """The per-context options of contexts ``idx`` as one sequence per option (what a batched estimator takes)."""
    if per_context is None:
        return {}
    keys = set(per_context[idx[0]])
    if any(set(per_context[i]) != keys for i in idx):
        raise InputError("every context's per-context options must name the same options")
    return {key: [per_context[i][key] for i in idx] for key in keys}


def require_game(model) -> None:
    """A set value network plays a game v(S); a pointwise model, which scores each unit alone, does not."""
    if isinstance(model, PointwiseScorer):
        raise InputError(
            "value_fraction reads the game v(S) of a set value network; a pointwise model scores each unit alone "
            "and has no value of a set: use threshold, keep_ratio or top_k with it"
        )


def prefix_values(model, contexts: Sequence[Context], scores: Sequence, device=None) -> list[np.ndarray]:
    """v(S_0), …, v(S_n) of each context's game, S_k the top-k units by its ``scores`` (ties by position, as
    :func:`scp.core.selection.select` breaks them): one batch of n + 1 coalitions per context, no gradients.

    What the value-fraction criterion reads (:func:`scp.core.selection.value_prefix_count`).  A pointwise model
    plays no game on a set of units, so it has no v(S): :class:`~scp.errors.InputError`."""
    require_game(model)
    if len(scores) != len(contexts):
        raise InputError(f"got {len(scores)} score vectors for {len(contexts)} contexts")
    if device is not None:
        model.to(resolve_device(device))
    dev = next(model.parameters()).device
    out = []
    for c, s in zip(contexts, scores):
        s = np.asarray(s, dtype=np.float64).reshape(-1)
        if s.size != c.n_units:
            raise InputError(f"got {s.size} scores for a context of {c.n_units} units")
        order = np.argsort(-s, kind="stable")
        prefixes = np.zeros((c.n_units + 1, c.n_units), dtype=bool)
        for k in range(1, c.n_units + 1):
            prefixes[k, order[:k]] = True
        game = ValueNetGame(model, c.units.to(dev), c.query.to(dev), c.extra.to(dev), cache_psi=True)
        out.append(game(prefixes))
    return out
