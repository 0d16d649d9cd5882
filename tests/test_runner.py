import argparse

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from scp import runner
from scp.notebook import read_records
from scp.runner import (NotebookFailed, ParameterError, add_subparser, check_params_in_sync, load_params, main, order,
                        parse_overrides, resolve_params)


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
    monkeypatch.setattr(runner, "NOTEBOOKS", nbs)
    monkeypatch.setattr(runner, "PARAMS", params)
    monkeypatch.setattr(runner, "RUNS", tmp_path / "runs")
    write_notebook(nbs / "01_demo.ipynb", "n = 10  # size\nseed = 0  # seed\nout_dir = None  # set by the runner",
                   "from scp.notebook import record\nrecord('n_seen', n)\nrecord('out_dir_seen', out_dir)")
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
        "n": 3, "delta": 0.01, "seeds": [0, 1], "name": "hotpotqa", "flag": True, "x": None, "e": None}
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


def test_unknown_notebook_is_a_clear_error(capsys):
    assert main(["no_such_notebook"]) == 1
    err = capsys.readouterr().err
    assert "no notebook" in err and "no_such_notebook" in err and "Traceback" not in err


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
    write_notebook(project / "notebooks" / "02_broken.ipynb", "out_dir = None  # set by the runner",
                   "x = 1", "y = 2\nz = 1 / 0")
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
