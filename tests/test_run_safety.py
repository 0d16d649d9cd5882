"""`scp run` loses nothing and runs no parameter as code: parameters are plain values, type-checked (inside
mappings and for ``None`` defaults too) and written into the injected cell by a serializer that cannot produce code;
one writer per notebook; the figures/ + results/ swap is one recoverable step; ``--status`` sees missing or changed
outputs and unreadable provenance; ``--check`` compares every table file; a run into the checkout refuses any
uncommitted change (scp.suite.runner, scp.suite.graph, scp.suite.check)."""

import ast
import base64
import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest

from scp.errors import InputError, SCPError
from scp.suite import runner
from scp.suite.graph import code_digests, notebook_digest, status
from scp.suite.notebook import read_records
from scp.suite.runner import ParameterError, main, parse_overrides, resolve_params
from scp.suite.sources import swap_outlook
from tests.test_incremental import BODY, checkout, commit, git  # noqa: F401 - checkout is a fixture
from tests.test_incremental import run as run_all
from tests.test_runner import project, write_notebook  # noqa: F401 - project is a fixture

PARAMS_CELL = (
    "max_train_examples = None  # int, declared by the runner\n"
    "train_overrides = {}  # any plain entries\n"
    "redundancy = {'n_copies': 1, 'seed': 0}  # typed entries\n"
    "name = 'x'  # text\n"
    "other = None  # no declared type\n"
    "out_dir = None  # set by the runner"
)
RECORD_CELL = (
    "from scp.suite.notebook import record\n"
    "record('seen', {'max_train_examples': max_train_examples, 'train_overrides': train_overrides, 'name': name})"
)


@pytest.fixture
def hostile(project):  # noqa: F811 - the fixture imported above
    write_notebook(project / "notebooks" / "05_values.ipynb", PARAMS_CELL, RECORD_CELL)
    (project / "params" / "05_values.yaml").write_text(
        "max_train_examples: null\ntrain_overrides: {}\nredundancy: {n_copies: 1, seed: 0}\nname: x\nother: null\n"
    )
    return project


def _payload(marker):
    """Text that, written unescaped between double quotes of a Python cell (papermill writes bytes that way),
    creates ``marker``."""
    code = f'"+str(open(r"{marker}","w").close())+"'
    return base64.b64encode(code.encode()).decode()


@pytest.mark.parametrize(
    "override",
    ["max_train_examples=!!binary {payload}", "train_overrides={{epochs: !!binary {payload}}}"],
    ids=["top-level", "dict entry"],
)
def test_a_binary_parameter_never_runs_as_code(hostile, tmp_path, capsys, override):
    marker = tmp_path / "marker"
    argv = ["05_values", "--out", str(tmp_path / "out"), "-p", override.format(payload=_payload(marker))]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "binary is no parameter value" in err and "Traceback" not in err
    assert not marker.exists()


def test_a_value_given_through_the_python_api_is_checked_before_the_kernel(hostile, tmp_path):
    marker = tmp_path / "marker"
    code = base64.b64decode(_payload(marker))
    for params in ({"max_train_examples": code}, {"train_overrides": {"epochs": code}}, {"name": {1, 2}}):
        with pytest.raises(ParameterError, match="takes numbers, text, true/false, null"):
            runner.run("05_values", params=params, out_dir=tmp_path / "out", echo=None)
    assert not marker.exists() and not (tmp_path / "out" / "runs" / "05_values.ipynb").exists()


def test_text_that_looks_like_code_arrives_as_text(hostile, tmp_path):
    marker = tmp_path / "marker"
    text = f'"; open(r"{marker}", "w").close(); x = "\\\' \'\'\' """ \n#'
    params = {"name": text, "train_overrides": {"lr": 0.5, text: [text, None, True]}}
    path = runner.run("05_values", params=params, out_dir=tmp_path / "out", echo=None)["05_values"]
    seen = read_records(path)["seen"]
    assert seen == {"max_train_examples": None, "train_overrides": params["train_overrides"], "name": text}
    assert not marker.exists()


