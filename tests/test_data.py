"""Loaders, labels, layouts, data resolution and splits on the shared real-data samples."""

from __future__ import annotations

import gzip
import json
import os
import sys
import types
from collections import Counter
from pathlib import Path

import pytest

from scp.data.datasets import (
    DATASETS,
    SPLITS,
    Example,
    load_2wiki,
    load_dataset,
    load_fever,
    load_hotpotqa,
    load_msmarco,
    load_musique,
    read_json_records,
    split_examples,
    split_of,
)
from scp.errors import DataFormatError, DataUnavailableError

REPO_ROOT = Path(__file__).resolve().parent.parent
HOTPOT_FIRST_ID = "5a70f4c45542994082a3e437"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = Path(os.environ.get("SCP_DATA_DIR") or REPO_ROOT.parent / "shared" / "data")
    if not (path / "hotpotqa").is_dir():
        pytest.skip(f"real data samples not found at {path} (set SCP_DATA_DIR)")
    return path


@pytest.fixture
def env_data(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> Path:
    monkeypatch.setenv("SCP_DATA_DIR", str(data_dir))
    return data_dir


def _raw(data_dir: Path, name: str) -> list[dict]:
    source = DATASETS[name]
    return list(read_json_records(data_dir / source.folder / source.filename))


def _to_hf_layout(record: dict) -> dict:
    out = {k: v for k, v in record.items() if k not in ("_id", "context", "supporting_facts")}
    out["id"] = record["_id"]
    out["context"] = {"title": [t for t, _ in record["context"]], "sentences": [s for _, s in record["context"]]}
    facts = record["supporting_facts"]
    out["supporting_facts"] = {"title": [t for t, _ in facts], "sent_id": [i for _, i in facts]}
    return out


# --------------------------------------------------------------------------- every dataset loads


@pytest.mark.parametrize("name", ["hotpotqa", "2wiki", "2wikimultihopqa", "musique", "msmarco", "fever"])
def test_every_shared_dataset_loads(env_data: Path, name: str) -> None:
    examples = load_dataset(name, limit=4)
    assert len(examples) == 4
    expected = {"2wikimultihopqa": "2wiki"}.get(name, name)
    for ex in examples:
        assert isinstance(ex, Example) and ex.dataset == expected
        assert ex.query and ex.n_units == len(ex.labels) == len(ex.titles) == len(ex.paragraph_ids) > 1
        assert all(u == u.strip() and u for u in ex.units)
    assert sum(ex.n_positive for ex in examples) > 0


def test_same_file_gives_same_examples_in_same_order(env_data: Path) -> None:
    assert load_hotpotqa(limit=30) == load_hotpotqa(limit=30)
    assert [ex.id for ex in load_musique(limit=10)] == [r["id"] for r in _raw(env_data, "musique")[:10]]


def test_path_may_be_file_dataset_dir_or_data_root(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCP_DATA_DIR", raising=False)
    source = DATASETS["hotpotqa"]
    by_file = load_hotpotqa(data_dir / source.folder / source.filename, limit=3)
    assert load_hotpotqa(data_dir / source.folder, limit=3) == by_file
    assert load_dataset("hotpotqa", data_dir, limit=3) == by_file
    assert [ex.id for ex in by_file][0] == HOTPOT_FIRST_ID


# --------------------------------------------------------------------------- HotpotQA / 2Wiki labels and layouts


def test_hotpotqa_hand_checked_record(env_data: Path) -> None:
    ex = load_hotpotqa(limit=1)[0]
    assert ex.id == HOTPOT_FIRST_ID
    assert ex.query == "Which Italian-American composer and librettist wrote the English language opera, Maria Golovin?"
    assert ex.answers == ("Gian Carlo Menotti",)
    assert ex.meta == {"type": "bridge", "level": "hard"}
    assert ex.n_units == 31 and len(set(ex.paragraph_ids)) == 10
    positives = {(ex.titles[i], ex.position_in_paragraph[i], ex.units[i]) for i in range(ex.n_units) if ex.labels[i]}
    assert positives == {
        ("Maria Golovin", 0, "Maria Golovin is an English language opera in three acts by Gian Carlo Menotti."),
        (
            "Gian Carlo Menotti",
            0,
            "Gian Carlo Menotti (] ; July 7, 1911 – February 1, 2007) was an Italian-American composer and librettist.",
        ),
    }
    assert ex.unit_texts(with_title=True)[7] == "Gian Carlo Menotti: " + ex.units[7]


def test_hotpotqa_labels_match_supporting_facts_on_all_records(env_data: Path) -> None:
    raw = {r["_id"]: r for r in _raw(env_data, "hotpotqa")}
    examples = load_hotpotqa()
    assert len(examples) == 1000
    for ex in examples:
        record = raw[ex.id]
        expected = {(t, dict(record["context"])[t][i].strip()) for t, i in record["supporting_facts"]}
        got = {(ex.titles[i], ex.units[i]) for i in range(ex.n_units) if ex.labels[i]}
        assert got == expected, ex.id
        assert ex.n_units == sum(1 for _, sents in record["context"] for s in sents if s.strip())


def test_hf_layout_gives_equal_examples(env_data: Path, tmp_path: Path) -> None:
    records = _raw(env_data, "hotpotqa")[:5]
    jsonl = tmp_path / "hf.jsonl"
    jsonl.write_text("\n".join(json.dumps(_to_hf_layout(r)) for r in records), encoding="utf-8")
    array_gz = tmp_path / "hf.json.gz"
    with gzip.open(array_gz, "wt", encoding="utf-8") as fh:
        json.dump([_to_hf_layout(r) for r in records], fh)
    original = load_hotpotqa(limit=5)
    assert load_hotpotqa(jsonl) == original
    assert load_hotpotqa(array_gz) == original


def test_unresolved_supporting_fact_raises_with_id(env_data: Path, tmp_path: Path) -> None:
    record = _raw(env_data, "hotpotqa")[0]
    record["supporting_facts"].append(["No Such Title", 0])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([record]), encoding="utf-8")
    with pytest.raises(ValueError, match=HOTPOT_FIRST_ID):
        load_hotpotqa(path)


def test_2wiki_duplicate_paragraph_kept_once(env_data: Path) -> None:
    raw = {r["_id"]: r for r in _raw(env_data, "2wiki")}
    ex = next(e for e in load_2wiki() if e.id == "72cfea12086711ebbd5eac1f6bf848b6")
    assert ex.titles.count("Seven Guns to Mesa") == 1
    assert len(set(ex.paragraph_ids)) == 9 and len(raw[ex.id]["context"]) == 10
    assert ex.n_positive == len(raw[ex.id]["supporting_facts"]) == 4
    assert ex.meta["type"] == "bridge_comparison"


# --------------------------------------------------------------------------- MuSiQue, MS MARCO, FEVER


def test_musique_sentence_labels_propagate_from_paragraphs(env_data: Path) -> None:
    paragraphs = load_musique(limit=10)
    sentences = load_dataset("musique", limit=10, granularity="sentence")
    for par, sen in zip(paragraphs, sentences):
        assert par.id == sen.id and par.granularity == "paragraph" and sen.granularity == "sentence"
        assert par.n_units == 20 and sen.n_units > par.n_units
        assert par.meta["supporting_paragraphs"] == tuple(i for i, y in enumerate(par.labels) if y)
        hops = par.meta["decomposition"]  # one single-hop question per supporting paragraph, the last answers
        assert sorted(h["paragraph"] for h in hops) == list(par.meta["supporting_paragraphs"])
        assert hops[-1]["answer"] == par.answers[0] and all(h["question"] and h["answer"] for h in hops)
        for pid, (text, label) in enumerate(zip(par.units, par.labels)):
            idx = [i for i, p in enumerate(sen.paragraph_ids) if p == pid]
            assert idx, "every paragraph yields at least one sentence"
            assert {sen.labels[i] for i in idx} == {label}
            assert " ".join(sen.units[i] for i in idx) == " ".join(text.split())
            assert [sen.position_in_paragraph[i] for i in idx] == list(range(len(idx)))
        assert sen.n_positive >= par.n_positive
    # the documented label noise: whole supporting paragraphs become positive sentences
    assert sum(s.n_positive for s in sentences) > sum(p.n_positive for p in paragraphs)
    with pytest.raises(ValueError, match="granularity"):
        load_musique(granularity="word")  # type: ignore[arg-type]


def test_msmarco_labels_from_is_selected(env_data: Path) -> None:
    raw = _raw(env_data, "msmarco")
    examples = load_msmarco()
    assert len(examples) == 200
    for record, ex in zip(raw, examples):
        assert ex.id == str(record["query_id"])
        assert ex.labels == tuple(record["passages"]["is_selected"])
        assert ex.units == tuple(p.strip() for p in record["passages"]["passage_text"])
    assert sum(ex.n_positive == 0 for ex in examples) == 11  # kept, as SOURCE.md counts


def test_fever_negatives_are_deterministic_and_never_positive(env_data: Path) -> None:
    raw = _raw(env_data, "fever")
    examples = load_fever()
    assert len(examples) == len({r["claim"] for r in raw}) == 1196
    assert load_fever(limit=40) == examples[:40]
    evidence_split = {}
    for ex in examples:
        for unit, label in zip(ex.units, ex.labels):
            if label:
                evidence_split.setdefault(unit, set()).add(split_of(ex.id))
    raw_by_row = {r["row"]: r for r in raw}
    first_is_negative = 0
    for ex in examples[:200]:
        record = raw_by_row[ex.meta["rows"][0]]
        positives = {s.strip() for _, s in record["gold_evidence"]}
        assert ex.query == record["claim"] and ex.answers == (record["label"],)
        assert {u for u, y in zip(ex.units, ex.labels) if y} == positives
        negatives = [(t, u) for t, u, y in zip(ex.titles, ex.units, ex.labels) if not y]
        assert len(negatives) == 9 and len({u for _, u in negatives}) == 9
        assert not positives & {u for _, u in negatives}
        assert not {t for _, t in record["gold_evidence"]} & {t for t, _ in negatives}
        assert all(split_of(ex.id) in evidence_split[u] for _, u in negatives)  # same-split pool
        first_is_negative += ex.labels[0] == 0
    assert first_is_negative > 100  # positives are shuffled in, not placed first
    few = load_fever(limit=5, n_negatives=3)
    assert [ex.n_units - ex.n_positive for ex in few] == [3] * 5
    assert load_fever(limit=5, seed=1) != examples[:5]


# --------------------------------------------------------------------------- missing data


def _fake_datasets(monkeypatch: pytest.MonkeyPatch, load, reachable: bool = True) -> None:
    """A stand-in ``datasets`` module with ``load`` as its ``load_dataset``; the hub counts as reachable (no probe)
    unless ``reachable`` is false."""
    import scp.data.datasets

    module = types.ModuleType("datasets")
    module.load_dataset = load  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "datasets", module)
    if reachable:
        monkeypatch.setattr(scp.data.datasets, "_hub_unavailable", lambda: None)


