"""scp.experiments.landscape (small contexts, least-core tight sets, pair interactions, the per-context statistics
of notebook 08) and scp.suite.plot's tree drawing."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from scp.core import theory  # noqa: E402
from scp.core.games import GloveGame, MajorityGame, TableGame, UnanimityGame  # noqa: E402
from scp.core.metrics import aggregate  # noqa: E402
from scp.data.datasets import Example  # noqa: E402
from scp.experiments.landscape import (  # noqa: E402
    PAIR_KINDS,
    LeastCoreTight,
    core_statistics,
    least_core_tight_sets,
    normalised_table,
    pair_kind_summary,
    pair_statistics,
    pairwise_dividends,
    pairwise_interaction,
    tree_statistics,
    truncate_example,
)
from scp.suite import plot  # noqa: E402


def example(paragraph_sizes, gold):
    """Paragraph p has paragraph_sizes[p] units named 'p.k'; gold = the (p, k) that support the answer."""
    pids = [p for p, size in enumerate(paragraph_sizes) for _ in range(size)]
    ks = [k for size in paragraph_sizes for k in range(size)]
    return Example(
        id="x",
        query="q?",
        units=[f"{p}.{k}" for p, k in zip(pids, ks)],
        labels=[int((p, k) in gold) for p, k in zip(pids, ks)],
        titles=[f"T{p}" for p in pids],
        paragraph_ids=pids,
        answers=["a"],
        dataset="toy",
        granularity="sentence",
        meta={"type": "bridge"},
    )


def test_truncate_keeps_gold_paragraphs_and_the_first_distractors_in_order():
    ex = example([3, 4, 2, 5], gold={(1, 0), (3, 2)})
    out = truncate_example(ex, max_units=20, n_distractor_paragraphs=1)
    assert out.units == ("0.0", "0.1", "0.2", "1.0", "1.1", "1.2", "1.3", "3.0", "3.1", "3.2", "3.3", "3.4")
    assert out.meta == {"type": "bridge", "n_units_original": 14} and out.id == "x" and out.query == "q?"
    assert truncate_example(ex, 20, 0).units == ("1.0", "1.1", "1.2", "1.3", "3.0", "3.1", "3.2", "3.3", "3.4")


def test_truncate_drops_trailing_distractor_units_of_the_longest_paragraph_first():
    ex = example([3, 4, 2, 5], gold={(1, 0), (3, 2)})
    out = truncate_example(ex, max_units=8, n_distractor_paragraphs=1)
    # 12 units → 8: 3.4 (paragraph 3 longest), 3.3 (tie 4–4: the later one), 1.3, then 3.1 (tie 3–3–3: the later)
    assert out.units == ("0.0", "0.1", "0.2", "1.0", "1.1", "1.2", "3.0", "3.2") and sum(out.labels) == 2
    assert len(set(out.paragraph_ids)) == 3  # every paragraph keeps a unit
    assert truncate_example(ex, max_units=2, n_distractor_paragraphs=0).units == ("1.0", "3.2")
    assert truncate_example(ex, max_units=1) is None  # the gold alone do not fit
    assert truncate_example(example([2, 2], gold=set()), 4) is None  # nothing supports the answer
    with pytest.raises(ValueError):
        truncate_example(ex, max_units=0)


def test_normalised_table_and_least_core_tight_sets():
    glove = GloveGame(left=[0], right=[1, 2])
    lc = least_core_tight_sets(glove)
    assert lc.epsilon == pytest.approx(0.0, abs=1e-9)
    np.testing.assert_allclose(lc.allocation, [1, 0, 0], atol=1e-9)
    assert (0, 1) in lc.tight and (0, 2) in lc.tight  # the pairs that earn 1 alone
    assert theory.in_core(lc.shifted, lc.allocation)
    maj = least_core_tight_sets(MajorityGame([1, 1, 1], quota=2))  # empty core, ε* = 1/3
    assert maj.epsilon == pytest.approx(1 / 3)
    assert set(maj.tight) == {(0, 1), (0, 2), (1, 2)}
    table = TableGame.random(4, seed=3).table()
    assert normalised_table(table)[0] == 0 and normalised_table(table)[5] == pytest.approx(table[5] - table[0])
    root = theory.context_tree(lc.shifted, lc.allocation)
    assert root.players == frozenset({0, 1, 2}) and root.tight


def test_pair_dividends_and_the_shapley_interaction_index():
    u = UnanimityGame(4, carrier=[0, 2])  # one dividend, d({0, 2}) = 1
    d = pairwise_dividends(u)
    assert d[0, 2] == d[2, 0] == 1.0 and np.count_nonzero(d) == 2  # singletons: 0
    np.testing.assert_array_equal(pairwise_interaction(u), d)
    u3 = UnanimityGame(4, carrier=[0, 1, 2])  # d({0,1,2}) = 1 shared by 2 pairs each
    assert pairwise_dividends(u3).max() == 0 and pairwise_interaction(u3)[0, 1] == pytest.approx(0.5)
    shapiq = pytest.importorskip("shapiq")
    game = TableGame.random(5, seed=7)
    ref = shapiq.ExactComputer(game, n_players=5)("SII", order=2).get_n_order_values(2)
    np.testing.assert_allclose(pairwise_interaction(game), ref, atol=1e-12)
    table = game.table()
    assert pairwise_dividends(game)[1, 3] == pytest.approx(table[0b1010] - table[0b10] - table[0b1000] + table[0])


def test_tree_layout_and_drawing():
    root = theory.ContextNode(
        frozenset(range(5)),
        [
            theory.ContextNode(frozenset({0, 1, 2}), [theory.ContextNode(frozenset({1}))]),
            theory.ContextNode(frozenset({4})),
        ],
    )
    pos, edges = plot.tree_layout(root)
    assert {k for k in pos if isinstance(k, int)} == set(range(5))
    assert [pos[p][0] for p in (1, 0, 2, 4, 3)] == [0, 1, 2, 3, 4]  # depth-first, children first
    assert {pos[p][1] for p in range(5)} == {-3.0}  # every player on the bottom row
    assert pos[root.players] == (pytest.approx(8 / 3), 0.0) and pos[frozenset({0, 1, 2})] == (pytest.approx(1.0), -1.0)
    assert (frozenset({0, 1, 2}), 0) in edges and (root.players, 3) in edges and len(edges) == 8
    fig, ax = plot.figure("column")
    out = plot.draw_tree(ax, root, leaf_labels={0: "zero"}, leaf_colors={0: plot.category_color("supporting")})
    assert out == pos and not ax.axison
    assert "zero" in [t.get_text() for t in ax.texts]


# ------------------------------------------------------------------------------- per-context statistics


def table_of(n, value):
    """The 2^n values value(S) of a game, S a frozenset, indexed by bitmask."""
    return np.array([value(frozenset(i for i in range(n) if m >> i & 1)) for m in range(1 << n)], dtype=float)


def test_core_statistics_of_three_classic_games():
    glove = normalised_table(GloveGame(left=[0], right=[1, 2]))  # core {(1, 0, 0)}; φ = (2/3, 1/6, 1/6)
    row = core_statistics(glove, [2 / 3, 1 / 6, 1 / 6], least_core_tight_sets(glove))
    assert row["v0_grand"] == 1.0 and row["shapley_excess"] == pytest.approx(1 / 6)  # v({0, 1}) − 5/6
    assert not row["shapley_in_core"] and row["core_nonempty"] and not row["supermodular"]
    assert row["least_core_epsilon"] == pytest.approx(0.0, abs=1e-9)
    maj = normalised_table(MajorityGame([1, 1, 1], quota=2))  # empty core, ε* = 1/3 = e(φ) at φ = 1/3 each
    row = core_statistics(maj, [1 / 3] * 3, least_core_tight_sets(maj))
    assert row["least_core_epsilon"] == pytest.approx(1 / 3) and row["shapley_excess"] == pytest.approx(1 / 3)
    assert not row["core_nonempty"] and not row["shapley_in_core"]
    una = normalised_table(UnanimityGame(3, carrier=[0, 1]))  # convex: the core holds φ = (1/2, 1/2, 0)
    row = core_statistics(una, [0.5, 0.5, 0.0], least_core_tight_sets(una))
    assert row["supermodular"] and row["shapley_in_core"] and row["core_nonempty"]
    assert row["shapley_excess"] >= row["least_core_epsilon"] - 1e-9
    assert list(row) == [
        "v0_grand",
        "shapley_excess",
        "shapley_in_core",
        "least_core_epsilon",
        "core_nonempty",
        "supermodular",
    ]


def laminar_game(n, family, x):
    """A LeastCoreTight whose shifted game pays exactly x(S) to the sets of ``family`` and x(S) − 1 to the other
    proper coalitions, so its tight sets are ``family`` (plus N)."""
    x = np.asarray(x, dtype=float)
    tight = {frozenset(S) for S in family}
    shifted = table_of(n, lambda S: x[list(S)].sum() - (0 if S in tight or len(S) in (0, n) else 1))
    return LeastCoreTight(epsilon=0.0, allocation=x, tight=sorted(tuple(sorted(S)) for S in family), shifted=shifted)


def test_tree_statistics_of_a_known_laminar_family():
    ex = example([2, 2], gold={(0, 1), (1, 1)})  # paragraphs {0, 1} and {2, 3}; units 1 and 3 support
    lc = laminar_game(4, [{0, 1}, {0, 1, 2}], [0.25] * 4)
    row = tree_statistics(ex, lc)
    assert row == {
        "n_tight": 2,
        "n_laminar": 2,
        "mean_laminar_size": 2.5,
        "paragraph_aligned": 0.5,  # {0, 1} is paragraph 0; {0, 1, 2} cuts paragraph 1
        "gold_share_outside_largest": 1.0,  # N ∖ {0, 1, 2} = {3}, supporting
        "gold_share": 0.5,
    }
    crossing = laminar_game(4, [{0, 1}, {1, 2}], [0.25] * 4)  # they cross: uncrossing keeps one of the two
    row = tree_statistics(ex, crossing)
    assert row["n_tight"] == 2 and row["n_laminar"] == 1 and row["mean_laminar_size"] == 2


def test_tree_statistics_without_a_tight_set():
    ex = example([3, 1], gold={(0, 0)})
    row = tree_statistics(ex, laminar_game(4, [], [0.1, 0.2, 0.3, 0.4]))
    assert row["n_tight"] == row["n_laminar"] == 0 and row["mean_laminar_size"] == 0
    assert row["paragraph_aligned"] == 1.0 and row["gold_share_outside_largest"] == row["gold_share"] == 0.25
    with pytest.raises(ValueError):
        tree_statistics(example([2], gold={(0, 0)}), laminar_game(4, [], [0.25] * 4))


def test_pair_statistics_of_substitutes_by_kind_of_pair():
    labels = [1, 0, 1, 0]  # pairs (0,1) (0,2) (0,3) (1,2) (1,3) (2,3): kinds 1 2 1 1 0 1
    either = table_of(4, lambda S: float(bool(S & {0, 2})))  # units 0 and 2 say the same thing: d({0, 2}) = −1
    rows = pair_statistics(labels, either)
    assert [r["measure"] for r in rows] == ["dividend", "interaction"]
    for r in rows:
        assert r["base_rate"] == pytest.approx(1 / 6)
        assert not r["top_is_gold_pair"] and r["top_abs_is_gold_pair"] and r["most_negative_is_gold_pair"]
        assert r["auc_negative_gold_pair"] == 1.0
        assert r["gold–gold"] == pytest.approx(-1.0) and r["gold–distractor"] == r["distractor–distractor"] == 0
    assert list(rows[0])[-3:] == list(PAIR_KINDS)
    none_gold = pair_statistics([0, 0, 0], table_of(3, len))
    assert np.isnan(none_gold[0]["gold–gold"]) and np.isnan(none_gold[0]["auc_negative_gold_pair"])
    assert none_gold[0]["base_rate"] == 0
    with pytest.raises(ValueError):
        pair_statistics([1, 0], either)


def test_pair_statistics_kind_means_match_the_matrices():
    table = TableGame.random(5, seed=2).table()
    labels = np.array([1, 1, 0, 0, 1])
    rows = {r["measure"]: r for r in pair_statistics(labels, table)}
    for name, fn in (("dividend", pairwise_dividends), ("interaction", pairwise_interaction)):
        m = fn(table)
        for c, kind in enumerate(PAIR_KINDS):
            vals = [m[i, j] for i in range(5) for j in range(i + 1, 5) if labels[i] + labels[j] == c]
            assert rows[name][kind] == pytest.approx(np.mean(vals))


def test_pair_kind_summary_averages_over_contexts_and_skips_missing_kinds():
    rows = [
        {"measure": m, "distractor–distractor": a, "gold–distractor": b, "gold–gold": g}
        for m, a, b, g in [
            ("dividend", 0.1, 0.2, np.nan),
            ("interaction", 1.0, 2.0, -1.0),
            ("dividend", 0.3, 0.4, -0.5),
            ("interaction", 3.0, 4.0, -3.0),
        ]
    ]
    out = pair_kind_summary(rows, n_boot=200, seed=1)
    assert [(r["measure"], r["pair"]) for r in out] == [(m, k) for m in ("dividend", "interaction") for k in PAIR_KINDS]
    by = {(r["measure"], r["pair"]): r for r in out}
    assert by["dividend", "distractor–distractor"]["mean"] == pytest.approx(0.2)
    assert by["dividend", "gold–gold"]["mean"] == -0.5 and by["dividend", "gold–gold"]["n_contexts"] == 1
    assert by["interaction", "gold–gold"]["n_contexts"] == 2
    ref = aggregate([1.0, 3.0], n_boot=200, seed=1)
    r = by["interaction", "distractor–distractor"]
    assert (r["mean"], r["ci_low"], r["ci_high"]) == (ref.mean, ref.ci_low, ref.ci_high)


def test_near_equal_paragraph_cosines_amplify_cosine_rounding_into_para_cos_z():
    """Why notebook 08's --check allows 1e-5: the z-score of three paragraphs' best cosines that lie within 0.004 (its
    context of row 49) moves ~100× more than a cosine does, when well apart about as much."""
    from scp.data.features import structural_features

    units = [f"{t}: s{i}" for i, t in enumerate("AAAABBBBBBCC")]
    ulp = 6e-8  # one float32 step of a cosine near 0.5
    for best, lo, hi in (((0.48756, 0.49045, 0.49155), 50, 1000), ((0.2, 0.5, 0.8), 0.1, 10)):
        cos = np.array([best[0] - 0.1] * 3 + [best[0]] + [best[1]] + [best[1] - 0.1] * 5 + [best[2] - 0.1, best[2]])
        nudged = cos.copy()
        nudged[3] += ulp
        z = structural_features("q", units, cos)["para_cos_z"]
        moved = np.abs(structural_features("q", units, nudged)["para_cos_z"] - z).max()
        assert lo * ulp < moved < hi * ulp, (best, moved / ulp)


def test_notebook_08_states_the_tolerance_its_params_declare():
    """The sentence in notebook 08 that justifies its --check tolerance names the tolerance params/ declares."""
    from scp.io import read_json
    from scp.suite import repo_root
    from scp.suite.graph import declared

    tolerance = declared("08_landscape_of_context").tolerance
    cells = read_json(repo_root() / "notebooks" / "08_landscape_of_context.ipynb", "notebook 08")["cells"]
    text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").replace("\n", " ")
    assert (tolerance.atol, tolerance.rtol) == (1e-5, 0.0)
    assert "must match them to 1e-5, not the suite's usual 1e-6" in text
