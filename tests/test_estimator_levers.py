"""The fast path's levers: the position control variate (unbiased, efficient), gather + cumsum prefix sums (same
values and gradients as the GEMM), and the ψ cache a ValueNetGame keeps across calls."""

import numpy as np
import pytest
import torch

from scp.core.enumeration import exact
from scp.core.fast_path import POSITION_GRID, blocked_cumsum, deepsets_shapley, position_table, resolve_prefix
from scp.core.games import TableGame, all_coalitions
from scp.core.monte_carlo import monte_carlo
from scp.models.game import ValueNetGame
from scp.models.value_net import DeepSetsValue


def small_net(seed=0, **kw):
    torch.manual_seed(seed)
    return DeepSetsValue(embed_dim=8, hidden=16, latent=8, query_mode="product", **kw).eval()


def repeated(net, units, query, m, seeds, **kw):
    """One estimate per seed of the same context, from one batched call."""
    r = len(seeds)
    with torch.no_grad():
        return deepsets_shapley(
            net, units[None].expand(r, -1, -1), query[None].expand(r, -1), n_permutations=m, seed=list(seeds), **kw
        )


@pytest.mark.parametrize("antithetic", [False, True])
def test_position_control_variate_is_unbiased_and_efficient(antithetic):
    net = small_net(1, skip=True)
    units, query = torch.randn(7, 8) * 2, torch.randn(8)
    game = ValueNetGame(net, units, query, cache_psi=True)
    phi = exact(game).values
    batch = repeated(net, units, query, 4, range(400), antithetic=antithetic, control_variate="position")
    values = batch.values.double().numpy()
    # every estimate is efficient: Σφ̂ = v(N) − v(∅)
    np.testing.assert_allclose(values.sum(1), game.grand_value - game.empty_value, atol=1e-5)
    # the mean over 400 independent estimates is within 4 standard errors of the exact values
    se = values.std(0, ddof=1) / np.sqrt(len(values))
    assert np.all(np.abs(values.mean(0) - phi) <= 4 * se + 1e-6)
    # its n_evaluations counts the 2·n·POSITION_GRID ρ evaluations of the control variate
    assert int(batch.n_evaluations[0]) == 4 * 6 + 2 + 2 * 7 * POSITION_GRID


def test_position_table_is_exact_at_both_ends_and_does_not_depend_on_the_batch():
    net = small_net(3).double()
    torch.manual_seed(3)
    g = torch.randn(2, 12, 16, dtype=torch.float64)
    mask = torch.ones(2, 12, dtype=torch.bool)
    mask[1, 9:] = False
    g[1, 9:] = 0.0
    g0 = torch.randn(2, 16, dtype=torch.float64)
    with torch.no_grad():
        c = position_table(net, g, g0, mask)
        alone = position_table(net, g[1:, :9], g0[1:])
        rho = net.rho_after_first
        total = g[1, :9].sum(0)
        first = rho(g0[1] + g[1, :9]) - rho(g0[1].expand(9, -1))  # s = 0: i joins ∅
        last = rho((g0[1] + total).expand(9, -1)) - rho(g0[1] + total - g[1, :9])  # s = n − 1: i joins the rest
    torch.testing.assert_close(c[1, :9, :9], alone[0])
    torch.testing.assert_close(c[1, :9, 0], first)
    torch.testing.assert_close(c[1, :9, 8], last)
    assert (c[1, 9:] == 0).all() and (c[1, :, 9:] == 0).all() and POSITION_GRID < 12


def test_position_control_variate_lowers_the_error_on_a_sigmoid_game():
    # a saturating game: marginals depend mostly on how many units came before, which the variate removes
    net = small_net(2, skip=True)
    with torch.no_grad():
        net.skip.weight.mul_(20.0)
    units, query = torch.randn(9, 8), torch.randn(8)
    phi = exact(ValueNetGame(net, units, query, cache_psi=True)).values
    plain = repeated(net, units, query, 8, range(200)).values.double().numpy()
    cv = repeated(net, units, query, 8, range(200), control_variate="position").values.double().numpy()
    assert np.mean((cv - phi) ** 2) < 0.7 * np.mean((plain - phi) ** 2)