@pytest.mark.parametrize(
    "value",
    [None, True, 3, -2.5, 1e-300, "a'b\"c\\d\n", [], [1, [2, {"k": "v"}]], {"a": {"b": [None]}}, (1, "x")],
)
def test_the_injected_literal_is_the_value_and_nothing_else(value):
    source = runner.python_literal(value)
    assert ast.literal_eval(source) == (list(value) if isinstance(value, tuple) else value)
    assert isinstance(ast.parse(source, mode="eval").body, (ast.Constant, ast.List, ast.Dict, ast.UnaryOp))


@pytest.mark.parametrize("value", [b"x", {1, 2}, {1: "a"}, object(), [b"x"], {"k": {"j": bytearray(b"x")}}])
def test_the_injected_literal_refuses_anything_but_plain_data(value):
    with pytest.raises(ParameterError, match="a parameter value must be"):
        runner.python_literal(value)


@pytest.mark.parametrize(
    "override, problem",
    [
        ("d=2024-01-01", "a timestamp is no parameter value"),
        ("s=!!set {a: null}", "a set is no parameter value"),
        ("p=!!omap [a: 1]", "a omap is no parameter value"),
        ("x=!!python/name:os.system", "could not determine a constructor"),
        ("a=[&x [1, 2], *x]", "an alias (*name) is no value here"),
        ("deep=" + "[" * 100 + "]" * 100, "nested deeper than 64 levels"),
    ],
)
def test_overrides_are_plain_values_only(override, problem):
    with pytest.raises(ParameterError) as info:
        parse_overrides([override])
    message = str(info.value)
    assert problem in message and len(message.splitlines()) == 1 and len(message) < 300


def test_none_defaults_declare_their_type_and_mapping_entries_are_checked(hostile):
    ok = resolve_params("05_values", overrides=parse_overrides(["max_train_examples=24", "redundancy={n_copies: 2}"]))
    assert ok["max_train_examples"] == 24 and ok["redundancy"] == {"n_copies": 2}
    assert resolve_params("05_values", overrides={"max_train_examples": None, "other": None})["other"] is None
    for override, expected in [
        (
            "max_train_examples=abc",
            "parameter max_train_examples of notebook 05_values expects an integer "
            "(its default is None, declared int); got 'abc'",
        ),
        ("max_train_examples=[1]", "expects an integer"),
        ("other=3", "parameter other of notebook 05_values has the default None and no declared type"),
        (
            "redundancy={n_copies: many}",
            "parameter redundancy.n_copies of notebook 05_values expects an integer (its default is 1); got 'many'",
        ),
        ("redundancy={seed: [0]}", "parameter redundancy.seed"),
    ]:
        with pytest.raises(ParameterError, match="^-p: ") as info:
            resolve_params("05_values", overrides=parse_overrides([override]))
        assert expected in str(info.value), override


def test_every_none_default_of_the_suite_declares_its_type():
    used = set()
    for name in runner.notebook_names():
        nulls = {k for k, v in runner._literal_defaults(name).items() if v is None and k != "out_dir"}
        assert nulls <= set(runner.NULL_DEFAULT_TYPES), f"{name}: {nulls} default to None with no declared type"
        used |= nulls
        resolve_params(name, smoke=True)  # the smoke values of None defaults fit the declared types
    assert used == set(runner.NULL_DEFAULT_TYPES)  # no declaration of a parameter no notebook has


# ----------------------------------------------------------------------------------- a run into the checkout

FIGURE_CELL = (
    "figure = run.out_dir / 'figures' / {name!r}\n"
    "figure.mkdir(parents=True, exist_ok=True)\n"
    "(figure / 'f.txt').write_text(str(n))"
)


@pytest.fixture
def outputs(checkout):  # noqa: F811 - the fixture imported above
    """test_incremental's checkout, its 01_a also drawing a "figure", run once (02_b not) and committed."""
    write_notebook(
        checkout / "notebooks" / "01_a.ipynb",
        "n = 2  # size\nout_dir = None  # set by the runner",
        *(cell.format(name="01_a") for cell in (*BODY[:-1], FIGURE_CELL, BODY[-1])),
    )
    commit(checkout, "01_a draws a figure")
    runner.run("01_a", echo=None)
    commit(checkout, "results")
    return checkout


