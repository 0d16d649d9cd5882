"""scp.experiments.crossing: the budget from which a quality curve stays at or above a flat reference."""

import math

import pytest

from scp.experiments.crossing import crossing_point


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
