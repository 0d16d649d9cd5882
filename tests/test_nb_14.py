"""Notebook 14 (attribution judged by the reader: SCP against ContextCite), run with its smoke parameters."""

import numpy as np
import pandas as pd
import pytest

from scp.suite.notebook import read_records

NAME = "14_attribution_against_contextcite"
NO_READER = ["scp", "scp-loo", "pointwise", "bm25", "cosine", "random"]


@pytest.mark.slow
def test_14_attribution_against_contextcite(smoke_run):
    executed, out = smoke_run(NAME)
    r = read_records(executed)
    n = r["units_per_context"]
    assert r["n_examples"] == 2 and r["methods"] == [*NO_READER, "contextcite-32", "contextcite-64", "loo"]
    # identities: each method's own reader calls are what its definition says
    for m in NO_READER:
        assert r[f"{m.replace('-', '_')}_cost"]["reader_calls"] == 0
    assert r["contextcite_32_cost"]["reader_calls"] == 32 and r["contextcite_64_cost"]["reader_calls"] == 64
    assert r["loo_cost"]["reader_calls"] == n + 1  # leave-one-out on the reader: f(U) and f(U \ {i}) for each i
    for m in r["methods"]:
        for metric, (mean, low, high) in r[f"{m.replace('-', '_')}_metrics"].items():
            assert low <= mean <= high, (m, metric)
            if metric == "auc":
                assert 0 <= low and high <= 1
            if metric == "lds":
                assert -1 <= low and high <= 1
    per = pd.read_csv(out / "results" / NAME / "per_example.csv")
    drop1 = per.pivot(index="example", columns="method", values="drop@1")
    # leave-one-out on the reader removes, by definition, the unit whose removal drops log P(a*) most
    assert (drop1["loo"].to_numpy()[:, None] >= drop1.to_numpy() - 1e-4).all()  # float rounding of two prefix trees
    # scp.core.metrics.paired_difference: the paired mean is the difference of the two means
    for m in ("contextcite-64", "bm25"):
        for metric in ("auc", "drop@2"):
            diff = r[f"scp_minus_{m.replace('-', '_')}"][metric][0]
            assert diff == pytest.approx(r["scp_metrics"][metric][0] - r[f"{m.replace('-', '_')}_metrics"][metric][0])
    # ContextCite's 32-ablation cost is half its 64-ablation run (one run; masks scored one at a time)
    assert r["contextcite_32_cost"]["seconds"] == pytest.approx(r["contextcite_64_cost"]["seconds"] / 2)
    # values of the reference smoke run (2 HotpotQA test examples cut to 6 units, SmolLM2-135M float32, seed 0)
    assert n == 6.0
    assert r["scp_metrics"]["auc"][0] == pytest.approx(0.826, abs=0.01)
    assert r["contextcite_64_metrics"]["lds"][0] == pytest.approx(0.800, abs=0.05)
    assert r["loo_metrics"]["drop@1"][0] == pytest.approx(6.120, abs=0.05)
    assert np.isfinite(r["seconds_reader"]) and r["seconds_per_reader_call"]["ContextCite"] > 0
    assert {p.stem for p in (out / "figures" / NAME).glob("*.png")} == {"metrics_by_method"}
    tables = {p.name for p in (out / "results" / NAME).iterdir()}
    assert {f"{t}.{x}" for t in ("per_example", "summary", "paired") for x in ("csv", "json")} <= tables
