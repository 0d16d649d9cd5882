"""scp.experiments.reranking: one evaluation per method with n/a records, table rows, curves and paired differences."""

import math
from pathlib import Path

import numpy as np
import pytest

from scp.data.datasets import Example
from scp.errors import ModelUnavailableError
from scp.experiments import reranking
from scp.experiments.reranking import (
    ci_text,
    evaluate_method,
    keep_ratio_rows,
    load_test_split,
    metric_matrix,
    paired_rows,
    per_dataset_config,
    summary_row,
    verdict,
)
from scp.models.config import config_from_preset
from scp.training.runs import run_name

ROOT = Path(__file__).resolve().parents[1]


def toy_examples():
    units = [
        "paris is the capital of france",
        "the eiffel tower is in paris",
        "bananas are yellow",
        "the moon orbits the earth",
    ]
    return [
        Example(
            id=f"q{i}",
            query="what is the capital of france",
            units=tuple(units),
            labels=(1, 0, 0, 0) if i < 3 else (0, 0, 0, 0),
            titles=("",) * 4,
            paragraph_ids=(0, 1, 2, 3),
            answers=("paris",),
            dataset="toy",
            granularity="sentence",
        )
        for i in range(4)
    ]


def test_baseline_record_rows_and_curves():
    ex = toy_examples()
    res = evaluate_method(ex, "bm25", keep_ratios=(0.25, 1.0), n_boot=50)
    assert res["method"] == "bm25" and res["status"] == "ok"
    row = summary_row(res, keep_ratio=0.25)
    assert row["auc"] == pytest.approx(1.0) and row["recall"] == pytest.approx(1.0)  # BM25 puts the answer first
    assert row["n_test"] == 4 and row["n_used"] == 3 and row["n_excluded"] == 1  # q3 has no positive
    recall = metric_matrix(res, "recall", (0.25, 1.0))
    assert recall.shape == (2, 4) and np.isnan(recall[:, 3]).all() and (recall[1, :3] == 1).all()
    assert (metric_matrix(res, "keep_rate", (0.25,)) == 0.25).all()
    rows = keep_ratio_rows(res, (0.25, 1.0))
    assert [r["keep_ratio"] for r in rows] == [0.25, 1.0] and rows[1]["compression"] == pytest.approx(0.0)
    assert rows[0]["auc"] == rows[1]["auc"] == row["auc"]


def test_unavailable_model_gives_an_na_record(monkeypatch):
    def offline(*args, **kwargs):
        raise ModelUnavailableError("naver/provence-reranker-debertav3-v1 is not available offline")

    monkeypatch.setattr(reranking, "make_ranker", offline)
    res = evaluate_method(toy_examples(), "provence")
    assert res["status"] == "n/a" and res["method"] == "provence" and "offline" in res["reason"]
    row = summary_row(res)
    assert row["status"] == "n/a" and row["auc"] is None and "offline" in row["reason"]


def test_bad_calls_are_errors():
    with pytest.raises(ValueError, match="unknown method"):
        evaluate_method(toy_examples(), "bm26")
    with pytest.raises(ValueError, match="checkpoints"):
        evaluate_method(toy_examples(), "scp-loo")
    with pytest.raises(ValueError, match="no examples"):
        evaluate_method([], "bm25")


def test_paired_rows_identities():
    ex = toy_examples()
    results = {m: evaluate_method(ex, m, n_boot=50) for m in ("bm25", "random")}
    results["provence"] = {"method": "provence", "status": "n/a", "reason": "offline"}
    (row, na) = paired_rows(results, [("bm25", "random"), ("bm25", "provence")], n_boot=50)
    means = {m: np.nanmean([r["auc"] for r in results[m]["per_example"]]) for m in ("bm25", "random")}
    assert row["difference"] == pytest.approx(means["bm25"] - means["random"]) and row["n_used"] == 3
    assert row["ci_low"] <= row["difference"] <= row["ci_high"]
    assert na["status"] == "n/a" and na["verdict"] == "n/a" and na["difference"] is None
    other = evaluate_method(ex[:3], "random", n_boot=50)
    with pytest.raises(ValueError, match="different examples"):
        paired_rows({"bm25": results["bm25"], "random": other}, [("bm25", "random")])


def test_ci_text():
    assert ci_text(0.9051, 0.8834, 0.92555) == "0.905 [0.883, 0.926]"
    assert ci_text(0.036, -0.018, 0.053, signed=True) == "+0.036 [-0.018, +0.053]" and ci_text(None, 0, 1) == "n/a"


def test_verdict():
    assert verdict(0.01, 0.05) == "A above B" and verdict(-0.05, -0.01) == "A below B"
    assert verdict(-0.01, 0.02) == "tie" and verdict(None, 0.1) == "n/a" and verdict(math.nan, 0.1) == "n/a"


def test_per_dataset_config_is_the_shared_recipe():
    config = per_dataset_config("pointwise", "fever", epochs=1)
    assert config == config_from_preset("pointwise", datasets=("fever",), val_dataset="fever", epochs=1)
    assert run_name(config) == run_name(
        config_from_preset("pointwise", datasets=("fever",), val_dataset="fever", epochs=1)
    )


def test_load_test_split_musique_granularities(data_dir):
    sentences, paragraphs = load_test_split("musique", "sentence"), load_test_split("musique", "paragraph")
    assert [e.id for e in sentences] == [e.id for e in paragraphs] and len(paragraphs) > 0
    assert all(e.n_units == 20 for e in paragraphs) and sum(e.n_units for e in sentences) > 20 * len(sentences)
    assert len(load_test_split("hotpotqa", limit=3)) == 3


@pytest.mark.slow
def test_scp_and_loo_with_the_shipped_model(data_dir):
    ex = load_test_split("hotpotqa", limit=3)
    ckpt = {"best": ROOT / "models" / "scp-hotpotqa-best.safetensors"}
    scp = evaluate_method(ex, "scp", ckpt, n_permutations=8, n_boot=50)
    loo = evaluate_method(ex, "scp-loo", ckpt, n_boot=50)
    assert scp["status"] == loo["status"] == "ok" and scp["method"] == "scp" and loo["method"] == "scp-loo"
    assert 0.5 < summary_row(scp)["auc"] <= 1 and 0.5 < summary_row(loo)["auc"] <= 1
