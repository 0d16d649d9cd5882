"""Notebook 07_convex_deepsets, run with its smoke parameters (HotpotQA and FEVER, each network trained 1 epoch
on 24 contexts with each of two seeds; 6 test contexts per dataset, 200 triples per context, game and seed)."""

import json

import pytest
from test_plan import smoke_plan_problems

from scp.suite.notebook import read_records

NAME = "07_convex_deepsets"


@pytest.mark.slow
def test_07_convex_deepsets(smoke_run):
    executed, out = smoke_run(NAME)
    r = read_records(executed)
    # identities: the convex logit game is supermodular by construction; sizes and sample counts are exact
    assert r["violation_rate_convex_logit"] == 0.0 and r["max_violation_convex_logit"] < 1e-9  # rounding only
    assert r["n_params_deepsets"] == 364_033 and r["n_params_convex"] == 296_833
    assert r["n_train_seeds"] == 2
    assert r["n_test_contexts"] == 12 and r["n_triples_per_network_and_game"] == 12 * 200 * 2
    assert len(r["violation_rate_convex_bounded_by_dataset"]) == 2
    assert 0 <= r["share_logit_grand_le_0_convex"] <= 1
    for d in ("hotpotqa", "fever"):
        assert 0 <= r[f"test_auc_deepsets_{d}"] <= 1 and 0 <= r[f"test_auc_convex_{d}"] <= 1
        low, high = r[f"test_auc_convex_{d}_ci_seeds"]  # Student t over the two seeds' means
        assert low <= r[f"test_auc_convex_{d}"] <= high
        diff, low, high = r[f"auc_difference_convex_minus_deepsets_{d}"]
        assert low <= diff <= high
        assert diff == pytest.approx(r[f"test_auc_convex_{d}"] - r[f"test_auc_deepsets_{d}"], abs=1e-12)
    # directions the violation figure shows
    assert r["violation_rate_deepsets_logit"] > 0.1
    assert r["violation_rate_convex_bounded"] < r["violation_rate_deepsets_bounded"]
    # values from the reference smoke run (seeds 0 and 1, seed 0 for the rest, 1 CPU thread)
    assert r["violation_rate_deepsets_logit"] == pytest.approx(0.458, abs=0.08)
    assert r["violation_rate_deepsets_bounded"] == pytest.approx(0.378, abs=0.08)
    assert r["violation_rate_convex_bounded"] == pytest.approx(0.104, abs=0.06)
    assert r["test_auc_deepsets_hotpotqa"] == pytest.approx(0.775, abs=0.05)
    assert r["test_auc_convex_hotpotqa"] == pytest.approx(0.871, abs=0.05)
    figures = {p.stem for p in (out / "figures" / NAME).glob("*.png")}
    assert figures == {"auc_by_dataset", "violation_rates"}
    by_seed = json.loads((out / "results" / NAME / "auc_by_seed.json").read_text())["rows"]
    assert sorted({row["train_seed"] for row in by_seed}) == [0, 1] and len(by_seed) == 2 * 2 * 2
    table = json.loads((out / "results" / NAME / "violations_by_dataset.json").read_text())
    assert {(row["dataset"], row["network"], row["game"]) for row in table["rows"]} == {
        (d, k, g) for d in ("hotpotqa", "fever") for k in ("DeepSets", "ConvexDeepSets") for g in ("logit", "bounded")
    }
    assert all(0 <= row["rate"] <= 1 for row in table["rows"])
    assert smoke_plan_problems("07_convex_deepsets", executed, out) == []  # the models the plan says
