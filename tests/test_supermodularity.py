"""scp.experiments.supermodularity: the games trained networks play on real contexts, and how often they are not
convex."""

import numpy as np
import pytest
import torch

from scp.data.embedders import RandomEmbedder
from scp.data.features import build_contexts
from scp.experiments.supermodularity import context_game, float64_network, summarize_rates, violation_rates
from scp.models.pointwise import PointwiseScorer
from scp.models.value_net import ConvexDeepSets, DeepSetsValue


def contexts(n_contexts=3, n_units=9, dim=16):
    queries = [f"question number {k} about rivers" for k in range(n_contexts)]
    units = [[f"sentence {j} of context {k} about rivers and towns" for j in range(n_units)] for k in range(n_contexts)]
    ids = [str(k) for k in range(n_contexts)]
    return build_contexts(queries, units, RandomEmbedder(dim), ("cos", "bm25z"), ids=ids)


def nets(dim=16):
    torch.manual_seed(0)
    convex = ConvexDeepSets(embed_dim=dim, hidden=32, latent=16, query_mode="product_concat", n_extra=2).eval()
    free = DeepSetsValue(embed_dim=dim, hidden=32, latent=16, query_mode="product_concat", n_extra=2, skip=True).eval()
    return convex, free


@pytest.mark.parametrize("which", [0, 1])
def test_logit_copy_is_the_logit_of_the_bounded_game_and_leaves_the_network_alone(which):
    net = nets()[which]
    ctx = contexts(1)[0]
    C = np.random.default_rng(0).random((64, ctx.n_units)) < 0.5
    v, g = context_game(net, ctx)(C), context_game(net, ctx, logit=True)(C)
    np.testing.assert_allclose(v, net.bound / (1 + np.exp(-g)), rtol=1e-12, atol=1e-15)
    assert next(net.parameters()).dtype == torch.float32 and "squash" not in vars(net)
    f64 = float64_network(net, logit=True)
    assert next(f64.parameters()).dtype == torch.float64 and not f64.training
    with torch.no_grad():  # the float64 game agrees with the float32 network up to float32 rounding
        v32 = net(
            ctx.units[None].expand(64, -1, -1),
            ctx.query[None].expand(64, -1),
            torch.as_tensor(C),
            ctx.extra[None].expand(64, -1, -1),
        ).numpy()
    np.testing.assert_allclose(v, v32, atol=1e-5)


def test_convex_logit_game_has_no_violation_and_the_free_network_has_some():
    convex, free = nets()
    rows = {
        name: violation_rates(net, contexts(), n_samples=400, seed=0)
        for name, net in (("convex", convex), ("free", free))
    }
    assert len(rows["convex"]) == 2 * 3 and {r["game"] for r in rows["convex"]} == {"logit", "bounded"}
    convex_logit = [r for r in rows["convex"] if r["game"] == "logit"]
    assert all(r["n_violations"] == 0 and r["max_violation"] == 0.0 for r in convex_logit)
    free_logit = summarize_rates(rows["free"], n_boot=100)[0]
    assert free_logit["game"] == "logit" and free_logit["n_violations"] > 0
    bounded = [r for r in rows["convex"] if r["game"] == "bounded"]
    assert all(0 <= r["value_min"] <= r["value_max"] <= convex.bound for r in bounded)


def test_summary_pools_the_rows_and_rates_are_reproducible():
    _, free = nets()
    a = violation_rates(free, contexts(), n_samples=200, seed=3)
    assert a == violation_rates(free, contexts(), n_samples=200, seed=3)
    s = {r["game"]: r for r in summarize_rates(a, n_boot=100)}
    for game, r in s.items():
        sub = [x for x in a if x["game"] == game]
        assert r["rate"] == sum(x["n_violations"] for x in sub) / sum(x["n_samples"] for x in sub)
        assert r["rate_ci_low"] <= r["rate_mean"] <= r["rate_ci_high"] and r["n_contexts"] == 3
        assert r["max_violation"] == max(x["max_violation"] for x in sub)


def test_pointwise_control_and_one_unit_contexts_are_refused():
    with pytest.raises(ValueError, match="pointwise"):
        float64_network(PointwiseScorer(embed_dim=16, hidden=8, n_extra=2))
    with pytest.raises(ValueError, match="2"):
        violation_rates(nets()[0], contexts(1, n_units=1), n_samples=10)


def test_rates_over_seeds_pool_per_seed_and_over_contexts():
    from scp.experiments.supermodularity import rates_over_seeds

    def row(seed, context, bad, logit):
        return dict(
            train_seed=seed,
            context=context,
            game="bounded",
            rate=bad / 10,
            n_violations=bad,
            n_samples=10,
            max_violation=0.1 * bad,
            logit_grand=logit,
        )

    rows = [row(0, "a", 1, -1.0), row(0, "b", 3, 1.0), row(1, "a", 2, 1.0), row(1, "b", 4, 1.0)]
    (r,) = rates_over_seeds(rows, n_boot=200)
    assert r["game"] == "bounded" and r["n_seeds"] == 2 and r["n_contexts"] == 2
    assert (r["rate_min"], r["rate_max"]) == (0.2, 0.3)
    assert r["rate"] == 10 / 40 and abs(r["rate_mean"] - 0.25) < 1e-12
    assert r["rate_ci_seeds_low"] < 0.25 < r["rate_ci_seeds_high"] and r["share_logit_grand_le_0"] == 0.25
    with pytest.raises(ValueError, match="same contexts"):
        rates_over_seeds(rows[:3] + [row(1, "c", 4, 1.0)])