def _stale(name):
    """``status()[name]`` but "code changed": the checkout's notebooks import the scp package these tests run,
    which may be edited while they run."""
    return [reason for reason in status()[name] if not reason.startswith("code changed")]


def _files(root):
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for kind in ("figures", "results")
        for p in sorted((root / kind).rglob("*"))
        if p.is_file()
    }


def _hold(lock_file):
    """Hold the flock another run of the notebook would hold (as a second process running it would)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_a_second_run_of_a_notebook_is_refused_with_one_line_and_loses_nothing(outputs, capsys):
    before = _files(outputs)
    fd = _hold(outputs / "runs" / ".locks" / "01_a.lock")
    try:
        assert main(["01_a", "--force"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "notebook 01_a is being written by another process" in err
        with pytest.raises(SCPError, match="notebook 01_a is being written by another process"):
            runner.run("01_a", check=True, echo=None)
    finally:
        os.close(fd)
    assert _files(outputs) == before
    assert sum("running" in line for line in run_all(force=True)) == 2  # the lock is free again, 02_b runs too


class Crash(BaseException):
    """A run killed at this point (kill -9): nothing after it runs, no handler sees it."""


@pytest.mark.parametrize("steps", [0, 1, 2, 3, 4], ids=lambda k: f"killed after {k} of 4 renames")
def test_a_run_killed_during_the_swap_is_finished_by_the_next_run(outputs, monkeypatch, steps):
    """The swap renames old figures aside, new figures in, old results aside, new results in, then removes its
    journal: a kill before each of those five steps."""
    params = outputs / "params" / "01_a.yaml"
    params.write_text(params.read_text().replace("n: 2\n", "n: 3\n", 1))
    commit(outputs, "n = 3")
    done, rename, unlink = [], Path.rename, Path.unlink

    def step(original):
        def killed(self, *args, **kwargs):
            if (outputs / "runs" / "scratch" / "01_a.swap.json").exists():  # inside the swap
                if len(done) == steps:
                    raise Crash
                done.append(self)
            return original(self, *args, **kwargs)

        return killed

    monkeypatch.setattr(Path, "rename", step(rename))
    monkeypatch.setattr(Path, "unlink", step(unlink))
    with pytest.raises(Crash):
        runner.run("01_a", echo=None)
    monkeypatch.setattr(Path, "rename", rename)
    monkeypatch.setattr(Path, "unlink", unlink)
    reasons = _stale("01_a")
    assert reasons[0].startswith("a run was cut while replacing figures/01_a and results/01_a (01_a.swap.json")
    lines = []
    with pytest.raises(InputError, match=r"uncommitted changes \(.*figures/01_a"):  # the recovered, new outputs
        runner.run("01_a", echo=lambda *a, **k: lines.append(a[0]))
    assert lines[0].startswith("[recover] 01_a: finished replacing figures/01_a and results/01_a")
    assert (outputs / "figures" / "01_a" / "f.txt").read_text() == "3"  # one run's figures and results
    assert json.loads((outputs / "results" / "01_a" / "records.json").read_text()) == {"n_seen": 3}
    assert not list(outputs.glob("*/.01_a.replaced")) and not (outputs / "runs" / "scratch" / "01_a").exists()
    commit(outputs, "the recovered run")
    assert _stale("01_a") == []


def test_a_missing_or_changed_output_makes_its_notebook_stale(outputs):
    prov = json.loads((outputs / "results" / "01_a" / "provenance.json").read_text())
    assert set(prov["outputs"]) == {
        "figures/01_a/f.txt",
        "results/01_a/t.csv",
        "results/01_a/t.json",
        "results/01_a/records.json",
    }
    (outputs / "results" / "01_a" / "t.json").unlink()
    (outputs / "figures" / "01_a" / "f.txt").write_text("edited")
    assert _stale("01_a") == ["outputs missing: results/01_a/t.json", "outputs changed: figures/01_a/f.txt"]
    git(outputs, "checkout", "--", ".")
    # a provenance written before outputs were recorded: the files git tracks there must exist
    del prov["outputs"]
    (outputs / "results" / "01_a" / "provenance.json").write_text(json.dumps(prov))
    commit(outputs, "an old provenance")
    assert _stale("01_a") == []
    (outputs / "figures" / "01_a" / "f.txt").unlink()
    assert _stale("01_a") == ["outputs missing: figures/01_a/f.txt"]


def test_record_outputs_backfills_the_hashes_of_committed_outputs(outputs):
    path = outputs / "results" / "01_a" / "provenance.json"
    recorded = json.loads(path.read_text())["outputs"]
    prov = json.loads(path.read_text())
    del prov["outputs"]
    path.write_text(json.dumps(prov))
    commit(outputs, "old provenance")
    (outputs / "figures" / "01_a" / "f.txt").write_text("edited")
    with pytest.raises(InputError, match=r"outputs with uncommitted changes \(figures/01_a/f.txt\)"):
        runner.record_outputs()
    git(outputs, "checkout", "--", ".")
    assert runner.record_outputs() == ["01_a"]
    assert json.loads(path.read_text())["outputs"] == recorded
    commit(outputs, "outputs recorded")
    (outputs / "figures" / "01_a" / "f.txt").write_text("edited")
    assert _stale("01_a") == ["outputs changed: figures/01_a/f.txt"]


@pytest.mark.parametrize(
    "text, reason",
    [
        ("[1, 2]", "results/01_a/provenance.json holds a list where an object is expected"),
        ('{"git": [], "outputs": {"a": 1}}', "results/01_a/provenance.json: its git, outputs are not of the recorded"),
        ('{"data_files": [{"path": 3}]}', "its data_files is not of the recorded form"),
        ('{"inputs": ' * 100 + "{}" + "}" * 100, "nests lists or objects deeper than 64 levels"),
        ("{not json", "is not valid JSON"),
    ],
)
def test_an_unreadable_provenance_is_one_reason_in_status(checkout, capsys, text, reason):  # noqa: F811
    (checkout / "results" / "01_a").mkdir(parents=True)
    (checkout / "results" / "01_a" / "provenance.json").write_text(text)
    reasons = _stale("01_a")
    assert len(reasons) == 1 and reasons[0].startswith("its provenance.json is unreadable: ") and reason in reasons[0]
    assert main(["all", "--status"]) == 0
    out = capsys.readouterr().out
    assert "01_a: stale: its provenance.json is unreadable" in out and "Traceback" not in out


def test_status_without_scp_data_dir_says_so_once(checkout, monkeypatch, capsys):  # noqa: F811
    data = [{"path": f"$SCP_DATA_DIR/hotpotqa/{i}.json", "bytes": 1, "sha256": "0" * 64} for i in "abc"]
    inputs = {"notebook": notebook_digest("01_a"), "code": code_digests("01_a")}
    prov = {"git": {"dirty": False}, "parameters": {"n": 2}, "inputs": inputs, "data_files": data, "outputs": {}}
    (checkout / "results" / "01_a").mkdir(parents=True)
    (checkout / "results" / "01_a" / "provenance.json").write_text(json.dumps(prov))
    monkeypatch.delenv("SCP_DATA_DIR")
    assert _stale("01_a") == ["its data files are not checked (SCP_DATA_DIR is not set)"]
    assert main(["01_a", "--status"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("note: SCP_DATA_DIR is not set, so no data file is checked") and "hub" in out[0]
    assert out[1:] == ["01_a: stale: its data files are not checked (SCP_DATA_DIR is not set)"]


@pytest.mark.parametrize(
    "change, shown",
    [
        (lambda root: (root / "NOTES.md").write_text("# notes\n"), "NOTES.md"),
        (lambda root: (root / "figures" / "01_a" / "f.txt").unlink(), "figures/01_a/f.txt"),
        (lambda root: (root / "results" / "01_a" / "t.csv").write_text("x\n"), "results/01_a/t.csv"),
        (lambda root: (root / "params" / "extra.txt").write_text("x"), "params/extra.txt"),
    ],
    ids=["untracked markdown", "a deleted figure", "an edited table", "an untracked file"],
)
def test_a_run_into_the_checkout_refuses_any_uncommitted_change(checkout, change, shown):  # noqa: F811
    outputs = checkout
    for path in ("README.md", "figures/01_a/f.txt", "results/01_a/t.csv"):  # as a committed run left them
        (outputs / path).parent.mkdir(parents=True, exist_ok=True)
        (outputs / path).write_text("# the project\n")
    commit(outputs, "a readme and outputs")
    (outputs / "README.md").write_text("# the project, edited\n")
    with pytest.raises(InputError, match=r"uncommitted changes \(README.md\)"):
        run_all(force=True)
    git(outputs, "checkout", "--", "README.md")
    change(outputs)
    before = _files(outputs)
    with pytest.raises(InputError, match=rf"uncommitted changes \({shown}\).*--allow-dirty"):
        run_all(force=True)
    assert _files(outputs) == before


# ------------------------------------------------------------------------------ one reading of every parameter


@pytest.fixture
def no_kernel(monkeypatch):
    """papermill's execution recorded instead of run: a refused parameter must stop before any kernel."""
    import papermill

    started = []
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: started.append(a))
    return started


