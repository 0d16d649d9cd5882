"""Output paths are the user's (issue 25): a regular file or a new path is written atomically with the old file's
mode kept; a symbolic link, device, named pipe or socket is refused with one line and left as it was, never
replaced by a regular file; a dangling link is refused and nothing is created at its target."""

import os
import socket
import stat
import time
import types
from pathlib import Path

import pytest

from scp import io
from scp.cli import main
from scp.errors import InputError
from scp.io import atomic_open, write_json

SHIPPED = Path(__file__).resolve().parents[1] / "models" / "scp-hotpotqa-best.safetensors"


def specials(tmp_path: Path) -> dict[str, Path]:
    """One of each kind of path that is not a regular file: a link to a file, a dangling link, a named pipe, a
    unix socket (bound, so it exists) and a folder."""
    target = tmp_path / "target.json"
    target.write_text('{"old": true}')
    (tmp_path / "link.json").symlink_to(target)
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere" / "deep" / "x.json")
    os.mkfifo(tmp_path / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    (tmp_path / "folder").mkdir()
    return {
        "a symbolic link to": tmp_path / "link.json",
        "which does not exist": tmp_path / "dangling.json",
        "a named pipe": tmp_path / "pipe",
        "a socket": tmp_path / "sock",
        "a directory": tmp_path / "folder",
    }


def kinds(tmp_path: Path) -> dict[str, int]:
    return {p.name: stat.S_IFMT(os.lstat(p).st_mode) for p in tmp_path.iterdir()}


def test_writers_refuse_what_is_not_a_regular_file_and_leave_it_as_it_was(tmp_path):
    paths = specials(tmp_path)
    before = kinds(tmp_path)
    for words, path in paths.items():
        with pytest.raises(InputError, match=words) as caught:
            write_json({"new": 1}, path)
        assert "\n" not in str(caught.value) and "not a regular file" in str(caught.value)
    assert kinds(tmp_path) == before  # every link, pipe and socket still what it was, no temporary file left
    assert (tmp_path / "target.json").read_text() == '{"old": true}'  # the link's target kept its content
    assert not (tmp_path / "nowhere").exists()  # nothing made at the dangling link's target


def test_a_device_node_is_refused_and_stays_a_device(tmp_path):
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs CAP_MKNOD here; /dev/null itself is only used where refusal comes first")
    with pytest.raises(InputError, match="a character device"), atomic_open(node, "w") as f:
        f.write("{}")
    with pytest.raises(InputError, match="a character device"):
        io.check_output_path(node, "--out")
    assert stat.S_ISCHR(os.lstat(node).st_mode) and sorted(os.listdir(tmp_path)) == ["null"]
    io.check_output_path(node, "--output", stream=True)  # where streaming is documented it is written to, in order


def test_a_replaced_file_keeps_its_mode_and_a_new_one_is_0644(tmp_path):
    private = tmp_path / "private.json"
    private.write_text("{}")
    private.chmod(0o600)
    write_json({"secret": 1}, private)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and '"secret"' in private.read_text()
    write_json({}, tmp_path / "new.json")
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644


def test_check_output_path_names_the_option_and_the_problem(tmp_path):
    paths = specials(tmp_path)
    for words, path in paths.items():
        with pytest.raises(InputError, match=words) as caught:
            io.check_output_path(path, "--out")
        assert str(caught.value).startswith(f"--out {path} ")
    io.check_output_path(tmp_path / "target.json", "--out")  # a regular file
    io.check_output_path(tmp_path / "new" / "x.json", "--out")  # a new path
    # streams where documented: a named pipe, /dev/stdout; a link, a socket still refused
    io.check_output_path(paths["a named pipe"], "--output", stream=True)
    io.check_output_path("/dev/stdout", "--output", stream=True)
    for refused in ("a symbolic link to", "a socket", "which does not exist"):
        with pytest.raises(InputError, match=refused):
            io.check_output_path(paths[refused], "--output", stream=True)
    # under a dangling link or a file: refused, and no folder is made at the link's target
    with pytest.raises(InputError, match="its folder .*dangling.json is a symbolic link"):
        io.check_output_path(paths["which does not exist"] / "x.json", "--out")
    with pytest.raises(InputError, match="its folder .*target.json is a file"):
        io.check_output_path(tmp_path / "target.json" / "x.json", "--out")
    assert not (tmp_path / "nowhere").exists()


def test_files_written_together_change_together(tmp_path):
    a, b = tmp_path / "a.bin", tmp_path / "b.json"
    a.write_bytes(b"old a")
    b.write_bytes(b"old b")
    with pytest.raises(RuntimeError), io.atomic_open_many([a, b]) as (fa, fb):
        fa.write(b"new a")
        fb.write(b"new b")
        raise RuntimeError("fails before the renames")
    assert (a.read_bytes(), b.read_bytes()) == (b"old a", b"old b") and sorted(os.listdir(tmp_path)) == [
        "a.bin",
        "b.json",
    ]
    with io.atomic_open_many([a, b]) as (fa, fb):
        fa.write(b"new a")
        fb.write(b"new b")
    assert (a.read_bytes(), b.read_bytes()) == (b"new a", b"new b")


def test_the_depth_check_skips_strings_and_costs_no_python_loop_per_character(tmp_path):
    assert io.parse_json('["[[[[[[\\"]]]", [[1]]]', "x", max_depth=3) == ['[[[[[["]]]', [[1]]]
    with pytest.raises(Exception, match="deeper than 2 levels"):
        io.parse_json('["[", [[1]]]', "x", max_depth=2)
    big = '{"sentences": ["' + "word " * 6_000_000 + '"]}'  # 30 MB in one sentence
    t0 = time.perf_counter()
    assert len(io.parse_json(big, "a record")["sentences"][0]) == 30_000_000
    assert time.perf_counter() - t0 < 1.0  # a Python loop over its characters took 1.5 s here


def one_line(argv: list[str], capsys) -> str:
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


EVAL = ["eval", "--dataset", "hotpotqa", "--method", "cosine", "--limit", "2", "--out"]


def test_the_command_line_refuses_special_outputs_before_any_work(tmp_path, capsys, monkeypatch):
    paths = specials(tmp_path)

    def no_work(*args, **kwargs):
        raise AssertionError("the output should have been refused before any work")

    monkeypatch.setattr("scp.pruning.evaluation.run_eval", no_work)
    monkeypatch.setattr("scp.models.checkpoint.convert", no_work)
    monkeypatch.setattr("scp.training.runs.run", no_work)
    for words, path in paths.items():
        assert words in one_line(EVAL + [str(path)], capsys)
    # /dev/null and /dev/stdout: refused before anything is written, /dev/null still the device it was
    assert "is a character device" in one_line(EVAL + ["/dev/null"], capsys)
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    assert "/dev/stdout is a symbolic link" in one_line(EVAL + ["/dev/stdout"], capsys)
    err = one_line(["convert-checkpoint", str(SHIPPED), str(paths["a named pipe"])], capsys)
    assert "the converted checkpoint" in err and "a named pipe" in err
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").symlink_to(tmp_path / "target.json")
    err = one_line(["train", "--out", str(run), "--epochs", "1"], capsys)
    assert f"--out {run / 'config.json'} is a symbolic link" in err
    assert kinds(tmp_path)["pipe"] == stat.S_IFIFO and (tmp_path / "target.json").read_text() == '{"old": true}'


# ------------------------------------------------------------------- issue 44: an output is never an input


def no_work(*args, **kwargs):
    raise AssertionError("the output should have been refused before any work")


def test_eval_refuses_an_output_that_is_its_data_checkpoint_or_card(tmp_path, capsys, monkeypatch):
    """`scp eval --data F --out F` replaced the data by the record, `--checkpoint C --out C` the checkpoint."""
    monkeypatch.setattr("scp.pruning.evaluation.run_eval", no_work)
    data = tmp_path / "mine.jsonl"
    data.write_text('{"my": "data"}\n')
    os.link(data, tmp_path / "hard.jsonl")
    model = tmp_path / "m.safetensors"
    model.write_bytes(SHIPPED.read_bytes())
    (tmp_path / "m.json").write_text('{"card": 1}')
    base = ["eval", "--dataset", "hotpotqa", "--method", "bm25", "--limit", "2"]
    err = one_line([*base, "--data", str(data), "--out", str(data)], capsys)
    assert f"--out {data} is --data {data}, a file this command reads" in err
    err = one_line([*base, "--data", str(data), "--out", str(tmp_path / "hard.jsonl")], capsys)  # a hard link
    assert f"--out {tmp_path / 'hard.jsonl'} is --data {data} (the same file under another name)" in err
    scp_eval = ["eval", "--dataset", "hotpotqa", "--method", "scp", "--limit", "2", "--checkpoint", str(model)]
    assert f"--out {model} is --checkpoint {model}" in one_line([*scp_eval, "--out", str(model)], capsys)
    err = one_line([*scp_eval, "--out", str(tmp_path / "m.json")], capsys)
    assert "is the model card of --checkpoint" in err
    # a data folder: the dataset's file in it, and $SCP_DATA_DIR's
    folder = tmp_path / "data" / "hotpotqa"
    folder.mkdir(parents=True)
    (folder / "hotpotqa_dev_distractor.jsonl.gz").write_bytes(b"not read")
    target = folder / "hotpotqa_dev_distractor.jsonl.gz"
    assert "--data hotpotqa data file" in one_line([*base, "--data", str(folder.parent), "--out", str(target)], capsys)
    monkeypatch.setenv("SCP_DATA_DIR", str(folder.parent))
    assert "$SCP_DATA_DIR's hotpotqa data file" in one_line([*base, "--out", str(target)], capsys)
    assert data.read_text() == '{"my": "data"}\n' and model.read_bytes() == SHIPPED.read_bytes()
    assert target.read_bytes() == b"not read" and (tmp_path / "m.json").read_text() == '{"card": 1}'


PRUNE = ["prune", "--checkpoint", str(SHIPPED), "--top-k", "1", "--no-progress"]


def test_prune_refuses_an_output_whose_settings_file_is_its_input(tmp_path, capsys, monkeypatch):
    """The output was new, so it was written: its settings file `OUT.settings.json` replaced the input."""
    monkeypatch.setattr("scp.pruning.pruner.ShapleyPruner.from_checkpoint", no_work)
    record = '{"question": "Who left?", "sentences": ["Ann is here.", "Bob left."]}\n'
    src = tmp_path / "out.jsonl.settings.json"
    src.write_text(record)
    err = one_line([*PRUNE, "--input", str(src), "--output", str(tmp_path / "out.jsonl")], capsys)
    assert f"the settings file of the output {src} is the input {src}" in err
    os.link(src, tmp_path / "linked.jsonl")  # the output a hard link of the input
    err = one_line([*PRUNE, "--input", str(src), "--output", str(tmp_path / "linked.jsonl")], capsys)
    assert f"the output {tmp_path / 'linked.jsonl'} is the input {src} (the same file under another name)" in err
    assert src.read_text() == record and not (tmp_path / "out.jsonl").exists()


def test_prune_of_an_empty_input_says_no_record_was_written_and_creates_nothing(tmp_path, capsys, monkeypatch):
    import torch

    from scp.pruning.pruner import MAX_UNITS

    fake = types.SimpleNamespace(
        model=torch.nn.Linear(1, 1),
        embedder=types.SimpleNamespace(id="fake"),
        estimator="monte_carlo",
        n_permutations=4,
        antithetic=False,
        seed=0,
        max_units=MAX_UNITS,
    )
    monkeypatch.setattr("scp.pruning.pruner.ShapleyPruner.from_checkpoint", lambda *a, **k: fake)
    (tmp_path / "empty.jsonl").write_text("")
    out = tmp_path / "out.jsonl"
    assert main([*PRUNE, "--input", str(tmp_path / "empty.jsonl"), "--output", str(out)]) == 0
    said = capsys.readouterr().out
    assert (
        said == f"no record was written: the input {tmp_path / 'empty.jsonl'} holds no records; {out} was not created\n"
    )
    assert sorted(os.listdir(tmp_path)) == ["empty.jsonl"]


TRAIN = ["train", "--embedder", "random", "--max-train-examples", "8", "--epochs", "1", "--quiet", "--out"]


def trained_run(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    run = tmp_path / "run"
    run.mkdir()
    files = {"best.safetensors": b"best weights", "last.safetensors": b"last weights", "config.json": b"{}"}
    for name, content in files.items():
        (run / name).write_bytes(content)
    return run, files


def test_train_onto_a_trained_run_is_refused_without_resume_or_force(tmp_path, capsys, monkeypatch):
    """It overwrote best.safetensors and last.safetensors of the finished run, no word."""
    monkeypatch.setattr("scp.training.runs.run", no_work)
    run, files = trained_run(tmp_path)
    err = one_line([*TRAIN, str(run)], capsys)
    assert f"--out {run} holds a trained run (best.safetensors, last.safetensors, config.json)" in err
    assert "--resume" in err and "--force" in err
    assert "give one of them" in one_line([*TRAIN, str(run), "--resume", "--force"], capsys)
    # --force with --data inside the run: refused before anything is removed
    err = one_line([*TRAIN, str(run), "--force", "--data", str(run / "config.json")], capsys)
    assert f"--out {run / 'config.json'} is --data {run / 'config.json'}" in err
    assert {name: (run / name).read_bytes() for name in files} == files


def test_train_force_replaces_the_run_and_says_so(tmp_path, capsys, monkeypatch):
    run, _ = trained_run(tmp_path)
    seen = {}

    def fake_run(config, out, **kwargs):
        seen["left"] = sorted(os.listdir(out))
        (out / "best.safetensors").write_bytes(b"new")
        return types.SimpleNamespace(best_val_auc=0.5, best_path=out / "best.safetensors", seconds=0.0)

    monkeypatch.setattr("scp.training.runs.run", fake_run)
    assert main([*TRAIN, str(run), "--force"]) == 0
    said = capsys.readouterr().out
    assert f"--force: removed the trained run in {run} (best.safetensors, last.safetensors, config.json)" in said
    assert seen["left"] == [] and (run / "best.safetensors").read_bytes() == b"new"


def test_ship_refuses_a_run_that_is_the_model_it_would_replace(tmp_path, capsys):
    from scp.training.ship import ship

    models = tmp_path / "models"
    models.mkdir()
    (models / "scp-x.safetensors").write_bytes(SHIPPED.read_bytes())
    with pytest.raises(InputError, match="the shipped model .*scp-x.safetensors is the run's checkpoint"):
        ship(models / "scp-x.safetensors", "scp-x", chosen_by="again", models_dir=models)
    assert sorted(os.listdir(models)) == ["scp-x.safetensors"]


def test_ship_removes_the_temporaries_a_killed_ship_left(tmp_path, capsys):
    """A SIGKILL between the two renames left models/.NAME.json.XXXXXXXX.tmp for good."""
    from scp.training.ship import ship

    models = tmp_path / "models"
    models.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    (run / "best.safetensors").write_bytes(SHIPPED.read_bytes())
    (models / ".scp-x.json.k3j_9xq2.tmp").write_text('{"half": ')  # what the killed ship left
    (models / ".scp-y.json.k3j_9xq2.tmp").write_text("another model's: not ours to remove")
    (models / "my.scp-x.json.notes.tmp").write_text("the user's")
    ship(run, "scp-x", chosen_by="a test", models_dir=models)
    assert ".scp-x.json.k3j_9xq2.tmp" in capsys.readouterr().err
    assert sorted(os.listdir(models)) == [
        ".scp-x.lock",
        ".scp-y.json.k3j_9xq2.tmp",
        "my.scp-x.json.notes.tmp",
        "scp-x.json",
        "scp-x.safetensors",
    ]


@pytest.fixture
def fake_book(monkeypatch):
    """book build with its two slow steps faked: staging writes one page, Jupyter Book one html file."""
    from scp.suite import book

    def stage(src, names, root):
        src.mkdir(parents=True)
        (src / "README.md").write_text("# the site")
        return ["README.md"]

    def jupyter_book(src, jb):
        html = jb / "_build" / "html"
        (html / "_static").mkdir(parents=True)
        (html / "index.html").write_text("<p>the site</p>")
        (html / "_static" / "x.css").write_text("p {}")
        return html

    monkeypatch.setattr(book, "stage", stage)
    monkeypatch.setattr(book, "_jupyter_book", jupyter_book)
    return lambda out, capsys: (book.main(["build", "--out", str(out), "--only", "x"]), capsys.readouterr())


def test_book_build_never_deletes_or_replaces_a_users_files(tmp_path, capsys, fake_book):
    """It deleted DIR/src/main.c and replaced DIR/html/index.html, exit 0."""
    mine = tmp_path / "mine"
    (mine / "src").mkdir(parents=True)
    (mine / "html").mkdir()
    (mine / "src" / "main.c").write_text("int main;")
    (mine / "html" / "index.html").write_text("my page")
    code, said = fake_book(mine, capsys)
    assert code == 2 and said.err.count("\n") == 1 and "Traceback" not in said.err
    assert said.err.startswith(f"python -m scp.suite.book build: error: --out {mine} holds files book build did not")
    assert (mine / "src" / "main.c").read_text() == "int main;" and (mine / "html" / "index.html").read_text() == (
        "my page"
    )
    assert sorted(os.listdir(mine)) == ["html", "src"]
    from scp.paths import ROOT

    code, said = fake_book(ROOT / "figures", capsys)
    assert code == 2 and "a folder the book is built from" in said.err


def test_book_build_rebuilds_its_own_folder_and_nothing_else(tmp_path, capsys, fake_book):
    site = tmp_path / "site"
    assert fake_book(site, capsys)[0] == 0  # a new folder
    assert (site / "html" / "index.html").is_file() and (site / ".scp-book").is_file()
    (site / "screenshots").mkdir()  # book check's, beside src/ and html/: kept
    (site / "screenshots" / "a.png").write_bytes(b"png")
    (site / "html" / "index.html").write_text("stale")
    assert fake_book(site, capsys)[0] == 0  # its own folder: rebuilt
    assert (site / "html" / "index.html").read_text() == "<p>the site</p>"
    assert (site / "screenshots" / "a.png").read_bytes() == b"png"
    assert sorted(os.listdir(site)) == [".scp-book", "html", "screenshots", "src"]  # no scratch folder left
    (site / "html" / "notes.txt").write_text("mine")  # a file the book did not write, under html/
    code, said = fake_book(site, capsys)
    assert code == 2 and f"{site / 'html' / 'notes.txt'} was not written by book build" in said.err
    assert (site / "html" / "notes.txt").read_text() == "mine" and (site / "html" / "index.html").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert fake_book(empty, capsys)[0] == 0  # an empty folder
