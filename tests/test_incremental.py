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
    # one parameter of 01_a changes: 01_a reruns (02_b, after it, read nothing 01_a wrote: it stays), and 01_a's
    # folder holds only this run's files
    (checkout / "params" / "01_a.yaml").write_text(
        (checkout / "params" / "01_a.yaml").read_text().replace("n: 2\n", "n: 3\n", 1)
    )
    commit(checkout)
    lines = run()
    assert [line for line in lines if "running" in line] == [lines[1]]
    assert lines[1].endswith("stale: parameters changed: n) ...") and lines[0].startswith("[skip] 02_b")
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


PRODUCER = (
    "import pathlib\nfrom scp import lineage\nfrom scp.suite import record, start\nrun = start('01_a', globals())",
    "model = pathlib.Path(os.environ['SCP_RUNS_DIR']) / 'models' / 'm' / 'best.safetensors'\n"
    "model.parent.mkdir(parents=True, exist_ok=True)\nmodel.write_bytes(bytes([n]))\n"
    "lineage.note_write(model, 'model')",
    "record('n_seen', n)\nrun.finish()",
)
CONSUMER = (
    "import pathlib\nfrom scp import lineage\nfrom scp.suite import record, start\nrun = start('02_b', globals())",
    "model = pathlib.Path(os.environ['SCP_RUNS_DIR']) / 'models' / 'm' / 'best.safetensors'\n"
    "lineage.note_read(model, 'model')\nrecord('model_byte', model.read_bytes()[0] + k)\nrun.finish()",
)


def _models_checkout(checkout):
    """01_a trains a model (one byte: n) into runs/models, 02_b (after it) reads it."""
    write_notebook(checkout / "notebooks" / "01_a.ipynb", "import os\nn = 2  # size\nout_dir = None", *PRODUCER)
    write_notebook(checkout / "notebooks" / "02_b.ipynb", "import os\nk = 0  # shift\nout_dir = None", *CONSUMER)
    (checkout / "params" / "02_b.yaml").write_text("k: 0\nsmoke:\n  k: 1\nsuite:\n  after: [01_a]\n")
    commit(checkout, "a producer and a consumer")


def test_one_notebook_regenerated_alone_at_a_later_commit_lands_beside_the_others(checkout):
    """The landing rule is by content: 02_b rerun alone at a later commit stands beside 01_a's earlier run."""
    from scp.suite.graph import landing_problems, status

    _models_checkout(checkout)
    run()
    commit(checkout, "results of both")
    assert landing_problems() == [] and not any(status().values())
    (checkout / "params" / "02_b.yaml").write_text(
        (checkout / "params" / "02_b.yaml").read_text().replace("k: 0\n", "k: 5\n", 1)
    )
    nb = checkout / "notebooks" / "02_b.ipynb"
    nb.write_text(nb.read_text().replace("k = 0  # shift", "k = 5  # shift"))
    commit(checkout, "02_b changes")
    assert {n for n, why in status().items() if why} == {"02_b"}
    lines = run()
    assert lines[0].startswith("[skip] 01_a") and sum("running" in line for line in lines) == 1
    commit(checkout, "02_b's results alone")
    provs = {n: json.loads((checkout / "results" / n / "provenance.json").read_text()) for n in ("01_a", "02_b")}
    commits = [git(checkout, "rev-parse", f"HEAD~{k}").strip() for k in (3, 1)]
    assert [provs[n]["git"]["commit"] for n in ("01_a", "02_b")] == commits  # two runs, two commits
    assert json.loads((checkout / "results" / "02_b" / "records.json").read_text()) == {"model_byte": 7}
    assert landing_problems() == [] and not any(status().values())


def test_a_consumed_model_whose_sha256_is_not_its_producers_fails_the_landing(checkout):
    from scp.suite.graph import landing_problems, status

    _models_checkout(checkout)
    run()
    commit(checkout, "results of both")
    # 01_a retrained elsewhere: its committed run now records another model than the one 02_b's run read
    (checkout / "runs" / "models" / "m" / "best.safetensors").write_bytes(b"\x09")
    path = checkout / "results" / "01_a" / "provenance.json"
    prov = json.loads(path.read_text())
    prov["models_written"][0]["sha256"] = "9" * 64
    path.write_text(json.dumps(prov))
    commit(checkout, "01_a from another machine")
    assert status()["02_b"][0].startswith("model changed: runs/models/m/best.safetensors is not the one 01_a's run")
    problems = landing_problems()
    assert len(problems) == 1 and problems[0].startswith("02_b: model changed")


def test_a_producers_rerun_that_changes_a_model_reruns_its_consumer(checkout):
    from scp.suite.graph import landing_problems, status

    _models_checkout(checkout)
    run()
    commit(checkout, "results of both")
    (checkout / "params" / "01_a.yaml").write_text(
        (checkout / "params" / "01_a.yaml").read_text().replace("n: 2\n", "n: 3\n", 1)
    )
    nb = checkout / "notebooks" / "01_a.ipynb"
    nb.write_text(nb.read_text().replace("n = 2  # size", "n = 3  # size"))
    commit(checkout, "01_a changes")
    assert {n for n, why in status().items() if why} == {"01_a"}
    lines = run()
    running = [line for line in lines if "running" in line]
    assert lines[0].startswith("[skip] 02_b") and "running 01_a" in running[0] and "running 02_b" in running[1]
    assert any(line.startswith("[stale] 02_b: now that 01_a landed (model changed") for line in lines)
    assert json.loads((checkout / "results" / "02_b" / "records.json").read_text()) == {"model_byte": 3}
    commit(checkout, "both again")
    assert landing_problems() == [] and not any(status().values())


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
