"""Value networks and the Deep Sets fast path."""

import numpy as np
import pytest
import torch

from scp.core.enumeration import exact
from scp.core.fast_path import deepsets_shapley
from scp.core.monte_carlo import monte_carlo
from scp.core.permutations import sample_permutations
from scp.models.game import ValueNetGame
from scp.models.value_net import QUERY_MODES, ConvexDeepSets, DeepSetsValue


def n_params(net):
    return sum(p.numel() for p in net.parameters())


def test_paper_parameter_count():
    assert n_params(DeepSetsValue()) == 3_026_433
    assert n_params(DeepSetsValue(query_mode="product")) == 3_026_433
    assert n_params(DeepSetsValue(query_mode="concat")) == 3_026_433 + 384 * 1024


def test_bounded_output_permutation_invariance_and_padding():
    torch.manual_seed(0)
    for mode in QUERY_MODES:
        net = DeepSetsValue(embed_dim=16, hidden=32, latent=8, query_mode=mode, bound=2.5).eval()
        u, q = torch.randn(3, 6, 16), torch.randn(3, 16)
        v = net(u, q)
        assert ((v >= 0) & (v <= 2.5)).all()
        perm = torch.randperm(6)
        torch.testing.assert_close(net(u[:, perm], q), v)
        # padding: a 4-unit context padded to 6 equals the unpadded 4-unit context
        mask = torch.tensor([[True] * 4 + [False] * 2] * 3)
        torch.testing.assert_close(net(u, q, mask), net(u[:, :4], q))


def test_fast_path_equals_generic_path():
    torch.manual_seed(1)
    variants = [
        (DeepSetsValue, dict(query_mode="member")),
        (DeepSetsValue, dict(query_mode="product")),
        (DeepSetsValue, dict(query_mode="product", skip=True, output="clip", bound=3.0)),
        (ConvexDeepSets, dict(query_mode="product")),
    ]
    for cls, kw in variants:
        net = cls(embed_dim=24, hidden=48, latent=16, **kw).eval()
        units, query = torch.randn(9, 24), torch.randn(24)
        game = ValueNetGame(net, units, query)
        perms = sample_permutations(9, 16, seed=2)
        generic = monte_carlo(game, permutations=perms, path="generic")
        fast = monte_carlo(game, permutations=perms, path="fast")
        np.testing.assert_allclose(fast.values, generic.values, atol=1e-5)
        assert fast.method.endswith("fast]") and generic.method.endswith("generic]")


def test_fast_path_batched_with_padding_matches_single_contexts():
    torch.manual_seed(2)
    net = DeepSetsValue(embed_dim=12, hidden=32, latent=16, query_mode="product", n_extra=2).eval()
    lengths = [5, 3, 7]
    units, query, extra = torch.randn(3, 7, 12), torch.randn(3, 12), torch.randn(3, 7, 2)
    mask = torch.arange(7)[None] < torch.tensor(lengths)[:, None]
    batch = deepsets_shapley(net, units, query, mask, extra, n_permutations=64, seed=0)
    for b, n in enumerate(lengths):
        assert (batch.values[b, n:] == 0).all()
        game = ValueNetGame(net, units[b, :n], query[b], extra[b, :n])
        # each context's estimate sums exactly to v(N) − v(∅) (efficiency holds per permutation)
        assert batch.values[b, :n].sum().item() == pytest.approx(game.grand_value - game.empty_value, abs=1e-5)
        # and converges to the exact values
        phi = exact(game).values
        assert (
            np.abs(batch.values[b, :n].detach().numpy() - phi).max() < 4 * batch.std_errors[b, :n].max().item() + 1e-4
        )
    assert batch.n_evaluations.tolist() == [64 * (n - 1) + 2 for n in lengths]


def test_psi_caching_game_equals_full_forward_game():
    torch.manual_seed(6)
    net = DeepSetsValue(embed_dim=10, hidden=16, latent=8, query_mode="product", n_extra=1, skip=True).eval()
    units, query, extra = torch.randn(7, 10), torch.randn(10), torch.randn(7, 1)
    from scp.core.games import all_coalitions

    C = all_coalitions(7)
    full = ValueNetGame(net, units, query, extra)(C)
    cached = ValueNetGame(net, units, query, extra, cache_psi=True)(C)
    np.testing.assert_allclose(cached, full, atol=1e-6)


