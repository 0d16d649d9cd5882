"""scp.experiments.landscape (small contexts, least-core tight sets, pair interactions) and scp.suite.plot's tree
drawing."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from scp.core import theory  # noqa: E402
from scp.core.games import GloveGame, MajorityGame, TableGame, UnanimityGame  # noqa: E402
from scp.data.datasets import Example  # noqa: E402
from scp.experiments.landscape import (  # noqa: E402
    least_core_tight_sets,
    normalised_table,
    pairwise_dividends,
    pairwise_interaction,
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
    out = plot.draw_tree(ax, root, leaf_labels={0: "zero"}, leaf_colors={0: plot.color("supporting")})
    assert out == pos and not ax.axison
    assert "zero" in [t.get_text() for t in ax.texts]
