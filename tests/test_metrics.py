import itertools
import math

import numpy as np
import pytest
from scipy.stats import kendalltau

from scp.core.metrics import (
    aggregate,
    compression,
    exact_match,
    f1,
    jaccard_at_k,
    keep_rate,
    kendall_tau_b,
    normalize_answer,
    pairwise_auc,
    recall_at_keep,
)
from scp.experiments.niah import needle_recall


def brute_auc(scores, labels):
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    wins = sum((p > n) + 0.5 * (p == n) for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_pairwise_auc_hand_computed_with_tie():
    # pairs (pos, neg): (.9,.5)=1 (.9,.1)=1 (.5,.5)=½ (.5,.1)=1  ->  3.5 / 4
    assert pairwise_auc([0.9, 0.5, 0.5, 0.1], [1, 1, 0, 0]) == pytest.approx(0.875)
    assert pairwise_auc([0.1, 0.9], [1, 0]) == 0.0
    assert pairwise_auc([3, 3, 3], [1, 0, 0]) == 0.5


def test_pairwise_auc_matches_brute_force_on_ties():
    rng = np.random.default_rng(1)
    for _ in range(20):
        scores = rng.integers(0, 4, size=12).astype(float)
        labels = rng.integers(0, 2, size=12)
        if 0 < labels.sum() < 12:
            assert pairwise_auc(scores, labels) == pytest.approx(brute_auc(scores, labels))


def test_pairwise_auc_undefined_is_nan():
    assert math.isnan(pairwise_auc([0.3, 0.2], [0, 0]))
    assert math.isnan(pairwise_auc([0.3, 0.2], [True, True]))
    with pytest.raises(ValueError):
        pairwise_auc([0.3, 0.2], [1])
    with pytest.raises(ValueError):
        pairwise_auc([0.3, 0.2], [1, 2])


def test_aggregate_excludes_nan_and_counts_it():
    values = [pairwise_auc([0.9, 0.1], [1, 0]), pairwise_auc([0.1, 0.9], [1, 0]), pairwise_auc([1, 2], [0, 0])]
    agg = aggregate(values, n_boot=200, seed=0)
    assert (agg.n_used, agg.n_excluded) == (2, 1)
    assert agg.mean == pytest.approx(0.5)
    assert 0.0 <= agg.ci_low <= agg.mean <= agg.ci_high <= 1.0


def test_aggregate_bootstrap_ci_contains_mean_and_is_deterministic():
    values = np.random.default_rng(3).normal(0.6, 0.2, size=300)
    a, b, c = aggregate(values, seed=7), aggregate(values, seed=7), aggregate(values, seed=8)
    assert a == b
    assert (a.ci_low, a.ci_high) != (c.ci_low, c.ci_high)
    assert a.ci_low < a.mean < a.ci_high
    assert a.mean == pytest.approx(values.mean())
    # the 95% percentile interval of the mean is about ±1.96·sd/√n wide
    half = 1.96 * values.std() / np.sqrt(values.size)
    assert a.ci_high - a.ci_low == pytest.approx(2 * half, rel=0.2)
    narrow = aggregate(values, seed=7, ci=0.5)
    assert a.ci_low < narrow.ci_low < narrow.ci_high < a.ci_high


def test_aggregate_degenerate_inputs():
    empty = aggregate([math.nan, math.nan])
    assert (empty.n_used, empty.n_excluded) == (0, 2) and math.isnan(empty.mean) and math.isnan(empty.ci_low)
    single = aggregate([0.25])
    assert (single.mean, single.ci_low, single.ci_high, single.n_excluded) == (0.25, 0.25, 0.25, 0)
    with pytest.raises(ValueError):
        aggregate([1.0], ci=1.0)


def test_recall_at_keep_expected_over_boundary_ties():
    scores, labels = [0.9, 0.8, 0.5, 0.5, 0.1], [1, 0, 1, 0, 1]
    # k = ceil(0.6·5) = 3: 0.9 (pos) and 0.8 (neg) are in; one of the two tied 0.5s (one positive) -> ½ expected
    assert recall_at_keep(scores, labels, 0.6) == pytest.approx((1 + 0.5) / 3)
    assert recall_at_keep(scores, labels, 0.4) == pytest.approx(1 / 3)
    assert recall_at_keep(scores, labels, 0.0) == 0.0
    assert recall_at_keep(scores, labels, 1.0) == 1.0
    # three-way tie for two slots, two positives among them: 2·2/3 expected positives
    assert recall_at_keep([1, 1, 1, 0], [1, 1, 0, 0], 0.5) == pytest.approx((2 * 2 / 3) / 2)


def test_recall_at_keep_rounding_and_no_positive():
    scores = np.arange(10, 0, -1.0)
    labels = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    assert recall_at_keep(scores, labels, 0.3) == pytest.approx(3 / 4)  # 0.3·10 keeps 3, not 4
    assert recall_at_keep(scores, labels, 0.31) == pytest.approx(1.0)  # ceil(3.1) = 4
    assert math.isnan(recall_at_keep(scores, np.zeros(10), 0.5))
    with pytest.raises(ValueError):
        recall_at_keep(scores, labels, 1.5)


def test_compression_and_keep_rate():
    assert compression(25, 100) == pytest.approx(0.75)
    assert compression(100, 100) == 0.0
    assert keep_rate(3, 10) == pytest.approx(0.3)
    assert math.isnan(keep_rate(0, 0)) and math.isnan(compression(0, 0))
    with pytest.raises(ValueError):
        keep_rate(11, 10)


def test_squad_normalisation_exact_match_and_f1():
    assert normalize_answer("  The  Eiffel-Tower, an icon! ") == "eiffeltower icon"
    assert exact_match("The Eiffel Tower!", ["Louvre", "eiffel tower"]) == 1.0
    assert exact_match("Eiffel", "Eiffel Tower") == 0.0
    # pred tokens {cat, sat, on, mat}, gold {cat, sat}: P = 1/2, R = 1 -> F1 = 2/3
    assert f1("the cat sat on a mat", "A cat sat.") == pytest.approx(2 / 3)
    assert f1("the cat sat on a mat", ["dog", "cat sat on mat"]) == 1.0
    assert f1("paris paris", "paris") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert f1("", "the") == 1.0 and f1("x", "the") == 0.0
    with pytest.raises(ValueError):
        f1("x", [])


def test_jaccard_at_k():
    a, b = [3, 2, 1, 0], [0, 2, 1, 3]
    assert jaccard_at_k(a, b, 2) == pytest.approx(1 / 3)  # {0,1} vs {3,1}
    assert jaccard_at_k(a, a, 2) == 1.0
    assert jaccard_at_k(a, b, 10) == 1.0  # k capped at n
    assert jaccard_at_k([1, 1, 1], [0, 0, 1], 1) == 0.0  # ties -> lower index: {0} vs {2}
    with pytest.raises(ValueError):
        jaccard_at_k(a, b[:3], 2)


def test_kendall_tau_b_hand_and_scipy():
    assert kendall_tau_b([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)  # C = 2, D = 1
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    rng = np.random.default_rng(5)
    for _ in range(20):
        a, b = rng.integers(0, 5, size=15), rng.integers(0, 4, size=15)
        assert kendall_tau_b(a, b) == pytest.approx(kendalltau(a, b, variant="b").statistic)
    assert math.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))
    assert math.isnan(kendall_tau_b([1], [2]))


