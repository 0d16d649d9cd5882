import hashlib
import json
import math
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from scp.core.result import ShapleyResult
from scp.io import jsonable
from scp.suite import notebook
from scp.suite.notebook import (
    RECORD_MIME,
    checkout_of,
    provenance,
    read_records,
    record,
    repo_root,
    resolve_out_dir,
)


def test_record_outside_ipython_stores_the_json_value():
    assert record("auc_mean", np.float64(0.5)) == 0.5
    assert record("counts", np.array([1, 2, 3])) == [1, 2, 3]
    assert notebook.RECORDS["auc_mean"] == 0.5 and notebook.RECORDS["counts"] == [1, 2, 3]
    with pytest.raises(ValueError, match="identifiers"):
        record("not a name", 1)
    with pytest.raises(TypeError, match="cannot write a object as JSON"):
        record("figure", object())


def test_jsonable_converts_numpy_dataclasses_and_special_floats():
    res = ShapleyResult(values=np.array([0.25, 0.75]), n_evaluations=4, method="exact")
    d = jsonable(res)
    assert d["values"] == [0.25, 0.75] and d["n_evaluations"] == 4 and d["method"] == "exact"
    assert jsonable({"a": (np.int64(1), np.bool_(True)), 2: {3.0}}) == {"a": [1, True], "2": [3.0]}
    assert jsonable(float("nan")) is None and jsonable(np.inf) is None
    assert math.copysign(1.0, jsonable(-0.0)) == 1.0
    json.dumps(d)


def _output(payload):
    return new_output("display_data", data={RECORD_MIME: payload, "text/plain": "x"})


def test_read_records_from_an_executed_notebook(tmp_path):
    nb = new_notebook(
        cells=[
            new_code_cell("record('a', 1)", outputs=[_output({"a": 1})]),
            new_code_cell("print(2)", outputs=[new_output("stream", name="stdout", text="2\n")]),
            new_code_cell("record('b', [1, 2]); record('a', 3)", outputs=[_output({"b": [1, 2]}), _output({"a": 3})]),
        ]
    )
    path = tmp_path / "executed.ipynb"
    nbformat.write(nb, str(path))
    assert read_records(path) == {"a": 3, "b": [1, 2]}
    assert list(read_records(path)) == ["a", "b"]


def test_out_dir_none_means_the_repository_root(tmp_path):
    root = repo_root()
    assert (root / "pyproject.toml").is_file() and (root / "scp" / "suite" / "notebook.py").is_file()
    assert resolve_out_dir(None) == root
    assert resolve_out_dir(tmp_path) == tmp_path.resolve()
    assert resolve_out_dir(str(tmp_path)).is_absolute()


def test_out_dir_none_means_the_checkout_the_notebook_runs_in(tmp_path, monkeypatch):
    """A kernel started in a second clone (JupyterLab starts it in the notebook's folder) writes into that clone,
    not into the checkout scp was imported from; outside any checkout the default stays the package's."""
    clone = tmp_path / "second-clone"
    (clone / "notebooks").mkdir(parents=True)
    (clone / "pyproject.toml").write_text('[project]\nname = "scp"\n')
    monkeypatch.chdir(clone / "notebooks")
    assert checkout_of(Path.cwd()) == clone.resolve() and resolve_out_dir(None) == clone.resolve()
    other = tmp_path / "other"
    (other / "notebooks").mkdir(parents=True)
    (other / "pyproject.toml").write_text('[project]\nname = "another-project"\n')
    monkeypatch.chdir(other / "notebooks")
    assert checkout_of(Path.cwd()) is None and resolve_out_dir(None) == repo_root()


def test_provenance_lists_parameters_versions_git_and_data_files(tmp_path):
    data = tmp_path / "sample.jsonl"
    data.write_bytes(b'{"q": 1}\n')
    prov = provenance({"seed": 3, "n": 5, "out_dir": "/tmp/x"}, data_files=[data], started=0.0, notebook="demo")
    assert prov["parameters"] == {"seed": 3, "n": 5}  # out_dir is where, not what
    assert prov["seeds"] == {"seed": 3}
    assert prov["notebook"] == "demo"
    assert prov["versions"]["python"] and prov["versions"]["numpy"] == np.__version__
    # every distribution this process imported a module of, not a fixed list
    assert {"numpy", "scp", "pytest"} <= set(prov["versions"]) and prov["versions"]["pytest"] == pytest.__version__
    assert set(prov["git"]) == {"commit", "dirty", "changed"}
    assert prov["git"]["commit"] is None or len(prov["git"]["commit"]) == 40
    # a file outside the data folder and the checkout is named by its absolute path
    sha = hashlib.sha256(b'{"q": 1}\n').hexdigest()
    assert prov["data_files"] == [{"path": str(data.resolve()), "bytes": 9, "sha256": sha}]
    assert prov["models"] == [] and prov["models_written"] == []
    assert prov["wall_time_s"] > 0
    assert provenance({"seeds": [0, 1]})["seeds"] == {"seeds": [0, 1]}
    assert provenance()["wall_time_s"] is None
    json.dumps(prov)


def test_start_reads_the_parameters_cell_names():
    ns = {"n_players": 4, "budgets": [10], "n_repeats": 2, "delta": 0.1, "seed": 1, "out_dir": None, "x": 0}
    run = notebook.start("00_cooperative_games_tutorial", ns)
    assert run.parameters == {k: v for k, v in ns.items() if k != "x"}
    assert run.out_dir == repo_root()
    assert run.provenance()["parameters"]["seed"] == 1
    with pytest.raises(RuntimeError, match="parameters cell"):
        notebook.start("00_cooperative_games_tutorial", {"seed": 0})
