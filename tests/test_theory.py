"""Tests for scp.core.theory against hand-worked textbook games."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from scp.core import theory as th
from scp.core.games import AdditiveGame, FunctionGame, GloveGame, MajorityGame, TableGame, UnanimityGame, all_coalitions

# ----------------------------------------------------------------------------------------------------------
# helpers (independent of scp.core.theory)


def shapley_by_enumeration(table: np.ndarray) -> np.ndarray:
    """φ_i = Σ_{S∌i} |S|!(n−|S|−1)!/n! · (v(S+i) − v(S)), by brute force over bitmasks."""
    n = int(np.log2(table.size))
    phi = np.zeros(n)
    for i in range(n):
        for m in range(2**n):
            if m >> i & 1:
                continue
            s = bin(m).count("1")
            w = math.factorial(s) * math.factorial(n - s - 1) / math.factorial(n)
            phi[i] += w * (table[m | 1 << i] - table[m])
    return phi


def mask(players) -> int:
    return sum(1 << p for p in players)


def size_game(f, n: int) -> FunctionGame:
    """v(S) = f(|S|)."""
    return FunctionGame(lambda C: np.array([f(int(k)) for k in C.sum(axis=1)], dtype=float), n)


# ----------------------------------------------------------------------------------------------------------
# input handling


def test_table_and_game_inputs_agree_and_limits_are_enforced():
    g = GloveGame([0], [1, 2])
    x = [1.0, 0.0, 0.0]
    assert th.core_violation(g, x) == th.core_violation(g.table(), x)
    assert th.core_violation(list(g.table()), x).in_core
    with pytest.raises(ValueError, match="max_players"):
        th.harsanyi_dividends(AdditiveGame(np.ones(21)))  # default limit 20
    with pytest.raises(ValueError, match="max_players"):
        th.harsanyi_dividends(np.zeros(16), max_players=3)
    assert th.harsanyi_dividends(np.zeros(16), max_players=4).shape == (16,)
    with pytest.raises(ValueError, match="length 2\\^n"):
        th.harsanyi_dividends(np.zeros(6))
    with pytest.raises(ValueError, match="length 2\\^n"):
        th.harsanyi_dividends(np.zeros(1))
    with pytest.raises(ValueError, match="1-d"):
        th.harsanyi_dividends(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="finite"):
        th.harsanyi_dividends(np.array([0.0, 1.0, np.nan, 2.0]))
    with pytest.raises(ValueError, match="allocation"):
        th.in_core(g, [1.0, 0.0])
    with pytest.raises(ValueError, match="allocation"):
        th.in_core(g, [1.0, np.inf, 0.0])


# ----------------------------------------------------------------------------------------------------------
# 1-3. bounds


def test_mc_error_bound_formula_and_monotonicity():
    got = th.mc_error_bound(2.0, 10, 100, 0.05, eps_approx=0.01)
    assert got == pytest.approx(2.0 * math.sqrt(2 * math.log(2 * 10 / 0.05) / 100) + 0.02, rel=1e-12)
    Ms = [1, 2, 10, 100, 1000, 10**6]
    bounds = [th.mc_error_bound(1.0, 10, M, 0.1) for M in Ms]
    assert all(a > b for a, b in zip(bounds, bounds[1:]))
    assert th.mc_error_bound(1.0, 20, 100, 0.1) > th.mc_error_bound(1.0, 10, 100, 0.1)  # union bound over more players
    assert th.mc_error_bound(1.0, 10, 100, 0.01) > th.mc_error_bound(1.0, 10, 100, 0.1)  # more confidence costs
    # the approximation term does not vanish with M
    assert th.mc_error_bound(1.0, 10, 10**12, 0.1, eps_approx=0.05) == pytest.approx(0.1, abs=1e-5)


@pytest.mark.parametrize(
    "B,n,target,delta,eps", [(1.0, 10, 0.1, 0.05, 0.0), (3.0, 50, 0.5, 0.01, 0.1), (0.5, 1, 0.02, 0.2, 0.0)]
)
def test_sample_size_inverts_mc_error_bound(B, n, target, delta, eps):
    M = th.sample_size(B, n, target, delta, eps)
    assert M == max(1, math.ceil(2 * B * B * math.log(2 * n / delta) / (target - 2 * eps) ** 2))
    assert th.mc_error_bound(B, n, M, delta, eps) <= target
    if M > 1:
        assert th.mc_error_bound(B, n, M - 1, delta, eps) > target


def test_topk_sample_size_formula_and_gap():
    B, n, gap, delta, eps = 1.0, 20, 0.3, 0.05, 0.02
    M = th.topk_sample_size(B, n, gap, delta, eps)
    assert M == math.ceil(8 * B * B * math.log(2 * n / delta) / (gap - 4 * eps) ** 2)
    # M permutations put every estimate within Δ_K/2 (the Top-K condition)
    assert th.mc_error_bound(B, n, M, delta, eps) <= gap / 2
    assert th.mc_error_bound(B, n, M - 1, delta, eps) > gap / 2
    assert th.topk_gap([3.0, 1.0, 2.0, 5.0], 2) == pytest.approx(1.0)  # sorted 5,3 | 2,1
    assert th.topk_gap([3.0, 1.0, 2.0, 5.0], 1) == pytest.approx(2.0)
    assert th.topk_gap([1.0, 1.0, 0.0], 1) == 0.0
    with pytest.raises(ValueError, match="k must"):
        th.topk_gap([1.0, 2.0, 3.0], 3)
    with pytest.raises(ValueError, match="k must"):
        th.topk_gap([1.0, 2.0, 3.0], 0)
    with pytest.raises(ValueError, match="values"):
        th.topk_gap([1.0], 1)


def test_bounds_reject_bad_inputs():
    for bad_delta in (0.0, 1.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="delta"):
            th.mc_error_bound(1.0, 10, 100, bad_delta)
        with pytest.raises(ValueError, match="delta"):
            th.sample_size(1.0, 10, 0.1, bad_delta)
    for bad_M in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="n_permutations"):
            th.mc_error_bound(1.0, 10, bad_M, 0.1)
    for bad_n in (0, -1, 3.0):
        with pytest.raises(ValueError, match="n_players"):
            th.mc_error_bound(1.0, bad_n, 10, 0.1)
        with pytest.raises(ValueError, match="n_players"):
            th.topk_sample_size(1.0, bad_n, 0.5, 0.1)
    with pytest.raises(ValueError, match="bound_B"):
        th.mc_error_bound(0.0, 10, 10, 0.1)
    with pytest.raises(ValueError, match="eps_approx"):
        th.mc_error_bound(1.0, 10, 10, 0.1, eps_approx=-0.1)
    with pytest.raises(ValueError, match="2·eps_approx"):
        th.sample_size(1.0, 10, 0.2, 0.1, eps_approx=0.1)  # target == 2ε
    with pytest.raises(ValueError, match="2·eps_approx"):
        th.sample_size(1.0, 10, 0.1, 0.1, eps_approx=0.2)
    with pytest.raises(ValueError, match="4·eps_approx"):
        th.topk_sample_size(1.0, 10, 0.4, 0.1, eps_approx=0.1)  # Δ == 4ε
    with pytest.raises(ValueError, match="gap_K"):
        th.topk_sample_size(1.0, 10, 0.0, 0.1)


def test_sample_size_is_enough_for_permutation_sampling():
    """Empirical check of Theorem 3.1 on a [0, 1]-valued game: the bound is (very) conservative."""
    n, target, delta = 6, 0.2, 0.05
    table = TableGame.random(n, seed=3, bound=1.0).values
    phi = shapley_by_enumeration(table)
    M = th.sample_size(1.0, n, target, delta)
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(30):
        perms = np.argsort(rng.random((M, n)), axis=1)
        est = np.zeros(n)
        prefix = np.zeros(M, dtype=np.int64)
        for pos in range(n):
            p = perms[:, pos]
            new = prefix | (np.int64(1) << p)
            np.add.at(est, p, table[new] - table[prefix])
            prefix = new
        worst = max(worst, np.abs(est / M - phi).max())
    assert worst <= target


# ----------------------------------------------------------------------------------------------------------
# 4. core


def test_glove_game_core_and_shapley():
    g = GloveGame(left=[0], right=[1, 2])
    phi = shapley_by_enumeration(g.table())
    np.testing.assert_allclose(phi, [2 / 3, 1 / 6, 1 / 6], atol=1e-12)
    assert th.in_core(g, [1.0, 0.0, 0.0])
    assert not th.in_core(g, [0.9, 0.05, 0.05])
    res = th.core_violation(g, phi)
    assert not res.in_core
    assert res.efficiency_gap == pytest.approx(0.0, abs=1e-12)
    # v({0,1}) − x({0,1}) = 1 − 5/6 = 1/6, tied with {0,2}
    assert res.most_violated in {(0, 1), (0, 2)}
    assert res.violation == pytest.approx(1 / 6)
    assert g.table()[mask(res.most_violated)] - phi[list(res.most_violated)].sum() == pytest.approx(res.violation)
    # least core: ε* = 0 and the core is the single point (1, 0, 0)
    lc = th.least_core(g)
    assert lc.epsilon == pytest.approx(0.0, abs=1e-8)
    assert lc.core_nonempty and th.core_is_nonempty(g)
    np.testing.assert_allclose(lc.allocation, [1.0, 0.0, 0.0], atol=1e-8)
    # inefficient allocations are not in the core even if every coalition is satisfied
    over = th.core_violation(g, [1.0, 0.5, 0.0])
    assert not over.in_core and over.efficiency_gap == pytest.approx(0.5)


def test_majority_game_empty_core_least_core():
    g = MajorityGame([1, 1, 1], quota=2)
    lc = th.least_core(g)
    assert lc.epsilon == pytest.approx(1 / 3, abs=1e-8)
    np.testing.assert_allclose(lc.allocation, [1 / 3] * 3, atol=1e-8)
    assert not lc.core_nonempty and not th.core_is_nonempty(g)
    x = np.full(3, 1 / 3)
    assert not th.in_core(g, x)
    assert th.core_violation(g, x).violation == pytest.approx(1 / 3)
    assert len(th.core_violation(g, x).most_violated) == 2
    assert th.in_epsilon_core(g, x, 1 / 3)
    assert not th.in_epsilon_core(g, x, 0.3)
    assert not th.in_epsilon_core(g, [1.0, 0.0, 0.0], 1 / 3)  # {1,2} gets 0 < 1 − 1/3
    for a in ([0.5, 0.5, 0.0], [0.2, 0.3, 0.5]):  # no allocation beats ε = 1/3
        assert th.core_violation(g, a).violation >= 1 / 3 - 1e-12


def test_least_core_negative_epsilon_for_strictly_convex_game():
    g = size_game(lambda s: s * s, 4)  # v(S) = |S|²; equal split x = 4 gives 4s − s² ≥ 3 for 1 ≤ s ≤ 3
    lc = th.least_core(g)
    assert lc.epsilon == pytest.approx(-3.0, abs=1e-7)
    assert lc.core_nonempty
    assert th.in_epsilon_core(g, lc.allocation, lc.epsilon, tol=1e-7)
    assert th.least_core(np.array([0.0, 2.5])).epsilon == -math.inf  # one player: nothing to constrain


def test_unanimity_game():
    g = UnanimityGame(4, carrier=[1, 3])
    d = th.harsanyi_dividends(g)
    expected = np.zeros(16)
    expected[mask([1, 3])] = 1.0
    np.testing.assert_array_equal(d, expected)
    assert th.check_supermodular(g).is_supermodular
    assert th.core_is_nonempty(g)
    phi = shapley_by_enumeration(g.table())
    np.testing.assert_allclose(phi, [0, 0.5, 0, 0.5], atol=1e-12)
    assert th.in_core(g, phi)
    res = th.core_violation(g, [1.0, 0.0, 0.0, 0.0])  # the dummy player 0 takes everything
    assert not res.in_core and res.violation == pytest.approx(1.0)
    assert set(res.most_violated) >= {1, 3} and 0 not in res.most_violated  # {1,3} or {1,2,3}: worth 1, paid 0
    assert th.core_violation(g, [0.0, 0.5, 0.5, 0.0]).violation == pytest.approx(0.5)  # {1,3} gets 0.5


def test_convex_games_have_shapley_in_core():
    g = size_game(lambda s: s * s, 5)
    phi = shapley_by_enumeration(g.table())
    np.testing.assert_allclose(phi, np.full(5, 5.0))
    assert th.check_supermodular(g).is_supermodular
    assert th.in_core(g, phi)
    rng = np.random.default_rng(1)
    for _ in range(5):  # random convex games: non-negative dividends on |T| ≥ 2, any singletons
        n = 5
        d = np.zeros(2**n)
        sizes = np.array([bin(m).count("1") for m in range(2**n)])
        d[sizes >= 2] = rng.uniform(0, 1, size=(sizes >= 2).sum())
        d[sizes == 1] = rng.normal(size=n)
        v = th.from_dividends(d)
        assert th.check_supermodular(v).is_supermodular
        phi = shapley_by_enumeration(v)
        assert th.in_core(v, phi)
        np.testing.assert_allclose(phi, [sum(d[m] / sizes[m] for m in range(2**n) if m >> i & 1) for i in range(n)])


# ----------------------------------------------------------------------------------------------------------
# 5. supermodularity


def _assert_pair_violates(table, pair, amount, tol=1e-9):
    S, T = mask(pair[0]), mask(pair[1])
    shortfall = table[S] + table[T] - table[S | T] - table[S & T]
    assert shortfall > tol
    assert shortfall == pytest.approx(amount)


def test_non_supermodular_games_return_a_real_violating_pair():
    v = size_game(lambda s: s * s, 4).table()
    v[mask([0, 1])] += 5.0  # breaks S={0}, i=1, j=2: 9 − 9 − 4 + 1 = −3 (and symmetric ones)
    res = th.check_supermodular(v)
    assert not res.is_supermodular
    assert res.violation == pytest.approx(3.0)
    _assert_pair_violates(v, res.violating_pair, res.violation)
    assert set(res.violating_pair[0]) | set(res.violating_pair[1]) >= {0, 1}

    for g in (size_game(math.sqrt, 5), MajorityGame([1, 1, 1], 2), GloveGame([0], [1, 2])):
        res = th.check_supermodular(g)
        assert not res.is_supermodular
        _assert_pair_violates(g.table(), res.violating_pair, res.violation)

    assert th.check_supermodular(AdditiveGame([1.0, -2.0, 3.0])).is_supermodular  # modular: equality everywhere
    assert th.check_supermodular(np.array([0.0, 5.0])).is_supermodular  # one player
    # a tiny violation below tol is tolerated, above it is not
    w = size_game(lambda s: float(s), 3).table()
    w[mask([0, 1])] += 1e-12
    assert th.check_supermodular(w).is_supermodular
    assert not th.check_supermodular(w, tol=0.0).is_supermodular


def test_supermodularity_violation_rate():
    convex = size_game(lambda s: s * s, 30)
    calls = []

    def counted(C):
        calls.append(C.shape)
        return convex(C)

    r = th.supermodularity_violation_rate(counted, 30, 500, seed=0)
    assert r.rate == 0.0 and r.n_violations == 0 and r.n_samples == 500
    assert calls == [(2000, 30)]  # one batched call with the 4 coalitions per sample

    # modular games sit exactly on the boundary: zero second differences are not violations
    r = th.supermodularity_violation_rate(AdditiveGame(np.arange(30.0)), 30, 200, seed=0)
    assert r.rate == 0.0 and r.max_violation == 0.0
    slightly = size_game(lambda s: -1e-7 * s * s, 30)
    assert th.supermodularity_violation_rate(slightly, 30, 100, seed=0, tol=1e-5).rate == 0.0
    assert th.supermodularity_violation_rate(slightly, 30, 100, seed=0).rate == 1.0

    concave = size_game(math.sqrt, 30)
    r = th.supermodularity_violation_rate(concave, 30, 500, seed=0)
    assert r.rate == 1.0 and r.n_violations == 500 and r.max_violation > 0

    # violated only when S = ∅ (f(2) − 2f(1) + f(0) = −1; second differences are +2 otherwise):
    # P(|S| = 0) = 1/(n − 1) under the uniform size distribution
    def f(s):
        return 0.0 if s == 0 else 2.0 + (s - 1) ** 2

    n = 5
    r = th.supermodularity_violation_rate(size_game(f, n), n, 4000, seed=1)
    assert r.rate == pytest.approx(1 / (n - 1), abs=0.03)
    assert r.n_violations == round(r.rate * 4000)
    assert r.max_violation == pytest.approx(1.0)

    torch = pytest.importorskip("torch")
    r = th.supermodularity_violation_rate(lambda C: torch.as_tensor(concave(C)), 30, 50, seed=0)
    assert r.rate == 1.0

    with pytest.raises(ValueError, match="n_players"):
        th.supermodularity_violation_rate(convex, 1, 10)
    with pytest.raises(ValueError, match="n_samples"):
        th.supermodularity_violation_rate(convex, 30, 0)
    with pytest.raises(ValueError, match="callable"):
        th.supermodularity_violation_rate(np.zeros(4), 2, 10)
    with pytest.raises(ValueError, match="n_players"):
        th.supermodularity_violation_rate(convex, 29, 10)
    with pytest.raises(ValueError, match="returned"):
        th.supermodularity_violation_rate(lambda C: np.zeros(3), 5, 10)


# ----------------------------------------------------------------------------------------------------------
# 6. Harsanyi dividends


def test_moebius_round_trip_and_definition():
    rng = np.random.default_rng(0)
    for n in range(1, 9):
        v = rng.normal(size=2**n)
        d = th.harsanyi_dividends(v)
        np.testing.assert_allclose(th.from_dividends(d), v, atol=1e-9)
        np.testing.assert_allclose(th.harsanyi_dividends(th.from_dividends(v)), v, atol=1e-9)
    n = 4
    v = rng.normal(size=2**n)
    d = th.harsanyi_dividends(v)
    for T in range(2**n):
        subsets = [S for S in range(2**n) if S & T == S]
        direct = sum((-1) ** (bin(T).count("1") - bin(S).count("1")) * v[S] for S in subsets)
        assert d[T] == pytest.approx(direct)
    # Shapley from dividends: φ_i = Σ_{T∋i} d(T)/|T|
    phi = [sum(d[T] / bin(T).count("1") for T in range(2**n) if T >> i & 1) for i in range(n)]
    np.testing.assert_allclose(phi, shapley_by_enumeration(v))
    # input is not modified
    v0 = v.copy()
    th.harsanyi_dividends(v)
    np.testing.assert_array_equal(v, v0)


# ----------------------------------------------------------------------------------------------------------
# 7-8. tight sets, laminar families, context trees


def test_tight_sets_additive_game():
    w = np.array([1.0, -2.0, 3.5])
    g = AdditiveGame(w)
    tight = th.tight_sets(g, w)
    assert tight == [(0,), (1,), (0, 1), (2,), (0, 2), (1, 2), (0, 1, 2)]  # every non-empty coalition, bitmask order
    shifted = th.tight_sets(g, w + np.array([0.1, -0.1, 0.0]))
    assert shifted == [(0, 1), (2,), (0, 1, 2)]  # exactly those containing both or neither of 0, 1
    assert th.tight_sets(g, w + 1.0) == []


def _crosses(a, b):
    a, b = set(a), set(b)
    return bool(a & b) and not a <= b and not b <= a


def test_laminar_family_by_uncrossing():
    sets = [{0, 1}, {1, 2}, {0, 1, 2}, {3}, {3, 4}, {0, 1, 2, 3, 4}, {2, 3}, (1, 0)]
    fam = th.laminar_family(sets, 5)
    assert fam == [(0, 1, 2, 3, 4), (0, 1, 2), (0, 1), (3, 4), (3,)]
    assert not any(_crosses(a, b) for a, b in itertools.combinations(fam, 2))
    for s in sets:  # maximal: every dropped set crosses a kept one
        if tuple(sorted(s)) not in fam:
            assert any(_crosses(s, f) for f in fam)
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = 6
        rand = [tuple(np.nonzero(rng.random(n) < 0.5)[0]) for _ in range(15)]
        rand = [r for r in rand if r]
        fam = th.laminar_family(rand, n)
        assert not any(_crosses(a, b) for a, b in itertools.combinations(fam, 2))
        assert set(fam) <= {tuple(sorted(r)) for r in rand}
        assert all(any(_crosses(r, f) for f in fam) for r in rand if tuple(sorted(r)) not in fam)
        assert len(fam) <= 2 * n - 1
    with pytest.raises(ValueError, match="non-empty"):
        th.laminar_family([(0,), ()], 3)
    with pytest.raises(ValueError, match="outside"):
        th.laminar_family([(0, 3)], 3)
    with pytest.raises(ValueError, match="integer"):
        th.laminar_family([(0, 1.5)], 3)


def _designed_game(x, tight_family):
    """v(S) = x(S) on the designed sets and N, x(S) − 1 on every other non-empty S, v(∅) = 0."""
    n = len(x)
    C = all_coalitions(n)
    v = C.astype(float) @ np.asarray(x, dtype=float) - 1.0
    v[0] = 0.0
    v[-1] += 1.0
    for s in tight_family:
        v[mask(s)] += 1.0
    return v


def _check_parent_relation(root):
    parents = root.parents()
    nodes = list(parents)
    assert len(nodes) == len(list(root.iter_nodes()))
    for node, parent in parents.items():
        if parent is None:
            assert node == root.players
            continue
        assert node < parent
        # the parent is the smallest set of the family strictly containing the node
        assert not any(node < other < parent for other in nodes)
    return parents


def test_context_tree_on_built_example():
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    v = _designed_game(x, [(0, 1, 2), (0, 1), (3, 4), (3,), (1, 2)])
    assert th.tight_sets(v, x) == sorted([(0, 1), (0, 1, 2), (1, 2), (3,), (3, 4), (0, 1, 2, 3, 4)], key=mask)
    root = th.context_tree(v, x)
    assert root.players == frozenset(range(5)) and root.tight
    assert [sorted(c.players) for c in root.children] == [[0, 1, 2], [3, 4]]
    parents = _check_parent_relation(root)
    assert parents == {
        frozenset(range(5)): None,
        frozenset({0, 1, 2}): frozenset(range(5)),
        frozenset({0, 1}): frozenset({0, 1, 2}),
        frozenset({3, 4}): frozenset(range(5)),
        frozenset({3}): frozenset({3, 4}),
    }
    # an inefficient allocation: N is not tight but still the root
    x2 = np.array(x) + np.array([0, 0, 0, 0, 0.5])
    root2 = th.context_tree(v, x2)
    assert not root2.tight
    assert {c.players for c in root2.children} == {frozenset({0, 1, 2}), frozenset({3})}


def test_context_tree_is_laminar_for_supermodular_core_allocation():
    # additive game: every set is tight; uncrossing leaves a chain-like laminar family of ≤ 2n − 1 sets
    root = th.context_tree(AdditiveGame([1.0, 2.0, 3.0, 4.0]), [1.0, 2.0, 3.0, 4.0])
    sets = [n.players for n in root.iter_nodes()]
    assert not any(_crosses(a, b) for a, b in itertools.combinations(sets, 2))
    assert len(sets) <= 2 * 4 - 1 and len(sets) == len(set(sets))
    _check_parent_relation(root)
    # convex game at its Shapley value: tight sets are closed under ∪ and ∩
    g = UnanimityGame(4, [0, 1])
    x = shapley_by_enumeration(g.table())
    tight = {frozenset(s) for s in th.tight_sets(g, x)}
    for a, b in itertools.combinations(tight, 2):
        assert a | b in tight
        assert not (a & b) or a & b in tight
    _check_parent_relation(th.context_tree(g, x))


# ----------------------------------------------------------------------------------------------------------
# 9. block additivity


def _two_block_game(const=0.0):
    glove = GloveGame([0], [1, 2])
    unan = UnanimityGame(2, [0, 1])
    return FunctionGame(lambda C: glove(C[:, :3]) + 2.0 * unan(C[:, 3:]) + const, 5)


def test_block_additivity_on_disjoint_sum():
    g = _two_block_game()
    assert th.is_block_additive(g, [(0, 1, 2), (3, 4)])
    assert th.is_block_additive(g, [(3, 4), [2, 0, 1]])
    assert th.is_block_additive(g, [(0, 1, 2, 3, 4)])  # the trivial partition always works
    assert not th.is_block_additive(g, [(0, 1), (2, 3, 4)])
    assert not th.is_block_additive(g, [(0, 1, 2), (3,), (4,)])
    assert th.finest_blocks(g) == [(0, 1, 2), (3, 4)]
    # with v(∅) = c ≠ 0 the −(m − 1)·v(∅) correction is what keeps the identity true
    gc = _two_block_game(const=0.7)
    assert th.is_block_additive(gc, [(0, 1, 2), (3, 4)])
    assert th.finest_blocks(gc) == [(0, 1, 2), (3, 4)]
    t = gc.table()
    S = mask([0, 1, 3, 4])
    assert t[S] != pytest.approx(t[mask([0, 1])] + t[mask([3, 4])])  # the naive sum double counts v(∅)
    # forest decomposition: Shapley values per block equal those of the whole game
    phi = shapley_by_enumeration(t)
    np.testing.assert_allclose(phi[:3], shapley_by_enumeration(GloveGame([0], [1, 2]).table()), atol=1e-12)
    np.testing.assert_allclose(phi[3:], [1.0, 1.0], atol=1e-12)


def test_finest_blocks_examples_and_partition_validation():
    assert th.finest_blocks(AdditiveGame([1.0, -2.0, 3.0])) == [(0,), (1,), (2,)]
    assert th.is_block_additive(AdditiveGame([1.0, -2.0, 3.0]), [(0,), (1,), (2,)])
    assert th.finest_blocks(GloveGame([0], [1, 2])) == [(0, 1, 2)]
    assert th.finest_blocks(UnanimityGame(5, [1, 3])) == [(0,), (1, 3), (2,), (4,)]
    # chained interactions {0,1} and {1,2} connect 0 and 2 although no dividend contains both
    v = th.from_dividends(np.array([0, 0, 0, 1.0, 0, 0, 2.0, 0]))
    assert th.finest_blocks(v) == [(0, 1, 2)]
    assert th.finest_blocks(v, tol=1.5) == [(0,), (1, 2)]
    g = _two_block_game()
    for bad, msg in [
        ([(0, 1, 2), (2, 3, 4)], "disjoint"),
        ([(0, 1, 2), (3,)], "cover"),
        ([(0, 1, 2), (3, 4), ()], "non-empty"),
        ([(0, 1, 2), (3, 4, 5)], "outside"),
        ([(0, 0, 1, 2), (3, 4)], "repeats"),
        ("01234", "iterable"),
    ]:
        with pytest.raises(ValueError, match=msg):
            th.is_block_additive(g, bad)