def _offline(*args, **kwargs):
    raise ConnectionError("Couldn't reach 'hotpot_qa' on the Hub (LocalEntryNotFoundError)")


@pytest.mark.parametrize("name", ["hotpotqa", "2wiki", "musique", "msmarco", "fever"])
def test_missing_dataset_raises_data_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str) -> None:
    monkeypatch.setenv("SCP_DATA_DIR", str(tmp_path))
    _fake_datasets(monkeypatch, _offline)
    with pytest.raises(DataUnavailableError, match="SCP_DATA_DIR") as info:
        load_dataset(name, limit=1)
    message = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert f"Set SCP_DATA_DIR to a directory holding {DATASETS[name].folder}/" in message
    assert "export SCP_DATA_DIR=" in message and "pass --data FILE (path=... in Python)" in message
    assert str(tmp_path / DATASETS[name].folder / DATASETS[name].filename) in message  # the paths it tried
    assert str(tmp_path / DATASETS[name].filename) in message
    if DATASETS[name].hub is not None:
        assert "ConnectionError" in message and "or go online" in message


def test_missing_datasets_package_and_unset_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCP_DATA_DIR", raising=False)
    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails
    with pytest.raises(DataUnavailableError, match="not installed") as info:
        load_hotpotqa()
    assert "SCP_DATA_DIR is not set" in str(info.value) and "pip install 'scp[online]'" in str(info.value)


