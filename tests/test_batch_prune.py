"""`scp prune` / scp.pruning.corpus: a JSONL corpus pruned record by record, locally and on Ray, resumable."""

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from scp.cli import main
from scp.data.datasets import load_dataset
from scp.errors import DataFormatError, SCPError
from scp.pruning import corpus as batch
from scp.pruning.pruner import ShapleyPruner

CHECKPOINT = Path(__file__).resolve().parents[1] / "models" / "scp-hotpotqa-best.safetensors"
M = 20
FIELDS = ["id", "kept_indices", "removed_indices", "scores", "kept_text", "tokens_before", "tokens_after", "ratio"]
pytestmark = pytest.mark.filterwarnings("ignore:this checkpoint was trained on 'Title:", "ignore:duplicate sentences")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("embeddings")


@pytest.fixture(scope="module")
def pruner(cache, one_thread):
    return ShapleyPruner.from_checkpoint(CHECKPOINT, cache_dir=cache, n_permutations=M, seed=0)


@pytest.fixture(scope="module")
def records(data_dir):
    """Six real HotpotQA contexts cut to 10 sentences, in every input form: sentences (+ titles), text,
    question or query, explicit string/integer ids or the line number."""
    out = []
    for i, ex in enumerate(load_dataset("hotpotqa", split="test", limit=6)):
        units, titles = list(ex.units[:10]), list(ex.titles[:10])
        if i % 3 == 2:
            record = {"question": ex.query, "text": " ".join(units)}
        else:
            record = {"question" if i % 2 else "query": ex.query, "sentences": units, "titles": titles}
        if i % 3 == 0:
            record["id"] = ex.id if i else 100
        out.append(record)
    return out


def write_jsonl(path: Path, lines) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def calls(pruner, monkeypatch):
    """The questions ``pruner.prune`` was called with during the test."""
    seen, original = [], pruner.prune

    def prune(question, *args, **kwargs):
        seen.append(question)
        return original(question, *args, **kwargs)

    monkeypatch.setattr(pruner, "prune", prune)
    return seen


def alone(pruner, record, **criterion):
    """ShapleyPruner.prune on one record, as a user would call it (independent of scp.pruning.corpus's parsing)."""
    question = record.get("question", record.get("query"))
    context = record["text"] if "text" in record else record["sentences"]
    return pruner.prune(question, context, titles=record.get("titles"), **criterion)


