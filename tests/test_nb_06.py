"""Notebook 06_embedder_ablation: one SCP model per embedder (paper Table 17, Fig. 4a), smoke parameters."""

import json

import pytest
from test_plan import smoke_plan_problems

from scp.data.embedders import hub_reachable
from scp.suite.notebook import read_records

NAME = "06_embedder_ablation"
AVAILABLE = ["minilm", "glove", "wordllama", "tfidf", "random"]


@pytest.mark.slow
def test_06_embedder_ablation(smoke_run):
    executed, out = smoke_run(NAME)
    r = read_records(executed)
    # identities
    assert r["n_test"] == 16
    offline = not hub_reachable(timeout=1.0)
    if offline:
        assert r["embedders_ok"] == AVAILABLE and r["embedders_na"] == ["bert-base"]
        assert "bert-base-uncased" in r["na_reasons"][0] and "hub" in r["na_reasons"][0]
    assert r["minilm_config_equals_shipped"] is False  # the smoke run shrinks the network
    assert r["minilm_weights_equal_shipped"] is False
    for e in AVAILABLE:
        low, high = r[f"{e}_scp_auc_ci"]
        assert 0.0 <= low <= r[f"{e}_scp_auc"] <= high <= 1.0
        assert 0.0 <= r[f"{e}_cosine_auc"] <= 1.0 and 0.0 <= r[f"{e}_scp_recall"] <= 1.0
        assert r[f"{e}_train_seconds"] > 0 and r[f"{e}_embed_seconds_per_1000"] > 0
    # directions: random vectors carry no meaning, but SCP still reads the BM25 feature
    assert abs(r["random_ranking_auc"] - 0.5) < 0.1 and abs(r["random_cosine_auc"] - 0.5) < 0.15
    assert r["random_scp_auc"] > r["random_cosine_auc"] + 0.2
    assert r["bm25_auc"] > 0.8
    # values from the reference smoke run (1 epoch on 32 questions, hidden 32, 16 test questions, M = 10)
    assert r["bm25_auc"] == pytest.approx(0.865, abs=0.01)  # no training involved
    assert r["minilm_cosine_auc"] == pytest.approx(0.848, abs=0.01)
    assert r["random_scp_auc"] == pytest.approx(0.827, abs=0.08)
    assert r["minilm_scp_auc"] == pytest.approx(0.733, abs=0.08)
    stems = {p.stem for p in (out / "figures" / NAME).glob("*.pdf")}
    assert stems == {"auc_by_embedder", "auc_vs_embedding_time"}
    doc = json.loads((out / "results" / NAME / "embedder_ablation.json").read_text())
    rows = {row["embedder"]: row for row in doc["rows"]}
    assert list(rows) == AVAILABLE + ["bert-base"]
    assert all(rows[e]["status"] == "ok" and rows[e]["scp_auc"] is not None for e in AVAILABLE)
    if offline:
        assert rows["bert-base"]["status"] == "n/a" and rows["bert-base"]["reason"]
    assert rows["tfidf"]["dim"] == 32 and rows["tfidf"]["embedder_id"].startswith("tfidf-svd:d32")
    assert {"parameters", "git", "versions", "data_files"} <= set(doc["provenance"])
    refs = json.loads((out / "results" / NAME / "reference_rankers.json").read_text())["rows"]
    assert [row["ranker"] for row in refs] == ["BM25", "random"] + [
        f"cosine, random vectors seed {k}" for k in (1, 2, 3)
    ]
    assert all(abs(a - 0.5) < 0.15 for a in r["random_cosine_auc_other_draws"])
    assert smoke_plan_problems("06_embedder_ablation", executed, out) == []  # the models the plan says
