"""Notebook 10 (downstream QA with a real reader), run with its smoke parameters: what it recorded and saved."""

import csv

import pytest
from test_plan import smoke_plan_problems

from scp.suite.notebook import read_records


@pytest.mark.slow
def test_10_downstream_qa(smoke_run):
    executed, out = smoke_run("10_downstream_qa")
    r = read_records(executed)
    datasets, methods = ("hotpotqa", "2wiki"), ("scp", "pointwise", "scp_loo", "bm25")
    assert r["reader"].startswith("SmolLM2-135M-Instruct")
    assert r["n_examples"] == {d: 2 for d in datasets}
    assert r["lm_seconds_per_read"] > 0 and all(r["lm_seconds_per_question"][d] > 0 for d in datasets)
    # identities: metrics in range, EM ≤ F1 (an exact match has F1 = 1), CIs hold their means
    for d in datasets:
        for m in ("full", "closed_book", *methods):
            em, f1, lp = r[f"em_{d}_{m}"], r[f"f1_{d}_{m}"], r[f"logprob_{d}_{m}"]
            assert 0 <= em <= f1 <= 1 and lp < 0
            for metric, value in (("em", em), ("f1", f1), ("logprob", lp)):
                low, high = r[f"{metric}_{d}_{m}_ci"]
                assert low - 1e-12 <= value <= high + 1e-12
        # a paired difference over the same questions is the difference of the two means
        for other in ("full", "pointwise", "scp_loo", "bm25"):
            for metric in ("f1", "logprob"):
                diff, low, high = r[f"paired_{metric}_{d}_scp_minus_{other}"]
                assert diff == pytest.approx(r[f"{metric}_{d}_scp"] - r[f"{metric}_{d}_{other}"], abs=1e-9)
                assert low - 1e-12 <= diff <= high + 1e-12
    # direction the figure claims: reading a context (any of them) makes the gold answer likelier than none
    for d in datasets:
        assert r[f"logprob_{d}_full"] > r[f"logprob_{d}_closed_book"]
    # values from the reference smoke run (2 questions per dataset; the reader is deterministic, greedy)
    assert r["logprob_hotpotqa_full"] == pytest.approx(-5.858, abs=0.05)
    assert r["logprob_hotpotqa_closed_book"] == pytest.approx(-8.252, abs=0.05)
    assert r["f1_hotpotqa_full"] == pytest.approx(0.167, abs=0.01)
    figures = {p.stem for p in (out / "figures" / "10_downstream_qa").glob("*.png")}
    assert figures == {"qa_by_method", "keep_ratio_sweep"}
    results = out / "results" / "10_downstream_qa"
    with open(results / "qa_by_method.csv") as f:
        rows = list(csv.DictReader(f))
    assert {row["reader"] for row in rows} == {r["reader"]}  # the reader's name in every table row
    assert {(row["dataset"], row["method"]) for row in rows} >= {
        (d, m) for d in datasets for m in ("full", "closed-book", "scp")
    }
    assert {p.name for p in results.iterdir()} >= {
        "qa_by_method.csv",
        "qa_by_method.json",
        "answers.csv",
        "paired.csv",
        "paired.json",
    }
    assert smoke_plan_problems("10_downstream_qa", executed, out) == []  # the models the plan says