def _count_hub_calls(monkeypatch: pytest.MonkeyPatch) -> list:
    calls: list = []

    def load(*args, **kwargs):
        calls.append(args)
        raise ConnectionError("no network")

    _fake_datasets(monkeypatch, load, reachable=False)
    return calls


@pytest.mark.parametrize("var", ["HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"])
def test_offline_mode_never_asks_the_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, var: str) -> None:
    import socket

    monkeypatch.setenv("SCP_DATA_DIR", str(tmp_path))
    monkeypatch.setenv(var, "1")
    calls = _count_hub_calls(monkeypatch)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("probed the hub offline"))
    with pytest.raises(DataUnavailableError, match=f"{var} is set") as info:
        load_hotpotqa()
    assert calls == [] and "or go online" in str(info.value)


def test_an_unreachable_hub_is_probed_once_not_retried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import socket

    import scp.data.embedders

    for var in (
        "HF_HUB_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SCP_DATA_DIR", str(tmp_path))
    calls = _count_hub_calls(monkeypatch)
    probes = []

    def no_network(address, timeout=None, *args, **kwargs):
        probes.append((address, timeout))
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "create_connection", no_network)
    scp.data.embedders._tcp_reachable.cache_clear()
    try:
        for _ in range(2):
            with pytest.raises(DataUnavailableError, match=r"the hub \(https://huggingface.co\) is unreachable"):
                load_hotpotqa()
    finally:
        scp.data.embedders._tcp_reachable.cache_clear()
    assert calls == []  # datasets.load_dataset (and its five retries) never ran
    assert probes == [(("huggingface.co", 443), 3.0)]  # one short probe per process


