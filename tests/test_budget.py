"""scp.experiments.mc_budget: repeated Monte-Carlo estimates equal one-at-a-time ones, errors and Top-K stability,
the tables of errors against Theorem 3.1 and of Top-K stability against Theorem A.3;
the batched scorer (scp.models.scoring) keeps the order and gives each context its own values, whatever the batch."""

import math

import numpy as np
import pytest
import torch

from scp.core import theory
from scp.core.enumeration import exact
from scp.core.games import TableGame
from scp.core.monte_carlo import monte_carlo
from scp.core.permutations import derive_seed
from scp.core.result import ShapleyResult
from scp.data.features import build_contexts
from scp.experiments.mc_budget import (
    error_bound_rows,
    max_abs_errors,
    repeated_monte_carlo,
    topk_rows,
    topk_set,
    topk_stability,
    topk_theorem_violations,
)
from scp.models.game import ValueNetGame
from scp.models.scoring import score_contexts
from scp.models.value_net import DeepSetsValue


def small_net(n_extra=2):
    torch.manual_seed(0)
    return DeepSetsValue(
        embed_dim=8, hidden=16, latent=8, query_mode="product_concat", n_extra=n_extra, skip=True
    ).eval()


def net_game(n=7, seed=0):
    rng = np.random.default_rng(seed)
    return ValueNetGame(
        small_net(), rng.normal(size=(n, 8)), rng.normal(size=8), rng.normal(size=(n, 2)), cache_psi=True
    )


def test_repeated_equals_one_at_a_time_on_the_fast_path_and_counts_evaluations():
    game, seeds = net_game(), [3, 11, 12]
    batch = repeated_monte_carlo(game, 20, seeds)
    for s, r in zip(seeds, batch):
        single = monte_carlo(game, 20, seed=s)
        np.testing.assert_allclose(r.values, single.values, atol=1e-6)
        assert r.seed == s and r.n_permutations == 20
        assert r.n_evaluations == single.n_evaluations == 20 * (game.n_players - 1) + 2
    assert not np.allclose(batch[0].values, batch[1].values)  # different seeds, different draws


def test_repeated_falls_back_for_other_games_and_needs_seeds():
    game = TableGame.random(5, seed=1)
    out = repeated_monte_carlo(game, 10, [0, 1])
    np.testing.assert_array_equal(out[1].values, monte_carlo(game, 10, seed=1).values)
    with pytest.raises(ValueError, match="seed"):
        repeated_monte_carlo(game, 10, [])


def test_errors_shrink_with_the_budget_and_match_the_definition():
    game = net_game(n=6, seed=2)
    phi = exact(game).values
    few, many = (max_abs_errors(repeated_monte_carlo(game, m, range(30)), phi) for m in (2, 200))
    assert few.shape == (30,) and many.mean() < few.mean()
    est = ShapleyResult(values=phi + np.array([0, 0.1, -0.3, 0, 0, 0]), n_evaluations=1, method="x")
    assert max_abs_errors([est], phi)[0] == pytest.approx(0.3)


def test_topk_set_and_stability():
    assert topk_set([0.1, 0.5, 0.5, 0.2], 2) == {1, 2}
    assert topk_set([1.0, 1.0, 1.0], 2) == {0, 1}  # ties towards the lower index
    with pytest.raises(ValueError):
        topk_set([1.0, 2.0], 3)
    truth = np.array([0.9, 0.8, 0.1, 0.0])
    ests = [
        ShapleyResult(values=v, n_evaluations=1, method="x")
        for v in ([0.9, 0.7, 0.2, 0.0], [0.9, 0.1, 0.8, 0.0], [0.5, 0.6, 0.1, 0.2], [1, 1, 0, 0])
    ]
    assert topk_stability(ests, truth, 2) == 0.75
    assert topk_stability(ests, truth, 1) == 0.75  # the third puts player 1 first


