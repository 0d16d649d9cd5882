"""A full run into a checkout: pinned to a clean commit, incremental, each results folder replaced whole, and
``--check`` against the committed tables (scp.suite.runner with scp.suite.graph and scp.suite.check)."""

import json
import os
import subprocess

import pytest

from scp.errors import InputError
from scp.suite import runner, sources
from tests.test_runner import write_notebook

BODY = (
    "import pandas as pd\nfrom scp.suite import plot, record, start\nrun = start({name!r}, globals())",
    "record('n_seen', n)\nplot.save_table(pd.DataFrame({{'x': [n * 0.5], 'seconds': [1.0]}}), {name!r} + '/t',"
    " run.out_dir, provenance=run.provenance())",
    "run.finish()",
)


def git(root, *args):
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def commit(root, message="update"):
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A checkout of two notebooks, 02_b after 01_a, committed, with the runner pointed at it."""
    root = tmp_path / "clone"
    (root / "params").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "scp"\n')
    (root / ".gitignore").write_text("runs/\n")
    for name, after in (("01_a", "[]"), ("02_b", "[01_a]")):
        write_notebook(
            root / "notebooks" / f"{name}.ipynb",
            "n = 2  # size\nout_dir = None  # set by the runner",
            *(cell.format(name=name) for cell in BODY),
        )
        (root / "params" / f"{name}.yaml").write_text(
            f"n: 2\nsmoke:\n  n: 1\nsuite:\n  after: {after}\n  tolerance: {{atol: 1.0e-9}}\n"
        )
    git(root, "init", "-q")
    commit(root, "two notebooks")
    folders = {"ROOT": root, "NOTEBOOKS": root / "notebooks", "PARAMS": root / "params", "RUNS": root / "runs"}
    for module in (runner, sources):  # the runner, and the notebooks and parameter files it reads
        for attr, value in folders.items():
            monkeypatch.setattr(module, attr, value)
    return root


def run(**kwargs):
    lines = []
    runner.run("all", echo=lambda *a, **k: lines.append(" ".join(map(str, a))), **kwargs)
    return lines


def test_a_clean_run_pins_skips_and_replaces_whole(checkout):
    lines = run()
    assert sum("running" in line for line in lines) == 2
    prov = json.loads((checkout / "results" / "01_a" / "provenance.json").read_text())
    head = git(checkout, "rev-parse", "HEAD").strip()
    assert prov["git"] == {"commit": head, "dirty": False, "changed": []}
    table = json.loads((checkout / "results" / "01_a" / "t.json").read_text())
    assert table["provenance"]["git"]["dirty"] is False  # taken when the run started, not after its first table
    assert json.loads((checkout / "results" / "02_b" / "records.json").read_text()) == {"n_seen": 2}
    (checkout / "results" / "01_a" / "left_over.csv").write_text("a\n1\n")
    commit(checkout, "results")
    # nothing changed: both are skipped, and say why
    lines = run()
    assert [line.split(":")[0] for line in lines[:2]] == ["[skip] 01_a", "[skip] 02_b"]
    assert lines[2].startswith("[suite] 0 run, 2 up to date, in ") and len(lines) == 3
    suite_run = json.loads((checkout / "runs" / runner.SUITE_RUN).read_text())
    assert suite_run["ran"] == [] and suite_run["up_to_date"] == ["01_a", "02_b"] and suite_run["wall_s"] >= 0
    assert suite_run["git"]["commit"] == git(checkout, "rev-parse", "HEAD").strip()
    # one parameter of 01_a changes: 01_a and 02_b (after it) rerun, and 01_a's folder holds only this run's files
    (checkout / "params" / "01_a.yaml").write_text(
        (checkout / "params" / "01_a.yaml").read_text().replace("n: 2\n", "n: 3\n", 1)
    )
    commit(checkout)
    lines = run()
    assert [line for line in lines if "running" in line][0].endswith("stale: parameters changed: n) ...")
    assert "it comes after 01_a, which is stale" in [line for line in lines if "running" in line][1]
    assert not (checkout / "results" / "01_a" / "left_over.csv").exists()
    assert json.loads((checkout / "results" / "01_a" / "records.json").read_text()) == {"n_seen": 3}
    assert not (checkout / "runs" / "scratch" / "01_a").exists()
    # --force reruns what is up to date
    commit(checkout, "results again")
    assert sum("running" in line for line in run(force=True)) == 2


def test_a_dirty_tree_is_refused_unless_allowed(checkout):
    nb = checkout / "notebooks" / "01_a.ipynb"
    nb.write_text(nb.read_text().replace("record('n_seen', n)", "record('n_seen', n + 0)"))
    with pytest.raises(InputError, match=r"uncommitted changes \(notebooks/01_a.ipynb\).*--allow-dirty"):
        run()
    assert not (checkout / "results").exists()
    run(allow_dirty=True)
    prov = json.loads((checkout / "results" / "01_a" / "provenance.json").read_text())
    assert prov["git"]["dirty"] is True and prov["git"]["changed"] == ["notebooks/01_a.ipynb"]


def test_a_notebook_after_a_stale_one_is_refused_alone(checkout):
    run()
    commit(checkout, "results")
    (checkout / "params" / "01_a.yaml").write_text(
        (checkout / "params" / "01_a.yaml").read_text().replace("n: 2\n", "n: 4\n", 1)
    )
    commit(checkout)
    with pytest.raises(InputError, match=r"02_b reuses what 01_a trained, which is stale.*scp run 01_a 02_b"):
        runner.run("02_b", echo=None)


def test_check_compares_a_rerun_with_the_committed_tables(checkout):
    run()
    commit(checkout, "results")
    lines = []
    runner.run("01_a", check=True, echo=lambda *a, **k: lines.append(" ".join(map(str, a))))
    assert any(line.startswith("[check] 01_a: equal within tolerance") for line in lines)
    csv = checkout / "results" / "01_a" / "t.csv"
    csv.write_text(csv.read_text().replace("1.0", "1.5", 1))
    with pytest.raises(runner.RunnerError, match="01_a differ from the committed results"):
        runner.run("01_a", check=True, echo=None)


def test_two_jobs_run_independent_notebooks(checkout):
    where = "import os\nrecord('cwd', os.getcwd())\nrecord('runs_dir', os.environ.get('SCP_RUNS_DIR'))"
    write_notebook(
        checkout / "notebooks" / "03_c.ipynb",
        "n = 2  # size\nout_dir = None  # set by the runner",
        *(cell.format(name="03_c") for cell in (*BODY[:-1], where, BODY[-1])),
    )
    (checkout / "params" / "03_c.yaml").write_text("n: 2\n")
    commit(checkout, "a third, independent notebook")
    cwd, environ = os.getcwd(), dict(os.environ)
    lines = run(jobs=2)
    assert sum(line.endswith("...") for line in lines) == 3
    assert all((checkout / "results" / n / "provenance.json").is_file() for n in ("01_a", "02_b", "03_c"))
    # each kernel starts in notebooks/ with the runs folder in its environment; the runner's own working folder
    # and environment are left as they were (threads changing them would race)
    records = json.loads((checkout / "results" / "03_c" / "records.json").read_text())
    assert records["cwd"] == str(checkout / "notebooks") and records["runs_dir"] == str(checkout / "runs")
    assert os.getcwd() == cwd and dict(os.environ) == environ