def test_the_hub_download_runs_quietly_when_reachable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import logging

    seen = []

    def load(*args, **kwargs):
        seen.append(logging.getLogger("huggingface_hub.utils._http").isEnabledFor(logging.WARNING))
        raise ConnectionError("interrupted")

    monkeypatch.setenv("SCP_DATA_DIR", str(tmp_path))
    _fake_datasets(monkeypatch, load)
    with pytest.raises(DataUnavailableError, match="ConnectionError: interrupted"):
        load_hotpotqa()
    assert seen == [False]  # the retry warnings are hidden while it runs
    assert logging.getLogger("huggingface_hub.utils._http").isEnabledFor(logging.WARNING)  # and shown again after


def test_explicit_missing_path_raises(tmp_path: Path) -> None:
    with pytest.raises(DataUnavailableError, match="no_such_file"):
        load_msmarco(tmp_path / "no_such_file.json")
    with pytest.raises(DataUnavailableError, match="ms_marco_v11_train_sample.json"):
        load_msmarco(tmp_path)


def test_hub_rows_are_used_when_reachable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data_dir: Path) -> None:
    rows = [_to_hf_layout(r) for r in _raw(data_dir, "hotpotqa")[:3]]
    calls = []

    def fake_load(*args, **kwargs):
        calls.append((args, kwargs))
        return rows

    monkeypatch.setenv("SCP_DATA_DIR", str(tmp_path))
    _fake_datasets(monkeypatch, fake_load)
    assert load_hotpotqa() == load_hotpotqa(data_dir)[:3]
    assert calls == [(("hotpot_qa", "distractor"), {"split": "validation"})]


def test_unknown_dataset_name() -> None:
    with pytest.raises(ValueError, match="unknown dataset"):
        load_dataset("squad")


# --------------------------------------------------------------------------- splits


