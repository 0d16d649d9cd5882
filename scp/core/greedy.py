"""Selection by the game itself: greedy maximisation of v under a size or token budget.

S₀ = ∅; S_{t+1} = S_t ∪ {argmax_{i ∉ S_t} [v(S_t ∪ {i}) − v(S_t)] / cost_i} among the units that still fit,
until k units are chosen or no unit fits the token budget.  With ψ computed once per context each step is one
batched call of ρ on the pooled sums base + Σ_{S_t} ψ + ψ_i.  A set function allows this and a pointwise
scorer does not: the marginal value of a unit drops once an equivalent unit is in S (a duplicate adds nothing
to coverage), which top-K by Shapley value or by a pointwise score cannot see.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from scp.devices import eval_mode
from scp.errors import InputError

__all__ = ["greedy_select"]


def greedy_select(
    net,
    units: torch.Tensor,
    query: torch.Tensor,
    extra: torch.Tensor | None = None,
    *,
    k: int | None = None,
    costs: Sequence[float] | None = None,
    budget: float | None = None,
) -> list[int]:
    """Indices chosen greedily by marginal value (per unit of cost when ``costs`` are given), in pick order.

    Exactly one of ``k`` (units to keep) or ``budget`` (total cost, with ``costs`` such as token counts).
    ``units`` (n, d), ``query`` (d,), ``extra`` (n, e) for one context; the network is used in eval mode.
    """
    n = units.shape[0]
    if (k is None) == (budget is None):
        raise InputError("give exactly one of k or budget")
    if k is not None and not 1 <= k <= n:
        raise InputError(f"k must be in [1, {n}], got {k}")
    cost = np.ones(n) if costs is None else np.asarray(costs, dtype=float)
    if cost.shape != (n,) or not np.all(cost > 0):
        raise InputError(f"costs must be {n} positive numbers")
    if budget is not None and (costs is None or not budget > 0):
        raise InputError("a budget needs positive costs and budget > 0")
    chosen: list[int] = []
    with eval_mode(net), torch.no_grad():
        h, base = net.encode(units[None], query[None], None if extra is None else extra[None])
        h, pooled = h[0], base[0]
        left = budget if budget is not None else float("inf")
        current = net.pooled_value(pooled[None])[0]
        while k is None or len(chosen) < k:
            free = [i for i in range(n) if i not in chosen and cost[i] <= left]
            if not free:
                break
            gains = (net.pooled_value(pooled[None] + h[free]) - current).double().numpy() / cost[free]
            best = free[int(np.argmax(gains))]
            chosen.append(best)
            pooled, left = pooled + h[best], left - cost[best]
            current = net.pooled_value(pooled[None])[0]
    return chosen