def test_skip_path_and_clip_output():
    net = DeepSetsValue(embed_dim=8, hidden=16, latent=8, query_mode="product", skip=True, output="clip", bound=2.0)
    assert n_params(net) == n_params(DeepSetsValue(embed_dim=8, hidden=16, latent=8, query_mode="product")) + 8
    v = net.eval()(torch.randn(4, 5, 8) * 10, torch.randn(4, 8))
    assert ((v >= 0) & (v <= 2.0)).all()
    with pytest.raises(ValueError, match="output"):
        DeepSetsValue(output="tanh")


def test_chunking_over_contexts_and_permutations_changes_nothing():
    torch.manual_seed(7)
    net = DeepSetsValue(embed_dim=8, hidden=16, latent=8, query_mode="product").eval()
    u, q = torch.randn(3, 300, 8), torch.randn(3, 8)
    whole = deepsets_shapley(net, u, q, n_permutations=6, seed=1)
    tiny = deepsets_shapley(net, u, q, n_permutations=6, seed=1, chunk_elements=1000)  # one permutation at a time
    torch.testing.assert_close(tiny.values, whole.values, atol=1e-6, rtol=0)


def test_gradients_reach_psi_and_rho():
    torch.manual_seed(3)
    net = DeepSetsValue(embed_dim=8, hidden=16, latent=8, query_mode="member")
    units, query = torch.randn(2, 5, 8), torch.randn(2, 8)
    phi = deepsets_shapley(net, units, query, n_permutations=4, seed=0).values
    (phi[:, 0] - phi[:, 1]).sum().backward()
    for name in ("psi.0.weight", "psi.4.weight", "rho.0.weight", "rho.4.weight", "rho.8.weight"):
        grad = dict(net.named_parameters())[name].grad
        assert grad is not None and grad.abs().sum() > 0, name


def test_antithetic_and_seed_reproducibility():
    torch.manual_seed(4)
    net = DeepSetsValue(embed_dim=8, hidden=16, latent=8).eval()
    u, q = torch.randn(2, 6, 8), torch.randn(2, 8)
    a = deepsets_shapley(net, u, q, n_permutations=10, seed=5, antithetic=True)
    b = deepsets_shapley(net, u, q, n_permutations=10, seed=5, antithetic=True)
    torch.testing.assert_close(a.values, b.values)
    assert not torch.equal(a.values, deepsets_shapley(net, u, q, n_permutations=10, seed=6).values)


def test_convex_deepsets_is_supermodular_and_unconstrained_is_not():
    from scp.core.theory import check_supermodular, supermodularity_violation_rate

    torch.manual_seed(5)
    n, d = 8, 10
    units, query = torch.randn(n, d), torch.randn(d)

    def logit_game(net):
        def fn(C):
            with torch.no_grad():
                h, base = net.encode(units[None], query[None])
                pooled = base + torch.as_tensor(C, dtype=h.dtype) @ h[0]
                return net.rho(pooled).squeeze(-1).double().numpy()

        return fn

    convex = ConvexDeepSets(embed_dim=d, hidden=32, latent=16).eval()
    plain = DeepSetsValue(embed_dim=d, hidden=32, latent=16, query_mode="product").eval()
    from scp.core.games import FunctionGame, TableGame

    assert check_supermodular(TableGame.from_game(FunctionGame(logit_game(convex), n)), tol=1e-6).is_supermodular
    rate_convex = supermodularity_violation_rate(logit_game(convex), n, 2000, seed=0)
    rate_plain = supermodularity_violation_rate(logit_game(plain), n, 2000, seed=0)
    print(f"supermodularity violations: convex {rate_convex}, unconstrained {rate_plain}")
    assert _rate(rate_convex) == 0.0 and _rate(rate_plain) > 0.05
    # clamping keeps weights non-negative after an optimizer step
    opt = torch.optim.SGD(convex.parameters(), lr=10.0)
    convex(units[None], query[None]).sum().mul(-1).backward()
    opt.step()
    convex.clamp_()
    assert all((layer.weight >= 0).all() for layer in (convex.z_to_h1, convex.h1_to_h2, convex.h2_to_out))


def test_convex_deepsets_starts_unsaturated():
    torch.manual_seed(8)
    net = ConvexDeepSets().eval()  # paper sizes
    v = net(torch.randn(4, 41, 384), torch.randn(4, 384))
    assert ((v > 0.02) & (v < 0.98)).all(), v  # gradients can flow through the sigmoid


