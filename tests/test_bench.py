"""scp.bench plumbing: rotated repeats, time-to-RMSE interpolation, BENCHMARKS.md regeneration, dispatch."""

import json
import math

import pytest
import torch

from scp.bench import accuracy, cli, common, gpu, report


def test_timed_rounds_rotates_the_order_and_warms_up():
    seen = []
    calls = {name: (lambda r, name=name: seen.append((name, r)) or r) for name in "abc"}
    times, outputs = common.timed_rounds(calls, 3, min_seconds=0.0)
    assert seen[:3] == [("a", -1), ("b", -1), ("c", -1)]  # one untimed warm-up each
    assert [name for name, _ in seen[3:]] == list("abcbcacab")
    assert outputs["b"] == [0, 1, 2] and all(len(t) == 3 for t in times.values())
    # a call much shorter than min_seconds is repeated back to back inside one measurement (time per call kept)
    count = []
    times, outputs = common.timed_rounds({"fast": lambda r: count.append(r) or r}, 2, min_seconds=0.01)
    assert len(count) > 3 and outputs["fast"] == [0, 1] and max(times["fast"]) < 0.01

    # a method that refuses (e.g. a budget below its minimum) is left out and named, or raises when not asked
    def refuse(r):
        raise ValueError("budget too small")

    failures = {}
    times, _ = common.timed_rounds({"ok": lambda r: r, "no": refuse}, 2, min_seconds=0.0, failures=failures)
    assert list(times) == ["ok"] and failures == {"no": "ValueError: budget too small"}
    with pytest.raises(ValueError, match="budget"):
        common.timed_rounds({"no": refuse}, 1)
    assert common.spread([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "repeats": 3}


def curve(points):
    return [{"seconds": {"median": t}, "rmse": r} for t, r in points]


def test_time_to_rmse_interpolates_in_log_log_and_ratios_pick_the_best_of_each_family():
    pts = curve([(1.0, 1e-2), (4.0, 5e-3), (16.0, 2.5e-3)])
    assert accuracy.time_to(pts, 1e-2) == 1.0 and accuracy.time_to(pts, 2e-2) == 1.0
    assert accuracy.time_to(pts, math.sqrt(1e-2 * 5e-3)) == pytest.approx(2.0)
    assert accuracy.time_to(pts, 1e-3) is None
    assert accuracy.time_to(curve([(1.0, 1e-2), (2.0, 2e-2), (4.0, 4e-3)]), 1e-2) == 1.0  # made monotone
    curves = {
        "ours: a": curve([(1.0, 1e-2), (2.0, 5e-3)]),
        "ours: b": curve([(3.0, 1e-2)]),
        "shapiq X": curve([(10.0, 1e-2), (40.0, 5e-3)]),
        "shapiq Y": curve([(5.0, 2e-2)]),
    }
    rows = accuracy.time_to_rmse_ratios(curves)
    assert [r["rmse"] for r in rows] == [5e-3, 1e-2, 2e-2]
    assert rows[0]["ours"] == "ours: a" and rows[0]["peer"] == "shapiq X" and rows[0]["ratio"] == pytest.approx(20)
    assert rows[2]["peer"] == "shapiq Y" and rows[2]["ratio"] == pytest.approx(5.0)
    h = accuracy.headline({"ratios": {"41": rows}}, "41")
    assert h["at_hardest"]["rmse"] == 5e-3 and h["min_ratio"] == pytest.approx(5.0)


def test_accuracy_verdicts_name_each_curve_and_its_target():
    """Every curve gets its headline; a curve with a target says met or by how much it is missed."""
    ours, peer = curve([(1.0, 1e-2)]), curve([(2.5, 1e-2)])
    for pts in (ours, peer):
        pts[0] |= {"m": 10, "budget": 420, "topk_overlap": 1.0, "seconds": common.spread([pts[0]["seconds"]["median"]])}
    label = "paper network (trained), n = 41"
    result = {
        "curves": {label: {"ours: a": ours, "shapiq X": peer}, "100": {"ours: a": ours, "shapiq X": peer}},
        "reference_rms_se": {label: 0.0, "100": 0.0},
    }
    result["ratios"] = {k: accuracy.time_to_rmse_ratios(c) for k, c in result["curves"].items()}
    text = accuracy.format_accuracy(result)
    assert accuracy.TARGETS[label] == 2.0 and "2.5× faster" in text
    assert f"**{label}: at RMSE 1.00e-02" in text and "target ≥ 2×: met" in text
    assert "**n = 100: at RMSE" in text and text.count("target ≥") == 1  # a curve keyed by n alone: no target
    result["ratios"][label][0]["ratio"] = 1.6
    assert "target ≥ 2×: missed by 1.25×" in accuracy.format_accuracy(result)
    assert accuracy.units_of(label) == 41 and accuracy.units_of("100") == 100


def test_report_regenerates_marked_blocks_from_json(tmp_path):
    env = {"cpu": "test cpu", "threads": 1, "quick": True, "torch": "x", "logical_cores": 2, "date": "today"}
    (tmp_path / "prefix.json").write_text(
        json.dumps(
            {
                "env": env,
                "m": 50,
                "threshold_in_code": 64,
                "crossover": {"net": 64},
                "rows": [
                    {
                        "net": "net",
                        "n": 64,
                        "gemm": common.spread([0.002]),
                        "cumsum": common.spread([0.001]),
                        "max_abs_difference": 1e-7,
                    }
                ],
            }
        )
    )
    doc = tmp_path / "BENCHMARKS.md"
    blocks = "".join(
        f"<!-- bench:{k} -->\nold\n<!-- /bench:{k} -->\n" for k in ["environment", *report.SECTIONS, "endtoend", "gpu"]
    )
    doc.write_text("# Benchmarks\n" + blocks + "tail\n")
    report.report(tmp_path, doc)
    text = doc.read_text()
    assert "| net | 64 | 2.00 [2.00, 2.00] | 1.00 [1.00, 1.00] | 2.00 | 1.0e-07 |" in text
    assert "_not run yet: `python -m scp.bench long`" in text and "old" in text  # endtoend.json absent: kept
    assert "| prefix | test cpu | 2 |" in text and text.endswith("tail\n")
    assert "_The GPU check has not run on a GPU yet" in text and "scripts/gpu_check.sh" in text
    doc.write_text("no markers")
    with pytest.raises(ValueError, match="bench:estimator"):
        report.report(tmp_path, doc)


def test_endtoend_dispatches_to_bench_e2e(monkeypatch):
    from scp.bench import e2e as bench_e2e

    got = []
    monkeypatch.setattr(bench_e2e, "main", lambda argv: got.append(argv) or 0)
    assert cli.main(["endtoend", "--quick", "--threads", "1"]) == 0
    assert got == [["--quick", "--threads", "1"]]


def test_gpu_dry_run_runs_every_section_and_checks_equality(tmp_path, capsys, monkeypatch):
    """The GPU check's plumbing on the CPU: every section, the equality check, the JSON's structure; never gpu.json."""
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", torch.backends.cuda.matmul.allow_tf32)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", torch.backends.cudnn.allow_tf32)
    code = cli.main(["gpu", "--dry-run", "--out", str(tmp_path)])
    assert not (tmp_path / "gpu.json").exists()
    result = json.loads((tmp_path / "gpu_dry_run.json").read_text())
    assert result["dry_run"] is True and "DRY RUN" in result["note"]
    assert result["devices"] == {"cpu": "cpu", "device": "cpu"}
    eq = result["equality"]
    assert result["passed"] and eq["passed"] and "1e-05" in eq["tolerance"]
    assert all(r["max_abs_diff_device_vs_cpu"] <= r["atol"] for r in eq["rows"])
    assert {"cpu", "device"} <= set(result["matmul"]) and result["matmul"]["device"]["rho_layer"][
        "flops_per_second"
    ] > 0
    rows = result["throughput"]
    assert [(r["n"], r["m"]) for r in rows] == [(10, 5), (10, 20), (41, 5), (41, 20)]
    assert all(r["cpu"]["contexts_per_second"] > 0 and r["ratio"] > 0 for r in rows)
    assert result["training"]["cpu"]["epoch_seconds"] > 0 and result["training"]["ratio"] > 0
    # the reader either measured tokens/s or says why it could not: never silently absent
    assert "reader" in result or "reader" in result["errors"]
    assert code == (0 if not result["errors"] else 3)
    text = gpu.format_gpu(result)
    assert text.startswith("**DRY RUN") and "| 41 | 20 | gemm |" in text
    with pytest.raises(ValueError, match="dry run never writes"):
        gpu.gpu(out_dir=common.RESULTS, dry_run=True)


