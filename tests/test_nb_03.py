"""Notebook 03_niah: needle in a haystack (paper Fig. 3d, Tables 13-16), run with its smoke parameters."""

import json

import pytest

from scp.suite.notebook import read_records

NAME = "03_niah"
METHODS = ("scp", "bm25", "cosine")


@pytest.mark.slow
def test_03_niah(smoke_run):
    executed, out = smoke_run(NAME)
    r = read_records(executed)
    # identities: grid sizes of the smoke parameters (2 lengths x 2 depths x 2 haystacks; 1 x 2 x 2; 1 x 1 x 2)
    assert r["n_contexts"] == [8, 4, 2]
    assert r["haystack_sentences"] > 3000 and 15 < r["words_per_sentence"] < 35  # HotpotQA test distractors
    for m in METHODS:
        values = (
            r[f"{m}_recall_by_length"]
            + r[f"{m}_auc_by_length"]
            + r[f"{m}_two_needle_recall_by_length"]
            + r[f"{m}_five_needle_all_recall"]
        )
        assert all(0.0 <= v <= 1.0 for v in values)
        assert len(r[f"{m}_recall_by_length"]) == 2 and len(r[f"{m}_five_needle_all_recall"]) == 2
        assert r[f"{m}_seconds_per_context"] >= 0
    # BM25 and the cosine are functions of the set of sentences: moving the needle cannot change its rank
    assert r["bm25_max_depth_spread"] == 0 and r["cosine_max_depth_spread"] == 0
    # directions: the needle repeats the question's words, so the lexical and embedding rankers find it
    assert r["bm25_recall_by_length"] == [1.0, 1.0] and r["cosine_recall_by_length"] == [1.0, 1.0]
    assert r["bm25_five_needle_all_recall"] == [1.0, 1.0]
    # values from the reference smoke run (n = 20, 40; SCP finds every needle in contexts this short)
    assert r["scp_recall_by_length"] == pytest.approx([1.0, 1.0], abs=0.01)
    assert min(r["scp_auc_by_length"]) > 0.98
    assert r["scp_five_needle_all_recall"] == pytest.approx([1.0, 1.0], abs=0.01)
    stems = {p.stem for p in (out / "figures" / NAME).glob("*.pdf")}
    assert stems == {
        "single_needle_heatmaps",
        "single_needle_curves",
        "two_needles_recall_vs_length",
        "five_needles_all_recall_vs_keep_ratio",
    }
    tables = {p.name: p for p in (out / "results" / NAME).iterdir()}
    for stem, n_rows in (
        ("single_needle", 3 * 2 * 2),
        ("single_needle_by_length", 3 * 2),
        ("two_needles", 3),
        ("five_needles", 3 * 1 * 2),
        ("seconds_per_context", 3),
    ):
        doc = json.loads(tables[f"{stem}.json"].read_text())
        assert len(doc["rows"]) == n_rows and f"{stem}.csv" in tables
        assert doc["provenance"]["parameters"]["keep_ratio"] == 0.02
    rows = json.loads(tables["single_needle.json"].read_text())["rows"]
    assert {row["method"] for row in rows} == {"SCP", "BM25", "MiniLM cosine"}
    assert all(row["recall@0.02_ci_low"] <= row["recall@0.02"] <= row["recall@0.02_ci_high"] for row in rows)
