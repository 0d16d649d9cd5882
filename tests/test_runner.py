import argparse
import os

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from scp.suite import runner, sources
from scp.suite.notebook import read_records
from scp.suite.runner import (
    NotebookFailed,
    ParameterError,
    add_subparser,
    check_params_in_sync,
    load_params,
    main,
    order,
    parse_overrides,
    resolve_params,
)


def write_notebook(path, params_source, *cells):
    """A small notebook: a title, a parameters cell, then the given code cells."""
    param_cell = new_code_cell(params_source)
    param_cell.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[new_markdown_cell("# demo"), param_cell, *(new_code_cell(c) for c in cells)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A notebooks/ and params/ pair in tmp_path that the runner uses instead of the repository's."""
    nbs, params = tmp_path / "notebooks", tmp_path / "params"
    params.mkdir()
    for module in (runner, sources):  # the runner, and the notebooks and parameter files it reads
        monkeypatch.setattr(module, "NOTEBOOKS", nbs)
        monkeypatch.setattr(module, "PARAMS", params)
        monkeypatch.setattr(module, "RUNS", tmp_path / "runs")
    write_notebook(
        nbs / "01_demo.ipynb",
        "n = 10  # size\nseed = 0  # seed\nout_dir = None  # set by the runner",
        "from scp.suite.notebook import record\nrecord('n_seen', n)\nrecord('out_dir_seen', out_dir)",
    )
    (params / "01_demo.yaml").write_text("n: 10\nseed: 0\nsmoke:\n  n: 2\n")
    return tmp_path


def test_params_full_and_smoke(tmp_path):
    (tmp_path / "demo.yaml").write_text("n: 1000\nseed: 0\nsmoke:\n  n: 5\n")
    assert load_params("demo", params_dir=tmp_path) == {"n": 1000, "seed": 0}
    assert load_params("demo", smoke=True, params_dir=tmp_path) == {"n": 5, "seed": 0}
    (tmp_path / "bad.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="mapping"):
        load_params("bad", params_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="parameter file"):
        load_params("missing", params_dir=tmp_path)


def test_overrides_are_yaml_values():
    assert parse_overrides(["n=3", "delta=0.01", "seeds=[0, 1]", "name=hotpotqa", "flag=true", "x=null", "e="]) == {
        "n": 3,
        "delta": 0.01,
        "seeds": [0, 1],
        "name": "hotpotqa",
        "flag": True,
        "x": None,
        "e": None,
    }
    for bad in ("n", "=3", "2n=1", "a=[1"):
        with pytest.raises(ParameterError):
            parse_overrides([bad])


def test_unknown_keys_are_rejected(project):
    assert resolve_params("01_demo") == {"n": 10, "seed": 0}
    assert resolve_params("01_demo", smoke=True, overrides={"seed": 4}) == {"n": 2, "seed": 4}
    with pytest.raises(ParameterError, match=r"-p: unknown parameter 'm' for notebook 01_demo .*declares n, seed"):
        resolve_params("01_demo", overrides={"m": 1})
    with pytest.raises(ParameterError, match="set by the runner"):
        resolve_params("01_demo", overrides={"out_dir": "/tmp"})
    (project / "params" / "01_demo.yaml").write_text("n: 10\nseed: 0\nsmoke:\n  n_examples: 2\n")
    with pytest.raises(ParameterError, match=r"smoke section\): unknown parameter 'n_examples'"):
        resolve_params("01_demo", smoke=True)
    (project / "params" / "01_demo.yaml").write_text("n: 10\nseeds: [0]\n")
    with pytest.raises(ParameterError, match="unknown parameter 'seeds'"):
        resolve_params("01_demo")


def test_notebook_must_declare_out_dir(project):
    write_notebook(project / "notebooks" / "02_no_out.ipynb", "n = 1  # size")
    with pytest.raises(ParameterError, match="out_dir = None"):
        resolve_params("02_no_out")


def test_params_file_and_parameters_cell_must_agree(project):
    check_params_in_sync("01_demo")
    (project / "params" / "01_demo.yaml").write_text("n: 11\nseed: 0\nsmoke:\n  n: 2\n")
    with pytest.raises(ParameterError, match="n: yaml 11 vs notebook 10"):
        check_params_in_sync("01_demo")
    (project / "params" / "01_demo.yaml").write_text("n: 10\n")
    with pytest.raises(ParameterError, match="keys"):
        check_params_in_sync("01_demo")


def test_dependency_order():
    assert order(["03_c", "01_a", "02_b"], depends={}) == ["01_a", "02_b", "03_c"]
    assert order(["01_a", "02_b", "03_c"], depends={"01_a": ["03_c"]}) == ["03_c", "01_a", "02_b"]
    assert order(["01_a", "02_b"], depends={"02_b": ["00_missing"]}) == ["01_a", "02_b"]
    with pytest.raises(runner.RunnerError, match="cycle"):
        order(["01_a", "02_b"], depends={"01_a": ["02_b"], "02_b": ["01_a"]})


def test_orphan_runs_are_the_trained_runs_no_committed_run_outside_the_rerun_wrote_and_are_set_aside(tmp_path):
    import json

    assert runner.orphan_runs(tmp_path) == []  # no runs/models at all
    for name in ("hotpotqa-deepsets-aaa", "hotpotqa-pointwise-bbb", "hotpotqa-deepsets-ccc"):
        (tmp_path / "runs" / "models" / name).mkdir(parents=True)
    (tmp_path / "results" / "02_b").mkdir(parents=True)
    written = [{"path": "runs/models/hotpotqa-deepsets-aaa/best.safetensors", "sha256": "0"}]
    (tmp_path / "results" / "02_b" / "provenance.json").write_text(json.dumps({"models_written": written}))
    (tmp_path / "results" / "13_d").mkdir()
    (tmp_path / "results" / "13_d" / "provenance.json").write_text("{not json")  # covers nothing
    assert runner.orphan_runs(tmp_path) == ["hotpotqa-deepsets-ccc", "hotpotqa-pointwise-bbb"]
    # a rerun of 02_b replaces its record, so the run only it wrote would be refused if reused: set aside too
    orphans = runner.orphan_runs(tmp_path, rerun=["02_b"])
    assert orphans == ["hotpotqa-deepsets-aaa", "hotpotqa-deepsets-ccc", "hotpotqa-pointwise-bbb"]
    aside = runner.set_aside(tmp_path, orphans[:2])
    assert sorted(p.name for p in aside.iterdir()) == orphans[:2]
    assert [p.name for p in (tmp_path / "runs" / "models").iterdir()] == ["hotpotqa-pointwise-bbb"]
    assert runner.set_aside(tmp_path, orphans[2:]) != aside  # a second set-aside never mixes with the first
    assert runner.orphan_runs(tmp_path) == []


def test_critical_paths_add_the_longest_chain_after_each_notebook():
    todo = ["00_a", "02_b", "11_c", "13_d"]
    after = {"00_a": set(), "02_b": set(), "11_c": set(), "13_d": {"02_b"}}
    paths = runner.critical_paths(todo, after, {"00_a": 6, "02_b": 1237, "11_c": 705, "13_d": 3954})
    assert paths == {"00_a": 6, "02_b": 1237 + 3954, "11_c": 705, "13_d": 3954}
    assert runner.critical_paths(todo, after, {}) == dict.fromkeys(todo, 0.0)  # unknown times: todo's order


def test_two_jobs_start_the_longest_chain_first(monkeypatch):
    """With -j 2 the chain 02 → 13 starts at once and 13 the moment 02 ends, not after every lower number."""
    import threading
    import time
    from types import SimpleNamespace

    from scp.suite import graph

    after = {"00_a": (), "02_b": (), "05_e": (), "11_c": (), "13_d": ("02_b",)}
    monkeypatch.setattr(graph, "declarations", lambda names: {n: SimpleNamespace(after=after[n]) for n in names})
    seconds = {"00_a": 6, "02_b": 50, "05_e": 9, "11_c": 30, "13_d": 90}
    monkeypatch.setattr(runner, "_last_wall_times", lambda names: seconds)
    started, lock = [], threading.Lock()

    def work(name):
        with lock:
            started.append(name)
        if name != "02_b":
            time.sleep(0.2)  # 02 ends first, while 11 still runs

    runner._schedule(list(after), 2, work, print)
    assert started[:3] == ["02_b", "11_c", "13_d"]
    started.clear()
    runner._schedule(list(after), 1, work, print)  # one job: the declared order, times unread
    assert started == list(after)


def test_a_two_thread_notebook_takes_both_slots(monkeypatch):
    """With -j 2 a notebook of torch_threads 2 never runs beside another: it waits for the running one to end, and
    the one-thread notebooks start only once it ended (three threads on two cores stall torch's thread pool)."""
    import threading
    import time
    from types import SimpleNamespace

    from scp.suite import graph

    after = {"10_a": (), "11_b": (), "12_c": (), "14_w": ()}
    monkeypatch.setattr(graph, "declarations", lambda names: {n: SimpleNamespace(after=after[n]) for n in names})
    monkeypatch.setattr(runner, "_last_wall_times", lambda names: {"10_a": 90, "14_w": 60, "11_b": 30, "12_c": 9})
    spans, lock = {}, threading.Lock()

    def work(name):
        t0 = time.perf_counter()
        time.sleep(0.15)
        with lock:
            spans[name] = (t0, time.perf_counter())

    runner._schedule(list(after), 2, work, print, slots={"14_w": 2, "10_a": 1})
    overlapping = {
        n for n in spans if n != "14_w" and spans[n][0] < spans["14_w"][1] and spans["14_w"][0] < spans[n][1]
    }
    assert overlapping == set(), spans
    assert spans["10_a"][0] < spans["14_w"][0]  # the longest chain still starts first
    spans.clear()
    runner._schedule(list(after), 2, work, print, slots={"14_w": 5})  # capped at the jobs: it still runs
    assert set(spans) == set(after)


def test_thread_slots_read_the_parameters():
    slots = runner.thread_slots(["14_attribution_against_contextcite", "00_cooperative_games_tutorial"])
    assert slots.get("14_attribution_against_contextcite") == 2 and "00_cooperative_games_tutorial" not in slots
    assert runner.thread_slots(["14_attribution_against_contextcite"], smoke=True) == {
        "14_attribution_against_contextcite": 1
    }


def test_unknown_notebook_is_a_clear_error(capsys):
    assert main(["no_such_notebook"]) == 2
    err = capsys.readouterr().err
    assert "no notebook" in err and "no_such_notebook" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


TYPED = """n = 10  # an int
rate = 0.5  # a float
flag = False  # a bool
name = "x"  # a str
seeds = [0, 1]  # ints
ratios = [0.1, 1]  # numbers
names = ["a", "b"]  # strings
mixed = [1, "a"]  # anything inside
empty = []  # a list
opts = {}  # a mapping
anything = None  # any value
fn = len  # no literal: any value
out_dir = None  # set by the runner"""


@pytest.fixture
def typed(project, monkeypatch):
    monkeypatch.setitem(runner.NULL_DEFAULT_TYPES, "anything", "list")
    monkeypatch.setitem(runner.NULL_DEFAULT_TYPES, "fn", "int")
    write_notebook(project / "notebooks" / "02_typed.ipynb", TYPED)
    (project / "params" / "02_typed.yaml").write_text(
        "n: 10\nrate: 0.5\nflag: false\nname: x\nseeds: [0, 1]\nratios: [0.1, 1]\nnames: [a, b]\nmixed: [1, a]\n"
        "empty: []\nopts: {}\nanything: null\nfn: null\nsmoke:\n  n: 2\n"
    )
    return project


@pytest.mark.parametrize(
    "override, value",
    [
        ("n=3", 3),
        ("n=-1", -1),
        ("rate=1", 1),
        ("rate=0.25", 0.25),
        ("rate=1e-3", 0.001),
        ("rate=-2.5E+2", -250.0),
        ("flag=true", True),
        ("name=hotpotqa", "hotpotqa"),
        ("name='3'", "3"),
        ("seeds=[4]", [4]),
        ("seeds=[]", []),
        ("ratios=[1, 0.5, 2e-1]", [1, 0.5, 0.2]),
        ("names=[c]", ["c"]),
        ("mixed=[[1], 2.0, x]", [[1], 2.0, "x"]),
        ("empty=[1, a]", [1, "a"]),
        ("opts={epochs: 1}", {"epochs": 1}),
        ("anything=[1, {a: b}]", [1, {"a": "b"}]),
        ("fn=3", 3),
    ],
)
def test_values_that_fit_their_defaults(typed, override, value):
    key = override.partition("=")[0]
    assert resolve_params("02_typed", overrides=parse_overrides([override]))[key] == value


@pytest.mark.parametrize(
    "override, expected",
    [
        ("n=abc", "expects an integer (its default is 10); got 'abc' (str)"),
        ("n=2.5", "expects an integer"),
        ("n=true", "got True (bool)"),
        ("n=[1]", "got [1] (list)"),
        ("n=1e3", "expects an integer"),
        ("n=", "got None (NoneType)"),
        ("rate=fast", "expects a number (its default is 0.5); got 'fast' (str)"),
        ("rate=false", "expects a number"),
        ("flag=1", "expects true or false (its default is False); got 1 (int)"),
        ("flag=yes!", "expects true or false"),
        ("name=3", "expects a string (its default is 'x'); got 3 (int) (quote it to pass text)"),
        ("seeds=3", "expects a list (its default is [0, 1]); got 3 (int)"),
        ("seeds=[0, x]", "expects a list of integers (its default is [0, 1]); got [0, 'x'] (list)"),
        ("ratios=[0.5, true]", "expects a list of numbers"),
        ("names=[1]", "expects a list of strings"),
        ("opts=[1]", "expects a mapping"),
    ],
)
def test_values_of_the_wrong_type_are_refused_naming_notebook_key_type_and_value(typed, override, expected):
    key = override.partition("=")[0]
    with pytest.raises(ParameterError) as info:
        resolve_params("02_typed", overrides=parse_overrides([override]))
    assert str(info.value).startswith(f"-p: parameter {key} of notebook 02_typed expects ")
    assert expected in str(info.value)


def test_parameter_files_are_type_checked_too(typed):
    path = typed / "params" / "02_typed.yaml"
    text = path.read_text()
    path.write_text(text.replace("  n: 2", "  n: two"))
    with pytest.raises(
        ParameterError,
        match=r"02_typed.yaml \(smoke section\): parameter n of notebook 02_typed "
        r"expects an integer \(its default is 10\); got 'two'",
    ):
        resolve_params("02_typed")  # a full run reads the smoke section too: the file is wrong either way
    path.write_text(text.replace("rate: 0.5", "rate: [0.5]"))
    with pytest.raises(ParameterError, match=r"02_typed.yaml: parameter rate .* expects a number"):
        resolve_params("02_typed", smoke=True)
    for bad, match in [
        ("n: [1\n", r"02_typed.yaml line 2: not valid YAML"),
        ("- 1\n", "must hold a mapping"),
        ("n: 1\nsmoke: [1]\n", "smoke section must be a mapping"),
    ]:
        path.write_text(bad)
        with pytest.raises(ParameterError, match=match):
            resolve_params("02_typed")
    path.write_bytes(b"n: \xff\n")
    with pytest.raises(ParameterError, match="not UTF-8"):
        resolve_params("02_typed")
    path.unlink()
    with pytest.raises(FileNotFoundError, match="no parameter file"):
        resolve_params("02_typed")


def test_a_parameters_cell_that_is_not_python_is_named(project):
    write_notebook(project / "notebooks" / "03_magic.ipynb", "%matplotlib inline\nn = 1\nout_dir = None")
    (project / "params" / "03_magic.yaml").write_text("n: 1\n")
    with pytest.raises(ParameterError, match="notebook 03_magic: its parameters cell is not plain Python"):
        resolve_params("03_magic")


def test_bad_input_stops_before_any_kernel_starts(typed, monkeypatch, capsys):
    import papermill

    started = []
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: started.append(a))
    (typed / "params" / "02_typed.yaml").write_text(
        (typed / "params" / "02_typed.yaml").read_text().replace("  n: 2", "  n: 2.5")
    )
    # 01_demo is fine and comes first; 02_typed's smoke section is wrong: neither runs
    assert main(["all", "--smoke"]) == 2
    assert started == []
    err = capsys.readouterr().err.strip()
    assert err.startswith("python -m scp.suite.runner: error: ") and len(err.splitlines()) == 1
    assert err.endswith(
        "02_typed.yaml (smoke section): parameter n of notebook 02_typed expects an integer (its "
        "default is 10); got 2.5 (float)"
    )
    for argv, words in [
        (["01_demo", "-p", "n=abc"], "parameter n of notebook 01_demo expects an integer"),
        (["01_demo", "-p", "m=1"], "unknown parameter 'm'"),
        (["01_demo", "-p", "n"], "key=value"),
        (["nope"], "no notebook"),
        ([], "name the notebooks to run, or all"),
        (["01_demo", "--out", str(typed / "params" / "01_demo.yaml")], "is a file"),
    ]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and words in err and "Traceback" not in err, err
    assert started == []
    runner.run("01_demo", params={"seed": 3}, out_dir=typed / "out", echo=None)
    assert len(started) == 1


def test_run_passes_parameters_and_out_dir(project, tmp_path):
    executed = runner.run("01_demo", smoke=True, params={"seed": 1}, out_dir=tmp_path / "out", echo=None)
    path = executed["01_demo"]
    assert path == tmp_path / "out" / "runs" / "01_demo.ipynb"
    assert read_records(path) == {"n_seen": 2, "out_dir_seen": str((tmp_path / "out").resolve())}
    # a smoke run without an output folder uses a temporary one; the executed copy goes to runs/smoke/
    path = runner.run(["all"], smoke=True, echo=None)["01_demo"]
    assert path == project / "runs" / "smoke" / "01_demo.ipynb"
    assert read_records(path)["out_dir_seen"] not in (str(runner.ROOT), str(project))
    with pytest.raises(ParameterError, match="-p: unknown parameter 'm' for notebook 01_demo"):
        runner.run("01_demo", smoke=True, params={"m": 1}, echo=None)
    write_notebook(project / "notebooks" / "02_other.ipynb", "k = 1  # other\nout_dir = None  # set by the runner")
    (project / "params" / "02_other.yaml").write_text("k: 1\n")
    with pytest.raises(ParameterError, match="no notebook among 01_demo, 02_other declares a parameter 'm'"):
        runner.run("all", smoke=True, params={"m": 1}, echo=None)
    with pytest.raises(runner.RunnerError, match="smoke run may not write into the repository"):
        runner.run_notebook("01_demo", smoke=True, out_dir=runner.ROOT)


def test_failure_names_notebook_cell_and_error(project, capsys):
    write_notebook(
        project / "notebooks" / "02_broken.ipynb", "out_dir = None  # set by the runner", "x = 1", "y = 2\nz = 1 / 0"
    )
    (project / "params" / "02_broken.yaml").write_text("{}\n")
    with pytest.raises(NotebookFailed) as info:
        runner.run_notebook("02_broken", smoke=True, out_dir=project / "out")
    err = info.value
    assert (err.name, err.cell_index, err.ename) == ("02_broken", 3, "ZeroDivisionError")
    assert err.evalue == "division by zero"
    assert err.executed.is_file()
    assert "cell 3 ('y = 2')" in str(err)
    assert main(["02_broken", "--smoke", "--out", str(project / "out")]) == 1
    out = capsys.readouterr()
    assert "error: notebook 02_broken failed in cell 3 ('y = 2'): ZeroDivisionError: division by zero" in out.err
    assert "Traceback" not in out.err + out.out
    assert "running 02_broken" in out.out and "02_broken failed after" in out.out


def test_add_subparser_gives_scp_run():
    parser = argparse.ArgumentParser(prog="scp")
    add_subparser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["run", "00_x", "01_y", "--smoke", "-p", "n=3", "-p", "seeds=[0,1]"])
    assert args.command == "run" and args.names == ["00_x", "01_y"] and args.smoke
    assert args.param == ["n=3", "seeds=[0,1]"] and callable(args.func)
    assert parser.parse_args(["run", "--all", "--smoke"]).all


