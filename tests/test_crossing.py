"""scp.experiments.crossing: the budget from which a quality curve stays at or above a flat reference, and the
credit an original supporting unit keeps once its paraphrases are added."""

import math
from dataclasses import replace

import numpy as np
import pytest

from scp.data.datasets import Example
from scp.data.synthetic import make_redundancy
from scp.experiments.crossing import credit_of_originals, credit_pairs, crossing_point


def test_crossing_interpolates_in_log_budget():
    c = crossing_point([1, 10, 100], [0.5, 0.7, 0.9], 0.8)
    assert c.crosses and c.budget == 100 and not c.from_start
    assert c.interpolated == pytest.approx(math.sqrt(10) * 10)  # halfway between log 10 and log 100
    assert c.final_gap == pytest.approx(0.1)


def test_last_crossing_counts_and_never_crossing():
    c = crossing_point([1, 2, 4, 8], [0.9, 0.5, 0.95, 0.96], 0.9)  # above, dips below, above for good
    assert c.budget == 4 and 2 < c.interpolated <= 4
    assert crossing_point([1, 2, 4], [0.1, 0.9, 0.95], 0.1).from_start
    never = crossing_point([1, 2, 4], [0.5, 0.9, 0.7], 0.8)
    assert not never.crosses and never.budget is None and never.interpolated is None
    assert never.final_gap == pytest.approx(-0.1)


def test_exact_tie_counts_as_overtaken():
    c = crossing_point([1, 10], [0.2, 0.4], 0.4)
    assert c.budget == 10 and c.interpolated == pytest.approx(10)


@pytest.mark.parametrize(
    "budgets, curve", [([1, 1], [0, 1]), ([0, 1], [0, 1]), ([1, 2], [0]), ([], []), ([1, 2], [0, float("nan")])]
)
def test_bad_grids(budgets, curve):
    with pytest.raises(ValueError):
        crossing_point(budgets, curve, 0.5)


def plain_example(k):
    return Example(
        id=f"e{k}",
        query="Which dose applies?",
        units=["The dose is 5 mg.", "The sky is blue today.", "Grass grows in spring.", "The dose was doubled."],
        labels=[1, 0, 0, 1],
        titles=["A", "B", "C", "A"],
        paragraph_ids=[0, 1, 2, 0],
        answers=["10 mg"],
        dataset="toy",
        granularity="sentence",
    )


def test_credit_of_originals_follows_each_supporting_original_into_its_augmented_context():
    plain = [plain_example(k) for k in range(2)]
    augmented = [make_redundancy(ex, n_copies=2, seed=k) for k, ex in enumerate(plain)]
    plain_scores = [np.array([0.4, 0.1, 0.2, 0.2]), np.array([0.6, 0.0, 0.3, 0.2])]
    # in the augmented contexts an original keeps half its plain score; copies and distractors score 9
    aug_scores = [
        np.array(
            [
                s[i] / 2 if c < 0 and y == 1 else 9.0
                for i, c, y in zip(ex.meta["source_index"], ex.meta["copy_of"], ex.labels)
            ]
        )
        for s, ex in zip(plain_scores, augmented)
    ]
    pairs = credit_pairs(plain_scores, aug_scores, augmented)
    assert pairs.shape == (4, 2)  # two supporting originals per context, no copy, no distractor
    assert sorted(pairs[:, 0].tolist()) == [0.2, 0.2, 0.4, 0.6]
    np.testing.assert_allclose(pairs[:, 1], pairs[:, 0] / 2)
    credit = credit_of_originals(plain_scores, aug_scores, augmented)
    assert credit["plain"] == pytest.approx(0.35) and credit["with copies"] == pytest.approx(0.175)
    assert credit["kept"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="one plain and one augmented"):
        credit_pairs(plain_scores[:1], aug_scores, augmented)
    no_gold = replace(augmented[0], labels=(0,) * augmented[0].n_units)
    with pytest.raises(ValueError, match="no original supporting unit"):
        credit_pairs(plain_scores[:1], aug_scores[:1], [no_gold])
