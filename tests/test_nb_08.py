"""Notebook 08_landscape_of_context (Fig. 5), run with its smoke parameters."""

import json

import pytest

from scp.suite.notebook import read_records

NAME = "08_landscape_of_context"


@pytest.mark.slow  # about 30 s (kernel, model, 12 exact games)
def test_08_landscape_of_context(smoke_run):
    executed, out = smoke_run(NAME)
    r = read_records(executed)
    # identities
    assert r["n_contexts"] == 12 and r["n_units_max"] <= 12
    assert r["efficiency_error"] < 1e-9  # Σφ = v(N) − v(∅)
    assert r["min_shapley_excess_minus_epsilon"] >= -1e-7  # ε* is the smallest largest excess
    assert r["fraction_shapley_in_core"] <= r["fraction_core_nonempty"]
    assert 0 <= r["gold_pair_base_rate"] <= 1 and r["example_n_supporting"] >= 2
    for m in ("dividend", "interaction"):
        assert len(r[f"{m}_by_pair_kind"]) == 3
        assert 0 <= r[f"{m}_auc_negative_gold_pair"] <= 1
    # directions the figures and the closing text claim
    d_d, gold_d, gold_gold = r["interaction_by_pair_kind"]
    assert gold_gold < 0 < d_d and gold_gold < gold_d  # supporting pairs are substitutes
    assert r["interaction_auc_negative_gold_pair"] > 0.5
    assert r["interaction_most_negative_is_gold_pair"] > r["gold_pair_base_rate"]
    assert r["fraction_supermodular"] == 0.0
    # values from the reference smoke run (the first 12 HotpotQA test examples, shipped model)
    assert r["fraction_shapley_in_core"] == pytest.approx(1 / 12, abs=0.09)
    assert r["mean_v_empty"] == pytest.approx(0.683, abs=0.005)
    assert r["fraction_core_nonempty"] == pytest.approx(1 / 2, abs=0.1)
    assert r["median_least_core_epsilon"] == pytest.approx(0.0021, abs=0.003)
    assert r["median_shapley_excess"] == pytest.approx(0.0188, abs=0.005)
    assert r["interaction_by_pair_kind"] == pytest.approx([0.0170, 0.0149, -0.0511], abs=0.005)
    assert r["interaction_auc_negative_gold_pair"] == pytest.approx(0.954, abs=0.02)
    figures = {p.stem for p in (out / "figures" / NAME).glob("*.pdf")}
    assert figures == {"shapley_values", "core_membership", "context_tree", "pair_interactions", "pair_types"}
    doc = json.loads((out / "results" / NAME / "pair_types.json").read_text())
    assert doc["columns"] == ["measure", "pair", "mean", "ci_low", "ci_high", "n_contexts"]
    assert len(doc["rows"]) == 6 and doc["provenance"]["parameters"]["n_examples"] == 12
