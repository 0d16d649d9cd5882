"""Estimators against independent references: enumeration, shapiq, the axioms and Theorem 3.1."""

import numpy as np
import pytest

from scp.core.closed_forms import max_game_shapley, max_shapley
from scp.core.enumeration import exact, leave_one_out, shapley_from_table
from scp.core.estimators import estimate
from scp.core.games import (
    AdditiveGame,
    FunctionGame,
    GloveGame,
    MajorityGame,
    MaxSumGame,
    TableGame,
    UnanimityGame,
    all_coalitions,
)
from scp.core.monte_carlo import monte_carlo
from scp.core.permutations import sample_permutations


def brute_force_shapley(game):
    """Σ over permutations: the definition, independent of scp.core.enumeration's weights."""
    import itertools

    n = game.n_players
    phi = np.zeros(n)
    perms = list(itertools.permutations(range(n)))
    for perm in perms:
        c = np.zeros(n, bool)
        prev = game(c)[0]
        for p in perm:
            c[p] = True
            cur = game(c)[0]
            phi[p] += cur - prev
            prev = cur
    return phi / len(perms)


@pytest.mark.parametrize("n", [1, 2, 5, 8, 10])
def test_exact_matches_shapiq(n):
    shapiq = pytest.importorskip("shapiq")
    game = TableGame.random(n, seed=n)
    # shapiq's ExactComputer expects a callable on (k, n) coalitions and the player count
    computer = shapiq.ExactComputer(n_players=n, game=lambda C: game(np.asarray(C, bool)))
    ref = computer("SV", 1)
    ref_values = np.array([ref[(i,)] for i in range(n)])
    # shapiq reports the empty-set baseline separately: its SV satisfy Σφ = v(N) − v(∅)
    np.testing.assert_allclose(exact(game).values, ref_values, atol=1e-9, rtol=0)


def test_exact_matches_permutation_definition():
    game = TableGame.random(6, seed=11)
    np.testing.assert_allclose(exact(game).values, brute_force_shapley(game), atol=1e-12)


def test_axioms():
    rng = np.random.default_rng(0)
    n = 7
    g1, g2 = TableGame.random(n, seed=1), TableGame.random(n, seed=2)
    phi1, phi2 = exact(g1).values, exact(g2).values
    # efficiency
    assert phi1.sum() == pytest.approx(g1.grand_value - g1.empty_value, abs=1e-12)
    # additivity (and linearity)
    np.testing.assert_allclose(exact(TableGame(g1.values + 3 * g2.values)).values, phi1 + 3 * phi2, atol=1e-12)
    # symmetry: make players 1 and 4 interchangeable by symmetrising the table
    C = all_coalitions(n)
    swapped = C.copy()
    swapped[:, [1, 4]] = C[:, [4, 1]]
    sym = TableGame(g1.values + g1(swapped))
    phi = exact(sym).values
    assert phi[1] == pytest.approx(phi[4], abs=1e-12)
    # dummy: a player whose marginal is always w_i gets w_i; a null player gets 0
    w = rng.normal(size=n)
    dummy = FunctionGame(lambda C: g1(C & ~np.eye(n, dtype=bool)[3]) + C[:, 3] * w[3], n)
    assert exact(dummy).values[3] == pytest.approx(w[3], abs=1e-12)
    null = FunctionGame(lambda C: g1(C & ~np.eye(n, dtype=bool)[5]), n)
    assert exact(null).values[5] == pytest.approx(0.0, abs=1e-12)


def test_textbook_values():
    np.testing.assert_allclose(exact(AdditiveGame([1.0, -2.0, 0.5])).values, [1.0, -2.0, 0.5], atol=1e-12)
    np.testing.assert_allclose(exact(UnanimityGame(4, [0, 2])).values, [0.5, 0, 0.5, 0], atol=1e-12)
    np.testing.assert_allclose(exact(GloveGame([0], [1, 2])).values, [2 / 3, 1 / 6, 1 / 6], atol=1e-12)
    np.testing.assert_allclose(exact(MajorityGame([1, 1, 1], 2)).values, [1 / 3] * 3, atol=1e-12)