def test_gpu_check_without_cuda_says_so_in_one_line(capsys):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert cli.main(["gpu"]) == 1
    err = capsys.readouterr().err.strip()
    assert "no CUDA device" in err and "\n" not in err


def test_structural_and_certify_write_their_json_and_report_renders_them(tmp_path, monkeypatch):
    """`python -m scp.bench structural|certify` write results/bench/NAME.json with the environment (their
    measurements stubbed here: tests/test_bench_structural.py and test_bench_certify.py check those), and
    `report` renders both sections from them."""
    from scp.bench import certify, structural

    seen = {}

    def fake_structural(contexts, m, replicates, setups):
        seen["structural"] = (contexts, m, replicates, setups)
        names = list(structural.ESTIMATORS)
        vr, tr = {k: [1.0] for k in names}, dict.fromkeys(names, 1.0)
        return {
            s: {"variance_reduction": vr, "time_ratio": tr | {structural.OWN_PLAIN: 1.0, "plain MC seconds": 1e-3}}
            for s in setups
        }

    def fake_certify(n_contexts=100, repeats=3, keeps=(0.3, 0.5), tolerances=(0.0, 0.01), m_ref=4000, **_):
        seen["certify"] = (n_contexts, repeats, tuple(keeps), tuple(tolerances), m_ref)
        row = {
            "keep": 0.5,
            "tolerance": 0.01,
            "rule": "engine, student",
            "rigorous": False,
            "certified": 9,
            "median_evaluations": 400.0,
            "median_m": 10.0,
            "agree": 9,
            "eps_correct": 9,
            "seconds": common.spread([1.0]),
        }
        return {
            "contexts": 10,
            "n_units": {"min": 20, "median": 41, "max": 60},
            "delta": 0.05,
            "max_permutations": 1000,
            "m_ref": m_ref,
            "ref_seed": 1,
            "ref_rms_se_median": 1e-3,
            "ref_boundary_gap_median": 1e-2,
            "ref_seconds": 1.0,
            "threads": 1,
            "rows": [row],
        }

    monkeypatch.setattr(structural, "measure", fake_structural)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # certify() pins one thread: not this process
    monkeypatch.setattr(certify, "measure", fake_certify)
    structural.structural(quick=True, out_dir=tmp_path)
    certify.certify(quick=True, out_dir=tmp_path)
    assert seen["structural"] == (3, 50, 8, structural.SETUPS[:1]) and seen["certify"] == (10, 1, (0.5,), (0.01,), 500)
    for name in ("structural", "certify"):
        saved = json.loads((tmp_path / f"{name}.json").read_text())
        assert saved["env"]["quick"] is True and saved["env"]["threads"] >= 1
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text(
        "".join(f"<!-- bench:{k} -->\n<!-- /bench:{k} -->\n" for k in ["environment", *report.SECTIONS, "gpu"])
    )
    report.report(tmp_path, doc)
    text = doc.read_text()
    assert "shipped network, n = 41: M = 50, 1 contexts × 8 replicates" in text and "— missed: 2.00× the target" in text
    assert "| ⌈0.5·n⌉ | 0.01 | engine, student | no | 9/10 (90%) | 400 |" in text
    assert "| structural |" in text and "| certify |" in text  # the environment table names both


