"""The evaluation entry point, from Python and from the command line."""

import gzip
import json
import subprocess
import sys

import pytest

from scp.pruning.evaluation import format_result, run_eval


def test_bm25_on_hotpotqa_records_metrics(tmp_path, data_dir):
    out = tmp_path / "bm25.json"
    res = run_eval("hotpotqa", "bm25", split="all", limit=40, units="title", out=str(out))
    assert res["status"] == "ok" and res["n_examples"] == 40 and res["units"] == "title"
    assert 0.7 < res["auc"]["mean"] < 0.98  # BM25 is a strong baseline on HotpotQA
    assert res["auc"]["ci"][0] <= res["auc"]["mean"] <= res["auc"]["ci"][1]
    assert 0 < res["compression@0.5"]["mean"] < 1 and 0.45 < res["keep_rate@0.5"]["mean"] < 0.6
    assert set(res["by_type"]) == {"bridge", "comparison"}
    assert json.loads(out.read_text())["per_example"][0]["id"] == res["per_example"][0]["id"]
    assert "AUC" in format_result(res)


def test_random_is_near_half_and_deterministic(data_dir):
    a = run_eval("hotpotqa", "random", split="all", limit=200)
    b = run_eval("hotpotqa", "random", split="all", limit=200)
    assert abs(a["auc"]["mean"] - 0.5) < 0.04 and a["auc"]["mean"] == b["auc"]["mean"]


def test_examples_without_positives_are_excluded_and_counted(data_dir):
    res = run_eval("msmarco", "bm25", split="all")
    assert res["auc"]["n_excluded"] == 11 and res["auc"]["n_used"] == 189


def test_unavailable_model_is_recorded_as_na(data_dir, monkeypatch):
    from scp.errors import ModelUnavailableError
    from scp.pruning import evaluation as evaluate

    def unavailable(*args, **kwargs):
        raise ModelUnavailableError("cross-encoder/ms-marco-MiniLM-L6-v2 is not available offline")

    monkeypatch.setattr(evaluate, "make_ranker", unavailable)
    res = run_eval("hotpotqa", "cross-encoder", split="all", limit=5)
    assert res["status"] == "n/a" and "offline" in res["reason"] and "n/a" in format_result(res)


def test_cli_accepts_a_file_in_the_original_layout(tmp_path, data_dir):
    src = data_dir / "hotpotqa" / "hotpotqa_dev_distractor.jsonl.gz"
    small = tmp_path / "my_hotpot.jsonl.gz"
    with gzip.open(src, "rt") as f, gzip.open(small, "wt") as g:
        for _, line in zip(range(12), f):
            g.write(line)
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "scp",
            "eval",
            "--dataset",
            "hotpotqa",
            "--method",
            "bm25",
            "--data",
            str(small),
            "--split",
            "all",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "bm25 on hotpotqa/all" in proc.stdout and json.loads(out.read_text())["n_examples"] == 12
    bad = subprocess.run(
        [sys.executable, "-m", "scp", "eval", "--dataset", "hotpotqa", "--method", "scp", "--data", str(small)],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "checkpoint" in bad.stderr and "Traceback" not in bad.stderr
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "scp",
            "eval",
            "--dataset",
            "hotpotqa",
            "--method",
            "bm25",
            "--data",
            str(tmp_path / "nope.jsonl"),
        ],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "neither a data file" in missing.stderr


def test_unknown_method_is_a_clear_error(data_dir):
    with pytest.raises(ValueError, match="unknown method"):
        run_eval("hotpotqa", "bm99", split="all", limit=3)


def test_train_cli_then_eval_scp_and_scp_loo(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv("SCP_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "scp",
            "train",
            "--preset",
            "best",
            "--embedder",
            "random",
            "--out",
            str(out),
            "--epochs",
            "1",
            "--hidden",
            "16",
            "--latent",
            "8",
            "--permutations",
            "4",
            "--max-train-examples",
            "48",
            "--quiet",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "best.safetensors").is_file() and (out / "last.safetensors").is_file()
    assert "best validation AUC" in proc.stdout
    for method in ("scp", "scp-loo"):
        res = run_eval(
            "hotpotqa", method, split="test", limit=6, checkpoint=str(out / "best.safetensors"), n_permutations=4
        )
        assert res["status"] == "ok" and res["units"] == "title" and res["n_examples"] == 6
        assert 0.0 <= res["auc"]["mean"] <= 1.0


def test_seed_records_pair_examples_and_seeds():
    from scp.pruning.evaluation import over_seed_records, paired_over_seed_records

    def record(aucs):
        return {"per_example": [{"id": f"e{k}", "auc": a} for k, a in enumerate(aucs)]}

    a = [record([0.9, 0.8, 0.7]), record([0.92, 0.82, 0.72])]
    b = [record([0.8, 0.8, 0.6]), record([0.8, 0.8, 0.6])]
    row = over_seed_records(a, n_boot=200)
    assert row["n_seeds"] == 2 and row["n_test"] == 3 and abs(row["test_auc"] - 0.81) < 1e-12
    assert row["test_auc_ci_seeds_low"] < 0.81 < row["test_auc_ci_seeds_high"] and row["test_auc_sd_seeds"] > 0
    diff = paired_over_seed_records(a, b, n_boot=200)
    assert diff["difference"] == pytest.approx(0.81 - 0.7333333333333)
    assert diff["difference_ci_seeds_low"] < diff["difference"] < diff["difference_ci_seeds_high"]
    with pytest.raises(ValueError, match="same examples"):
        over_seed_records([a[0], {"per_example": [{"id": "x", "auc": 1.0}] * 3}])