def test_exact_limit_and_table_size():
    with pytest.raises(ValueError, match="max_players"):
        exact(AdditiveGame(np.ones(17)))
    assert exact(AdditiveGame(np.ones(17)), max_players=17).n_evaluations == 2**17
    with pytest.raises(ValueError, match="2\\^n"):
        TableGame(np.ones(6))


def test_each_permutation_marginals_sum_to_grand_minus_empty():
    game = TableGame.random(9, seed=4)
    for perm in sample_permutations(9, 20, seed=1):
        res = monte_carlo(game, permutations=perm[None], path="generic")
        assert res.values.sum() == pytest.approx(game.grand_value - game.empty_value, abs=1e-12)


def test_monte_carlo_converges_and_reports_budget():
    game = TableGame.random(8, seed=5)
    phi = exact(game).values
    errors = [np.abs(monte_carlo(game, m, seed=0).values - phi).max() for m in (10, 100, 2000)]
    assert errors[2] < errors[0] and errors[2] < 0.03
    res = monte_carlo(game, 100, seed=0)
    assert res.n_evaluations == 100 * 7 + 2 and res.n_permutations == 100 and res.seed == 0
    # the reported standard errors are calibrated: |error| / se is rarely above 4
    assert np.all(np.abs(res.values - phi) < 4 * res.std_errors + 1e-12)


def test_same_seed_same_numbers_and_seed_recorded():
    game = TableGame.random(6, seed=5)
    a, b = monte_carlo(game, 30, seed=7), monte_carlo(game, 30, seed=7)
    np.testing.assert_array_equal(a.values, b.values)
    c = monte_carlo(game, 30)
    assert isinstance(c.seed, int)
    np.testing.assert_array_equal(monte_carlo(game, 30, seed=c.seed).values, c.values)


def test_theorem_3_1_bound_holds_in_99_percent_of_trials():
    from scp.core import theory

    n, B, M, delta = 8, 1.0, 40, 0.01
    game = TableGame.random(n, seed=6, bound=B)
    phi = exact(game).values
    bound = theory.mc_error_bound(B, n, M, delta)
    hits = [np.abs(monte_carlo(game, M, seed=s).values - phi).max() <= bound for s in range(300)]
    assert np.mean(hits) >= 0.99
    # and the bound is not vacuous in the other direction: with far fewer samples some errors exceed bound(M)
    small = [np.abs(monte_carlo(game, 1, seed=s).values - phi).max() for s in range(300)]
    assert max(small) > theory.mc_error_bound(B, n, 4000, delta)


def test_antithetic_lowers_variance_on_additive_like_game():
    # For a monotone game close to additive, a permutation and its reverse give negatively correlated marginals.
    n = 10
    w = np.linspace(0.1, 1.0, n)
    game = FunctionGame(lambda C: (C @ w) ** 1.5, n)
    phi = exact(game).values
    plain = [monte_carlo(game, 20, seed=s).values for s in range(200)]
    anti = [monte_carlo(game, 20, antithetic=True, seed=s).values for s in range(200)]
    mse_plain = np.mean((np.array(plain) - phi) ** 2)
    mse_anti = np.mean((np.array(anti) - phi) ** 2)
    assert mse_anti < 0.5 * mse_plain
    with pytest.raises(ValueError, match="even"):
        monte_carlo(game, 5, antithetic=True)


def test_max_game_closed_form_matches_enumeration():
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 9):
        r = rng.normal(size=n)
        r[rng.integers(n)] = r[0]  # a tie
        np.testing.assert_allclose(max_game_shapley(r), exact(MaxSumGame(r)).values, atol=1e-12)
    rel, w = rng.uniform(size=(7, 3)), np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(max_shapley(rel, w), exact(MaxSumGame(rel, w)).values, atol=1e-12)


