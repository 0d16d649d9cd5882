"""Exit codes by kind of error: bad input is one line and exit code 2, anything else is a bug in scp (its traceback,
a line asking to report it, exit code 1); a missing dataset offline fails at once, without the hub's retries."""

import socket
import sys
import types

import pytest

import scp.data.embedders
import scp.pruning.evaluation
from scp.cli import main
from scp.errors import InputError

BUG_LINE = (
    "scp eval: internal error: this is a bug in scp, not a problem with your input; please report it with "
    "the traceback above and the command you ran"
)
EVAL = ["eval", "--dataset", "hotpotqa", "--method", "bm25", "--limit", "2"]


def _raising(error):
    def run_eval(*args, **kwargs):
        raise error

    return run_eval


@pytest.mark.parametrize(
    "error",
    [
        ZeroDivisionError("division by zero"),
        ValueError("a plain ValueError"),
        KeyError("units"),
        TypeError("unsupported operand"),
    ],
)
def test_an_unexpected_exception_is_a_bug_with_its_traceback(error, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(scp.pruning.evaluation, "run_eval", _raising(error))
    assert main(EVAL + ["--out", str(tmp_path / "r.json")]) == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert f"{type(error).__name__}: " in err and "in run_eval" in err  # the traceback down to where it was raised
    assert lines[-1] == BUG_LINE


@pytest.mark.parametrize(
    "error, text",
    [
        (
            InputError("keep ratios must be numbers in (0, 1]\n  got [2.0]"),
            "keep ratios must be numbers in (0, 1] got [2.0]",
        ),  # a message over two lines is printed on one
        (PermissionError(13, "Permission denied", "/x/r.json"), "[Errno 13] Permission denied: '/x/r.json'"),
    ],
)
def test_bad_input_is_exit_code_2_and_one_line(error, text, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(scp.pruning.evaluation, "run_eval", _raising(error))
    assert main(EVAL + ["--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err == f"scp eval: error: {text}\n"


def test_a_missing_dataset_offline_is_one_line_without_hub_retries(tmp_path, monkeypatch, capsys):
    """No HF_HUB_OFFLINE and no network: one short probe of the hub, never datasets.load_dataset."""
    for var in (
        "HF_HUB_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SCP_DATA_DIR", str(tmp_path))
    calls = []
    fake = types.ModuleType("datasets")
    fake.load_dataset = lambda *a, **k: calls.append(a) or pytest.fail("asked the hub while offline")
    monkeypatch.setitem(sys.modules, "datasets", fake)
    probes = []

    def no_network(address, timeout=None, *args, **kwargs):
        probes.append(address)
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "create_connection", no_network)
    scp.data.embedders._tcp_reachable.cache_clear()
    try:
        assert main(["eval", "--dataset", "hotpotqa", "--method", "bm25", "--out", str(tmp_path / "r.json")]) == 2
    finally:
        scp.data.embedders._tcp_reachable.cache_clear()
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("scp eval: error: hotpotqa is not available: neither ")
    assert str(tmp_path / "hotpotqa" / "hotpotqa_dev_distractor.jsonl.gz") in err
    assert "the hub (https://huggingface.co) is unreachable" in err and "export SCP_DATA_DIR=" in err
    assert calls == [] and probes == [("huggingface.co", 443)]


def test_the_hub_probe_goes_through_a_configured_proxy(monkeypatch):
    probed = []
    monkeypatch.setattr(
        scp.data.embedders, "_tcp_reachable", lambda host, port, timeout: probed.append((host, port)) or True
    )
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "NO_PROXY", "no_proxy", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    assert scp.data.embedders.hub_reachable()
    monkeypatch.setenv("NO_PROXY", "huggingface.co")
    monkeypatch.setenv("no_proxy", "huggingface.co")
    assert scp.data.embedders.hub_reachable()
    assert probed == [("proxy.example", 3128), ("huggingface.co", 443)]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(seed=-1), "seed must be an integer ≥ 0; got -1"),
        (dict(seed=True), "seed must be an integer"),
        (dict(keep_ratios=(True,)), "keep ratios must be numbers"),
        (dict(keep_ratios=(float("nan"),)), "keep ratios must be numbers"),
    ],
)
def test_run_eval_refuses_bad_numbers_before_loading(kwargs, match):
    with pytest.raises(InputError, match=match):
        scp.pruning.evaluation.run_eval(
            "no-such-dataset", "random", **kwargs
        )  # refused before the dataset is looked up


def test_a_negative_seed_is_bad_input_not_a_bug(capsys, tmp_path):
    assert (
        main(
            [
                "eval",
                "--dataset",
                "hotpotqa",
                "--method",
                "random",
                "--limit",
                "2",
                "--seed",
                "-1",
                "--out",
                str(tmp_path / "r.json"),
            ]
        )
        == 2
    )
    assert capsys.readouterr().err == "scp eval: error: seed must be an integer ≥ 0; got -1\n"


def test_prune_onto_a_dangling_link_is_one_line_and_makes_nothing_at_its_target(tmp_path, capsys):
    """Issue 25: the link is refused before any work, not followed to create folders (and a file) at its target."""
    from scp.paths import SHIPPED_MODEL

    src = tmp_path / "in.jsonl"
    src.write_text('{"question": "Who left?", "sentences": ["Ann is here.", "Bob left."]}\n')
    (tmp_path / "out.jsonl").symlink_to(tmp_path / "elsewhere" / "deep" / "out.jsonl")
    argv = ["prune", "--checkpoint", str(SHIPPED_MODEL), "--input", str(src), "--output", str(tmp_path / "out.jsonl")]
    assert main(argv + ["--top-k", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a symbolic link to" in err and "which does not exist" in err
    assert not (tmp_path / "elsewhere").exists()
