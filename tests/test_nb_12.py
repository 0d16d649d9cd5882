"""Notebook 12 (entropic context shaping), run with its smoke parameters: what it recorded and saved."""

import json

import pytest
from test_plan import smoke_plan_problems

from scp.llm.readers import PROMPT
from scp.suite.notebook import read_records

NAME = "12_entropic_context_shaping"
DATASETS = ("hotpotqa", "2wiki")
VARIANTS = ("ecs", "ecs_free")
BASELINES = ("tfidf", "bm25", "scp", "pointwise")


@pytest.mark.slow
def test_12_entropic_context_shaping(smoke_run):
    executed, out = smoke_run(NAME)
    r = read_records(executed)
    k_max = len(r["f1_at_k_bm25_hotpotqa"])
    for d in DATASETS:
        assert r[f"n_examples_{d}"] == 2
        # identities: every baseline keeps exactly as many sentences as the ECS variant it is matched to, and
        # the paired difference of means is the difference of the two means
        for v in VARIANTS:
            k = r[f"selected_mean_{v}_{d}"]
            assert 0 <= k <= k_max and r[f"k_mean_{v}_at_{v}_size_{d}"] == pytest.approx(k, abs=1e-12)
            for m in BASELINES:
                assert r[f"k_mean_{m}_at_{v}_size_{d}"] == pytest.approx(k, abs=1e-12)
                diff = r[f"f1_{v}_at_{v}_size_{d}"][0] - r[f"f1_{m}_at_{v}_size_{d}"][0]
                assert r[f"f1_{v}_minus_{m}_{d}"][0] == pytest.approx(diff, abs=1e-12)
                low, high = r[f"f1_{m}_at_{v}_size_{d}"][1:]
                assert low <= r[f"f1_{m}_at_{v}_size_{d}"][0] <= high
        # the fixed-k view: selections are nested in k (top k; ECS's first k picks), so recall never falls
        # as k grows, and no method can recall more than the candidate pool holds
        for m in (*VARIANTS, *BASELINES):
            f1, precision, recall = (r[f"{x}_at_k_{m}_{d}"] for x in ("f1", "precision", "recall"))
            assert len(f1) == len(precision) == len(recall) == k_max
            assert all(0 <= x <= 1 for x in f1 + precision + recall)
            assert all(a <= b + 1e-12 for a, b in zip(recall, recall[1:]))
            assert recall[-1] <= r[f"pool_recall_{d}"] + 1e-12
        assert 0 <= r[f"reader_answer_f1_{d}"] <= 1
    # prefix caching changes the cost of a greedy run, not its picks or utilities
    assert r["prefix_cache_same_picks"] is True and r["prefix_cache_max_abs_diff"] < 1e-3
    assert r["prefix_cache_speedup"] > 0
    # values from the reference smoke run (2 examples per dataset, pools of 5, k_max 2, SmolLM2 on one thread)
    assert r["pool_recall_hotpotqa"] == pytest.approx(7 / 12, abs=1e-12)  # BM25: no model, exact
    assert r["pool_recall_2wiki"] == pytest.approx(0.5, abs=1e-12)
    assert r["f1_at_k_bm25_hotpotqa"] == pytest.approx([0.25, 0.65], abs=1e-9)
    assert r["f1_at_k_tfidf_2wiki"] == pytest.approx([0.4, 1 / 3], abs=1e-9)
    assert r["f1_at_k_ecs_hotpotqa"] == pytest.approx([1 / 3, 0.45], abs=0.15)  # LM picks: looser
    assert r["f1_at_k_ecs_free_2wiki"] == pytest.approx([0.4, 1 / 3], abs=0.15)
    figures = {p.stem for p in (out / "figures" / NAME).glob("*.png")}
    assert figures == {"f1_matched", "prf_vs_k"}
    tables = {p.name for p in (out / "results" / NAME).iterdir()}
    assert {
        f"{t}.{x}" for t in ("matched_size", "paired_f1", "prf_at_k", "headline_vs_paper") for x in ("csv", "json")
    } <= tables
    headline = json.loads((out / "results" / NAME / "headline_vs_paper.json").read_text())
    paper = headline["rows"][0]  # the paper's numbers, labelled as the paper's
    assert paper["source"] == "seed paper (reported)" and paper["dataset"] == "LoCoMo"
    assert (paper["ecs_f1"], paper["tfidf_f1"]) == (0.265, 0.154)
    assert {row["source"] for row in headline["rows"][1:]} == {"ours"}
    assert "SmolLM2" in headline["provenance"]["reader"] and headline["provenance"]["prompt"] == PROMPT
    assert smoke_plan_problems("12_entropic_context_shaping", executed, out) == []  # the models the plan says