def test_output_fields_equal_shapley_pruner_on_each_record(tmp_path, pruner, records):
    src, dst = write_jsonl(tmp_path / "in.jsonl", records), tmp_path / "out.jsonl"
    summary = batch.prune_jsonl(src, dst, pruner=pruner, keep_ratio=0.5, progress=False)
    assert (summary.total, summary.written, summary.errors, summary.complete) == (6, 6, 0, True)
    out = read_jsonl(dst)
    assert [row["id"] for row in out] == [100, 2, 3, records[3]["id"], 5, 6]
    for record, row in zip(records, out):
        assert list(row) == FIELDS
        ref = alone(pruner, record, keep_ratio=0.5)
        assert row["scores"] == list(ref.scores)  # identical, not close
        assert row["kept_indices"] == list(ref.kept_indices) and row["removed_indices"] == list(ref.removed_indices)
        assert row["kept_text"] == ref.kept_text
        assert (row["tokens_before"], row["tokens_after"]) == (ref.original_tokens, ref.kept_tokens)
        assert row["ratio"] == pytest.approx(ref.kept_tokens / ref.original_tokens) and 0 < row["ratio"] < 1
        assert len(row["kept_indices"]) == -(-len(row["scores"]) // 2)
    settings = json.loads((tmp_path / "out.jsonl.settings.json").read_text())
    assert settings["n_permutations"] == M and settings["criterion"] == "keep_ratio=0.5"


def test_top_k_and_token_budget_keep_what_they_say_with_the_same_scores(tmp_path, pruner, records):
    src = write_jsonl(tmp_path / "in.jsonl", records)
    batch.prune_jsonl(src, tmp_path / "k.jsonl", pruner=pruner, top_k=2, progress=False)
    batch.prune_jsonl(src, tmp_path / "t.jsonl", pruner=pruner, token_budget=60, progress=False)
    for record, k, t in zip(records, read_jsonl(tmp_path / "k.jsonl"), read_jsonl(tmp_path / "t.jsonl")):
        assert k["scores"] == t["scores"]  # the criterion only selects
        assert len(k["kept_indices"]) == 2
        best = sorted(range(len(k["scores"])), key=lambda i: -k["scores"][i])[:2]
        assert k["kept_indices"] == sorted(best)
        assert 0 < t["tokens_after"] <= 60 < t["tokens_before"]
        ref = alone(pruner, record, token_budget=60)
        assert t["kept_indices"] == list(ref.kept_indices) and t["tokens_after"] == ref.kept_tokens


BAD = [
    ("not json {", "the record is not valid JSON"),
    ("[1, 2]", "a record must be a JSON object, not list"),
    ({"sentences": ["A b c."]}, "missing 'question' (or 'query')"),
    ({"question": " ", "sentences": ["A b c."]}, "the question must be a non-empty string"),
    ({"question": "q", "query": "q", "sentences": ["A b c."]}, "give 'question' or 'query', not both"),
    ({"question": "q"}, "no context"),
    ({"question": "q", "sentences": []}, "empty context"),
    ({"question": "q", "text": "  "}, "empty context"),
    ({"question": "q", "sentences": ["A b.", ""]}, "sentence 1 is empty"),
    ({"question": "q", "sentences": "A b."}, "'sentences' must be a list of strings"),
    ({"question": "q", "sentences": ["A b.", "C d."], "titles": ["T"]}, "'titles' has 1 entries for the 2 sentences"),
    ({"question": "q", "text": "Ann is here. Bob left.", "titles": ["T"]}, "for the 2 sentences the text splits into"),
    ({"id": [1], "question": "q", "sentences": ["A b."]}, "'id' must be a string or an integer"),
    ({"id": "x", "question": "q", "sentences": ["A b."]}, "id 'x' repeats the id of line 1"),
]


@pytest.mark.parametrize("line, problem", BAD, ids=[p for _, p in BAD])
def test_a_bad_record_stops_the_job_before_anything_is_pruned(tmp_path, pruner, calls, line, problem):
    good = {"id": "x", "question": "Who?", "sentences": ["Ann is here.", "Bob left."], "titles": ["A", "B"]}
    src, dst = write_jsonl(tmp_path / "in.jsonl", [good, line, {**good, "id": "y"}]), tmp_path / "out.jsonl"
    with pytest.raises(DataFormatError) as caught:
        batch.prune_jsonl(src, dst, pruner=pruner, top_k=1, progress=False)
    message = str(caught.value)
    assert message.startswith(f"{src} line 2: ") and problem in message and "\n" not in message
    assert calls == [] and not dst.exists()  # nothing written, not even an empty file


def test_skip_bad_writes_error_records_and_the_cli_exits_2_otherwise(tmp_path, pruner, monkeypatch, capsys, cache):
    good = {"question": "Who left?", "sentences": ["Ann is here.", "Bob left."], "titles": ["A", "B"]}
    src = write_jsonl(tmp_path / "in.jsonl", [good, {"sentences": ["x"]}, "", "oops", good | {"id": "g"}])
    summary = batch.prune_jsonl(src, tmp_path / "out.jsonl", pruner=pruner, top_k=1, skip_bad=True, progress=False)
    out = read_jsonl(tmp_path / "out.jsonl")
    assert (summary.total, summary.written, summary.errors) == (4, 4, 2)
    assert out[1] == {"id": 2, "error": "line 2: missing 'question' (or 'query')"}
    assert out[2]["id"] == 4 and out[2]["error"].startswith("line 4: the record is not valid JSON")  # line 3 blank
    assert len(out[0]["kept_indices"]) == 1 and out[3]["id"] == "g" and out[3]["scores"] == out[0]["scores"]
    # the command line: one line on stderr, exit code 2, nothing written
    monkeypatch.setenv("SCP_CACHE_DIR", str(cache))
    argv = ["prune", "--checkpoint", str(CHECKPOINT), "--input", str(src), "--output", str(tmp_path / "cli.jsonl")]
    capsys.readouterr()  # drop what loading the model for the run above printed (a progress bar, the first time)
    assert main(argv + ["--top-k", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scp prune: error:") and "line 2: missing 'question'" in err and err.count("\n") == 1
    assert main(argv + ["--top-k", "1", "--ray-workers", "2"]) == 2
    assert "--ray-workers only apply with --ray" in capsys.readouterr().err
    assert main(argv + ["--keep-ratio", "1.5"]) == 2 and "keep_ratio must be" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(argv)  # no criterion: argparse's one-line error
    assert not (tmp_path / "cli.jsonl").exists()


def test_resume_skips_finished_records_and_drops_a_half_written_line(tmp_path, pruner, records, calls):
    src = write_jsonl(tmp_path / "in.jsonl", records)
    reference = tmp_path / "reference.jsonl"
    batch.prune_jsonl(src, reference, pruner=pruner, keep_ratio=0.5, progress=False)
    assert len(calls) == 6
    calls.clear()
    dst = tmp_path / "out.jsonl"
    first = batch.prune_jsonl(src, dst, pruner=pruner, keep_ratio=0.5, progress=False, max_records=2)
    assert (first.written, first.complete, len(calls)) == (2, False, 2) and "4 still to do" in first.describe()
    with open(dst, "a") as f:  # killed while writing the third record
        f.write(reference.read_text().splitlines()[2][:40])
    calls.clear()
    second = batch.prune_jsonl(src, dst, pruner=pruner, keep_ratio=0.5, progress=False)
    assert second.dropped_partial_line and (second.already_done, second.written, second.complete) == (2, 4, True)
    assert calls == [r.get("question", r.get("query")) for r in records[2:]]  # finished records not recomputed
    assert dst.read_bytes() == reference.read_bytes()
    calls.clear()
    third = batch.prune_jsonl(src, dst, pruner=pruner, keep_ratio=0.5, progress=False)
    assert (third.written, third.already_done, calls) == (0, 6, []) and dst.read_bytes() == reference.read_bytes()
    # resuming with other settings, a damaged line, a second writer: errors, the file untouched
    with pytest.raises(SCPError, match=r"other settings \(criterion 'keep_ratio=0.5' → 'top_k=2'\)"):
        batch.prune_jsonl(src, dst, pruner=pruner, top_k=2, progress=False)
    with batch._Output(dst):
        with pytest.raises(SCPError, match="being written by another job"):
            batch.prune_jsonl(src, dst, pruner=pruner, keep_ratio=0.5, progress=False)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(reference.read_text().splitlines()[0] + "\nnot a record\n")
    with pytest.raises(SCPError, match="damaged.jsonl exists and is not an output of scp prune"):
        batch.prune_jsonl(src, damaged, pruner=pruner, keep_ratio=0.5, progress=False)  # no settings beside it
    (tmp_path / "damaged.jsonl.settings.json").write_bytes((tmp_path / "out.jsonl.settings.json").read_bytes())
    with pytest.raises(DataFormatError, match="damaged.jsonl line 2 is not a record written by scp prune"):
        batch.prune_jsonl(src, damaged, pruner=pruner, keep_ratio=0.5, progress=False)
    assert damaged.read_text() == reference.read_text().splitlines()[0] + "\nnot a record\n"
    assert dst.read_bytes() == reference.read_bytes() and calls == []


def test_cli_prune_writes_the_same_file_as_prune_jsonl(tmp_path, pruner, records, cache, monkeypatch, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", records)
    batch.prune_jsonl(src, tmp_path / "api.jsonl", pruner=pruner, top_k=3, progress=False)
    monkeypatch.setenv("SCP_CACHE_DIR", str(cache))
    rc = main(
        [
            "prune",
            "--checkpoint",
            str(CHECKPOINT),
            "--input",
            str(src),
            "--output",
            str(tmp_path / "cli.jsonl"),
            "--top-k",
            "3",
            "--n-permutations",
            str(M),
            "--seed",
            "0",
            "--no-progress",
        ]
    )
    assert rc == 0 and "6 records written" in capsys.readouterr().out
    assert (tmp_path / "cli.jsonl").read_bytes() == (tmp_path / "api.jsonl").read_bytes()


def test_ray_missing_is_one_clear_error(tmp_path, monkeypatch, capsys, records):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)
    src = write_jsonl(tmp_path / "in.jsonl", records)
    with pytest.raises(SCPError, match=r"pip install 'scp\[ray\]'"):
        batch.prune_jsonl_ray(src, tmp_path / "out.jsonl", checkpoint=CHECKPOINT, keep_ratio=0.5)
    assert (
        main(
            [
                "prune",
                "--checkpoint",
                str(CHECKPOINT),
                "--input",
                str(src),
                "--output",
                str(tmp_path / "o.jsonl"),
                "--keep-ratio",
                "0.5",
                "--ray",
            ]
        )
        == 2
    )
    assert "pip install 'scp[ray]'" in capsys.readouterr().err


RAY_SLOW_START = "The current node timed out during startup"
"""What Ray 2.60 raises when its local raylet has not registered within 30 s (a constant in ray/_private/node.py,
with no setting or environment variable), as on a machine whose two cores are busy with other work."""


RAY_START_TRIES = 2
"""How many times a local Ray node is started before its slow start makes the Ray test skip (visibly)."""


def prune_on_ray(ray, src: Path, dst: Path, **kwargs):
    """batch.prune_jsonl_ray, tried again (on ``dst`` as it was before) when the local Ray node did not start in
    time.  Ray gives its raylet a fixed 30 s to register (``raylet_start_wait_time_s`` in ray/_private/node.py, no
    setting); on a loaded machine (both cores busy) that fails several times in a row.  A slow start is the
    machine's state, not a failure of the library: after RAY_START_TRIES slow starts the test is skipped, with the
    reason in pytest's summary (``-rs``).  Any other error fails."""
    before = dst.read_bytes()
    for _ in range(RAY_START_TRIES):
        try:
            return batch.prune_jsonl_ray(src, dst, **kwargs)
        except Exception as exc:
            if RAY_SLOW_START not in str(exc):
                raise
        ray.shutdown()
        dst.write_bytes(before)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    pytest.skip(
        f"the local Ray node missed Ray's fixed 30 s start {RAY_START_TRIES} times (load average {load}): "
        "the machine is too busy to start Ray, nothing of the library was tested"
    )


@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2,
    reason="a local Ray node needs 2 usable CPUs to start (Ray "
    "2.60's raylet gives its agent processes a fixed 15 s, which one shared CPU does not allow)",
)
def test_ray_run_resumes_and_equals_the_local_run_record_for_record(tmp_path, pruner, records, cache):
    """prune_jsonl_ray starts a local Ray instance (1 CPU: one actor of one thread) and finishes a file a local
    run started, with a bad record in the middle (--skip-bad), in chunks of 2 records: the file equals the local
    run's byte for byte, and Ray is shut down again.  A local node that misses Ray's fixed 30 s start on a loaded
    machine is started again; after RAY_START_TRIES slow starts the test is skipped, saying so (prune_on_ray)."""
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e '.[ray]'")
    corpus = records[:3] + [{"query": "no context here"}] + records[3:]
    src = write_jsonl(tmp_path / "in.jsonl", corpus)
    local, dst = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    batch.prune_jsonl(src, local, pruner=pruner, keep_ratio=0.5, skip_bad=True, progress=False)
    batch.prune_jsonl(src, dst, pruner=pruner, keep_ratio=0.5, skip_bad=True, progress=False, max_records=2)
    with open(dst, "a") as f:
        f.write('{"id": 3, "kept_')
    summary = prune_on_ray(
        ray,
        src,
        dst,
        checkpoint=CHECKPOINT,
        keep_ratio=0.5,
        n_permutations=M,
        seed=0,
        skip_bad=True,
        progress=False,
        num_workers=1,
        cpus_per_worker=1,
        batch_size=2,
        cache_dir=cache,
    )
    assert not ray.is_initialized()
    assert (summary.already_done, summary.written, summary.errors, summary.dropped_partial_line) == (2, 5, 1, True)
    assert dst.read_bytes() == local.read_bytes()
    assert read_jsonl(dst)[3] == {
        "id": 4,
        "error": "line 4: no context: give 'sentences' (a list of strings) or 'text' (a string)",
    }


def test_ray_worker_prunes_the_scanned_chunks_as_the_local_run_does(tmp_path, pruner, records, cache):
    """The Ray actor's code without a cluster: the pending lines cut into chunks of 2 records (runs broken by
    finished records), each chunk read back from its byte offset and pruned, give the local run's lines."""
    import numpy as np

    corpus = records[:3] + [{"query": "no context here"}] + records[3:]
    src, local = write_jsonl(tmp_path / "in.jsonl", corpus), tmp_path / "local.jsonl"
    batch.prune_jsonl(src, local, pruner=pruner, keep_ratio=0.5, skip_bad=True, progress=False)
    offsets = [0]
    for line in src.read_bytes().splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    scan = batch._scan(src, skip_bad=True, max_units=1000, beat=batch._Heartbeat(False))
    assert len(scan.records) == 7 and scan.records[4].key == batch.id_key(records[3]["id"])
    chunks = batch._chunks(scan, [1, 2, 3, 5, 6], chunk_records=2)  # lines 1 and 5 done
    assert chunks == [(offsets[1], 2, 2), (offsets[3], 4, 1), (offsets[5], 6, 2)]
    worker = batch.RayPruneWorker(str(CHECKPOINT), str(src), {"keep_ratio": 0.5}, M, 0, str(cache), False, 1)
    lines, errors, digests = [], [], []
    for offset, first, count in chunks:
        out = worker({"offset": np.array([offset]), "first": np.array([first]), "count": np.array([count])})
        lines += list(out["line"])
        errors += list(out["error"])
        digests += list(out["digest"])  # what the driver checks against the scan (an input rewritten since)
    expected = local.read_text().splitlines()
    assert lines == [expected[i] for i in (1, 2, 3, 5, 6)]
    assert digests == [scan.records[i].digest for i in (1, 2, 3, 5, 6)]
    assert errors == ["", "", "line 4: no context: give 'sentences' (a list of strings) or 'text' (a string)", "", ""]


# ------------------------------------------------------------------- files it did not write, inputs, retries


def question(record: dict) -> str:
    return record.get("question", record.get("query"))


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def one_line_error(argv: list[str], capsys) -> str:
    """Run the command line: exit code 2 and one line on stderr, no traceback; that line."""
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("scp prune: error: ")
    return err


def test_a_file_scp_prune_did_not_write_is_an_error_and_stays_byte_identical(tmp_path, pruner, records, calls):
    """Notes whose last line has no newline, a one-line JSON file, an empty file, an output copied without its
    settings file: refused (named), before or after a failing validation, and left byte for byte as they were."""
    src = write_jsonl(tmp_path / "in.jsonl", records[:2])
    bad = write_jsonl(tmp_path / "bad.jsonl", [records[0], "not json {"])
    batch.prune_jsonl(src, tmp_path / "real.jsonl", pruner=pruner, top_k=1, progress=False)
    calls.clear()
    users = {
        "notes.txt": b"my notes\nthe last line has no newline",
        "one.json": b'{"a": 1}',
        "empty.jsonl": b"",
        "copied.jsonl": (tmp_path / "real.jsonl").read_bytes(),
    }
    for name, content in users.items():
        path = tmp_path / name
        path.write_bytes(content)
        for source in (src, bad):
            for skip_bad in (False, True):
                with pytest.raises(SCPError, match=f"{name} exists and is not an output of scp prune"):
                    batch.prune_jsonl(source, path, pruner=pruner, top_k=1, skip_bad=skip_bad, progress=False)
                assert path.read_bytes() == content and not (tmp_path / f"{name}.settings.json").exists()
    assert calls == []
    # its own output, killed mid-line: the half-written line is cut only once the input is valid
    ours = tmp_path / "ours.jsonl"
    batch.prune_jsonl(src, ours, pruner=pruner, top_k=1, progress=False, max_records=1)
    with open(ours, "ab") as f:
        f.write(b'{"id": 2, "kept_')
    before, settings = ours.read_bytes(), (tmp_path / "ours.jsonl.settings.json").read_bytes()
    write_jsonl(src, records[:2] + ["not json {"])
    with pytest.raises(DataFormatError, match="in.jsonl line 3: the record is not valid JSON"):
        batch.prune_jsonl(src, ours, pruner=pruner, top_k=1, progress=False)
    assert ours.read_bytes() == before and (tmp_path / "ours.jsonl.settings.json").read_bytes() == settings
    write_jsonl(src, records[:2])
    summary = batch.prune_jsonl(src, ours, pruner=pruner, top_k=1, progress=False)
    assert summary.dropped_partial_line and ours.read_bytes() == (tmp_path / "real.jsonl").read_bytes()


def test_another_input_into_the_same_output_is_an_error_naming_what_differs(
    tmp_path, pruner, records, calls, cache, monkeypatch, capsys
):
    """Default ids are line numbers: a second input written to the same output must not 'resume' it; nor may
    the input change in a record that was pruned (changed or gone).  New records at the end are pruned."""
    first, second = (
        write_jsonl(tmp_path / "first.jsonl", records[:3]),
        write_jsonl(tmp_path / "second.jsonl", records[3:]),
    )
    dst, settings = tmp_path / "out.jsonl", tmp_path / "out.jsonl.settings.json"
    batch.prune_jsonl(first, dst, pruner=pruner, top_k=2, progress=False)
    before, stored = dst.read_bytes(), settings.read_bytes()
    calls.clear()
    with pytest.raises(
        SCPError,
        match=r"out.jsonl holds the records of another input: it was started from "
        r"\S*first.jsonl \(\d+ bytes, sha256 [0-9a-f]{16}…\), this run reads "
        r"\S*second.jsonl",
    ):
        batch.prune_jsonl(second, dst, pruner=pruner, top_k=2, progress=False)
    monkeypatch.setenv("SCP_CACHE_DIR", str(cache))
    argv = ["prune", "--checkpoint", str(CHECKPOINT), "--output", str(dst), "--top-k", "2", "--n-permutations", str(M)]
    assert "holds the records of another input" in one_line_error(argv + ["--input", str(second)], capsys)
    write_jsonl(first, [records[0], records[4], records[2]])  # line 2 (id 2, pruned) changed
    with pytest.raises(SCPError, match=r"first.jsonl line 2: the record with id 2 changed since it was pruned into"):
        batch.prune_jsonl(first, dst, pruner=pruner, top_k=2, progress=False)
    write_jsonl(first, records[:2])  # id 3 (pruned) gone
    with pytest.raises(SCPError, match=r"first.jsonl no longer holds the record with id 3 that \S*out.jsonl has"):
        batch.prune_jsonl(first, dst, pruner=pruner, top_k=2, progress=False)
    assert calls == [] and dst.read_bytes() == before and settings.read_bytes() == stored
    assert json.loads(stored)["input"]["path"] == str(first.resolve())
    write_jsonl(first, records[:4])  # a record appended: pruned, the rest kept
    summary = batch.prune_jsonl(first, dst, pruner=pruner, top_k=2, progress=False)
    assert (summary.already_done, summary.written, calls) == (3, 1, [question(records[3])])
    batch.prune_jsonl(first, tmp_path / "fresh.jsonl", pruner=pruner, top_k=2, progress=False)
    assert dst.read_bytes() == (tmp_path / "fresh.jsonl").read_bytes()
    assert (
        json.loads(settings.read_text())["input"]["sha256"]
        == json.loads((tmp_path / "fresh.jsonl.settings.json").read_text())["input"]["sha256"]
    )


def test_error_records_are_retried_and_a_fixed_record_replaces_its_error_line(
    tmp_path, pruner, records, calls, monkeypatch
):
    """After a --skip-bad run, a rerun retries the error records; once the bad records are fixed in the input,
    the file ends up equal to one uninterrupted run on the fixed input (rewritten beside it, in input order)."""
    broken = [records[0], {"query": "no context here"}, records[2], "not json {", records[4], records[5]]
    src, dst = write_jsonl(tmp_path / "in.jsonl", broken), tmp_path / "out.jsonl"
    assert batch.prune_jsonl(src, dst, pruner=pruner, keep_ratio=0.5, skip_bad=True, progress=False).errors == 2
    first = dst.read_bytes()
    calls.clear()
    again = batch.prune_jsonl(src, dst, pruner=pruner, keep_ratio=0.5, skip_bad=True, progress=False)
    assert (again.retried, again.written, again.errors, again.already_done) == (2, 2, 2, 4)
    assert "2 error records of an earlier run retried" in again.describe()
    assert calls == [] and dst.read_bytes() == first  # still bad: the same error lines in the same places
    with pytest.raises(DataFormatError, match="in.jsonl line 2: no context"):
        batch.prune_jsonl(src, dst, pruner=pruner, keep_ratio=0.5, progress=False)  # without --skip-bad
    assert dst.read_bytes() == first
    write_jsonl(src, records)  # both fixed (line 4 now has its own id: its old error line has to go)
    reference = tmp_path / "reference.jsonl"
    batch.prune_jsonl(src, reference, pruner=pruner, keep_ratio=0.5, progress=False)
    calls.clear()
    # a crash (a bug) while rewriting leaves the output as it was, and no temporary file
    original = pruner.prune

    def crash(q, *args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(pruner, "prune", crash)
    with pytest.raises(RuntimeError, match="boom"):
        batch.prune_jsonl(src, dst, pruner=pruner, keep_ratio=0.5, progress=False)
    assert dst.read_bytes() == first and files_in(tmp_path) == [
        "in.jsonl",
        "out.jsonl",
        "out.jsonl.settings.json",
        "reference.jsonl",
        "reference.jsonl.settings.json",
    ]
    monkeypatch.setattr(pruner, "prune", original)
    # a job killed between saving the new settings and renaming the rewritten file over the output
    settings = (tmp_path / "reference.jsonl.settings.json").read_bytes()  # what this run's settings file holds
    (tmp_path / "out.jsonl.settings.json").write_bytes(settings)
    calls = []
    monkeypatch.setattr(pruner, "prune", lambda q, *a, **k: calls.append(q) or original(q, *a, **k))
    (tmp_path / ".out.jsonl.rewrite.tmp").write_text("left by a job killed while rewriting")
    one = batch.prune_jsonl(src, dst, pruner=pruner, keep_ratio=0.5, progress=False, max_records=1)
    assert (one.retried, one.written, one.already_done, calls) == (1, 1, 4, [question(records[1])])
    assert [row["id"] for row in read_jsonl(dst)] == [100, 2, 3, 5, 6]  # record 2 in its place, id 4's error gone
    assert not (tmp_path / ".out.jsonl.rewrite.tmp").exists()
    rest = batch.prune_jsonl(src, dst, pruner=pruner, keep_ratio=0.5, progress=False)
    assert (rest.written, rest.already_done, calls[1:]) == (1, 5, [question(records[3])])
    assert dst.read_bytes() == reference.read_bytes()
    assert (tmp_path / "out.jsonl.settings.json").read_bytes() == settings


@pytest.mark.timeout(120)
def test_a_named_pipe_output_is_streamed_and_never_read(tmp_path, pruner, records):
    src, reference = write_jsonl(tmp_path / "in.jsonl", records), tmp_path / "reference.jsonl"
    batch.prune_jsonl(src, reference, pruner=pruner, keep_ratio=0.5, progress=False)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    summary = batch.prune_jsonl(src, fifo, pruner=pruner, keep_ratio=0.5, progress=False)
    reader.join(60)
    assert got == [reference.read_bytes()]
    assert summary.streamed and (summary.written, summary.complete) == (6, True) and "streamed" in summary.describe()
    assert files_in(tmp_path) == ["in.jsonl", "pipe", "reference.jsonl", "reference.jsonl.settings.json"]
    assert batch.is_stream("/dev/stdout") and batch.is_stream("/dev/null") and not batch.is_stream(reference)


@pytest.mark.timeout(300)
def test_cli_output_dev_stdout_into_a_pipe_streams_the_records(tmp_path, pruner, records, cache):
    """`scp prune … --output /dev/stdout | cat`: the records on stdout (the summary on stderr), nothing read
    from the pipe, no settings file."""
    src, reference = write_jsonl(tmp_path / "in.jsonl", records), tmp_path / "reference.jsonl"
    batch.prune_jsonl(src, reference, pruner=pruner, keep_ratio=0.5, progress=False)
    env = {**os.environ, "SCP_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1"}  # one torch thread, as `pruner`
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "scp",
            "prune",
            "--checkpoint",
            str(CHECKPOINT),
            "--input",
            str(src),
            "--output",
            "/dev/stdout",
            "--keep-ratio",
            "0.5",
            "--n-permutations",
            str(M),
        ],
        capture_output=True,
        env=env,
        timeout=240,
        cwd=tmp_path,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert proc.stdout == reference.read_bytes()
    assert "6 records written to /dev/stdout" in err and "streamed (no resume)" in err
    assert files_in(tmp_path) == ["in.jsonl", "reference.jsonl", "reference.jsonl.settings.json"]


def test_a_failed_run_leaves_no_output_and_no_settings_file(tmp_path, pruner, records, monkeypatch):
    src = write_jsonl(tmp_path / "in.jsonl", records[:3])
    dst = tmp_path / "sub" / "out.jsonl"
    original = pruner.prune

    def refuse(q, *args, **kwargs):
        raise ValueError("the pruner refuses this record")

    monkeypatch.setattr(pruner, "prune", refuse)
    with pytest.raises(DataFormatError, match=r"in.jsonl line 1: the pruner refuses this record \(0 records written"):
        batch.prune_jsonl(src, dst, pruner=pruner, top_k=1, progress=False)
    assert files_in(tmp_path) == ["in.jsonl"]  # no output, no settings file, not even the folder

    def interrupt_at_the_second(q, *args, **kwargs):
        if q == question(records[1]):
            raise KeyboardInterrupt
        return original(q, *args, **kwargs)

    monkeypatch.setattr(pruner, "prune", interrupt_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        batch.prune_jsonl(src, dst, pruner=pruner, top_k=1, progress=False)
    assert len(read_jsonl(dst)) == 1 and files_in(dst.parent) == ["out.jsonl", "out.jsonl.settings.json"]
    monkeypatch.setattr(pruner, "prune", original)
    assert batch.prune_jsonl(src, dst, pruner=pruner, top_k=1, progress=False).already_done == 1
    batch.prune_jsonl(src, tmp_path / "reference.jsonl", pruner=pruner, top_k=1, progress=False)
    assert dst.read_bytes() == (tmp_path / "reference.jsonl").read_bytes()


@pytest.mark.timeout(300)
def test_gpus_asked_for_but_not_there_is_an_error_before_any_work(tmp_path, records, monkeypatch, capsys, cache):
    """--ray-gpus without a GPU: refused before Ray starts (torch sees none) or, on a cluster, before anything
    runs on it (its resources hold none), where Ray would otherwise wait forever; no file is created."""
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e '.[ray]'")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on this machine, even on one with a GPU
    src = write_jsonl(tmp_path / "in.jsonl", records[:2])
    dst = tmp_path / "out.jsonl"
    with pytest.raises(SCPError, match=r"gpus_per_worker=1 \(--ray-gpus\) but no GPU is visible here"):
        batch.prune_jsonl_ray(src, dst, checkpoint=CHECKPOINT, keep_ratio=0.5, gpus_per_worker=1, progress=False)
    assert not ray.is_initialized()
    monkeypatch.setenv("SCP_CACHE_DIR", str(cache))
    argv = ["prune", "--checkpoint", str(CHECKPOINT), "--input", str(src), "--output", str(dst), "--keep-ratio", "0.5"]
    assert "no GPU is visible here" in one_line_error(argv + ["--ray", "--ray-gpus", "1"], capsys)
    assert files_in(tmp_path) == ["in.jsonl"] and not ray.is_initialized()
    # a cluster (--ray ADDRESS) without GPUs, or without enough CPUs: its resources, checked once connected
    seen = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: seen.append(kwargs["address"]))
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 8.0, "memory": 1e10})
    monkeypatch.setattr(ray, "shutdown", lambda: seen.append("shutdown"))
    with pytest.raises(
        SCPError,
        match=r"1 Ray worker\(s\) × 0.5 GPU each \(--ray-gpus\) need 0.5 GPU\(s\), but the "
        r"Ray cluster at ray://nowhere:10001 has 0; nothing was pruned",
    ):
        batch.prune_jsonl_ray(
            src,
            dst,
            checkpoint=CHECKPOINT,
            keep_ratio=0.5,
            gpus_per_worker=0.5,
            progress=False,
            address="ray://nowhere:10001",
        )
    assert "need 12 CPU(s), but the Ray cluster at ray://x:1 has 8" in one_line_error(
        argv + ["--ray", "ray://x:1", "--ray-workers", "3", "--ray-cpus", "4"], capsys
    )
    assert seen == ["ray://nowhere:10001", "shutdown", "ray://x:1", "shutdown"]
    assert files_in(tmp_path) == ["in.jsonl"]