def test_needle_recall():
    text = "The code is 4821 and the capital is Paris; the year was 1234."
    assert needle_recall(text, ["4821", "paris", "12"]) == pytest.approx(2 / 3)  # "12" is not a token here
    assert needle_recall(text, ["Berlin"]) == 0.0
    assert math.isnan(needle_recall(text, []))
    with pytest.raises(TypeError):
        needle_recall(text, "4821")


def test_paired_difference_keeps_the_pairing():
    from scp.core.metrics import paired_difference

    rng = np.random.default_rng(0)
    b = rng.random(200)
    a = b + 0.01  # A beats B by exactly 0.01 on every example, whatever the spread between examples
    d = paired_difference(a, b, n_boot=500)
    assert d.mean == pytest.approx(0.01) and d.ci_low == pytest.approx(0.01) and d.ci_high == pytest.approx(0.01)
    unpaired_low = aggregate(a).ci_low - aggregate(b).ci_high  # the unpaired intervals overlap
    assert unpaired_low < 0 < d.ci_low
    d = paired_difference([0.9, np.nan, 0.7], [0.5, 0.6, np.nan])
    assert d.mean == pytest.approx(0.4) and d.n_used == 1 and d.n_excluded == 2
    with pytest.raises(ValueError):
        paired_difference([0.1, 0.2], [0.1])


