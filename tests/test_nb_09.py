"""Notebook 09 (compression and transfer), run with its smoke parameters: what it recorded and saved."""

import pytest
from test_plan import smoke_plan_problems

from scp.suite.notebook import read_records


@pytest.mark.slow
def test_09_compression_and_transfer(smoke_run):
    executed, out = smoke_run("09_compression_and_transfer")
    r = read_records(executed)
    methods = ("scp", "pointwise", "bm25", "cosine")
    k = len(r["keep_ratios"])
    # identities: the keep rate is ⌈r·n⌉/n whatever the ranking, so every method keeps the same share of units
    for m in methods:
        assert len(r[f"recall_{m}"]) == len(r[f"compression_{m}"]) == len(r[f"keep_rate_{m}"]) == k
        assert r[f"keep_rate_{m}"] == pytest.approx(r["keep_rate_scp"], abs=1e-12)
        assert all(0 <= x <= 1 for x in r[f"recall_{m}"] + r[f"compression_{m}"]) and 0 <= r[f"auc_{m}"] <= 1
    assert r["transfer_auc_scp_from_hotpotqa"] == pytest.approx(r["auc_scp"], abs=1e-12)  # the same model
    assert r["transfer_auc_pointwise_from_hotpotqa"] == pytest.approx(r["auc_pointwise"], abs=1e-12)
    for d in ("hotpotqa", "msmarco", "fever"):
        for m in ("scp", "pointwise"):
            low, high = r[f"transfer_auc_{m}_from_{d}_ci"]
            assert low <= r[f"transfer_auc_{m}_from_{d}"] <= high
        diff = r[f"transfer_auc_scp_from_{d}"] - r[f"transfer_auc_pointwise_from_{d}"]
        assert r[f"scp_minus_pointwise_from_{d}"] == pytest.approx(diff, abs=1e-12)  # paired mean
    # directions the figure claims: keeping more units keeps more evidence and removes fewer tokens
    for m in methods:
        assert all(a <= b + 1e-12 for a, b in zip(r[f"recall_{m}"], r[f"recall_{m}"][1:]))
        assert all(a > b for a, b in zip(r[f"compression_{m}"], r[f"compression_{m}"][1:]))
        assert r[f"recall_{m}"][0] > r["keep_ratios"][0]  # every method beats a random order
    # values from the reference smoke run (8 HotpotQA test contexts, tiny models trained one epoch on 24 contexts)
    assert r["n_test"] == 8
    assert r["auc_bm25"] == pytest.approx(0.900, abs=0.005)  # no training: exact up to rounding
    assert r["auc_cosine"] == pytest.approx(0.850, abs=0.005)
    assert r["auc_scp"] == pytest.approx(0.73, abs=0.1)  # a tiny trained model: looser
    # a keep count chosen per query: a higher target recall gives a lower threshold, which keeps more of every
    # context and so more evidence; a larger value fraction asks a longer prefix of the same ranking
    assert set(r["per_query_splits"]) == {"hotpotqa", "msmarco"}
    for d in ("hotpotqa", "msmarco"):
        assert r["per_query_splits"][d] == {"test": 8, "validation": 8}
        for m in methods:
            t = r[f"per_query_{d}_{m}_threshold"]
            assert t["setting"] == [0.8, 0.9, 0.95]
            assert all(a >= b for a, b in zip(t["threshold"], t["threshold"][1:]))
            assert all(a <= b + 1e-12 for a, b in zip(t["recall"], t["recall"][1:]))
            assert all(a <= b + 1e-12 for a, b in zip(t["kept"], t["kept"][1:]))
            assert all(low <= x <= high for x, (low, high) in zip(t["recall"], t["recall_ci"]))
        v = r[f"per_query_{d}_scp_value_fraction"]
        assert v["setting"] == [0.9, 0.95, 0.99] and all(x is None for x in v["threshold"])
        assert all(a <= b + 1e-12 for a, b in zip(v["kept"], v["kept"][1:])) and v["kept"][0] >= 1
        assert f"per_query_{d}_pointwise_value_fraction" not in r  # no game: no value fraction
        shape = r[f"game_shape_{d}"]
        assert 0 <= shape["share_grand_below_empty"] <= 1 and shape["mean_v_peak"] >= shape["mean_v_grand"] - 1e-12
    figures = {p.stem for p in (out / "figures" / "09_compression_and_transfer").glob("*.png")}
    assert figures == {"keep_ratio_sweep", "cross_domain_auc", "per_query_tradeoff", "per_query_kept_counts"}
    tables = {p.name for p in (out / "results" / "09_compression_and_transfer").iterdir()}
    assert {
        "keep_ratio_sweep.csv",
        "keep_ratio_sweep.json",
        "cross_domain.csv",
        "transfer_cost.csv",
        "scp_minus_pointwise.csv",
        "per_query_keep.csv",
        "game_shape.csv",
    } <= tables
    assert smoke_plan_problems("09_compression_and_transfer", executed, out) == []  # the models the plan says
