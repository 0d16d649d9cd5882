"""The command line answers ``--help``, a usage error and an unknown notebook without importing torch, numpy, YAML or
the notebook machinery (each checked in a fresh interpreter, by the modules it loaded, not by timing), and prints
every warning as one line."""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from scp import cli
from scp.errors import MissingFileError

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "numpy", "scipy", "pandas", "matplotlib", "sklearn", "yaml", "papermill", "nbformat", "jupyter")

# ``python -m scp ARGS…`` in this interpreter; the names of the modules it imported go to the file REPORT
PROBE = """
import json, runpy, sys
args, report = json.loads(sys.argv[1]), sys.argv[2]
sys.argv = ["scp", *args]
try:
    runpy.run_module("scp", run_name="__main__", alter_sys=True)
except SystemExit as exit:
    code = exit.code
with open(report, "w") as f:
    json.dump(sorted(sys.modules), f)
sys.exit(code)
"""


def scp_probe(args: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run ``python -m scp ARGS…`` in a fresh interpreter: its result and the heavy packages it imported."""
    report = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args), str(report)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "120"},
        timeout=120,
    )
    modules = json.loads(report.read_text())
    return done, sorted({m.split(".")[0] for m in modules} & set(HEAVY))


CASES = [  # (arguments, exit code, what stdout (code 0) or the one line on stderr (code 2) contains)
    (["--help"], 0, ["usage: scp", "{eval,train,prune,convert-checkpoint,ship,run}"]),
    (["run", "--help"], 0, ["usage: scp run", "Papermill runner: execute notebooks", "--smoke"]),
    (["eval", "--help"], 0, ["usage: scp eval", "--bound {bernstein,hoeffding,student}"]),
    (["prune", "--help"], 0, ["usage: scp prune", "--keep-ratio R"]),
    (["train", "--help"], 0, ["usage: scp train", "--model {deepsets,convex,", "one of paper, best"]),
    (["ship", "--help"], 0, ["usage: scp ship", "--chosen-by TEXT"]),
    (["convert-checkpoint", "--help"], 0, ["usage: scp convert-checkpoint"]),
    (["eval", "--dataset", "hotpotqa"], 2, ["scp eval: error: the following arguments are required: --method"]),
    (["eval", "--dataset", "hotpotqa", "--method", "scp", "--bound", "x"], 2, ["argument --bound: invalid choice"]),
    (["train", "--out", "x", "--model", "rnn"], 2, ["scp train: error: argument --model: invalid choice: 'rnn'"]),
    (["frobnicate"], 2, ["scp: error: argument command: invalid choice: 'frobnicate'"]),
    (["run", "99_nope"], 2, ["scp run: error: no notebook notebooks/99_nope.ipynb (known notebooks: 00_"]),
]


@pytest.mark.parametrize("args, code, expected", CASES, ids=[" ".join(case[0]) for case in CASES])
def test_help_usage_errors_and_an_unknown_notebook_import_nothing_heavy(args, code, expected, tmp_path):
    done, heavy = scp_probe(args, tmp_path)
    assert heavy == [], f"scp {' '.join(args)} imported {heavy}"
    assert done.returncode == code, done.stderr
    text = done.stdout if code == 0 else done.stderr
    if code == 2:  # bad input: one line, no traceback
        assert done.stdout == "" and len(text.splitlines()) == 1, text
    assert all(words in text for words in expected), text


def test_an_unknown_notebook_is_the_runners_own_line(tmp_path):
    """``scp run`` refuses an unknown notebook before loading the runner, in the words the runner uses."""
    from scp.suite import runner

    with pytest.raises(MissingFileError) as error:
        runner.run(["00_cooperative_games_tutorial", "99_nope"], echo=None)
    done, _ = scp_probe(["run", "00_cooperative_games_tutorial", "99_nope", "--smoke"], tmp_path)
    assert (done.returncode, done.stderr) == (2, f"scp run: error: {error.value}\n")


def test_the_options_the_parser_writes_out_are_the_librarys():
    """The parser's choices and help text name what the library accepts (it holds copies to stay light)."""
    from scp.core.adaptive import BOUNDS
    from scp.data.features import FEATURES, STRUCTURAL
    from scp.models.config import MODELS, PRESETS
    from scp.models.value_net import QUERY_MODES

    assert cli.BOUNDS == BOUNDS and cli.STRUCTURAL == STRUCTURAL and cli.FEATURES == FEATURES
    assert cli.MODELS == MODELS and cli.PRESETS == tuple(PRESETS) and cli.QUERY_MODES == QUERY_MODES


def test_scp_run_and_the_runner_module_offer_the_same_options():
    def help_of(*command: str) -> str:
        done = subprocess.run(
            [sys.executable, *command, "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "COLUMNS": "120"},
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split("\n\n", 1)[1]  # after the usage block, whose program name differs

    assert help_of("-m", "scp", "run") == help_of("-m", "scp.suite.runner")


@pytest.mark.parametrize(
    "category, message, line",
    [
        (UserWarning, "the text has no\n  sentence boundary", "scp: warning: the text has no sentence boundary\n"),
        (RuntimeWarning, "overflow encountered in exp", "scp: warning: RuntimeWarning: overflow encountered in exp\n"),
    ],
)
def test_a_warning_is_one_line_named_by_its_category_unless_a_user_warning(category, message, line):
    from scp.errors import format_warning

    assert format_warning(category(message), category, "/x/bin/scp", 8, "sys.exit(main())") == line


def test_the_cli_prints_each_warning_on_one_line(tmp_path):
    """``scp prune --token-budget 0`` warns once per record that nothing is kept: one line each, no source line."""
    from scp.data.embedders import RandomEmbedder
    from scp.data.features import build_contexts
    from scp.models.config import TrainConfig
    from scp.training.loop import train

    emb = RandomEmbedder()  # what the checkpoint's embedder name, random, gives scp prune
    queries = [f"what is the capital of country {i}" for i in range(6)]
    units = [[f"the capital of country {i} is city {i}", f"unrelated sentence {i}", "it rains"] for i in range(6)]
    contexts = build_contexts(queries, units, emb, ("cos",), labels_list=[[1, 0, 0]] * 6, ids=list("abcdef"))
    config = TrainConfig(
        embedder="random",
        query_mode="product_concat",
        features=("cos",),
        hidden=8,
        latent=4,
        epochs=1,
        n_permutations=4,
        eval_permutations=4,
    )
    best = train(config, contexts[:4], contexts[4:], tmp_path / "run", emb.id, progress=False).best_path
    records = tmp_path / "records.jsonl"
    records.write_text(
        json.dumps({"id": "one", "question": "Who left?", "sentences": ["Ann is here.", "Bob left."]})
        + "\n"
        + json.dumps({"id": "two", "question": "Who?", "sentences": ["Ann is here.", "Bob left.", "Cy ran off."]})
        + "\n"
    )
    script = Path(sys.executable).with_name("scp")  # the console script: its warnings once named bin/scp:8
    done = subprocess.run(
        [str(script), "prune", "--checkpoint", str(best), "--input", str(records), "--output", str(tmp_path / "o")]
        + ["--token-budget", "0", "--no-progress", "--n-permutations", "4"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "SCP_CACHE_DIR": str(tmp_path / "cache")},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines == [
        "scp: warning: token_budget=0 keeps no unit: the shortest of the 2 units has 3 tokens, so the pruned text "
        "is empty",
        "scp: warning: token_budget=0 keeps no unit: the shortest of the 3 units has 3 tokens, so the pruned text "
        "is empty",
    ], done.stderr


def test_main_formats_warnings_its_way_only_while_it_runs(monkeypatch):
    """A Python caller of ``scp.cli.main`` keeps its own warning format afterwards."""
    from scp.errors import format_warning

    before, during = warnings.formatwarning, []
    monkeypatch.setattr(cli, "_command", lambda argv: during.append(warnings.formatwarning) or 0)
    assert cli.main(["eval"]) == 0
    assert during == [format_warning] and warnings.formatwarning is before