def _refused(argv, capsys):
    """``main(argv)``'s exit status 2 and its one error line (no traceback)."""
    assert main(argv) == 2, argv
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "text, key, where",
    [
        ("n: 10\nseed: 0\nseed: 1\n", "seed", "line 3"),
        ("n: 10\nseed: 0\nsmoke:\n  n: 2\n  n: 3\n", "n", "line 5"),
        ("n: 10\nseed: 0\nsuite:\n  after: []\n  after: [01_demo]\n", "after", "line 5"),
        ("n: 10\nseed: 0\nsuite:\n  tolerance: {atol: 1.0, atol: 2.0}\n", "atol", "line 4"),
    ],
    ids=["top level", "smoke section", "suite section", "nested mapping"],
)
def test_a_key_twice_in_a_params_file_is_refused_naming_it(project, no_kernel, capsys, text, key, where):  # noqa: F811
    (project / "params" / "01_demo.yaml").write_text(text)
    err = _refused(["01_demo", "--out", str(project / "out")], capsys)
    assert f"01_demo.yaml {where}: " in err and f"the key {key!r} is given twice" in err
    assert no_kernel == []


def test_a_key_or_a_p_name_given_twice_is_refused_naming_it(hostile, no_kernel, capsys):
    out = ["05_values", "--out", str(hostile / "out")]
    err = _refused([*out, "-p", "train_overrides={epochs: 1, epochs: 2}"], capsys)
    assert "-p train_overrides: " in err and "the key 'epochs' is given twice" in err
    err = _refused([*out, "-p", "max_train_examples=1", "-p", "max_train_examples=2"], capsys)
    assert "-p max_train_examples is given twice ('max_train_examples=1' and 'max_train_examples=2')" in err
    with pytest.raises(ParameterError, match="-p n is given twice"):
        parse_overrides(["n=1", " n =1"])  # even with the same value
    assert no_kernel == []