def test_numpy_criteria_are_written_as_the_python_numbers_they_hold(tmp_path, pruner, records):
    """prune_jsonl(keep_ratio=np.float32(...)): the settings file is plain JSON, and it tells np.float32(0.3)
    (0.30000001…, which keeps more units) from 0.3, so neither run resumes the other's output."""
    import numpy as np

    src = write_jsonl(tmp_path / "in.jsonl", records[:2])
    half = tmp_path / "half.jsonl"
    batch.prune_jsonl(src, half, pruner=pruner, keep_ratio=np.float32(0.5), progress=False)
    assert json.loads((tmp_path / "half.jsonl.settings.json").read_text())["criterion"] == "keep_ratio=0.5"
    again = batch.prune_jsonl(src, half, pruner=pruner, keep_ratio=0.5, progress=False)  # the same run: resumed
    assert (again.already_done, again.written) == (2, 0)
    batch.prune_jsonl(src, tmp_path / "top.jsonl", pruner=pruner, top_k=np.int64(2), progress=False)
    assert json.loads((tmp_path / "top.jsonl.settings.json").read_text())["criterion"] == "top_k=2"

    f32 = tmp_path / "f32.jsonl"
    batch.prune_jsonl(src, f32, pruner=pruner, keep_ratio=np.float32(0.3), progress=False)
    stored = json.loads((tmp_path / "f32.jsonl.settings.json").read_text())["criterion"]
    assert stored == "keep_ratio=0.30000001192092896"
    with pytest.raises(
        SCPError,
        match=r"was written with other settings \(criterion "
        r"'keep_ratio=0.30000001192092896' → 'keep_ratio=0.3'\)",
    ):
        batch.prune_jsonl(src, f32, pruner=pruner, keep_ratio=0.3, progress=False)


