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
