"""Notebook 05_shapley_vs_loo: recall vs M of Monte-Carlo Shapley against leave-one-out, and the paper's Table 19."""

import pytest

from scp.suite.notebook import read_records

NAME = "05_shapley_vs_loo"
TAGS = ("hotpotqa_03", "hotpotqa_05", "redundant_03", "redundant_05")


@pytest.mark.slow  # smoke run about 50 s on the shared 2-core machine
def test_05_shapley_vs_loo(smoke_run):
    executed, out = smoke_run(NAME)
    r = read_records(executed)
    # identities
    assert r["n_examples"] == 8 and r["budgets"] == [1, 10]
    assert r["loo_evaluations_equal_m1"] is True  # n + 1 = M·(n − 1) + 2 at M = 1
    assert r["case_ids"] == [f"S{i}" for i in range(1, 11)]
    assert r["case_labels"] == [0, 1, 1, 1, 1, 1, 0, 0, 0, 0]  # G1–G3 are the evidence
    assert r["case_paper_loo"] == [-1.0, 0.0, 0.1, 0.0, -0.1, 1.2, 0.0, -0.1, 0.0, 0.0]  # as printed
    assert r["case_paper_scp"] == [-0.8, 0.7, 0.8, 0.5, 0.5, 1.3, 0.0, -0.1, 0.0, 0.0]
    assert r["case_exact_sum"] == pytest.approx(r["case_v_grand_minus_empty"], abs=1e-5)  # efficiency
    assert r["case_mc_sums"] == pytest.approx([r["case_v_grand_minus_empty"]] * 3, abs=1e-5)
    assert r["case_n_evaluations"] == {"exact": 2**10, "loo": 11, "mc": 50 * 9 + 2}
    assert r["case_auc_paper_scp"] == 1.0 and r["case_rank_s1_paper_scp"] == 10
    # directions: the M* record agrees with the curve; MC lies inside the Theorem 3.1 band on the case
    for tag in TAGS:
        loo, last = r[f"loo_recall_{tag}"], r[f"shapley_recall_max_m_{tag}"]
        assert 0 <= loo <= 1 and all(0 <= x <= 1 for x in r[f"shapley_recall_curve_{tag}"])
        assert last == r[f"shapley_recall_curve_{tag}"][-1]
        assert (r[f"m_star_{tag}"] is not None) == (last >= loo)
        gap, low, high = r[f"gap_ci_{tag}"]
        assert gap == pytest.approx(last - loo) and low <= gap <= high
    assert r["case_mc_mean_max_error"] < r["case_mc_bound"]
    assert r["case_rank_s1_our_exact"] <= 2  # the shipped model ranks the stale distractor S1 high
    # values from the reference smoke run (8 test examples, M in {1, 10}, seed 0; LOO and exact are deterministic)
    assert r["loo_recall_hotpotqa_03"] == pytest.approx(0.96875, abs=1e-6)
    assert r["loo_recall_redundant_03"] == pytest.approx(0.90625, abs=1e-3)
    assert r["case_our_exact"][0] == pytest.approx(0.142, abs=0.01)
    assert r["case_auc_our_exact"] == pytest.approx(0.60, abs=0.05)
    assert r["kendall_tau_loo_vs_shapley"]["hotpotqa"] == pytest.approx(0.86, abs=0.1)
    stems = {p.stem for p in (out / "figures" / NAME).glob("*.pdf")}
    assert stems == {"recall_vs_permutations", "recall_gain_over_loo", "table19_scores"}
    tables = {p.name for p in (out / "results" / NAME).iterdir()}
    assert {
        f"{t}.{ext}"
        for t in ("recall_vs_permutations", "crossing_point", "table19", "table19_summary")
        for ext in ("csv", "json")
    } <= tables