def test_all_recall_at_keep_every_positive_kept():
    from itertools import combinations

    from scp.core.metrics import all_recall_at_keep

    assert all_recall_at_keep([0.9, 0.8, 0.1, 0.0], [1, 1, 0, 0], 0.5) == 1.0  # both in the top 2
    assert all_recall_at_keep([0.9, 0.1, 0.8, 0.0], [1, 1, 0, 0], 0.5) == 0.0  # one below the cut
    assert all_recall_at_keep([0.9, 0.1, 0.8, 0.0], [1, 1, 0, 0], 1.0) == 1.0
    assert all_recall_at_keep([0.9, 0.8], [0, 1], 0.0) == 0.0
    assert math.isnan(all_recall_at_keep([0.9, 0.8], [0, 0], 0.5))
    # ties at the cut: 2 slots among 4 tied units holding both positives -> 1 of C(4, 2) = 6 draws keeps both
    assert all_recall_at_keep([1, 1, 1, 1, 0], [1, 1, 0, 0, 0], 0.4) == pytest.approx(1 / 6)
    # the same probability by enumerating every random tie-break of 3 slots among 5 tied units (p = 2)
    draws = list(combinations(range(5), 3))
    assert all_recall_at_keep([2, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], 4 / 6) == pytest.approx(
        sum({0, 1} <= set(c) for c in draws) / len(draws)
    )
    # one positive: the same as recall_at_keep
    one = ([1, 1, 1, 0], [1, 0, 0, 0], 0.5)
    assert all_recall_at_keep(*one) == pytest.approx(recall_at_keep(*one))
    with pytest.raises(ValueError):
        all_recall_at_keep([0.1], [1], 1.5)


def test_over_seeds_separates_retraining_from_test_examples():
    from scipy.stats import t as student_t

    from scp.core.metrics import over_seeds

    rng = np.random.default_rng(0)
    examples = rng.uniform(0.6, 1.0, size=40)
    shifts = np.array([-0.02, 0.0, 0.02])
    x = examples[None, :] + shifts[:, None]
    x[1, 3] = np.nan  # undefined for one seed: dropped for all
    r = over_seeds(x, n_boot=500, seed=0)
    keep = np.ones(40, bool)
    keep[3] = False
    means = x[:, keep].mean(axis=1)
    assert r.n_seeds == 3 and r.n_used == 39 and r.n_excluded == 1
    assert np.allclose(r.per_seed, means) and np.isclose(r.mean, means.mean())
    half = student_t.ppf(0.975, 2) * means.std(ddof=1) / np.sqrt(3)
    assert np.allclose(r.ci_seeds, (means.mean() - half, means.mean() + half))
    # the seeds differ by a constant shift, so the example CI is that of the seed-averaged values
    assert r.ci_examples[0] < r.mean < r.ci_examples[1]
    same = over_seeds(np.vstack([examples, examples]), n_boot=500)
    assert same.sd_seeds == 0 and same.ci_seeds == (same.mean, same.mean)
    with pytest.raises(ValueError, match="≥ 2 seeds"):
        over_seeds([examples])