def test_no_names_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "name the notebooks to run, or all" in capsys.readouterr().err


def test_an_unreadable_notebook_is_named(project, capsys):
    (project / "notebooks" / "03_broken.ipynb").write_text('{"cells": [')
    (project / "params" / "03_broken.yaml").write_text("{}\n")
    assert main(["03_broken"]) == 2
    err = capsys.readouterr().err
    assert "notebook" in err and "03_broken.ipynb cannot be read" in err and len(err.strip().splitlines()) == 1


def test_a_run_pins_the_cpu_kernels_for_what_it_starts(monkeypatch):
    """Kernels and stage workers inherit AVX2 kernels (torch, oneDNN, OpenBLAS) unless a variable is set already."""
    for k in runner.PINNED_KERNELS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Zen")
    assert runner.pinned_kernels() == {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    seen = {}

    def fake_schedule(todo, jobs, work, echo, more=None, slots=None):
        seen.update({k: os.environ.get(k) for k in runner.PINNED_KERNELS})

    monkeypatch.setattr(runner, "_schedule", fake_schedule)
    runner.run("00_cooperative_games_tutorial", smoke=True, echo=None)
    assert seen == {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "OPENBLAS_CORETYPE": "Zen"}
    assert "ATEN_CPU_CAPABILITY" not in os.environ  # restored afterwards


def test_the_test_processes_compute_with_the_pinned_kernels():
    """conftest pins this process's torch like a run's workers and kernels (an x86 CPU with AVX2 or more is assumed:
    torch falls back below AVX2 on its own, never above the pin)."""
    import torch

    assert os.environ["ATEN_CPU_CAPABILITY"] == runner.PINNED_KERNELS["ATEN_CPU_CAPABILITY"]
    assert torch.backends.cpu.get_cpu_capability() in {"AVX2", "DEFAULT", "NO AVX"}