# ------------------------------------------- issue 25: output paths, bounded input, a rewritten input, slow records


def test_a_linked_dangling_or_socket_output_is_refused_and_nothing_is_made_at_a_link_target(
    tmp_path, pruner, records, calls
):
    import socket

    src = write_jsonl(tmp_path / "in.jsonl", records[:2])
    (tmp_path / "notes.jsonl").write_text("my notes\n")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "notes.jsonl")
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "elsewhere" / "deep" / "out.jsonl")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    refused = {"link.jsonl": "a symbolic link to", "dangling.jsonl": "which does not exist", "sock": "a socket"}
    for name, words in refused.items():
        with pytest.raises(SCPError, match=f"output {tmp_path / name} is .*{words}"):
            batch.prune_jsonl(src, tmp_path / name, pruner=pruner, top_k=1, progress=False)
    (tmp_path / "out.jsonl.settings.json").symlink_to(tmp_path / "notes.jsonl")
    with pytest.raises(SCPError, match="the settings file of the output .*out.jsonl.settings.json is a symbolic link"):
        batch.prune_jsonl(src, tmp_path / "out.jsonl", pruner=pruner, top_k=1, progress=False)
    assert calls == [] and not (tmp_path / "elsewhere").exists()  # no folder made at the dangling link's target
    assert (tmp_path / "notes.jsonl").read_text() == "my notes\n" and "out.jsonl" not in files_in(tmp_path)


