"""scp.core.adaptive: the certified adaptive budget keeps the exact Top-K set in ≥ 1 − δ of seeded runs."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from scp.core.adaptive import (
    adaptive_deepsets_shapley,
    adaptive_monte_carlo,
    bernstein_radius,
    certify_topk,
    hoeffding_radius,
    round_schedule,
    student_radius,
)
from scp.core.enumeration import exact
from scp.core.games import AdditiveGame, FunctionGame, TableGame, all_coalitions
from scp.core.selection import keep_count
from scp.models.game import ValueNetGame
from scp.models.value_net import DeepSetsValue


def separated_table_game(seed=0):
    """An additive game with a clear Top-2 plus a small interaction table (exact values known)."""
    rng = np.random.default_rng(seed)
    w = np.array([0.6, 0.45, 0.1, 0.08, 0.05, 0.02])
    table = all_coalitions(6) @ w + 0.05 * rng.random(2**6)
    return TableGame(table)


def test_schedule_radii_and_keep_count():
    assert round_schedule(16, 100) == [16, 32, 64, 100]
    assert round_schedule(8, 8) == [8]
    assert round_schedule(4, 20, antithetic=True) == [4, 8, 16, 20]
    for args, match in [
        ((16, 8), "max_permutations"),
        ((1, 8), "min_permutations"),
        ((6, 20, True), "antithetic"),
        ((2.5, 8), "min_permutations"),
    ]:
        with pytest.raises(ValueError, match=match):
            round_schedule(*args)
    assert hoeffding_radius(50, 2.0, 0.1) == pytest.approx(2.0 * math.sqrt(math.log(20) / 100))
    assert bernstein_radius(np.array([0.0]), 10, 2.0, 0.1)[0] == pytest.approx(7 * 2.0 * math.log(40) / 27)
    assert np.isinf(bernstein_radius(np.array([1.0]), 1, 2.0, 0.1)).all()
    assert student_radius(np.array([0.04]), 10, 0.1)[0] == pytest.approx(stats.t.ppf(0.95, 9) * 0.2 / math.sqrt(10))
    assert student_radius(np.array([0.04]), 10, 0.1)[0] < bernstein_radius(np.array([0.04]), 10, 2.0, 0.1)[0]
    assert keep_count(41, 0.5) == 21 and keep_count(10, 0.01) == 1
    gap, margin = certify_topk(np.array([0.5, 0.1, 0.4]), np.array([0.01, 0.02, 0.03]), 2)
    assert gap == pytest.approx(0.3) and margin == pytest.approx(0.37 - 0.12)


def test_topk_is_right_in_at_least_one_minus_delta_of_seeded_runs():
    game, delta = separated_table_game(), 0.1
    truth = set(np.argsort(-exact(game).values)[:2].tolist())
    runs = [
        adaptive_monte_carlo(game, 2, delta=delta, value_range=1.5, max_permutations=4096, seed=s) for s in range(60)
    ]
    right = [set(np.argsort(-r.values)[:2].tolist()) == truth for r in runs]
    certified = [r.certificate.certified for r in runs]
    assert all(certified) and np.mean(right) >= 1 - delta
    cert = runs[0].certificate
    assert cert.separated and cert.margin > 0 and cert.radius == pytest.approx(cert.gap - cert.margin)
    assert runs[0].n_permutations == cert.n_permutations < 4096
    m = runs[0].n_permutations
    assert runs[0].n_evaluations == m * 5 + 2 * cert.rounds  # each round values ∅ and N once


def test_student_interval_keeps_the_exact_topk_in_at_least_one_minus_delta_of_seeded_runs():
    """The asymptotic interval is no theorem at small t, so its coverage is what this test measures: on a game with
    known exact values the Top-K set must be right in ≥ 1 − δ of seeded runs, and it stops far earlier."""
    game, delta = separated_table_game(), 0.1
    truth = set(np.argsort(-exact(game).values)[:2].tolist())
    runs = [
        adaptive_monte_carlo(game, 2, delta=delta, value_range=1.5, max_permutations=4096, seed=s, bound="student")
        for s in range(100)
    ]
    assert np.mean([set(np.argsort(-r.values)[:2].tolist()) == truth for r in runs]) >= 1 - delta
    certs = [r.certificate for r in runs]
    assert all(c.certified and not c.rigorous for c in certs)
    rigorous = adaptive_monte_carlo(game, 2, delta=delta, value_range=1.5, max_permutations=4096, seed=0)
    assert rigorous.certificate.rigorous
    assert np.median([r.n_permutations for r in runs]) < rigorous.n_permutations


def test_control_variate_rounds_match_single_context_and_need_the_student_interval():
    torch.manual_seed(1)
    net = DeepSetsValue(embed_dim=8, hidden=16, latent=8, query_mode="product").double().eval()
    units, query = torch.randn(9, 8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    game = ValueNetGame(net, units, query, cache_psi=True)
    phi = exact(game).values
    k = int(np.argmax(-np.diff(np.sort(phi)[::-1]))) + 1
    options = dict(delta=0.1, max_permutations=2048, bound="student", control_variate="position", antithetic=True)
    results = adaptive_deepsets_shapley(
        net, units[None].expand(30, -1, -1), query[None].expand(30, -1), k=k, seeds=list(range(30)), **options
    )
    values, certs = [r.values for r in results], [r.certificate for r in results]
    truth = set(np.argsort(-phi)[:k].tolist())
    assert np.mean([set(np.argsort(-v)[:k].tolist()) == truth for v in values]) >= 0.9
    single = adaptive_monte_carlo(game, k, seed=4, **options)  # the table is recomputed per round here
    np.testing.assert_allclose(single.values, values[4], atol=1e-9)
    assert single.n_permutations == certs[4].n_permutations
    plain = [
        r.certificate
        for r in adaptive_deepsets_shapley(
            net,
            units[None].expand(30, -1, -1),
            query[None].expand(30, -1),
            k=k,
            seeds=list(range(30)),
            **(options | dict(control_variate=None)),
        )
    ]
    assert np.median([c.n_permutations for c in certs]) <= np.median([c.n_permutations for c in plain])
    for bound in ("bernstein", "hoeffding"):
        with pytest.raises(ValueError, match="student"):
            adaptive_monte_carlo(game, k, bound=bound, control_variate="position")


def test_value_net_game_topk_certified_and_batched_equals_single():
    torch.manual_seed(0)
    net = DeepSetsValue(embed_dim=8, hidden=16, latent=8, query_mode="product", skip=True).eval()
    with torch.no_grad():
        net.skip.weight.mul_(4.0)
    units, query = torch.randn(7, 8), torch.randn(8)
    game = ValueNetGame(net, units, query, cache_psi=True)
    phi = exact(game).values
    gaps = -np.diff(np.sort(phi)[::-1])
    k = int(np.argmax(gaps)) + 1  # the K with the largest gap
    truth = set(np.argsort(-phi)[:k].tolist())
    delta, r = 0.1, 40
    results = adaptive_deepsets_shapley(
        net,
        units[None].expand(r, -1, -1),
        query[None].expand(r, -1),
        k=k,
        delta=delta,
        max_permutations=8192,
        seeds=list(range(r)),
    )
    values, certs = [res.values for res in results], [res.certificate for res in results]
    right = [set(np.argsort(-v)[:k].tolist()) == truth for v in values]
    assert np.mean(right) >= 1 - delta and np.mean([c.certified for c in certs]) >= 0.9
    single = adaptive_monte_carlo(game, k, delta=delta, max_permutations=8192, seed=3)
    np.testing.assert_allclose(single.values, values[3], atol=1e-6)
    assert single.n_permutations == certs[3].n_permutations
    again = adaptive_monte_carlo(game, k, delta=delta, max_permutations=8192, seed=3)
    np.testing.assert_array_equal(again.values, single.values)  # same seed, same numbers


def test_a_tie_at_the_boundary_runs_to_max_and_says_so():
    game = FunctionGame(lambda C: C @ np.array([0.5, 0.3, 0.3, 0.1]) + 0.2 * C[:, 1] * C[:, 3], 4)
    res = adaptive_monte_carlo(game, 2, value_range=1.5, min_permutations=8, max_permutations=64, seed=0)
    cert = res.certificate
    assert not cert.certified and cert.stopped_at_max and res.n_permutations == 64 == cert.n_permutations
    # a tolerance turns it into an ε-certificate: no kept/dropped swap gains more than ε
    loose = adaptive_monte_carlo(
        game, 2, value_range=1.5, min_permutations=8, max_permutations=64, seed=0, tolerance=50.0
    )
    assert loose.certificate.certified and loose.n_permutations == 8
    everything = adaptive_monte_carlo(AdditiveGame([0.2, 0.1]), 2, value_range=1.0, seed=0)
    assert everything.certificate.certified and everything.n_permutations == 16


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(delta=0.0), "delta"),
        (dict(delta=1.0), "delta"),
        (dict(k=0), "k must"),
        (dict(k=7), "k must"),
        (dict(tolerance=-0.1), "tolerance"),
        (dict(bound="chernoff"), "bound"),
        (dict(max_permutations=8, min_permutations=16), "max_permutations"),
        (dict(value_range=0.0), "value_range"),
    ],
)
def test_bad_parameters(kwargs, match):
    game = separated_table_game()
    args = dict(k=2, value_range=1.5) | kwargs
    with pytest.raises(ValueError, match=match):
        adaptive_monte_carlo(game, **args)
    with pytest.raises(ValueError, match="value_range"):
        adaptive_monte_carlo(game, 2)  # a table game has no known bound


class _Words:
    """A deterministic toy embedder (what build_contexts needs)."""

    dim, id = 8, "toy"

    def encode(self, texts, batch_size=256, show_progress=False):
        return np.asarray([np.random.default_rng(sum(map(ord, t))).normal(size=8) for t in texts], np.float32)


def toy_pruner(**kwargs):
    from scp.models.config import TrainConfig
    from scp.models.factory import build_model
    from scp.pruning.pruner import ShapleyPruner

    config = TrainConfig(query_mode="product_concat", features=("cos", "bm25z"), hidden=16, latent=8, skip=True)
    torch.manual_seed(0)
    return ShapleyPruner(build_model(config, 8), config, _Words(), **kwargs)


def test_pruner_and_eval_ranker_with_an_adaptive_budget():
    from scp.pruning.evaluation import SCPRanker

    sentences = [f"sentence {i} about topic {i % 3}" for i in range(6)]
    pruner = toy_pruner(n_permutations="adaptive", max_permutations=64, delta=0.2)
    res = pruner.rank("what about topic 1?", sentences)
    cert = res.certificate
    assert cert.k == 3 and 16 <= res.n_permutations <= 64 and res.n_permutations == cert.n_permutations
    out = pruner.prune("what about topic 1?", sentences, top_k=2)
    assert len(out.kept_indices) == 2
    ranker = SCPRanker(pruner)
    scores = ranker.score_many(["what about topic 1?", "and topic 2?"], [sentences, sentences[:4]])
    assert [len(s) for s in scores] == [6, 4]
    np.testing.assert_allclose(scores[0], res.values, atol=1e-6)  # same seed and key: same values as rank()
    summary = ranker.budget_summary()
    assert summary["delta"] == 0.2 and 16 <= summary["median_permutations"] <= 64
    cv = toy_pruner(
        n_permutations="adaptive", max_permutations=64, bound="student", control_variate="position", tolerance=0.01
    )
    res_cv = cv.rank("what about topic 1?", sentences)
    assert res_cv.metadata["control_variate"] == "position" and not res_cv.certificate.rigorous
    cv_ranker = SCPRanker(cv)
    np.testing.assert_allclose(cv_ranker.score_many(["what about topic 1?"], [sentences])[0], res_cv.values, atol=1e-6)
    assert cv_ranker.budget_summary()["bound"] == "student"
    fixed = toy_pruner(n_permutations=32, control_variate="position").rank("what about topic 1?", sentences)
    assert fixed.metadata["control_variate"] == "position" and fixed.n_permutations == 32
    for kwargs, match in [
        (dict(n_permutations="fast"), "adaptive"),
        (dict(n_permutations="adaptive", delta=2.0), "delta"),
        (dict(n_permutations="adaptive", max_permutations=8), "max_permutations"),
        (dict(n_permutations="adaptive", certify_keep=0.0), "keep_ratio"),
        (dict(n_permutations="adaptive", control_variate="position"), "student"),
        (dict(control_variate="linear"), "control_variate"),
        (dict(estimator="loo", control_variate="position"), "control_variate"),
    ]:
        with pytest.raises(ValueError, match=match):
            toy_pruner(**kwargs)


def test_cli_rejects_adaptive_options_without_the_flag(capsys):
    from scp.cli import main

    assert (
        main(["eval", "--dataset", "hotpotqa", "--method", "scp", "--checkpoint", "x.safetensors", "--delta", "0.1"])
        == 2
    )
    assert "--adaptive" in capsys.readouterr().err
    assert (
        main(
            ["eval", "--dataset", "hotpotqa", "--method", "scp", "--checkpoint", "x.safetensors", "--bound", "student"]
        )
        == 2
    )
    assert "--adaptive" in capsys.readouterr().err
    assert (
        main(
            [
                "eval",
                "--dataset",
                "hotpotqa",
                "--method",
                "scp",
                "--checkpoint",
                "x.safetensors",
                "--adaptive",
                "--control-variate",
                "position",
            ]
        )
        == 2
    )  # bernstein (the default) is rigorous: needs student
    assert "student" in capsys.readouterr().err
