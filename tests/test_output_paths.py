"""Output paths are the user's (issue 25): a regular file or a new path is written atomically with the old file's
mode kept; a symbolic link, device, named pipe or socket is refused with one line and left as it was, never
replaced by a regular file; a dangling link is refused and nothing is created at its target."""

import os
import socket
import stat
import time
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