def test_error_bound_rows_against_theorem_3_1():
    # 2 games, 2 budgets, 3 repeats; n = 4, δ = 0.1, ranges 1 and 0.1
    errors = np.array([[[0.1, 0.2, 0.3], [0.05, 0.05, 0.9]], [[0.01, 0.02, 0.5], [0.001, 0.002, 0.003]]])
    rows = error_bound_rows(errors, [1, 100], n_players=4, delta=0.1, ranges=[1.0, 0.1])
    assert [r["M"] for r in rows] == [1, 100] and [r["n_evaluations"] for r in rows] == [5, 302]  # M(n − 1) + 2
    b = [math.sqrt(2 * math.log(2 * 4 / 0.1) / m) for m in (1, 100)]  # B·sqrt(2 ln(2n/δ)/M), B = 1
    assert [r["bound_B1"] for r in rows] == pytest.approx(b)
    assert rows[1]["bound_range"] == pytest.approx((b[1] + 0.1 * b[1]) / 2)  # mean over games of R·b
    assert rows[0]["mean_error"] == pytest.approx(np.mean([0.1, 0.2, 0.3, 0.01, 0.02, 0.5]))
    assert rows[0]["p95_error"] == pytest.approx(np.quantile([0.1, 0.2, 0.3, 0.01, 0.02, 0.5], 0.95))
    assert rows[0]["inside_B1"] == 1.0 and rows[1]["inside_B1"] == pytest.approx(5 / 6)  # 0.9 > b(100) ≈ 0.30
    # B = range: game 1 at M = 1 (bound 0.1·3.0): 0.5 is outside; at M = 100 game 0's 0.9 is outside (0.30)
    assert rows[0]["inside_range"] == pytest.approx(5 / 6) and rows[1]["inside_range"] == pytest.approx(5 / 6)
    assert rows[0]["bound_B1"] == theory.mc_error_bound(1.0, 4, 1, 0.1)
    with pytest.raises(ValueError, match="shape"):
        error_bound_rows(errors[:, :1], [1, 100], 4, 0.1, [1.0, 0.1])


def test_topk_rows_and_theorem_violations():
    phis = [np.array([0.5, 0.3, 0.1, 0.0]), np.array([0.4, 0.2, 0.2, 0.1])]  # Δ_2 = 0.2 and 0 (a tie)
    stability = [[0.5, 0.96, 1.0], [0.1, 0.2, 0.3]]
    rows = topk_rows(phis, stability, [1, 10, 100], k=2, delta=0.05)
    assert [r["game"] for r in rows] == [0, 1]
    assert rows[0]["gap"] == pytest.approx(0.2) and rows[1]["gap"] == 0
    assert rows[0]["m_theorem"] == math.ceil(8 * math.log(2 * 4 / 0.05) / 0.2**2)  # 8B² ln(2n/δ)/Δ², B = 1
    assert rows[1]["m_theorem"] == math.inf  # no gap: no M suffices
    assert rows[0]["m_measured"] == 10 and math.isnan(rows[1]["m_measured"])  # first M with stability ≥ 0.95
    assert [rows[0][f"stability_M{m}"] for m in (1, 10, 100)] == [0.5, 0.96, 1.0]
    assert topk_theorem_violations(rows, [1, 10, 100], 0.05) == 0  # the theorem asks for M ≈ 1015 > 100
    tested = [dict(rows[0], m_theorem=10), dict(rows[1], m_theorem=1)]  # its promise holds from M = 10, resp. 1
    assert topk_theorem_violations(tested, [1, 10, 100], 0.05) == 3  # game 1 fails at every M
    with pytest.raises(ValueError, match="one stability"):
        topk_rows(phis, stability[:1], [1, 10, 100], 2, 0.05)