def test_control_variate_same_seed_same_numbers_and_padding():
    net = small_net(3)
    units, query = torch.randn(3, 6, 8), torch.randn(3, 8)
    mask = torch.arange(6)[None] < torch.tensor([6, 4, 1])[:, None]
    a = deepsets_shapley(net, units, query, mask, n_permutations=10, seed=[1, 2, 3], control_variate="position")
    b = deepsets_shapley(net, units, query, mask, n_permutations=10, seed=[1, 2, 3], control_variate="position")
    torch.testing.assert_close(a.values, b.values)
    assert (a.values[1, 4:] == 0).all() and (a.values[2, 1:] == 0).all()
    # a context in a padded batch gets the values it gets alone
    alone = deepsets_shapley(net, units[1:2, :4], query[1:2], n_permutations=10, seed=[2], control_variate="position")
    torch.testing.assert_close(a.values[1, :4], alone.values[0], atol=1e-6, rtol=0)
    # one unit: its value is v(N) − v(∅) exactly
    assert a.values[2, 0].item() == pytest.approx((a.grand_values[2] - a.empty_values[2]).item(), abs=1e-6)
    game = ValueNetGame(net, units[0], query[0], cache_psi=True)
    single = monte_carlo(game, 10, seed=1, control_variate="position")
    np.testing.assert_allclose(single.values, a.values[0].detach().double().numpy(), atol=1e-6)
    assert single.metadata["control_variate"] == "position"


def test_bad_options_are_clear_errors():
    net = small_net()
    units, query = torch.randn(1, 4, 8), torch.randn(1, 8)
    with pytest.raises(ValueError, match="control_variate"):
        deepsets_shapley(net, units, query, n_permutations=4, control_variate="taylor")
    with pytest.raises(ValueError, match="prefix"):
        deepsets_shapley(net, units, query, n_permutations=4, prefix="scan")
    with pytest.raises(ValueError, match="fast path"):
        monte_carlo(TableGame.random(3), 4, control_variate="position")


def test_blocked_cumsum_equals_cumsum():
    torch.manual_seed(0)
    for shape, dim in [((3, 70, 5), 1), ((2, 4, 33, 3), 2), ((31, 2), 0), ((1, 1, 4), 1)]:
        x = torch.randn(*shape, dtype=torch.float64)
        torch.testing.assert_close(blocked_cumsum(x, dim), x.cumsum(dim), atol=1e-12, rtol=0)


def test_cumsum_and_gemm_prefix_paths_agree_in_values_and_gradients():
    net = small_net(4, skip=True)
    units, query = torch.randn(3, 40, 8), torch.randn(3, 8)
    mask = torch.arange(40)[None] < torch.tensor([40, 23, 2])[:, None]
    out = {}
    for path, chunk in [("gemm", 1 << 23), ("cumsum", 1 << 23), ("cumsum", 700)]:
        net.zero_grad()
        res = deepsets_shapley(
            net, units, query, mask, n_permutations=6, seed=[5, 6, 7], prefix=path, chunk_elements=chunk
        )
        assert res.prefix == path
        (res.values * torch.linspace(-1, 1, 40)).sum().backward()
        out[(path, chunk)] = (res.values.detach(), [p.grad.clone() for p in net.parameters()])
    ref_values, ref_grads = out[("gemm", 1 << 23)]
    for values, grads in out.values():
        torch.testing.assert_close(values, ref_values, atol=1e-6, rtol=0)
        for g, r in zip(grads, ref_grads):
            torch.testing.assert_close(g, r, atol=1e-5, rtol=1e-4)
    assert resolve_prefix("auto", 10) == "gemm" and resolve_prefix("auto", 5000) == "cumsum"


def test_value_net_game_caches_psi_across_calls_until_the_weights_change():
    net = small_net(5, skip=True)
    units, query = torch.randn(6, 8), torch.randn(8)
    calls = []
    encode = net.encode
    net.encode = lambda *a, **k: calls.append(1) or encode(*a, **k)
    game = ValueNetGame(net, units, query, cache_psi=True)
    C = all_coalitions(6)
    first = game(C)
    game(C[:5])
    monte_carlo(game, 8, seed=0)
    monte_carlo(game, 8, seed=1, control_variate="position")
    assert len(calls) == 1  # ψ once for this game object, whatever estimators read it
    del net.encode
    np.testing.assert_allclose(first, ValueNetGame(net, units, query)(C), atol=1e-6)  # = full forward
    with torch.no_grad():
        net.rho[0].bias.add_(0.5)  # an in-place weight change (what an optimizer step does)
    np.testing.assert_allclose(game(C), ValueNetGame(net, units, query)(C), atol=1e-6)
