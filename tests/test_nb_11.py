"""Notebook 11 (MaxShapley against LM-utility Shapley estimators), run with its smoke parameters."""

import pytest

from scp.experiments.maxshapley import KEY_POINT_SOURCE, random_jaccard
from scp.suite.notebook import read_records


@pytest.mark.slow
def test_11_maxshapley(smoke_run):
    executed, out = smoke_run("11_maxshapley")
    r = read_records(executed)
    n = r["n_sources"]
    # identities: exact methods are exact, costs are what the definitions say
    assert r["n_queries"] == 2 and n == 4
    assert r["key_point_source"] == KEY_POINT_SOURCE
    assert r["efficiency_error"] < 1e-9  # Σφ = U(N) − U(∅) on every table
    assert r["maxshapley_vs_enumeration"] < 1e-9  # closed form = 2^n enumeration of its game
    assert r["kernelshap_full_budget_tau"] == 1.0  # B = 2^n: KernelSHAP is exact
    assert r["mc_coalitions_within_bound"] is True
    assert r["max_abs_scorer_difference"] < 2e-3  # tree, batched and reuse agree
    assert r["tau_full"] == 1.0
    assert r["n_coalitions_full"] == 2**n and r["n_coalitions_loo"] == n + 1
    assert r["n_coalitions_maxshapley_minilm"] == 0 and r["n_tokens_maxshapley_minilm"] == 0
    assert r["n_coalitions_maxshapley_lm"] == n * 2 + 2  # both smoke questions have m = 2 hops
    assert r["budget_kernelshap"] == [8, 16] and r["n_coalitions_kernelshap"] == [8, 16]
    assert r["n_tokens_kernelshap"][-1] == r["n_tokens_full"]  # every coalition once
    assert r["chance_jaccard"] == pytest.approx(random_jaccard(4, 2), abs=1e-12)
    for key in ("jaccard_full", "jaccard_loo", "jaccard_maxshapley_lm", "jaccard_maxshapley_minilm"):
        low, high = r[key + "_ci"]
        assert 0 <= low <= r[key] <= high <= 1
    # directions the notebook claims: MaxShapley and the tree cost fewer tokens, budgets buy coalitions
    assert r["n_tokens_maxshapley_lm"] < r["n_tokens_full"]
    assert r["token_share_maxshapley_lm"] == pytest.approx(r["n_tokens_maxshapley_lm"] / r["n_tokens_full"])
    assert r["tokens_run_full_per_query"] < r["n_tokens_full"]
    for m in ("mc", "mc_antithetic", "kernelshap"):
        assert r[f"n_coalitions_{m}"] == sorted(r[f"n_coalitions_{m}"])
        assert all(c <= 2**n for c in r[f"n_coalitions_{m}"])
    # values from the reference smoke run (2 MuSiQue questions, 4 sources, SmolLM2-135M float32, seed 0)
    assert r["n_tokens_full"] == 5241 and r["n_tokens_maxshapley_lm"] == 1717  # tokenizer: exact
    assert r["jaccard_full"] == pytest.approx(2 / 3, abs=1e-9)
    assert r["jaccard_maxshapley_lm"] == 1.0 and r["jaccard_maxshapley_minilm"] == 1.0
    assert r["tau_maxshapley_lm"] == pytest.approx(0.790, abs=0.02)
    assert r["tau_loo"] == pytest.approx(2 / 3, abs=1e-9)
    figures = {p.stem for p in (out / "figures" / "11_maxshapley").glob("*.png")}
    assert figures == {"attribution_vs_cost"}
    tables = {p.name for p in (out / "results" / "11_maxshapley").iterdir()}
    assert {
        "attribution_vs_cost.csv",
        "attribution_vs_cost.json",
        "per_query.csv",
        "headline.csv",
        "scorer_timing.csv",
    } <= tables
