"""`scp run NAME --check`: a rerun's tables and records against the committed ones (scp.suite.check)."""

import json

import pytest

from scp.errors import DataFormatError
from scp.suite.check import compare
from scp.suite.graph import Tolerance


def _folder(path, rows, records):
    path.mkdir(parents=True)
    lines = ["method,auc,seconds,n"] + [f"{m},{a},{s},{n}" for m, a, s, n in rows]
    (path / "auc.csv").write_text("\n".join(lines) + "\n")
    (path / "records.json").write_text(json.dumps(records))
    return path


def test_equal_within_tolerance_and_timings_ignored(tmp_path):
    old = _folder(tmp_path / "old", [("scp", 0.9, 1.0, 5), ("bm25", "nan", 2.0, 5)], {"auc": 0.9, "train_seconds": 3})
    new = _folder(
        tmp_path / "new", [("scp", 0.9 + 4e-7, 9.0, 5), ("bm25", "nan", 7.0, 5)], {"auc": 0.9, "train_seconds": 8}
    )
    report = compare(old, new, Tolerance(atol=1e-6))
    assert report.ok, report.summary()
    assert report.files == 2 and report.values == 5 and 3e-7 < report.largest < 5e-7
    assert report.summary().startswith("equal within tolerance")


def test_differences_beyond_tolerance_are_listed(tmp_path):
    old = _folder(tmp_path / "old", [("scp", 0.9, 1.0, 5)], {"auc": [0.9, 0.8], "name": "a"})
    new = _folder(tmp_path / "new", [("SCP", 0.91, 1.0, 5)], {"auc": [0.9, 0.7], "name": "a", "extra": 1})
    (new / "more.csv").write_text("a\n1\n")
    report = compare(old, new, Tolerance(atol=1e-3))
    found = {(d.file, d.where) for d in report.differences}
    assert found == {
        ("auc.csv", "row 0 method"),
        ("auc.csv", "row 0 auc"),
        ("records.json", "['auc'][1]"),
        ("records.json", "['extra']"),
        ("more.csv", "file"),
    }
    assert not report.ok and "5 differences beyond tolerance" in report.summary()
    assert compare(old, new, Tolerance(atol=0.2)).differences != []  # text and structure never pass by tolerance


def test_largest_difference_is_over_all_numbers_beyond_tolerance_too(tmp_path):
    """The summary's largest difference counts the numbers beyond tolerance (it once counted only those within)."""
    old = _folder(tmp_path / "old", [("scp", 0.9, 1.0, 5), ("bm25", 0.8, 1.0, 5)], {"auc": 0.5, "x": "nan"})
    new = _folder(tmp_path / "new", [("scp", 0.9 + 4e-7, 1.0, 5), ("bm25", 0.8 + 4.5e-6, 1.0, 5)], {"auc": 0.5, "x": 1})
    report = compare(old, new, Tolerance(atol=1e-6))
    assert 4.4e-6 < report.largest < 4.6e-6 and report.largest_at == "auc.csv row 1 auc"
    assert report.numbers_beyond == 2  # bm25's auc and the NaN that became 1
    summary = report.summary()
    assert "largest difference 4.5e-06 (auc.csv row 1 auc); 2 numbers beyond the tolerance" in summary, summary
    assert (
        compare(old, old, Tolerance())
        .summary()
        .startswith(
            "equal within tolerance: 2 files, 6 numbers compared; largest difference 0; 0 numbers beyond the tolerance"
        )
    )


def test_rows_and_columns_must_match(tmp_path):
    old = _folder(tmp_path / "old", [("scp", 0.9, 1.0, 5)], {})
    new = _folder(tmp_path / "new", [("scp", 0.9, 1.0, 5), ("bm25", 0.8, 1.0, 5)], {})
    assert [d.where for d in compare(old, new, Tolerance()).differences] == ["rows"]
    (new / "auc.csv").write_text("method,auc\nscp,0.9\n")
    assert [d.where for d in compare(old, new, Tolerance()).differences] == ["columns"]


def test_milliseconds_are_timings_and_ms_marco_is_not():
    tolerance = Tolerance()
    assert tolerance.ignores("ms_per_context") and tolerance.ignores("ms_per_context_hotpotqa_by_budget")
    assert tolerance.ignores("embed_ms") and not tolerance.ignores("msmarco_auc") and not tolerance.ignores("auc")


def _table_json(path, rows, commit):
    doc = {"name": "t", "columns": ["method", "auc", "seconds"], "rows": rows, "provenance": {"git": commit}}
    path.write_text(json.dumps(doc))


def test_every_table_file_is_compared_json_and_nested_too(tmp_path):
    old = _folder(tmp_path / "old", [("scp", 0.9, 1.0, 5)], {"auc": 0.9})
    new = _folder(tmp_path / "new", [("scp", 0.9, 1.0, 5)], {"auc": 0.9})
    rows = [{"method": "scp", "auc": 0.9, "seconds": 1.0}]
    _table_json(old / "auc.json", rows, "a" * 40)
    _table_json(new / "auc.json", [{**rows[0], "seconds": 7.0}], "b" * 40)  # a timing and the table's provenance
    for folder in (old, new):
        (folder / "sub").mkdir()
        (folder / "provenance.json").write_text(json.dumps({"wall_time_s": str(folder)}))
    (old / "sub" / "x.csv").write_text("k,v\na,1\n")
    (new / "sub" / "x.csv").write_text("k,v\na,1\n")
    report = compare(old, new, Tolerance(atol=1e-9))
    assert report.ok and report.files == 4, report.summary()  # auc.csv, auc.json, records.json, sub/x.csv
    _table_json(new / "auc.json", [{**rows[0], "auc": 0.95}], "a" * 40)  # a hand edit of the JSON table alone
    (new / "sub" / "x.csv").write_text("k,v\na,2\n")
    (new / "extra.json").write_text("{}")
    found = {(d.file, d.where) for d in compare(old, new, Tolerance(atol=1e-9)).differences}
    assert found == {("auc.json", "['rows'][0]['auc']"), ("sub/x.csv", "row 0 v"), ("extra.json", "file")}


def test_deeply_nested_records_are_one_error_not_a_recursion(tmp_path):
    old = _folder(tmp_path / "old", [("scp", 0.9, 1.0, 5)], {"auc": 0.9})
    new = _folder(tmp_path / "new", [("scp", 0.9, 1.0, 5)], {"auc": 0.9})
    (new / "records.json").write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(DataFormatError, match="records.json nests lists or objects deeper than 64 levels"):
        compare(old, new, Tolerance())


def test_check_names_a_change_of_machine(tmp_path):
    """A rerun's provenance records its machine; ``--check`` says when it is not the committed run's."""
    from scp.suite.notebook import machine_facts
    from scp.suite.runner import _machine_change

    here = machine_facts()
    assert here["logical_cores"] and here["isa"] is not None and "torch_cpu_capability" in here
    committed, rerun = tmp_path / "committed", tmp_path / "rerun"
    for folder, machine in ((committed, here), (rerun, here)):
        folder.mkdir()
        (folder / "provenance.json").write_text(json.dumps({"machine": machine}), encoding="utf-8")
    assert _machine_change(committed, rerun) == ""
    (rerun / "provenance.json").write_text(json.dumps({"machine": {**here, "cpu": "Other CPU"}}), encoding="utf-8")
    assert "another machine" in _machine_change(committed, rerun) and "Other CPU" in _machine_change(committed, rerun)
    (committed / "provenance.json").write_text(json.dumps({}), encoding="utf-8")
    assert "recorded no machine" in _machine_change(committed, rerun)
