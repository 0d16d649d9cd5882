"""The budget-counted peers of scp.bench.peers (shap's explainers, Leverage SHAP, regression-adjusted Monte Carlo)
on small games with exact Shapley values: exact on additive games, unbiased where they are Monte Carlo, more
accurate with more budget, reporting the rows the game valued; and the Leverage SHAP paper's Diabetes figure."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import t as student_t

from scp.bench.methods import budget_of
from scp.bench.peers import CountedGame, peer_methods, tree_ensemble_shapley
from scp.core.enumeration import exact
from scp.core.games import AdditiveGame, FunctionGame, MajorityGame
from scp.models.game import ValueNetGame
from scp.models.value_net import DeepSetsValue

PEERS = peer_methods()
KERNEL, PERMUTATION = "shap KernelExplainer", "shap PermutationExplainer"
LEVERAGE = "Leverage SHAP (from its paper)"
LINEAR, TREE = (f"regression-adjusted MC, {p} proxy (from its paper)" for p in ("linear", "tree"))
MONTE_CARLO = [name for name in (PERMUTATION, LINEAR, TREE) if name in PEERS]


def majority_game() -> MajorityGame:
    weights = np.random.default_rng(1).integers(1, 6, size=9).astype(float)
    return MajorityGame(weights, weights.sum() / 2)


def pairwise_game() -> FunctionGame:
    """v(S) = Σ_{i∈S} a_i + Σ_{i<j∈S} b_ij, n = 8 (φ_i = a_i + Σ_j b_ij / 2)."""
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=8), np.triu(rng.normal(size=(8, 8)), 1)
    return FunctionGame(lambda C: C @ a + np.einsum("ki,ij,kj->k", C * 1.0, b, C * 1.0), 8)


def deepsets_game() -> ValueNetGame:
    """A random-init Deep Sets value network on 10 random units, the ψ-caching game the benchmark plays."""
    torch.manual_seed(3)
    net = DeepSetsValue(embed_dim=8, hidden=16, latent=8, query_mode="product").double().eval()
    units, query = torch.randn(10, 8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    return ValueNetGame(net, units, query, cache_psi=True)


GAMES = {"majority": majority_game, "pairwise": pairwise_game, "deepsets": deepsets_game}


@pytest.mark.parametrize("name", [name for name in PEERS if name != TREE])
def test_exact_on_an_additive_game(name):
    """Every marginal of an additive game is its weight, so permutations are exact, and the regressions (KernelSHAP's,
    Leverage SHAP's, the linear proxy's) fit it with zero residual.  The tree proxy is left out: 100 depth-2 trees
    fit a sum of 9 terms only approximately (its residual correction stays unbiased, tested below)."""
    game = AdditiveGame(np.random.default_rng(0).normal(size=9))
    np.testing.assert_allclose(PEERS[name](game, budget_of(9, 6), 0).values, game.weights, atol=1e-10)


@pytest.mark.parametrize("name", [name for name in (KERNEL, LEVERAGE) if name in PEERS])
def test_the_regressions_are_exact_once_every_coalition_is_valued(name):
    game = deepsets_game()
    np.testing.assert_allclose(PEERS[name](game, 2**game.n_players, 0).values, exact(game).values, atol=1e-10)


@pytest.mark.parametrize("game_name", ["pairwise", "deepsets"])
@pytest.mark.parametrize("name", MONTE_CARLO)
def test_the_monte_carlo_peers_are_unbiased(name, game_name):
    """The mean over seeds is within t·s.e. of the exact values for every player, t the Student quantile at a
    family-wise false-alarm rate of 10⁻³ over the n players, so a bias of the order of the standard error of the
    mean fails it (plus 10⁻¹² of the values' scale for float rounding: a permutation walked forward and back is
    exact on a game without interactions of order > 2, such as the pairwise one, and its s.e. is rounding).
    Leverage SHAP and KernelSHAP are regressions, consistent but not unbiased, and are left out."""
    game = GAMES[game_name]()
    phi, n = exact(game).values, game.n_players
    seeds = 30 if name == TREE else 200
    estimates = np.array([PEERS[name](game, budget_of(n, 3), seed).values for seed in range(seeds)])
    se = estimates.std(0, ddof=1) / math.sqrt(seeds)
    limit = student_t.ppf(1 - 1e-3 / (2 * n), seeds - 1)
    z = np.abs(estimates.mean(0) - phi) / (se + 1e-12 * np.abs(phi).max())
    assert z.max() <= limit, f"{name} on {game_name}: max |mean − φ|/s.e. = {z.max():.2f} > {limit:.2f}"


@pytest.mark.parametrize("name", list(PEERS))
def test_error_falls_with_budget(name):
    """RMSE over 8 seeds on the Deep Sets game (n = 10) at budgets 24, 96 and 384 (below 2^n = 1024)."""
    game = deepsets_game()
    phi = exact(game).values
    rmse = [
        math.sqrt(np.mean([np.mean((PEERS[name](game, budget, seed).values - phi) ** 2) for seed in range(8)]))
        for budget in (24, 96, 384)
    ]
    assert rmse[0] > rmse[1] > rmse[2], f"{name}: RMSE {rmse} does not fall with the budget"


@pytest.mark.parametrize("name", list(PEERS))
def test_the_reported_evaluations_are_the_rows_the_game_valued(name):
    """Counted outside the peer by a second counter; never above the budget; Leverage SHAP spends 2 + 2⌊(B − 2)/2⌋
    (v(∅), v(N) and its pairs) and shap's PermutationExplainer (2n + 1)·⌊B/(2n + 1)⌋ (whole permutations)."""
    for game in (majority_game(), deepsets_game()):
        n, budget = game.n_players, budget_of(game.n_players, 5)
        outside = CountedGame(game)
        reported = PEERS[name](outside, budget, 7).evaluations
        assert reported == outside.rows <= budget
        if name == LEVERAGE:
            assert reported == 2 + 2 * ((budget - 2) // 2)
        if name == PERMUTATION:
            assert reported == (2 * n + 1) * (budget // (2 * n + 1))


def test_tree_ensemble_shapley_is_exact():
    """Against enumeration of S ↦ model(1_S), and against shap's interventional TreeExplainer with the all-zeros
    background where shap is installed."""
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(4)
    X = rng.random((60, 7)) < 0.5
    y = X @ rng.normal(size=7) + 2 * (X[:, 0] & X[:, 3]) - X[:, 1] * X[:, 5] + 0.1 * rng.normal(size=60)
    model = GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0).fit(X.astype(float), y)
    phi = tree_ensemble_shapley(model, 7)
    truth = exact(FunctionGame(lambda C: model.predict(C.astype(float)), 7)).values
    np.testing.assert_allclose(phi, truth, atol=1e-10)
    try:
        import shap
    except ImportError:
        return
    explainer = shap.TreeExplainer(model, data=np.zeros((1, 7)), feature_perturbation="interventional")
    np.testing.assert_allclose(phi, explainer.shap_values(np.ones((1, 7)))[0], atol=1e-8)


def _ratio_interval(numerator: np.ndarray, denominator: np.ndarray, level: float = 0.99) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(numerator)/mean(denominator), resampling the runs in pairs."""
    idx = np.random.default_rng(5).integers(len(numerator), size=(4000, len(numerator)))
    ratios = numerator[idx].mean(1) / denominator[idx].mean(1)
    return tuple(np.quantile(ratios, [(1 - level) / 2, (1 + level) / 2]))


def test_diabetes_error_ratios_agree_with_the_leverage_shap_paper():
    """Leverage SHAP's own game family: a boosted-tree regressor fitted to sklearn's Diabetes data (n = 10), the
    baseline game v(S) = f(x_S, x̄_{N∖S}) (x̄ the feature means, x a random row), m = 10n = 100 evaluations, error
    ‖φ̂ − φ‖²/‖φ‖² against exact values, mean over 40 explicands.  The paper fits XGBoost (100 trees of depth 4);
    xgboost is not installed here, so sklearn's gradient boosting with the same sizes stands in.

    The paper's figure: its table of mean errors at m = 10n (rtealwitter/leverageshap, tables/main_shap_error.tex
    at commit 36700d3, "prep for camera ready!", 2025-02-10) gives Diabetes 9.30e-03 for Optimized Kernel SHAP
    (shap's KernelExplainer) and 2.30e-03 for Leverage SHAP: a ratio of 4.04.  The ratio measured here must be
    above 1 with that value inside its 99% bootstrap interval.  Permutation SHAP (shap's PermutationExplainer)
    is not in the paper's table; the repository's later Diabetes table (tables/Diabetes-shap_error.tex at 0de0a80,
    2025-04-28) has 8.75e-03, a ratio of 3.80 to the same Leverage SHAP runs, held to the same test.  For
    regression-adjusted Monte Carlo no per-dataset figure of its paper (arXiv 2506.11849) was found — its abstract
    states errors up to 6.5× below Permutation SHAP's over eight datasets — so only that direction is tested:
    PermutationExplainer's error over the tree proxy's, above 1 at the 99% level."""
    pytest.importorskip("shap")
    from sklearn.datasets import load_diabetes
    from sklearn.ensemble import GradientBoostingRegressor

    X, y = load_diabetes(return_X_y=True)
    n = X.shape[1]
    model = GradientBoostingRegressor(n_estimators=100, max_depth=4, random_state=0).fit(X, y)
    rng = np.random.default_rng(0)
    errors: dict[str, list[float]] = {KERNEL: [], PERMUTATION: [], LEVERAGE: [], TREE: []}
    for run in range(40):
        x = X[rng.integers(len(X))]
        game = FunctionGame(lambda C, x=x: model.predict(np.where(C, x, X.mean(0))), n)
        phi = exact(game).values
        for name, found in errors.items():
            found.append(np.sum((PEERS[name](game, 10 * n, run).values - phi) ** 2) / np.sum(phi**2))
    e = {name: np.array(found) for name, found in errors.items()}
    for name, reported in ((KERNEL, 9.30e-03 / 2.30e-03), (PERMUTATION, 8.75e-03 / 2.30e-03)):
        low, high = _ratio_interval(e[name], e[LEVERAGE])
        measured = e[name].mean() / e[LEVERAGE].mean()
        assert 1 < low <= reported <= high, f"{name}/Leverage: {measured:.2f} [{low:.2f}, {high:.2f}] vs {reported:.2f}"
    low, high = _ratio_interval(e[PERMUTATION], e[TREE])
    measured = e[PERMUTATION].mean() / e[TREE].mean()
    assert low > 1, f"PermutationExplainer/tree proxy: {measured:.2f} [{low:.2f}, {high:.2f}]"