def test_numbers_are_read_as_yaml_1_2_reads_them(project, no_kernel, capsys):  # noqa: F811
    read = parse_overrides(["a=0x1F", "b=0o17", "c=1:30", "d=1_000", "e=1e-3", "f=yes", "g=-9223372036854775808"])
    assert read == {"a": 31, "b": 15, "c": "1:30", "d": "1_000", "e": 0.001, "f": "yes", "g": -(2**63)}
    with pytest.raises(ParameterError, match=r"-p: parameter seed of notebook 01_demo expects an integer .*'1:30'"):
        resolve_params("01_demo", overrides=parse_overrides(["seed=1:30"]))  # not 90 (YAML 1.1 base 60)
    out = ["01_demo", "--out", str(project / "out")]
    err = _refused([*out, "-p", "seed=010"], capsys)  # YAML 1.1 read 8, 1.2 reads 10: refused, not guessed
    assert "-p seed: cannot read '010' as a value ('010' has a leading zero, which YAML 1.1 reads as octal" in err
    for digits in ("1" * 5000, str(2**63), str(-(2**63) - 1), "0x1" + "0" * 16):
        err = _refused([*out, "-p", f"seed={digits}"], capsys)
        assert "is beyond 64 bits" in err and len(err) < 400, err
    params = project / "params" / "01_demo.yaml"
    params.write_text("n: 0x1F\nseed: 0o17\n")
    assert resolve_params("01_demo") == {"n": 31, "seed": 15}
    params.write_text("n: 10\nseed: 010\n")
    err = _refused(out, capsys)
    assert "01_demo.yaml line 2: " in err and "leading zero" in err
    params.write_text("n: 10\nseed: 1:30\n")
    assert "parameter seed of notebook 01_demo expects an integer" in _refused(out, capsys)
    assert no_kernel == []