def test_loo_fails_on_duplicates_while_shapley_shares():
    # players 0 and 1 are two copies of the supporting sentence: either suffices; 2..4 are noise.
    n = 5
    game = FunctionGame(lambda C: (C[:, 0] | C[:, 1]).astype(float) + 0.01 * C[:, 2:].sum(1), n)
    loo, shap = leave_one_out(game).values, exact(game).values
    assert abs(loo[0]) < 1e-12 and abs(loo[1]) < 1e-12
    assert shap[0] == pytest.approx(0.5) and shap[1] == pytest.approx(0.5)
    assert leave_one_out(game).n_evaluations == n + 1


def test_shapley_from_table_consistency_and_estimate_dispatch():
    game = TableGame.random(5, seed=9)
    np.testing.assert_allclose(shapley_from_table(game.values), exact(game).values)
    assert estimate(game, "exact").method == "exact"
    assert estimate(game, "loo").method == "leave_one_out"
    with pytest.raises(ValueError, match="unknown estimator"):
        estimate(game, "kernel")


def test_bad_inputs():
    game = TableGame.random(4, seed=0)
    with pytest.raises(ValueError, match="M"):
        monte_carlo(game, 0)
    with pytest.raises(ValueError, match="shape"):
        game(np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="permutation"):
        monte_carlo(game, permutations=np.array([[0, 0, 1, 2]]))
    with pytest.raises(ValueError, match="at least one"):
        AdditiveGame([])
    with pytest.raises(ValueError, match="finite"):
        max_game_shapley([0.1, np.nan])
    with pytest.raises(ValueError, match="seed"):
        monte_carlo(game, 4, seed=-1)
    # n = 1 works everywhere
    one = AdditiveGame([2.0])
    assert exact(one).values[0] == 2.0 and monte_carlo(one, 3).values[0] == 2.0 and leave_one_out(one).values[0] == 2.0


class CountingGame:
    """Wraps a game and counts the coalitions it is asked to value (shapiq's access counter)."""

    def __init__(self, game):
        self.game, self.n_players, self.count = game, game.n_players, 0

    def __call__(self, coalitions):
        self.count += len(coalitions)
        return self.game(coalitions)


@pytest.mark.parametrize(
    "method, kwargs",
    [
        ("exact", {}),
        ("loo", {}),
        ("monte_carlo", dict(n_permutations=13, seed=0)),
        ("monte_carlo", dict(n_permutations=14, antithetic=True, seed=0)),
    ],
)
def test_n_evaluations_counts_real_game_evaluations(method, kwargs):
    game = CountingGame(TableGame.random(6, seed=1))
    res = estimate(game, method, **kwargs)
    assert res.n_evaluations == game.count
    assert np.isfinite(res.values).all()  # a plain callable with n_players is a game


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("method", ["exact", "monte_carlo", "loo"])
def test_non_finite_game_values_are_an_error(bad, method):
    # v(S) = |S| except one coalition (bitmask 5; for LOO, the grand coalition) that is NaN or ±inf
    target = 15 if method == "loo" else 5
    game = FunctionGame(lambda C: np.where(C.astype(np.int64) @ (1 << np.arange(4)) == target, bad, C.sum(1) * 1.0), 4)
    kwargs = {"n_permutations": 40, "seed": 0} if method == "monte_carlo" else {}
    with pytest.raises(ValueError, match=r"FunctionGame returned non-finite values \(NaN or inf\) for \d+ of \d+"):
        estimate(game, method, **kwargs)


def test_games_that_are_not_games_get_a_clear_error():
    with pytest.raises(TypeError, match="FunctionGame"):
        monte_carlo(lambda C: C.sum(1), 10)
    zero = FunctionGame.__new__(FunctionGame)
    zero.fn, zero.n_players = (lambda C: np.zeros(len(C))), 0
    for method in ("exact", "monte_carlo", "loo"):
        with pytest.raises(ValueError, match="at least one player"):
            estimate(zero, method)