class _Words:
    """A deterministic toy embedder (what build_contexts needs: encode(texts, …) -> (k, d))."""

    dim = 8

    def encode(self, texts, batch_size=256, show_progress=False):
        rows = [np.random.default_rng(sum(map(ord, t))).normal(size=self.dim) for t in texts]
        return np.asarray(rows, dtype=np.float32)


@pytest.mark.parametrize("by_length", [False, True])
def test_scored_contexts_keep_the_order_and_equal_single_context_scores(by_length):
    net = small_net()
    units = [[f"u{k}-{i}" for i in range(n)] for k, n in enumerate([5, 2, 7, 3])]
    contexts = build_contexts([f"q{k}" for k in range(4)], units, _Words(), ("cos", "bm25z"))
    results = score_contexts(net, contexts, n_permutations=10, seed=4, batch_size=2, by_length=by_length)
    scores = [r.values for r in results]
    assert [s.shape[0] for s in scores] == [5, 2, 7, 3] and all(r.n_permutations == 10 for r in results)
    for c, s in zip(contexts, scores):
        alone = score_contexts(net, [c], n_permutations=10, seed=4)[0].values
        np.testing.assert_allclose(s, alone, atol=1e-5)
        game = ValueNetGame(net, c.units, c.query, c.extra, cache_psi=True)  # = monte_carlo on its game
        np.testing.assert_allclose(s, monte_carlo(game, 10, seed=derive_seed(4, c.key)).values, atol=1e-5)
        with torch.no_grad():  # efficiency: Σφ = v(N) − v(∅)
            full = net(c.units[None], c.query[None], None, c.extra[None])[0]
            empty = net(c.units[None], c.query[None], torch.zeros(1, c.n_units, dtype=torch.bool), c.extra[None])[0]
        assert s.sum() == pytest.approx(float(full - empty), abs=1e-5)


def test_a_budget_gives_each_context_the_permutations_its_length_buys():
    net = small_net()
    units = [[f"u{k}-{i}" for i in range(n)] for k, n in enumerate([5, 2, 7])]
    contexts = build_contexts([f"q{k}" for k in range(3)], units, _Words(), ("cos", "bm25z"))
    results = score_contexts(net, contexts, budget=62, seed=1)
    assert [r.n_permutations for r in results] == [15, 60, 10]  # ⌊(62 − 2)/(n − 1)⌋
    assert all(r.n_evaluations <= 62 for r in results)
    for c, r in zip(contexts, results):
        game = ValueNetGame(net, c.units, c.query, c.extra, cache_psi=True)
        np.testing.assert_allclose(r.values, monte_carlo(game, budget=62, seed=derive_seed(1, c.key)).values, atol=1e-6)
    loo = score_contexts(net, contexts, "loo")  # no batched form: one game per context
    assert [r.method for r in loo] == ["leave_one_out"] * 3 and loo[0].n_evaluations == 6


def test_an_adaptive_budget_caps_each_context_and_batched_equals_single():
    from scp.core.adaptive import adaptive_monte_carlo

    net = small_net()
    units = [[f"u{k}-{i}" for i in range(n)] for k, n in enumerate([5, 2, 7])]
    contexts = build_contexts([f"q{k}" for k in range(3)], units, _Words(), ("cos", "bm25z"))
    options = dict(budget=400, seed=3, delta=0.2, min_permutations=8, bound="student")
    results = score_contexts(net, contexts, "adaptive", per_context=[{"k": 2}, {"k": 1}, {"k": 3}], **options)
    for c, r, k in zip(contexts, results, (2, 1, 3)):
        assert r.certificate.k == k and r.n_evaluations <= 400 and r.n_permutations == r.certificate.n_permutations
        game = ValueNetGame(net, c.units, c.query, c.extra, cache_psi=True)
        single = adaptive_monte_carlo(game, k, **(options | dict(seed=derive_seed(3, c.key))))
        np.testing.assert_allclose(r.values, single.values, atol=1e-6)
        assert single.n_permutations == r.n_permutations and single.n_evaluations == r.n_evaluations
