"""Needle-in-a-haystack evaluation helpers (scp.experiments.niah)."""

import math

import pytest

from scp.data.datasets import Example
from scp.data.synthetic import make_niah, niah_grid
from scp.experiments.niah import distractor_pool, needle_rows, niah_seed


def _example(units, labels, titles):
    n = len(units)
    return Example(
        id="x",
        query="q?",
        units=tuple(units),
        labels=tuple(labels),
        titles=tuple(titles),
        paragraph_ids=tuple(range(n)),
        answers=("a",),
        dataset="toy",
        granularity="sentence",
        meta={},
    )


def test_distractor_pool_keeps_label_0_units_in_order_with_titles():
    a = _example(["s1", "s2", "s3"], [0, 1, 0], ["A", "A", "B"])
    b = _example(["s1", "s4"], [0, 0], ["A", "C"])
    assert distractor_pool([a, b]) == ["A: s1", "B: s3", "C: s4"]  # duplicates dropped, supports left out
    assert distractor_pool([a, b], with_title=False) == ["s1", "s3", "s4"]


def test_needle_rows_on_a_real_haystack():
    pool = [f"T{i}: plain sentence number {chr(97 + i % 26)} of the pool." for i in range(60)]
    examples = list(niah_grid([20], [0.0, 1.0], [1, 2], haystack=pool, seeds=[3]))
    assert [niah_seed(ex) for ex in examples] == [3, 3, 3, 3]
    perfect = [[1.0 if y else 0.0 for y in ex.labels] for ex in examples]
    rows = needle_rows(examples, perfect, keep_ratios=[0.05, 0.5], method="oracle")
    assert [(r["n_units"], r["depth"], r["n_needles"]) for r in rows] == [
        (20, 0.0, 1),
        (20, 0.0, 2),
        (20, 1.0, 1),
        (20, 1.0, 2),
    ]
    assert all(r["auc"] == 1.0 and r["recall@0.5"] == 1.0 and r["all_recall@0.5"] == 1.0 for r in rows)
    assert [r["recall@0.05"] for r in rows] == [1.0, 0.5, 1.0, 0.5]  # one unit kept: 1 of 2 needles
    assert [r["all_recall@0.05"] for r in rows] == [1.0, 0.0, 1.0, 0.0]
    assert rows[1]["needle_ranks"] == [0, 0]  # tied needles share rank 0
    worst = [[0.0 if y else 1.0 for y in ex.labels] for ex in examples]
    r = needle_rows(examples[:1], worst[:1], keep_ratios=[0.5], method="anti")[0]
    assert r["auc"] == 0.0 and r["needle_ranks"] == [19] and r["recall@0.5"] == 0.0


def test_needle_rows_checks_shapes():
    ex = make_niah(10, 0.5, seed=1)
    with pytest.raises(ValueError):
        needle_rows([ex], [[0.0] * 9], [0.5], "x")
    with pytest.raises(ValueError):
        needle_rows([ex], [], [0.5], "x")
    with pytest.raises(ValueError):
        niah_seed(_example(["s"], [1], ["A"]))
    assert not math.isnan(needle_rows([ex], [list(range(10))], [0.5], "x")[0]["auc"])


def test_summarize_by_group_means_and_intervals_per_group():
    from scp.experiments.niah import summarize_by_group

    rows = [{"method": "a", "x": v} for v in (0.0, 1.0, 1.0, 0.0)] + [{"method": "b", "x": 0.5}] * 3
    out = summarize_by_group(rows, by=("method",), columns=("x",), n_boot=200)
    assert [(o["method"], o["n"], o["x"]) for o in out] == [("a", 4, 0.5), ("b", 3, 0.5)]
    assert 0.0 <= out[0]["x_ci_low"] < 0.5 < out[0]["x_ci_high"] <= 1.0
    assert out[1]["x_ci_low"] == out[1]["x_ci_high"] == 0.5  # no spread, no interval


def test_cluster_bootstrap_resamples_whole_clusters():
    import numpy as np

    from scp.core.metrics import aggregate
    from scp.experiments.niah import cluster_bootstrap

    rng = np.random.default_rng(0)
    # 5 haystacks x 5 depths: each haystack shifts all its depths together (strongly correlated cells)
    haystack = np.repeat(np.arange(5), 5)
    values = rng.normal(size=5)[haystack] + 0.05 * rng.normal(size=25)
    cells, blocks = aggregate(values, seed=1), cluster_bootstrap(values, haystack, seed=1)
    assert blocks.mean == cells.mean and blocks.n_used == cells.n_used == 25
    # the cell bootstrap treats the 25 cells as independent draws: its interval is much too narrow
    assert blocks.ci_high - blocks.ci_low > 1.5 * (cells.ci_high - cells.ci_low)
    # one cell per cluster: exactly the plain bootstrap (same seed, same resamples)
    for n in (1, 5, 40):
        v = rng.random(n)
        assert cluster_bootstrap(v, [f"c{i}" for i in range(n)], n_boot=500, seed=3) == aggregate(v, n_boot=500, seed=3)
    # constant within clusters: resampling clusters is resampling the cluster means
    means = rng.random(6)
    same = cluster_bootstrap(np.repeat(means, 4), np.repeat(np.arange(6), 4), seed=2)
    plain = aggregate(means, seed=2)
    assert same.mean == pytest.approx(plain.mean, abs=1e-15) and same.n_used == 24
    assert (same.ci_low, same.ci_high) == pytest.approx((plain.ci_low, plain.ci_high), abs=1e-15)


def test_cluster_bootstrap_nan_and_bad_input():
    import math

    from scp.experiments.niah import cluster_bootstrap

    agg = cluster_bootstrap([1.0, float("nan"), 3.0, float("nan")], ["a", "a", "b", "c"], n_boot=200)
    assert agg.n_used == 2 and agg.n_excluded == 2 and agg.mean == 2.0  # cluster c has no value left
    assert 1.0 <= agg.ci_low <= agg.ci_high <= 3.0
    assert math.isnan(cluster_bootstrap([float("nan")], [0]).mean)
    with pytest.raises(ValueError):
        cluster_bootstrap([1.0, 2.0], [0])
    with pytest.raises(ValueError):
        cluster_bootstrap([1.0], [0], ci=1.0)


def test_summarize_by_group_with_clusters():
    from scp.experiments.niah import summarize_by_group

    # two haystacks at three depths each: haystack 0 always 0, haystack 1 always 1
    rows = [{"method": "a", "seed": s, "depth": d, "x": float(s)} for s in (0, 1) for d in (0.0, 0.5, 1.0)]
    cells = summarize_by_group(rows, by=("method",), columns=("x",), n_boot=400)[0]
    blocks = summarize_by_group(rows, by=("method",), columns=("x",), n_boot=400, cluster="seed")[0]
    assert blocks["n"] == 6 and blocks["n_clusters"] == 2 and "n_clusters" not in cells
    assert blocks["x"] == cells["x"] == 0.5
    assert (blocks["x_ci_low"], blocks["x_ci_high"]) == (0.0, 1.0)  # either haystack can be drawn twice
    assert 0.0 < cells["x_ci_low"] and cells["x_ci_high"] < 1.0  # six "independent" cells: too narrow
    # one row per haystack in every group (per depth): the same numbers as without clusters
    per_depth = summarize_by_group(rows, by=("method", "depth"), columns=("x",), n_boot=400)
    per_depth_c = summarize_by_group(rows, by=("method", "depth"), columns=("x",), n_boot=400, cluster="seed")
    assert [{k: v for k, v in r.items() if k != "n_clusters"} for r in per_depth_c] == per_depth