def test_split_is_deterministic_disjoint_and_80_10_10(env_data: Path) -> None:
    examples = load_hotpotqa()
    ids = [ex.id for ex in examples]
    assert split_of(HOTPOT_FIRST_ID) == "train"  # pinned: sha256-based, not Python's hash()
    parts = {s: split_examples(examples, s) for s in SPLITS}
    id_sets = {s: {ex.id for ex in part} for s, part in parts.items()}
    assert sum(len(p) for p in id_sets.values()) == len(set(ids)) == 1000
    train, val, test = (id_sets[s] for s in SPLITS)
    assert not (train & val or train & test or val & test)
    counts = Counter(split_of(i) for i in ids)
    assert 760 <= counts["train"] <= 840 and 70 <= counts["validation"] <= 130 and 70 <= counts["test"] <= 130
    reversed_parts = {s: split_examples(examples[::-1], s) for s in SPLITS}
    assert all(reversed_parts[s] == parts[s][::-1] for s in SPLITS)
    assert all(split_of(i) == s for s in SPLITS for i in id_sets[s])
    assert load_dataset("hotpotqa", split="validation") == parts["validation"]
    assert load_dataset("hotpotqa", split="test", limit=7) == parts["test"][:7]
    with pytest.raises(ValueError, match="split"):
        split_examples(examples, "dev")


# --------------------------------------------------------------------------- Example


def _example(**overrides) -> Example:
    fields = dict(
        id="x",
        query="q?",
        units=("A one.", "A two.", "B one."),
        labels=(1, 0, 0),
        titles=("A", "A", "B"),
        paragraph_ids=(0, 0, 1),
        answers=("a",),
        dataset="toy",
        granularity="sentence",
    )
    return Example(**{**fields, **overrides})


def test_example_properties() -> None:
    ex = _example(units=["A one.", "A two.", "B one."], labels=[True, 0, 0])
    assert ex.units == ("A one.", "A two.", "B one.") and ex.labels == (1, 0, 0)
    assert ex.n_units == 3 and ex.n_positive == 1
    assert ex.position_in_paragraph == (0, 1, 0)
    assert ex.unit_texts() == ["A one.", "A two.", "B one."]
    assert ex.unit_texts(with_title=True) == ["A: A one.", "A: A two.", "B: B one."]
    assert _example(titles=("", "A", "B")).unit_texts(with_title=True)[0] == "A one."
    assert hash(ex) == hash(_example(meta={"anything": []}))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"labels": (1, 0)}, "differ in length"),
        ({"paragraph_ids": (0, 0)}, "differ in length"),
        ({"labels": (1, 2, 0)}, "0 or 1"),
        ({"units": (), "labels": (), "titles": (), "paragraph_ids": ()}, "at least one unit"),
        ({"units": ("A one.", " ", "B one.")}, "empty or not stripped"),
        ({"granularity": "token"}, "granularity"),
    ],
)
def test_example_validation(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _example(**overrides)


def test_fever_negative_rules_on_crafted_file(tmp_path: Path) -> None:
    from scp.data.datasets import _fever_id

    claims = [c for c in (f"Claim {i}." for i in range(200)) if split_of(_fever_id(c)) == "train"][:12]
    records = [
        {"row": 0, "claim": claims[0], "label": "SUPPORTS", "gold_evidence": [["T1", "S one ."]]},
        {"row": 1, "claim": claims[1], "label": "REFUTES", "gold_evidence": [["T1", "S two ."], ["T1", "S one ."]]},
    ]
    records += [
        {"row": i, "claim": claims[i], "label": "SUPPORTS", "gold_evidence": [[f"T{i}", f"Other {i} ."]]}
        for i in range(2, 12)
    ]
    path = tmp_path / "fever.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")

    def negatives(ex: Example) -> list[tuple[str, str]]:
        return [(t, u) for t, u, y in zip(ex.titles, ex.units, ex.labels) if not y]

    first = load_fever(path, n_negatives=10)[0]
    assert sorted(negatives(first)) == sorted((f"T{i}", f"Other {i} .") for i in range(2, 12))  # other titles first
    filled = load_fever(path, n_negatives=11, limit=1)[0]  # the second claim has only 10 candidates
    assert ("T1", "S two .") in negatives(filled) and "S one ." not in [u for _, u in negatives(filled)]
    second = load_fever(path, n_negatives=10)[1]
    assert not {"S one .", "S two ."} & {u for _, u in negatives(second)}
    with pytest.raises(ValueError, match="negatives"):
        load_fever(path, n_negatives=12, limit=1)


# --------------------------------------------------------------------------- bad files and records: one clear sentence


def _hotpot_lines(data_dir: Path, n: int) -> list[str]:
    return [json.dumps(r) for r in _raw(data_dir, "hotpotqa")[:n]]


