"""Notebook 04_mc_budget_and_bounds (Table 20, Fig. 4b, Fig. 6), run with its smoke parameters."""

import pytest
from test_plan import smoke_plan_problems

from scp.suite.notebook import read_records

NAME = "04_mc_budget_and_bounds"


@pytest.mark.slow  # about 40 s: trains a tiny MS MARCO model
def test_04_mc_budget_and_bounds(smoke_run):
    executed, out = smoke_run(NAME)
    r = read_records(executed)
    budgets, bound_budgets, n = r["budgets"], r["bound_budgets"], r["n_players_bound"]
    # identities: the budget convention, the table shapes, the theorem's bound
    assert r["n_evaluations_by_budget"] == [m * (n - 1) + 2 for m in bound_budgets]
    assert n == 12 and r["n_games"] == 3 and r["n_test_contexts"] == 12
    for key in ("transfer", "in_domain"):
        assert len(r[f"auc_{key}_by_budget"]) == len(r[f"ms_per_context_{key}_by_budget"]) == len(budgets)
        assert all(0 <= a <= 1 for a in r[f"auc_{key}_by_budget"])
        low, high = r[f"auc_{key}_ci_at_max_budget"]
        assert low <= r[f"auc_{key}_by_budget"][-1] <= high
        assert all(t > 0 for t in r[f"ms_per_context_{key}_by_budget"])
        assert len(r[f"mean_error_{key}_by_budget"]) == len(r[f"topk_stability_{key}_by_budget"]) == len(bound_budgets)
        assert all(0 <= s <= 1 for s in r[f"topk_stability_{key}_by_budget"])
    assert r["bound_B1_by_budget"][0] == pytest.approx(3.5139, abs=1e-4)  # sqrt(2 ln(2·12/0.05)), M = 1
    # directions the figures claim
    for key in ("transfer", "in_domain"):
        errors = r[f"mean_error_{key}_by_budget"]
        assert errors[-1] < errors[0]  # more permutations, smaller error
        assert r[f"fraction_inside_bound_{key}"] == 1.0  # Theorem 3.1 with B = 1
        assert r[f"fraction_inside_range_bound_{key}"] >= 0.95  # ... with B = the game's range
        assert all(e < b for e, b in zip(errors, r["bound_B1_by_budget"]))
        stability = r[f"topk_stability_{key}_by_budget"]
        assert stability[-1] >= stability[0]
        assert r[f"topk_theorem_violations_{key}"] == 0  # Theorem A.3 never failed
        assert r[f"topk_m_theorem_median_{key}"] > bound_budgets[-1]  # the theorem is conservative
        assert 0 <= r[f"topk_games_reached_{key}"] <= r["n_games"]
        assert r[f"topk_m_theorem_min_{key}"] <= r[f"topk_m_theorem_median_{key}"]
    assert r["auc_in_domain_by_budget"][-1] >= r["auc_in_domain_by_budget"][0]
    # values from the reference smoke run (12 test contexts, M in {1, 10}; 3 games, M in {1, 10, 100}, 8 repeats)
    assert r["auc_in_domain_by_budget"] == pytest.approx([0.9414, 0.9738], abs=0.01)
    assert r["auc_bm25"] == pytest.approx(0.8782, abs=0.01)
    assert r["auc_cosine"] == pytest.approx(0.8471, abs=0.01)
    assert r["mean_error_in_domain_by_budget"] == pytest.approx([0.0947, 0.0291, 0.0078], abs=0.01)
    assert r["topk_stability_in_domain_by_budget"] == pytest.approx([0.583, 0.833, 0.833], abs=0.05)
    assert r["auc_transfer_by_budget"] == pytest.approx([0.511, 0.599], abs=0.05)  # tiny model: looser
    figures = {p.stem for p in (out / "figures" / NAME).glob("*.pdf")}
    assert figures == {"auc_and_time_vs_permutations", "error_vs_bound", "topk_stability_vs_theorem"}
    tables = {p.name for p in (out / "results" / NAME).iterdir()}
    assert {
        f"{t}.{ext}"
        for t in ("auc_and_time_vs_permutations", "error_vs_bound", "topk_stability")
        for ext in ("csv", "json")
    } <= tables
    assert smoke_plan_problems("04_mc_budget_and_bounds", executed, out) == []  # the models the plan says