DEEP = '{"question": "q", "sentences": ["A b."], "x": ' + "[" * 50_000 + "]" * 50_000 + "}"


def test_a_deeply_nested_record_is_a_bad_record_not_a_crash(tmp_path, pruner, records, calls):
    src = write_jsonl(tmp_path / "in.jsonl", [records[0], DEEP, records[1]])
    with pytest.raises(DataFormatError, match=r"in.jsonl line 2: the record nests lists or objects deeper than 64"):
        batch.prune_jsonl(src, tmp_path / "out.jsonl", pruner=pruner, top_k=1, progress=False)
    assert calls == [] and not (tmp_path / "out.jsonl").exists()
    summary = batch.prune_jsonl(src, tmp_path / "out.jsonl", pruner=pruner, top_k=1, skip_bad=True, progress=False)
    out = read_jsonl(tmp_path / "out.jsonl")
    assert (summary.written, summary.errors) == (3, 1) and out[1]["id"] == 2 and "deeper than 64" in out[1]["error"]


def test_a_damaged_settings_file_is_named_as_the_cause(tmp_path, pruner, records, calls, cache, monkeypatch, capsys):
    """Deeply nested, truncated, or edited (a record's hash, the input's): one line saying the settings file is
    damaged, never a RecursionError or 'the record with id … changed'; the output and settings left as they were."""
    src, dst = write_jsonl(tmp_path / "in.jsonl", records[:3]), tmp_path / "out.jsonl"
    batch.prune_jsonl(src, dst, pruner=pruner, top_k=1, progress=False)
    settings = tmp_path / "out.jsonl.settings.json"
    good, output = json.loads(settings.read_text()), dst.read_bytes()
    calls.clear()
    write_jsonl(src, records[:4])  # a record appended: the resume compares the stored hashes of the pruned ones
    edited_record = {**good, "records": [[rid, "0" * 16] for rid, _ in good["records"]]}
    edited_input = {**good, "input": {**good["input"], "sha256": "0" * 64}}
    monkeypatch.setenv("SCP_CACHE_DIR", str(cache))
    argv = ["prune", "--checkpoint", str(CHECKPOINT), "--input", str(src), "--output", str(dst), "--top-k", "1"]
    for content, words in (
        ('{"records": ' + "[" * 100_000 + "]" * 100_000 + "}", "nests lists or objects deeper than 64 levels"),
        (json.dumps(good)[:-20], "is not valid JSON"),
        (json.dumps(edited_record), "does not match the checksum written with it"),
        (json.dumps(edited_input), "does not match the checksum written with it"),
    ):
        settings.write_text(content)
        with pytest.raises(SCPError, match=f"settings file {settings} .*{words}.*cannot be resumed safely") as caught:
            batch.prune_jsonl(src, dst, pruner=pruner, top_k=1, progress=False)
        assert "damaged" in str(caught.value) and "changed since it was pruned" not in str(caught.value)
        assert "damaged" in one_line_error(argv + ["--n-permutations", str(M), "--no-progress"], capsys)
        assert settings.read_text() == content and dst.read_bytes() == output
    assert calls == []