@pytest.mark.parametrize(
    ("name", "make", "message"),
    [
        ("x.jsonl.gz", lambda lines: b'{"_id": 1}\n', r"x\.jsonl\.gz: not a valid gzip file \(Not a gzipped file"),
        (
            "x.jsonl.gz",
            lambda lines: gzip.compress("\n".join(lines).encode())[:4000],
            r"x\.jsonl\.gz: truncated gzip stream after line \d+ \(re-download or re-create it\)",
        ),
        ("x.jsonl", lambda lines: "\n".join(lines[:2] + ["{oops"]).encode(), r"x\.jsonl line 3: not valid JSON"),
        ("x.json", lambda lines: b"[{},\n {oops}]", r"x\.json line 2: not valid JSON"),
        (
            "x.json",
            lambda lines: b'{"_id": "a"}',
            r"x\.json: a \.json file must hold one JSON array of records, not a dict",
        ),
        ("x.jsonl", lambda lines: "\n".join([lines[0], "[1, 2]"]).encode(), r"x\.jsonl line 2: expected a JSON object"),
        ("x.jsonl", lambda lines: b'{"_id": "caf\xe9"}\n', r"x\.jsonl: not UTF-8 text"),
        (
            "x.jsonl",
            lambda lines: (lines[0] + "\n" + "[" * 100_000 + "]" * 100_000).encode(),
            r"x\.jsonl line 2: JSON nested too deeply to be a record",
        ),
        ("x.json", lambda lines: b"[" * 100_000 + b"]" * 100_000, r"x\.json: JSON nested too deeply"),
    ],
    ids=[
        "not-gzip",
        "truncated-gzip",
        "bad-json-line",
        "bad-json-array",
        "not-an-array",
        "not-an-object",
        "not-utf8",
        "too-deep-line",
        "too-deep-array",
    ],
)
def test_unreadable_file_raises_data_format_error_naming_it(
    data_dir: Path, tmp_path: Path, name: str, make, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(make(_hotpot_lines(data_dir, 30)))
    with pytest.raises(DataFormatError, match=message) as info:
        load_hotpotqa(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)
    with pytest.raises(DataFormatError, match=message):
        list(read_json_records(path))  # the generator names the file too


def _write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    return path


def test_record_in_wrong_layout_names_file_line_and_expected_fields(data_dir: Path, tmp_path: Path) -> None:
    good, bad = _raw(data_dir, "hotpotqa")[:2]
    del bad["_id"]
    path = _write_jsonl(tmp_path / "hotpot.jsonl", [good, bad])
    with pytest.raises(DataFormatError) as info:
        load_hotpotqa(path)
    assert str(info.value) == (
        f"{path} line 2: not in the HotpotQA layout: missing key 'id' "
        "(expected _id or id, question, answer, context, supporting_facts)"
    )
    good["context"] = {"title": ["T"]}  # HF layout without sentences
    with pytest.raises(
        DataFormatError, match=r"hotpot\.jsonl line 1: not in the HotpotQA layout: missing key 'sentences'"
    ):
        load_hotpotqa(_write_jsonl(path, [good]))
    good["context"] = [["T", ["A sentence."], "extra"]]
    with pytest.raises(DataFormatError, match=r"line 1: not in the HotpotQA layout: ValueError: too many values"):
        load_hotpotqa(_write_jsonl(path, [good]))
    with pytest.raises(DataFormatError, match=r"2wiki\.jsonl line 1: not in the 2WikiMultiHopQA layout"):
        load_2wiki(_write_jsonl(tmp_path / "2wiki.jsonl", [bad]))


@pytest.mark.parametrize(
    ("name", "record", "message"),
    [
        (
            "musique",
            {"id": "2hop__1", "question": "q?", "answer": "a", "paragraphs": [{"title": "T"}]},
            "not in the MuSiQue layout: missing key 'paragraph_text'",
        ),
        (
            "msmarco",
            {"query_id": 1, "query": "q", "passages": {"passage_text": ["p"], "is_selected": ["yes"], "url": ["u"]}},
            r"not in the MS MARCO v1.1 layout: passages\.is_selected\[0\] must be true/false or 0/1, not str 'yes'",
        ),
        (
            "fever",
            {"claim": "c.", "label": "SUPPORTS", "gold_evidence": [["only a title"]]},
            "not in the FEVER layout: ValueError: not enough values to unpack",
        ),
    ],
)
def test_every_loader_names_file_and_line_of_a_bad_record(
    tmp_path: Path, name: str, record: dict, message: str
) -> None:
    path = _write_jsonl(tmp_path / "data.jsonl", [record])
    with pytest.raises(DataFormatError, match=rf"data\.jsonl line 1: {message}.*\(expected .+\)$"):
        load_dataset(name, path)


def test_content_errors_name_the_file(data_dir: Path, tmp_path: Path) -> None:
    record = _raw(data_dir, "hotpotqa")[0]
    record["supporting_facts"].append(["No Such Title", 0])
    path = tmp_path / "bad.jsonl"
    path.write_text("\n\n" + json.dumps(record), encoding="utf-8")
    with pytest.raises(DataFormatError, match=rf"bad\.jsonl line 3: hotpotqa example '{HOTPOT_FIRST_ID}': supporting"):
        load_hotpotqa(path)
    record = {"claim": "c.", "label": "SUPPORTS", "gold_evidence": [["T", "S ."]]}
    with pytest.raises(DataFormatError, match=r"fever\.jsonl line 1: fever example .*only 0 negatives"):
        load_fever(_write_jsonl(tmp_path / "fever.jsonl", [record]))


def test_bad_hub_row_names_the_row(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SCP_DATA_DIR", str(tmp_path))
    _fake_datasets(monkeypatch, lambda *a, **k: [{"question": "q?"}])
    with pytest.raises(DataFormatError, match=r"^hotpotqa \(Hugging Face hub\) row 1: not in the HotpotQA layout"):
        load_hotpotqa()


def test_data_dir_that_does_not_exist_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)
    monkeypatch.setenv("SCP_DATA_DIR", str(tmp_path / "typo"))
    with pytest.raises(DataUnavailableError, match=r"SCP_DATA_DIR='.*typo' is not a directory"):
        load_hotpotqa()
    monkeypatch.setenv("SCP_DATA_DIR", str(tmp_path))
    with pytest.raises(
        DataUnavailableError,
        match=r"neither .*hotpotqa_dev_distractor\.jsonl\.gz nor "
        r".*hotpotqa/hotpotqa_dev_distractor\.jsonl\.gz exists",
    ):
        load_hotpotqa()


def test_dataset_file_names_the_file_the_loader_reads(data_dir, monkeypatch):
    from scp.data.datasets import dataset_file

    monkeypatch.setenv("SCP_DATA_DIR", str(data_dir))
    assert dataset_file("hotpotqa") == data_dir / "hotpotqa" / "hotpotqa_dev_distractor.jsonl.gz"
    assert dataset_file("2wikimultihopqa") == dataset_file("2wiki") and dataset_file("2wiki").is_file()
    monkeypatch.delenv("SCP_DATA_DIR")
    assert dataset_file("fever") is None
    with pytest.raises(ValueError, match="unknown dataset"):
        dataset_file("imagenet")


# --------------------------------------------------------------------------- issue 17: malformed fields are refused


def _blank_question(r: dict) -> None:
    r["question"] = " \u200b "


def _musique_aliases_string(r: dict) -> None:
    r["answer_aliases"] = "Paris"  # would split into the answers P, a, r, i, s


def _msmarco_selected(extra: int):
    def edit(r: dict) -> None:
        selected = r["passages"]["is_selected"]
        r["passages"]["is_selected"] = selected + [0] * extra if extra > 0 else selected[:extra]

    return edit


def _set(path: tuple, value):
    def edit(r: dict) -> None:
        target = r
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _to_hf(r: dict) -> None:
    hf = _to_hf_layout(r)
    r.clear()
    r.update(hf)


def _hf_then(edit):
    def both(r: dict) -> None:
        _to_hf(r)
        edit(r)

    return both


MALFORMED = [  # (id, dataset, edit of its first shared record, words of the message)
    ("hotpotqa blank question", "hotpotqa", _blank_question, "the question (query) is empty"),
    ("2wiki empty question", "2wiki", _set(("question",), ""), "the question (query) is empty"),
    ("musique blank question", "musique", _blank_question, "the question (query) is empty"),
    ("msmarco blank query", "msmarco", _set(("query",), "  "), "the question (query) is empty"),
    ("fever blank claim", "fever", _set(("claim",), "\t"), "the claim is empty"),
    (
        "musique answer_aliases a string",
        "musique",
        _musique_aliases_string,
        "answer_aliases must be a list of strings, not str 'Paris'",
    ),
    (
        "musique answer_aliases of numbers",
        "musique",
        _set(("answer_aliases",), [1]),
        "answer_aliases must be a list of strings; item 0 is int 1",
    ),
    (
        "musique is_supporting a string",
        "musique",
        _set(("paragraphs", 0, "is_supporting"), "false"),
        "paragraph 0: is_supporting must be true/false or 0/1, not str 'false'",
    ),
    ("msmarco is_selected longer", "msmarco", _msmarco_selected(1), "passages has lists of different lengths"),
    ("msmarco is_selected shorter", "msmarco", _msmarco_selected(-1), "passages has lists of different lengths"),
    (
        "msmarco passage_text a string",
        "msmarco",
        _set(("passages", "passage_text"), "one passage"),
        "passages.passage_text must be a list, not str",
    ),
    ("msmarco answers a string", "msmarco", _set(("answers",), "an answer"), "answers must be a list of strings"),
    (
        "hotpotqa sentences a string",
        "hotpotqa",
        _set(("context", 0, 1), "One sentence."),
        "context paragraph 0 ('The Old Maid and the Thief'): its sentences must be a list of strings",
    ),
    (
        "hotpotqa sent_id a string",
        "hotpotqa",
        _set(("supporting_facts", 0, 1), "0"),
        "supporting_facts entry 0 must be [title, sentence index] with a string title and an integer index",
    ),
    ("hotpotqa sent_id a float", "hotpotqa", _set(("supporting_facts", 0, 1), 0.5), "an integer index"),
    ("2wiki title null", "2wiki", _set(("context", 0, 0), None), "context paragraph 0: its title must be a string"),
    ("hotpotqa answer null", "hotpotqa", _set(("answer",), None), "answer must be a string, not null"),
    (
        "hotpotqa HF layout, sentences missing one",
        "hotpotqa",
        _hf_then(lambda r: r["context"]["sentences"].pop()),
        "context has lists of different lengths (10 title, 9 ",
    ),
    (
        "hotpotqa HF layout, sent_id missing one",
        "hotpotqa",
        _hf_then(lambda r: r["supporting_facts"]["sent_id"].pop()),
        "supporting_facts has lists of different lengths",
    ),
    ("fever label null", "fever", _set(("label",), None), "label must be a string such as SUPPORTS or REFUTES"),
    (
        "fever gold_evidence an object",
        "fever",
        _set(("gold_evidence",), {"ab": "cd"}),
        "gold_evidence must be a list of [title, sentence] pairs, not dict",
    ),
]


@pytest.mark.parametrize("name, edit, words", [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_a_malformed_field_is_one_error_naming_file_and_line(data_dir: Path, tmp_path: Path, name, edit, words) -> None:
    record, good = _raw(data_dir, name)[:2]
    edit(record)
    path = _write_jsonl(tmp_path / "data.jsonl", [good, record])
    with pytest.raises(DataFormatError) as info:
        load_dataset(name, path)
    message = str(info.value)
    assert message.startswith(f"{path} line 2: ") and words in message and "\n" not in message, message


def test_the_stricter_checks_accept_every_shared_record(env_data: Path, tmp_path: Path) -> None:
    counts = {name: len(load_dataset(name)) for name in ("hotpotqa", "2wiki", "musique", "msmarco", "fever")}
    assert counts == {"hotpotqa": 1000, "2wiki": 175, "musique": 301, "msmarco": 200, "fever": 1196}
    hf = _write_jsonl(tmp_path / "hf.jsonl", [_to_hf_layout(r) for r in _raw(env_data, "hotpotqa")[:20]])
    assert load_hotpotqa(hf) == load_hotpotqa(limit=20)  # the Hugging Face layout passes the checks too