def _rate(r):
    return r.rate if hasattr(r, "rate") else (r[0] if isinstance(r, tuple) else r)


def test_bad_inputs_give_clear_errors():
    net = DeepSetsValue(embed_dim=8, hidden=16, latent=8)
    u, q = torch.randn(1, 4, 8), torch.randn(1, 8)
    with pytest.raises(ValueError, match="empty context"):
        net(torch.randn(1, 0, 8), q)
    with pytest.raises(ValueError, match="dimension"):
        net(torch.randn(1, 4, 9), torch.randn(1, 9))
    bad = u.clone()
    bad[0, 1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        net(bad, q)
    with pytest.raises(ValueError, match="NaN"):
        net(u, torch.full((1, 8), float("inf")))
    with pytest.raises(ValueError, match="mask"):
        net(u, q, torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="M"):
        deepsets_shapley(net, u, q, n_permutations=0)
    with pytest.raises(ValueError, match="padding mask"):
        deepsets_shapley(net, u, q, torch.tensor([[True, False, True, True]]))
    with pytest.raises(ValueError, match="query_mode"):
        DeepSetsValue(query_mode="sum")
    with pytest.raises(ValueError, match="bound"):
        DeepSetsValue(bound=0)
    # one sentence works
    one = deepsets_shapley(net.eval(), u[:, :1], q, n_permutations=3, seed=0)
    assert one.values.shape == (1, 1)


def test_scores_do_not_depend_on_batch_composition():
    """A context's permutations come from its own seed and length: alone, in any batch, at any position and
    padding width, and through monte_carlo on its game, it gets the same values."""
    torch.manual_seed(4)
    net = DeepSetsValue(embed_dim=8, hidden=16, latent=8, query_mode="product").eval()
    units, query = torch.randn(4, 9, 8), torch.randn(4, 8)
    lengths = [6, 9, 4, 6]
    mask = torch.arange(9)[None] < torch.tensor(lengths)[:, None]
    seeds = [11, 12, 13, 14]
    batch = deepsets_shapley(net, units, query, mask, n_permutations=10, seed=seeds).values
    alone = deepsets_shapley(net, units[:1, :6], query[:1], n_permutations=10, seed=11).values
    reordered = deepsets_shapley(
        net, units.flip(0), query.flip(0), mask.flip(0), n_permutations=10, seed=seeds[::-1]
    ).values.flip(0)
    torch.testing.assert_close(batch[0, :6], alone[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(batch, reordered, atol=1e-6, rtol=0)
    via_game = monte_carlo(ValueNetGame(net, units[0, :6], query[0]), n_permutations=10, seed=11).values
    np.testing.assert_allclose(via_game, alone[0].detach().numpy(), atol=1e-6)
    generic = monte_carlo(ValueNetGame(net, units[0, :6], query[0]), n_permutations=10, seed=11, path="generic")
    np.testing.assert_allclose(generic.values, alone[0].detach().numpy(), atol=1e-5)


def test_fast_path_values_exactly_the_counted_coalitions():
    """n_evaluations is the number of coalitions ρ actually valued: M·(n−1) + 2 for one unpadded context,
    the same count the generic path reports for the same M."""
    torch.manual_seed(5)
    net = DeepSetsValue(embed_dim=8, hidden=16, latent=8, query_mode="product").eval()
    counted = []
    original = net.rho_after_first
    net.rho_after_first = lambda y: counted.append(y[..., 0].numel()) or original(y)
    res = monte_carlo(ValueNetGame(net, torch.randn(7, 8), torch.randn(8)), n_permutations=12, seed=0)
    assert sum(counted) == res.n_evaluations == 12 * 6 + 2


def test_numpy_float64_inputs_and_overflow_are_handled():
    net = DeepSetsValue(embed_dim=6, hidden=8, latent=4, query_mode="product").eval()
    rng = np.random.default_rng(0)
    game = ValueNetGame(net, rng.normal(size=(5, 6)), rng.normal(size=6))  # float64 arrays, float32 network
    assert np.isfinite(exact(game).values).all()
    with pytest.raises(ValueError, match="overflowed"):
        _ = ValueNetGame(net, np.full((5, 6), 1e30), np.full(6, 1e30)).grand_value