def test_a_long_value_is_refused_and_quoted_cut_with_its_length(hostile, no_kernel, capsys):
    out = ["05_values", "--out", str(hostile / "out")]
    for override in ("name=" + "x" * 120_000, "train_overrides={note: " + "y" * 120_000 + "}"):
        err = _refused([*out, "-p", override], capsys)
        assert "takes texts of at most 1024 characters" in err and "(120000 characters)" in err
        assert len(err) < 400, len(err)
    err = _refused([*out, "-p", "max_train_examples=" + "z" * 120_000], capsys)
    assert "expects an integer" in err and "(120000 characters)" in err and len(err) < 400
    assert no_kernel == []


def test_the_status_of_a_swap_journal_says_what_the_next_run_will_do(outputs):
    from scp.suite import sources

    assert sources._OUTPUTS == runner.OUTPUTS  # the folders the runner swaps
    journal = outputs / "runs" / "scratch" / "01_a.swap.json"
    journal.parent.mkdir(parents=True, exist_ok=True)
    assert swap_outlook("01_a") is None
    (outputs / "runs" / "scratch" / "01_a" / "figures" / "01_a").mkdir(parents=True)
    journal.write_text(json.dumps({"notebook": "01_a", "staged": {"figures": True, "results": False}}))
    assert swap_outlook("01_a").endswith("(01_a.swap.json; the next scp run 01_a finishes it)")
    shutil.rmtree(outputs / "runs" / "scratch" / "01_a")  # the staged folder vanished, and the old one is aside
    (outputs / "figures" / "01_a").rename(outputs / "figures" / ".01_a.replaced")
    said = swap_outlook("01_a")
    assert "names runs/scratch/01_a/figures/01_a, which no longer exists, and figures/01_a is missing too" in said
    assert "move figures/.01_a.replaced back" in said and "remove runs/scratch/01_a.swap.json by hand" in said
    (outputs / "figures" / ".01_a.replaced").rename(outputs / "figures" / "01_a")
    assert swap_outlook("01_a").endswith("finishes it)")  # figures/01_a in place: the swap of it is done
    (outputs / "results" / ".01_a.replaced").mkdir()  # results were not staged, and an old copy is aside
    said = swap_outlook("01_a")
    assert "results/01_a and results/.01_a.replaced both exist, so the next run refuses it" in said
    journal.write_text("{")
    assert "cannot be read" in swap_outlook("01_a") and "remove it by hand" in swap_outlook("01_a")


@pytest.mark.parametrize(
    "where, what",
    [
        (lambda root, data: root, "is the checkout"),
        (lambda root, data: root / "results", "is inside the checkout"),
        (lambda root, data: root / "notebooks", "is inside the checkout"),
        (lambda root, data: data, "is the data folder"),
        (lambda root, data: data / "hotpotqa", "is inside the data folder"),
    ],
)
def test_an_out_folder_that_would_land_on_the_checkout_or_the_data_is_refused(where, what, data_dir):
    """scp run --out writes figures/, results/ and runs/ there: never onto the checkout (whose committed results a
    run into the checkout alone replaces, pinned and journaled) or the data it reads."""
    from scp.errors import InputError

    out = where(runner.ROOT, data_dir)
    with pytest.raises(InputError, match=f"--out {out} {what}"):
        runner.run("00_cooperative_games_tutorial", smoke=True, out_dir=out, echo=None)


def test_an_out_folder_under_runs_is_allowed(tmp_path):
    runner._check_out_dir(runner.RUNS / "elsewhere")
    runner._check_out_dir(tmp_path / "out")
