"""The estimators the ``estimator`` and ``accuracy`` sections compare, each as a call on one game: ours (Monte
Carlo on the fast path, exact enumeration), the generic and naive paths and the peers of :mod:`scp.bench.peers`;
the budget M·(n − 1) + 2 they all get, and the accuracy of an estimate (RMSE, Top-K overlap, and for the peers
that count them the game rows they evaluated)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scp.bench.common import TOP_K
from scp.bench.peers import PeerEstimate, peer_methods, shapiq_methods, shapiq_values
from scp.core.enumeration import exact
from scp.core.monte_carlo import monte_carlo, naive_monte_carlo
from scp.models.game import ValueNetGame

OURS = {  # name -> monte_carlo options (fast path on the caching game)
    "ours: MC (Algorithm 1, fast path)": {},
    "ours: MC antithetic": {"antithetic": True},
    "ours: MC + position CV": {"control_variate": "position"},
    "ours: MC antithetic + position CV": {"antithetic": True, "control_variate": "position"},
}


EXACT = "ours: exact (all 2^n coalitions, one game call)"


def budget_of(n: int, m: int) -> int:
    """Game evaluations of M permutations: M·(n − 1) + 2."""
    return m * (n - 1) + 2


def method_calls(games: list[ValueNetGame], m: int, names: Sequence[str], device: str = "cpu") -> dict:
    """name -> call(r) returning (values of context r mod C, context index) for one repeat r (seed 1000 + r)."""
    n = games[0].n_players
    budget, peers = budget_of(n, m), peer_methods()
    calls = {}
    for name in names:
        if name == EXACT:

            def call(r):
                j = r % len(games)
                return exact(games[j]).values, j
        elif name in OURS:

            def call(r, kw=OURS[name]):
                j = r % len(games)
                return monte_carlo(games[j], m, seed=1000 + r, device=device, **kw).values, j
        elif name == "generic path (one batched game call)":

            def call(r):
                j = r % len(games)
                return monte_carlo(games[j], m, seed=1000 + r, path="generic").values, j
        elif name == "naive Algorithm 1 (one game call per coalition)":

            def call(r):
                j = r % len(games)
                return naive_monte_carlo(games[j], m, seed=1000 + r).values, j
        elif name in peers:

            def call(r, estimate=peers[name]):
                j = r % len(games)
                return estimate(games[j], budget, 1000 + r), j
        else:
            make, opts = shapiq_methods()[name]

            def call(r, make=make, opts=opts):
                j = r % len(games)
                approx = make(n, 1000 + r)
                kwargs = {"batch_size": m + 1} if opts.get("all_in_one") else {}
                return approx.approximate(budget, games[j], **kwargs), j

        calls[name] = call
    return calls


def accuracy_row(outputs: list, refs: list[np.ndarray], n: int) -> dict:
    """RMSE and Top-K overlap of one method's outputs [(values, InteractionValues or PeerEstimate, context index)];
    for PeerEstimates also the game rows they evaluated (mean, min, max over the outputs)."""
    sq, overlap, rows = [], [], []
    k = min(TOP_K, n - 1)
    for out, j in outputs:
        if isinstance(out, PeerEstimate):
            values = out.values
            rows.append(out.evaluations)
        else:
            values = out if isinstance(out, np.ndarray) else shapiq_values(out, n)
        sq.append(np.mean((values - refs[j]) ** 2))
        truth = set(np.argsort(-refs[j], kind="stable")[:k].tolist())
        overlap.append(len(truth & set(np.argsort(-values, kind="stable")[:k].tolist())) / k)
    row = {"rmse": float(np.sqrt(np.mean(sq))), "topk_overlap": float(np.mean(overlap)), "k": k}
    if rows:
        row["evaluations"] = {"mean": float(np.mean(rows)), "min": min(rows), "max": max(rows)}
    return row
