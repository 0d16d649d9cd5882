"""scp.data.cases: the paper's worked cases read from $SCP_DATA_DIR/cases (never shipped with the project)."""

import json

import pytest

from scp.data.cases import TABLE19, case_path, load_case
from scp.errors import DataFormatError, DataUnavailableError


def test_table19_case_from_the_shared_data(data_dir):
    ex = load_case(TABLE19)
    assert ex.n_units == 10 and ex.meta["ids"] == [f"S{i}" for i in range(1, 11)]
    assert ex.labels == (0, 1, 1, 1, 1, 1, 0, 0, 0, 0)  # G1, G2 (duplicated), G3 are evidence
    assert ex.units[0] == "The old manual states: standard analgesic dose is 5 mg."
    assert ex.query.startswith("According to the latest protocol")
    assert ex.meta["paper_loo"][0] == -1.0 and ex.meta["paper_scp"][5] == 1.3
    assert ex.meta["roles"][0] == "distractor (old)" and ex.titles == ("",) * 10
    assert case_path(TABLE19) == data_dir / "cases" / f"{TABLE19}.json"


def test_missing_case_file_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SCP_DATA_DIR", str(tmp_path))
    with pytest.raises(DataUnavailableError, match="SCP_DATA_DIR.*not shipped"):
        load_case(TABLE19)
    monkeypatch.delenv("SCP_DATA_DIR")
    with pytest.raises(DataUnavailableError, match="SCP_DATA_DIR is not set"):
        load_case(TABLE19)


def test_explicit_path_and_bad_files(tmp_path):
    good = {
        "question": "Q?",
        "answer": "A",
        "sentences": [
            {"id": "S1", "text": "a. ", "role": "G1", "paper_x": 1},
            {"id": "S2", "text": "b.", "role": "noise", "paper_x": 0.5},
        ],
    }
    path = tmp_path / "c.json"
    path.write_text(json.dumps(good))
    ex = load_case("c", path=path)
    assert ex.units == ("a.", "b.") and ex.labels == (1, 0) and ex.meta["paper_x"] == [1.0, 0.5]
    good["sentences"][1].pop("paper_x")
    path.write_text(json.dumps(good))
    with pytest.raises(DataFormatError, match="S2 has no number in column paper_x"):
        load_case("c", path=path)
    good["sentences"][1].pop("role")
    path.write_text(json.dumps(good))
    with pytest.raises(DataFormatError, match="sentence 1 lacks role"):
        load_case("c", path=path)
    path.write_text("{not json")
    with pytest.raises(DataFormatError, match="not a JSON case file"):
        load_case("c", path=path)
