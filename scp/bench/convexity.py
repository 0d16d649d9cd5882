"""``python -m scp.bench convexity``: supermodularity violations of ConvexDeepSets vs the unconstrained
network."""

from __future__ import annotations

import numpy as np
import torch

from scp.models.value_net import DeepSetsValue


def convexity(quick: bool = False, seed: int = 0) -> dict:
    """Fraction of violated supermodularity inequalities v(S+i+j) − v(S+i) − v(S+j) + v(S) ≥ 0 on random
    (S, i, j), for ConvexDeepSets and the unconstrained DeepSetsValue (paper sizes, random init, n = 41,
    float64), on the logit game (before the bound) and on the bounded game v = B·σ(·).  The value range is
    printed because a saturated sigmoid makes every inequality hold trivially."""
    from scp.core.theory import supermodularity_violation_rate
    from scp.models.value_net import ConvexDeepSets

    torch.manual_seed(seed)
    n, samples = 41, 1000 if quick else 5000
    units, query = torch.randn(n, 384, dtype=torch.float64), torch.randn(384, dtype=torch.float64)
    nets = {
        "ConvexDeepSets": ConvexDeepSets().double().eval(),
        "DeepSetsValue (unconstrained)": DeepSetsValue(query_mode="product").double().eval(),
    }
    out = {}
    print(f"supermodularity violations on {samples} random (S, i, j), n = {n}")
    for name, net in nets.items():
        with torch.no_grad():
            h, base = net.encode(units[None], query[None])

        def game(C, bounded):
            with torch.no_grad():
                pooled = base + torch.as_tensor(C, dtype=h.dtype) @ h[0]
                return (net.pooled_value(pooled) if bounded else net.rho(pooled).squeeze(-1)).double().numpy()

        for bounded in (False, True):
            sizes = np.random.default_rng(seed).random((200, n)) < np.linspace(0, 1, 200)[:, None]
            values = game(sizes, bounded)
            tol = 1e-9 * max(1.0, float(np.abs(values).max()))
            r = supermodularity_violation_rate(lambda C: game(C, bounded), n, samples, seed=seed, tol=tol)
            out[(name, bounded)] = r.rate
            print(
                f"  {name:30s} {'v = B·σ(logit)' if bounded else 'logit game':16s} violation rate {r.rate:.3f} "
                f"(max violation {r.max_violation:.2e}; values over coalitions in "
                f"[{values.min():.3g}, {values.max():.3g}])"
            )
    return out