def test_training_bench_times_both_modes_on_the_same_batches_and_compares_seeds():
    """scp.bench.training on toy contexts of unequal length: both modes timed on every batch, the padding share of
    those batches, per-seed AUCs of both modes, and the table the report prints."""
    from scp.bench import training as bench_training
    from scp.data.embedders import RandomEmbedder
    from scp.data.features import build_contexts
    from scp.models.config import TrainConfig

    units = [[f"sentence {j} of context {i}" for j in range(3 + i % 4)] for i in range(20)]
    labels = [[1] + [0] * (len(u) - 1) for u in units]
    ctx = build_contexts([f"query {i}" for i in range(20)], units, RandomEmbedder(16), (), labels_list=labels)
    config = TrainConfig(
        embedder="random", hidden=8, latent=4, epochs=1, batch_size=4, n_permutations=4, eval_permutations=4
    )
    steps = bench_training.step_times(config, ctx[:16], 3)
    assert steps["padded"]["repeats"] == steps["grouped"]["repeats"] == 3
    assert steps["padded_over_grouped"] == steps["padded"]["median"] / steps["grouped"]["median"]
    assert 0 < steps["padding_share"] < 1  # lengths 3..6 in batches of 4
    rows = bench_training.seed_aucs(config, ctx[:16], ctx[16:], [0, 1], "random")
    assert [(r["seed"], r["mode"]) for r in rows] == [(0, "padded"), (0, "grouped"), (1, "padded"), (1, "grouped")]
    summary = bench_training.auc_summary(rows)
    assert summary["difference"] == pytest.approx(summary["grouped"]["mean"] - summary["padded"]["mean"])
    text = bench_training.format_training({"n_train": 16, "steps": {"toy": steps}, "aucs": rows, "summary": summary})
    assert "| toy |" in text and "grouped − padded mean" in text


def test_reader_table_and_bfloat16_effect_come_from_the_rows():
    from scp.bench import reader

    def row(dtype, threads, answers, logprob, read_s):
        return {
            "dtype": dtype,
            "threads": threads,
            "dataset": "hotpotqa",
            "context": "full",
            "prompt_tokens": 700.0,
            "prefill_s": 2.0,
            "prefill_tokens_per_s": 350.0,
            "read_s": read_s,
            "decode_s": read_s - 2.0,
            "answers": answers,
            "logprob": logprob,
        }

    rows = [row("float32", 1, ["a", "b"], [-1.0, -2.0], 2.5), row("bfloat16", 1, ["a", "c"], [-1.5, -2.1], 1.2)]
    effect = reader.bf16_effect(rows)
    assert effect["answers_changed"] == 1 and effect["answers"] == 2
    assert effect["logprob_abs_diff_max"] == pytest.approx(0.5) and effect["logprob_abs_diff_median"] == pytest.approx(
        0.3
    )
    text = reader.format_reader(
        {"questions": 2, "max_new_tokens": 16, "batch_size": 8, "rows": rows, "bfloat16": effect}
    )
    assert "| float32 | 1 | hotpotqa | full | 700 | 2.00 | 350 | 2.50 | 0.50 |" in text
    assert "1 of 2 greedy answers change" in text
    assert reader.bf16_effect(rows[:1]) == {}
