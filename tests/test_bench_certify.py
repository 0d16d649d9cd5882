"""scp.bench.certify: the LUCB Top-K rule with player-targeted draws finds the exact Top-K in ≥ 1 − δ of seeded runs,
counts the evaluations the game really made, and stops earlier when the boundary is wider."""

import numpy as np
import pytest
import torch

from scp.bench.certify import draw_grid, engine_cap, lucb_topk
from scp.core.adaptive import adaptive_deepsets_shapley, hoeffding_radius
from scp.core.enumeration import exact
from scp.core.games import Game, TableGame, all_coalitions
from scp.models.game import ValueNetGame
from scp.models.value_net import DeepSetsValue


def shapley_not_banzhaf(a: float) -> TableGame:
    """v(S) = a·[0 ∈ S] + [{1, 2, 3, 4} ⊆ S] on 6 players (player 5 a dummy): φ = (a, ¼, ¼, ¼, ¼, 0), so the Top-4
    is {1, 2, 3, 4} for a < ¼.  Its Banzhaf values are (a, ⅛, ⅛, ⅛, ⅛, 0): a sampler that drew P as a uniform
    subset rather than a uniform permutation's predecessors would certify player 0 for a > ⅛.  Marginals lie in
    [0, 1], an interval of width 1 (value_range = ½)."""
    C = all_coalitions(6)
    return TableGame(a * C[:, 0] + C[:, 1:5].all(1))


class Counted(Game):
    """A game that counts the coalitions it is asked to value."""

    def __init__(self, game: Game):
        self.game, self.n_players, self.rows = game, game.n_players, 0

    def value(self, coalitions):
        self.rows += coalitions.shape[0]
        return self.game(coalitions)


def small_net_game(seed: int = 1) -> ValueNetGame:
    torch.manual_seed(seed)
    net = DeepSetsValue(embed_dim=16, hidden=32, latent=8, dropout=0.0).double().eval()
    units, query = torch.randn(8, 16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    return ValueNetGame(net, units, query, cache_psi=True)


def test_grid_and_input_errors():
    assert draw_grid(16, 40, 1.25) == [16, 20, 25, 32, 40]
    assert draw_grid(2, 5, 1.1) == [2, 3, 4, 5]  # at least one more draw per grid point
    game = shapley_not_banzhaf(0.1)
    for kwargs, match in [
        ({"k": 0}, "k must"),
        ({"k": 2, "budget": 2 + 2 * 6 * 16 - 1}, "budget"),
        ({"k": 2, "growth": 1.0}, "growth"),
        ({"k": 2, "min_draws": 1}, "min_draws"),
        ({"k": 2, "bound": "normal"}, "bound"),
        ({"k": 2, "delta": 1.0}, "delta"),
    ]:
        with pytest.raises(ValueError, match=match):
            lucb_topk(game, **({"budget": 10**5, "value_range": 0.5} | kwargs))
    with pytest.raises(ValueError, match="value_range"):
        lucb_topk(game, 2, 10**5)  # a table game has no value_bound


@pytest.mark.parametrize("bound", ["bernstein", "student"])
def test_exact_topk_in_at_least_one_minus_delta_of_seeded_runs(bound):
    """Bernstein is a theorem (failures ≤ δ·runs is then a weak check, but the game makes a biased sampler fail
    it); Student is asymptotic, and this counts its failures where its draws are Bernoulli(¼) at small t."""
    game, delta, runs = shapley_not_banzhaf(0.19), 0.1, 100
    truth = np.sort(np.argsort(-exact(game).values, kind="stable")[:4])
    np.testing.assert_array_equal(truth, [1, 2, 3, 4])
    results = [lucb_topk(game, 4, 10**6, delta=delta, bound=bound, value_range=0.5, seed=s) for s in range(runs)]
    assert all(r.certified and r.separated and not r.stopped_at_cap for r in results)
    failures = sum(not np.array_equal(r.kept, truth) for r in results)
    assert failures <= delta * runs
    assert results[0].rigorous == (bound == "bernstein")


def test_value_net_topk_and_evaluations_match_an_outside_counter():
    game = small_net_game()
    phi = exact(game).values
    desc = np.sort(phi)[::-1]
    k = int(np.argmax(desc[:-1] - desc[1:])) + 1  # the widest boundary of this random net
    truth = np.sort(np.argsort(-phi, kind="stable")[:k])
    delta, runs, failures = 0.1, 30, 0
    for s in range(runs):
        counted = Counted(game)
        res = lucb_topk(counted, k, 10**6, delta=delta, value_range=game.value_bound, seed=s)
        assert res.certified and res.n_evaluations == counted.rows
        assert res.n_evaluations < 2 * res.draws.sum() + 2  # ∅ and N are valued once, not per draw
        failures += not np.array_equal(res.kept, truth)
    assert failures <= delta * runs
    again = lucb_topk(game, k, 10**6, delta=delta, seed=0)
    assert again.n_evaluations == lucb_topk(game, k, 10**6, delta=delta, seed=0).n_evaluations
    np.testing.assert_array_equal(again.values, lucb_topk(game, k, 10**6, delta=delta, seed=0).values)


def test_budget_cap_union_and_engine_cap():
    game = small_net_game()
    capped = Counted(game)
    budget = 2 + 2 * 8 * 16 + 40
    res = lucb_topk(capped, 4, budget, delta=0.05, bound="hoeffding", value_range=game.value_bound, seed=0)
    assert res.stopped_at_cap and not res.certified and capped.rows == res.n_evaluations <= budget
    grid = draw_grid(16, (budget - 2) // 2)
    assert res.grid_points == len(grid)
    np.testing.assert_allclose(res.radius, hoeffding_radius(res.draws, 2 * game.value_bound, 0.05 / (8 * len(grid))))
    net = game.net
    engine = adaptive_deepsets_shapley(
        net, game.units[None], game.query[None], k=4, delta=1e-9, max_permutations=64, seeds=0, bound="bernstein"
    )[0]
    assert not engine.certificate.certified and engine.n_evaluations == engine_cap(8, 64)


def test_stops_earlier_when_the_boundary_is_wider():
    for bound in ("bernstein", "student"):
        wide = lucb_topk(shapley_not_banzhaf(0.05), 4, 10**6, delta=0.1, bound=bound, value_range=0.5, seed=3)
        tight = lucb_topk(shapley_not_banzhaf(0.2), 4, 10**6, delta=0.1, bound=bound, value_range=0.5, seed=3)
        assert wide.certified and tight.certified
        assert wide.n_evaluations < tight.n_evaluations
