"""The command line on bad input: exit code 2 and one line naming the problem, never a traceback."""

import gzip
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from scp.cli import main

SHIPPED = "models/scp-hotpotqa-best.safetensors"


@pytest.fixture(scope="module")
def files(tmp_path_factory, data_dir):
    d = tmp_path_factory.mktemp("bad")
    shipped = open(SHIPPED, "rb").read()
    (d / "truncated.safetensors").write_bytes(shipped[: len(shipped) // 2])
    (d / "empty.safetensors").write_bytes(b"")
    (d / "random.safetensors").write_bytes(np.random.default_rng(0).bytes(4096))
    flipped = bytearray(shipped)
    flipped[len(flipped) // 2 : len(flipped) // 2 + 64] = bytes(b ^ 0xFF for b in flipped[len(flipped) // 2 :][:64])
    (d / "flipped.safetensors").write_bytes(bytes(flipped))
    (d / "notgzip.jsonl.gz").write_text('{"_id": "x"}\n')
    src = gzip.open(data_dir / "hotpotqa" / "hotpotqa_dev_distractor.jsonl.gz").read()
    packed = gzip.compress(src[:200_000])
    (d / "truncated.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    (d / "layout.jsonl").write_text(json.dumps({"question": "q", "answer": "a"}) + "\n")
    (d / "notjson.jsonl").write_text(src.decode().splitlines()[0] + "\n{not json\n")
    (d / "twice.jsonl").write_text(src.decode().splitlines()[0] + "\n" + src.decode().splitlines()[0] + "\n")
    (d / "a_file").write_text("x")
    (d / "run").mkdir()
    (d / "run" / "last.safetensors").write_bytes(shipped[:1000])
    (d / "empty_run").mkdir()
    (d / "records.jsonl").write_text(
        json.dumps({"question": "Who left?", "sentences": ["Ann is here.", "Bob left."]}) + "\n"
    )
    (d / "notes.txt").write_text("my notes\nthe last line has no newline")  # a user's file, not an scp prune output
    return d


EVAL = ["eval", "--dataset", "hotpotqa", "--method", "bm25"]
SCP = ["eval", "--dataset", "hotpotqa", "--method", "scp", "--limit", "2", "--checkpoint"]
TRAIN = ["train", "--embedder", "random", "--max-train-examples", "8", "--epochs", "1", "--quiet", "--out"]

CASES = [  # (id, argv with {d} for the temporary folder, words the message must contain, extra environment)
    ("limit 0", EVAL + ["--limit", "0"], "--limit: must be an integer ≥ 1", {}),
    ("limit -1", EVAL + ["--limit", "-1"], "--limit: must be an integer ≥ 1", {}),
    ("truncated checkpoint", SCP + ["{d}/truncated.safetensors"], "truncated.safetensors cannot be read", {}),
    ("empty checkpoint", SCP + ["{d}/empty.safetensors"], "empty.safetensors is empty", {}),
    ("random-byte checkpoint", SCP + ["{d}/random.safetensors"], "random.safetensors cannot be read", {}),
    ("flipped checkpoint", SCP + ["{d}/flipped.safetensors"], "flipped.safetensors", {}),
    ("missing checkpoint", SCP + ["{d}/nope.safetensors"], "no checkpoint at", {}),
    ("resume, no checkpoint", TRAIN + ["{d}/empty_run", "--resume"], "--resume: no checkpoint", {}),
    ("resume, truncated last.safetensors", TRAIN + ["{d}/run", "--resume"], "last.safetensors cannot be read", {}),
    ("non-gzip .gz", EVAL + ["--data", "{d}/notgzip.jsonl.gz"], "notgzip.jsonl.gz: not a valid gzip file", {}),
    ("truncated .jsonl.gz", EVAL + ["--data", "{d}/truncated.jsonl.gz"], "truncated.jsonl.gz: truncated", {}),
    ("wrong layout", EVAL + ["--data", "{d}/layout.jsonl"], "layout.jsonl line 1: not in the HotpotQA layout", {}),
    ("not JSON", EVAL + ["--data", "{d}/notjson.jsonl"], "notjson.jsonl line 2: not valid JSON", {}),
    (
        "cache dir is a file",
        ["eval", "--dataset", "hotpotqa", "--method", "cosine", "--limit", "2"],
        "must be a directory",
        {"SCP_CACHE_DIR": "{d}/a_file"},
    ),
    ("train --out is a file", TRAIN + ["{d}/a_file"], "is a file", {}),
    ("eval --out is a folder", EVAL + ["--limit", "2", "--out", "{d}/empty_run"], "is a directory", {}),
    ("scp without checkpoint", ["eval", "--dataset", "hotpotqa", "--method", "scp"], "needs --checkpoint", {}),
    ("unknown dataset", ["eval", "--dataset", "squad", "--method", "bm25"], "unknown dataset", {}),
    ("unknown method", ["eval", "--dataset", "hotpotqa", "--method", "bm99"], "unknown method", {}),
    ("keep ratio 1.5", EVAL + ["--keep", "1.5"], "keep ratios", {}),
    ("M = 0", TRAIN + ["{d}/x", "--permutations", "0"], "--permutations: must be an integer ≥ 1", {}),
    ("bad split", EVAL + ["--split", "dev"], "invalid choice: 'dev'", {}),
    ("train margin inf", TRAIN + ["{d}/x", "--margin", "inf"], "margin, lr and weight_decay must be finite", {}),
    (
        "train --data, two datasets",
        TRAIN + ["{d}/x", "--datasets", "hotpotqa", "msmarco", "--data", "{d}/layout.jsonl"],
        "--data / data_path names the data of one dataset",
        {},
    ),
    # scp run: every bad input is refused before a kernel starts
    ("run, no names", ["run"], "scp run: error: name the notebooks to run, or all", {}),
    ("run, unknown notebook", ["run", "99_nope"], "no notebook notebooks/99_nope.ipynb (known notebooks: 00_", {}),
    ("run -p without =", ["run", "00_cooperative_games_tutorial", "-p", "n_players"], "-p expects key=value", {}),
    (
        "run -p bad YAML",
        ["run", "00_cooperative_games_tutorial", "-p", "budgets=[1"],
        "cannot read '[1' as a value",
        {},
    ),
    (
        "run -p unknown key",
        ["run", "00_cooperative_games_tutorial", "-p", "n_playerz=3"],
        "-p: unknown parameter 'n_playerz' for notebook 00_cooperative_games_tutorial",
        {},
    ),
    (
        "run -p wrong type",
        ["run", "00_cooperative_games_tutorial", "--smoke", "-p", "n_players=abc"],
        "-p: parameter n_players of notebook 00_cooperative_games_tutorial expects an integer (its default is 10); "
        "got 'abc' (str)",
        {},
    ),
    ("run -p float for int", ["run", "00_cooperative_games_tutorial", "-p", "n_repeats=2.5"], "expects an integer", {}),
    (
        "run -p list of str",
        ["run", "00_cooperative_games_tutorial", "-p", "budgets=[10, x]"],
        "expects a list of integers",
        {},
    ),
    ("run -p out_dir", ["run", "00_cooperative_games_tutorial", "-p", "out_dir=/tmp"], "set by the runner", {}),
    ("run, all, wrong type", ["run", "all", "--smoke", "-p", "seed=x"], "parameter seed of notebook 00_", {}),
    ("run --out is a file", ["run", "00_cooperative_games_tutorial", "--out", "{d}/a_file"], "is a file", {}),
    # issue 17: options that used to be ignored silently (see tests/test_silent_failures.py)
    (
        "S3 --checkpoint with bm25",
        EVAL + ["--checkpoint", "{d}/nope.safetensors"],
        "--checkpoint only applies to the methods that use one (scp, scp-loo, pointwise); method 'bm25' does not read",
        {},
    ),
    ("S4 an example twice", EVAL + ["--data", "{d}/twice.jsonl"], "twice.jsonl lines 1 and 2: example id", {}),
    (
        "S6 pointwise --control-variate",
        SCP + ["models/pointwise-hotpotqa-best.safetensors", "--control-variate", "position"],
        "--control-variate does not apply to",
        {},
    ),
    (
        "S7 pointwise --adaptive",
        SCP + ["models/pointwise-hotpotqa-best.safetensors", "--adaptive"],
        "its model is 'pointwise', whose scores are exact per unit",
        {},
    ),
    # issue 17 item 2: scp prune never touches a file it did not write (tests/test_batch_prune.py checks the bytes)
    (
        "prune into a user's file",
        ["prune", "--checkpoint", SHIPPED, "--input", "{d}/records.jsonl", "--output", "{d}/notes.txt", "--top-k", "1"],
        "notes.txt exists and is not an output of scp prune",
        {},
    ),
    # issue 17: an output path under a regular file names the file in the way (not "[Errno 17] File exists")
    (
        "eval --out under a file",
        EVAL + ["--limit", "2", "--out", "{d}/a_file/x.json"],
        "--out {d}/a_file/x.json: its folder {d}/a_file is a file",
        {},
    ),
    (
        "eval --out two folders under a file",
        EVAL + ["--limit", "2", "--out", "{d}/a_file/deep/x.json"],
        "its folder {d}/a_file is a file",
        {},
    ),
    (
        "train --out under a file",
        TRAIN + ["{d}/a_file/sub"],
        "--out {d}/a_file/sub: its folder {d}/a_file is a file",
        {},
    ),
    (
        "prune --output under a file",
        [
            "prune",
            "--checkpoint",
            SHIPPED,
            "--input",
            "{d}/records.jsonl",
            "--output",
            "{d}/a_file/x.jsonl",
            "--top-k",
            "1",
        ],
        "output {d}/a_file/x.jsonl: its folder {d}/a_file is a file",
        {},
    ),
    (
        "run --out under a file",
        ["run", "00_cooperative_games_tutorial", "--out", "{d}/a_file/sub"],
        "--out {d}/a_file/sub: its folder {d}/a_file is a file",
        {},
    ),
    (
        "checkpoint is a JSONL file",
        SCP + ["{d}/records.jsonl"],
        "records.jsonl is not an SCP checkpoint (neither a safetensors file nor a legacy torch checkpoint)",
        {},
    ),
    # issue 29: a keep count chosen per query, refused where it cannot apply, before any data are loaded
    (
        "--value-fraction with a pointwise checkpoint",
        SCP + ["models/pointwise-hotpotqa-best.safetensors", "--value-fraction", "0.9"],
        "a value fraction reads the game v(S) of a set value network",
        {},
    ),
    ("--value-fraction with bm25", EVAL + ["--value-fraction", "0.9"], "which method 'bm25' does not have", {}),
    ("--value-fraction 0", SCP + [SHIPPED, "--value-fraction", "0"], "value_fraction must be a number in (0, 1]", {}),
    ("--threshold nan", EVAL + ["--threshold", "nan"], "thresholds must be finite numbers; got [nan]", {}),
    ("--target-recall 1.5", EVAL + ["--target-recall", "1.5"], "target recalls must be numbers in (0, 1]", {}),
    (
        "--target-recall on validation",
        EVAL + ["--target-recall", "0.9", "--split", "validation"],
        "a target recall calibrates τ on the validation split and applies it to another",
        {},
    ),
    (
        "prune --value-fraction with a pointwise checkpoint",
        ["prune", "--checkpoint", "models/pointwise-hotpotqa-best.safetensors", "--input", "{d}/records.jsonl"]
        + ["--output", "{d}/vf.jsonl", "--value-fraction", "0.9"],
        "a pointwise model scores each unit alone and has no value of a set",
        {},
    ),
    (
        "prune --threshold and --top-k",
        ["prune", "--checkpoint", SHIPPED, "--input", "{d}/records.jsonl", "--output", "{d}/t.jsonl"]
        + ["--threshold", "0.1", "--top-k", "1"],
        "not allowed with argument",
        {},
    ),
    # issue 25: exact Shapley's player limit is checked before any context is embedded, naming what the CLI can do
    (
        "--estimator exact on long contexts",
        SCP + [SHIPPED, "--estimator", "exact"],
        "takes contexts of at most 16 units; 2 of the 2 hotpotqa contexts have more",
        {},
    ),
]


@pytest.mark.parametrize("argv, words, env", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_code_2(argv, words, env, files, capsys, monkeypatch):
    for key, value in env.items():
        monkeypatch.setenv(key, value.format(d=files))
    try:
        code = main([a.format(d=files) for a in argv])
    except SystemExit as stop:  # argparse errors exit directly
        code = stop.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and words.format(d=files) in lines[0], err
    assert lines[0].startswith("scp ")


def test_eval_with_data_scores_the_whole_file_and_writes_under_runs(files, data_dir, tmp_path, monkeypatch, capsys):
    src = data_dir / "hotpotqa" / "hotpotqa_dev_distractor.jsonl.gz"
    mine = tmp_path / "mine.jsonl.gz"
    with gzip.open(src, "rt") as f, gzip.open(mine, "wt") as g:
        for _, line in zip(range(15), f):
            g.write(line)
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--dataset", "hotpotqa", "--method", "bm25", "--data", str(mine)]) == 0
    record = json.loads((tmp_path / "runs" / "eval_hotpotqa_bm25_all.json").read_text())
    assert record["split"] == "all" and record["n_examples"] == 15
    assert not (tmp_path / "results").exists()


def test_interrupted_training_says_what_was_saved(files, monkeypatch, capsys):
    import scp.training.runs

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(scp.training.runs, "run", interrupted)
    assert main(TRAIN[:-1] + ["--out", str(files / "fresh")]) == 130
    assert (
        capsys.readouterr().err.strip() == "scp train: interrupted; no epoch had finished, nothing was saved "
        "(embeddings computed so far are cached)"
    )


def test_sigint_is_one_line_not_a_traceback(tmp_path, data_dir):
    env = {**os.environ, "SCP_CACHE_DIR": str(tmp_path / "cache")}
    # a shell that starts a job in the background (as CI may) ignores SIGINT for it: restore the default
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scp",
            "train",
            "--embedder",
            "random",
            "--epochs",
            "200",
            "--out",
            str(tmp_path / "run"),
            "--permutations",
            "4",
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        proc.stdout.readline()  # the config line: imports are done and the command is running
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate()  # hang guard: pytest-timeout
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("scp train: interrupted; ")


def test_ablate_says_what_it_skipped_and_how_to_rerun(tmp_path, capsys):
    from scp.experiments.ablations import GRIDS, write_table
    from scp.experiments.ablations import main as ablate_main

    write_table({name: {"name": name, "status": "ok"} for name in GRIDS["main"]}, tmp_path)
    assert ablate_main(["main", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert all(f"[main] {name}: already in" in out for name in GRIDS["main"])
    assert "pass --rerun to retrain them" in out


@pytest.mark.parametrize("limit", [0, -1, 2.5, True])
def test_run_eval_refuses_a_bad_limit_before_loading(limit):
    from scp.pruning.evaluation import run_eval

    with pytest.raises(ValueError, match="limit must be an integer ≥ 1"):
        run_eval("no-such-dataset", "bm25", limit=limit)  # refused before the (unknown) dataset is looked up