def test_an_input_rewritten_while_it_is_pruned_is_refused_and_the_settings_describe_what_was_pruned(
    tmp_path, pruner, records, monkeypatch
):
    src, dst = write_jsonl(tmp_path / "in.jsonl", records[:4]), tmp_path / "out.jsonl"
    changed = [records[0], records[1], {**records[2], "question": "Another question?"}, records[3]]
    original = pruner.prune

    def rewrite_after_the_first(q, *args, **kwargs):
        if q == question(records[0]):
            write_jsonl(src, changed)  # after the check, before line 3 is read for pruning
        return original(q, *args, **kwargs)

    monkeypatch.setattr(pruner, "prune", rewrite_after_the_first)
    with pytest.raises(DataFormatError, match=r"in.jsonl changed while it was being pruned: line 3 is not") as caught:
        batch.prune_jsonl(src, dst, pruner=pruner, top_k=1, progress=False)
    assert "2 records written before it" in str(caught.value)
    lines, stored = read_jsonl(dst), json.loads((tmp_path / "out.jsonl.settings.json").read_text())
    assert len(lines) == 2  # lines 1 and 2 are the same in both versions; nothing of the new line 3
    digests = {json.dumps(rid): digest for rid, digest in stored["records"]}
    for record, line in zip(records[:2], lines):
        assert digests[json.dumps(line["id"])] == batch._digest(json.dumps(record).encode())
    monkeypatch.setattr(pruner, "prune", original)
    assert batch.prune_jsonl(src, dst, pruner=pruner, top_k=1, progress=False).already_done == 2  # resumed
    batch.prune_jsonl(src, tmp_path / "fresh.jsonl", pruner=pruner, top_k=1, progress=False)
    assert dst.read_bytes() == (tmp_path / "fresh.jsonl").read_bytes()


def test_a_slow_record_prints_a_line_every_few_seconds(tmp_path, pruner, records, monkeypatch, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", [records[0], {**records[1], "id": "slow"}])
    original = pruner.prune

    def slow(q, *args, **kwargs):
        if q == question(records[1]):
            time.sleep(0.5)
        return original(q, *args, **kwargs)

    monkeypatch.setattr(pruner, "prune", slow)
    monkeypatch.setattr(batch, "HEARTBEAT_SECONDS", 0.1)
    batch.prune_jsonl(src, tmp_path / "out.jsonl", pruner=pruner, top_k=1, progress=False)
    beats = [line for line in capsys.readouterr().err.splitlines() if line.startswith("scp prune: ")]
    assert len(beats) >= 2
    assert all(re.fullmatch(r"scp prune: line 2 \(id 'slow'\) has been pruned for \d+s", b) for b in beats), beats
    batch.prune_jsonl(src, tmp_path / "quiet.jsonl", pruner=pruner, top_k=1, progress=False, heartbeat=False)
    assert "has been pruned" not in capsys.readouterr().err
