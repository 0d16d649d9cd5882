"""`scp prune` / scp.batch: a JSONL corpus pruned record by record, locally and on Ray, resumable."""

import json
import os
from pathlib import Path

import pytest
import torch

from scp import batch
from scp.cli import main
from scp.data import load_dataset
from scp.errors import DataFormatError, SCPError
from scp.pruner import ShapleyPruner

CHECKPOINT = Path(__file__).resolve().parents[1] / "models" / "scp-hotpotqa-best.pt"
M = 20
FIELDS = ["id", "kept_indices", "removed_indices", "scores", "kept_text", "tokens_before", "tokens_after", "ratio"]
pytestmark = pytest.mark.filterwarnings("ignore:this checkpoint was trained on 'Title:", "ignore:duplicate sentences")


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread, as a Ray worker with one CPU uses (scores depend on it in the last bits)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
    """ShapleyPruner.prune on one record, as a user would call it (independent of scp.batch's parsing)."""
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
    ("not json {", "not JSON"),
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
    assert out[2]["id"] == 4 and out[2]["error"].startswith("line 4: not JSON")  # the blank line 3 is skipped
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
    damaged.write_text("not a record\n")
    with pytest.raises(DataFormatError, match="damaged.jsonl line 1 is not a record written by scp prune"):
        batch.prune_jsonl(src, damaged, pruner=pruner, keep_ratio=0.5, progress=False)
    assert dst.read_bytes() == reference.read_bytes() and calls == []


def test_cli_prune_writes_the_same_file_as_prune_jsonl(tmp_path, pruner, records, cache, monkeypatch, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", records)
    batch.prune_jsonl(src, tmp_path / "api.jsonl", pruner=pruner, top_k=3, progress=False)
    monkeypatch.setenv("SCP_CACHE_DIR", str(cache))
    rc = main(["prune", "--checkpoint", str(CHECKPOINT), "--input", str(src), "--output", str(tmp_path / "cli.jsonl"),
               "--top-k", "3", "--n-permutations", str(M), "--seed", "0", "--no-progress"])
    assert rc == 0 and "6 records written" in capsys.readouterr().out
    assert (tmp_path / "cli.jsonl").read_bytes() == (tmp_path / "api.jsonl").read_bytes()


def test_ray_missing_is_one_clear_error(tmp_path, monkeypatch, capsys, records):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)
    src = write_jsonl(tmp_path / "in.jsonl", records)
    with pytest.raises(SCPError, match=r"pip install 'scp\[ray\]'"):
        batch.prune_jsonl_ray(src, tmp_path / "out.jsonl", checkpoint=CHECKPOINT, keep_ratio=0.5)
    assert main(["prune", "--checkpoint", str(CHECKPOINT), "--input", str(src), "--output", str(tmp_path / "o.jsonl"),
                 "--keep-ratio", "0.5", "--ray"]) == 2
    assert "pip install 'scp[ray]'" in capsys.readouterr().err


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a local Ray node needs 2 usable CPUs to start (Ray "
                    "2.60's raylet gives its agent processes a fixed 15 s, which one shared CPU does not allow)")
def test_ray_run_resumes_and_equals_the_local_run_record_for_record(tmp_path, pruner, records, cache):
    """prune_jsonl_ray starts a local Ray instance (1 CPU: one actor of one thread) and finishes a file a local
    run started, with a bad record in the middle (--skip-bad), in chunks of 2 records: the file equals the local
    run's byte for byte, and Ray is shut down again."""
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e '.[ray]'")
    corpus = records[:3] + [{"query": "no context here"}] + records[3:]
    src = write_jsonl(tmp_path / "in.jsonl", corpus)
    local, dst = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    batch.prune_jsonl(src, local, pruner=pruner, keep_ratio=0.5, skip_bad=True, progress=False)
    batch.prune_jsonl(src, dst, pruner=pruner, keep_ratio=0.5, skip_bad=True, progress=False, max_records=2)
    with open(dst, "a") as f:
        f.write('{"id": 3, "kept_')
    summary = batch.prune_jsonl_ray(src, dst, checkpoint=CHECKPOINT, keep_ratio=0.5, n_permutations=M, seed=0,
                                    skip_bad=True, progress=False, num_workers=1, cpus_per_worker=1, batch_size=2,
                                    cache_dir=cache)
    assert not ray.is_initialized()
    assert (summary.already_done, summary.written, summary.errors, summary.dropped_partial_line) == (2, 5, 1, True)
    assert dst.read_bytes() == local.read_bytes()
    assert read_jsonl(dst)[3] == {"id": 4, "error": "line 4: no context: give 'sentences' (a list of strings) or "
                                                    "'text' (a string)"}


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
    done = {batch.id_key(100), batch.id_key(records[3]["id"])}  # lines 1 and 5
    scan = batch._scan(src, done, skip_bad=True, max_units=1000, chunk_records=2)
    assert (scan.total, scan.pending) == (7, 5)
    assert scan.chunks == [(offsets[1], 2, 2), (offsets[3], 4, 1), (offsets[5], 6, 2)]
    worker = batch.RayPruneWorker(str(CHECKPOINT), str(src), {"keep_ratio": 0.5}, M, 0, str(cache), False, 1)
    lines, errors = [], []
    for offset, first, count in scan.chunks:
        out = worker({"offset": np.array([offset]), "first": np.array([first]), "count": np.array([count])})
        lines += list(out["line"])
        errors += list(out["error"])
    expected = local.read_text().splitlines()
    assert lines == [expected[i] for i in (1, 2, 3, 5, 6)]
    assert errors == ["", "", "line 4: no context: give 'sentences' (a list of strings) or 'text' (a string)", "", ""]
