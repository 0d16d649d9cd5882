"""Issue 44: every JSON the package reads has one reading (a key given twice is refused, naming the key and the
file), a shipped model's card names the file beside it, and a lock path that is not a regular file is one clear
line."""

import json
import os

import pytest

from scp.errors import DataFormatError, InputError
from scp.io import exclusive_lock, parse_json, read_json
from scp.paths import MODELS


def one_line(error) -> str:
    message = str(error)
    assert "\n" not in message
    return message


# ------------------------------------------------------------------------------------ a key given twice


@pytest.mark.parametrize(
    "text, key",
    [
        ('{"criterion": "forged", "criterion": "real"}', "criterion"),
        ('{"inputs": {}, "git": {"dirty": true, "dirty": false}}', "dirty"),  # nested: provenance.json
        ('[{"id": 1}, {"id": 2, "question": "a", "question": "b"}]', "question"),
    ],
)
def test_the_json_reader_refuses_a_key_given_twice(tmp_path, text, key):
    path = tmp_path / "provenance.json"
    path.write_text(text)
    with pytest.raises(DataFormatError) as caught:
        read_json(path, expect=None)
    message = one_line(caught.value)
    assert str(path) in message and f"'{key}' twice" in message
    with pytest.raises(DataFormatError, match=f"the record gives the key '{key}' twice"):
        parse_json(text, "the record")
    assert parse_json('{"a": 1, "b": {"a": 2}}', "x") == {"a": 1, "b": {"a": 2}}  # one per object is fine


def test_a_prune_record_with_a_key_given_twice_carries_the_error():
    from scp.pruning.corpus import parse_line

    record = parse_line('{"question": "forged", "question": "q", "sentences": ["a", "b"], "id": 1}', 3)
    assert record.error and "'question' twice" in record.error


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_data_record_with_a_key_given_twice_is_refused(tmp_path, suffix):
    from scp.data.datasets import read_json_records

    record = '{"_id": "x", "supporting_facts": [["A", 0]], "supporting_facts": [["B", 1]]}'
    path = tmp_path / f"data{suffix}"
    path.write_text(record + "\n" if suffix == ".jsonl" else f"[{record}]")
    with pytest.raises(DataFormatError) as caught:
        list(read_json_records(path))
    message = one_line(caught.value)
    assert str(path) in message and "'supporting_facts' twice" in message
    if suffix == ".jsonl":
        assert "line 1" in message


def test_a_case_file_with_a_key_given_twice_is_refused(tmp_path):
    from scp.data.cases import load_case

    path = tmp_path / "case.json"
    path.write_text('{"question": "forged", "question": "q", "sentences": [{"id": "s1", "text": "t", "role": "r"}]}')
    with pytest.raises(DataFormatError, match="'question' twice"):
        load_case("case", path)


# ------------------------------------------------------------------------------------ the shipped model's card


@pytest.fixture
def shipped(tmp_path):
    """A copy of a committed model and its card in a models/ folder of its own."""
    models = tmp_path / "models"
    models.mkdir()
    for suffix in (".safetensors", ".json"):
        (models / f"scp-hotpotqa-best{suffix}").write_bytes((MODELS / f"scp-hotpotqa-best{suffix}").read_bytes())
    return models / "scp-hotpotqa-best.safetensors"


def test_a_card_with_a_forged_first_sha256_is_refused(shipped):
    from scp.models.checkpoint import CheckpointError
    from scp.models.factory import load_checkpoint

    load_checkpoint(shipped)  # as committed: loads
    card = shipped.with_suffix(".json")
    text = card.read_text()
    card.write_text(text.replace('"sha256":', '"sha256": "' + "0" * 64 + '",\n "sha256":', 1))
    assert json.loads(card.read_text())["sha256"] == json.loads(text)["sha256"]  # last-wins would pass
    with pytest.raises((CheckpointError, DataFormatError)) as caught:
        load_checkpoint(shipped)
    assert "'sha256' twice" in one_line(caught.value) and str(card) in str(caught.value)


def test_a_model_swapped_under_a_card_renamed_to_match_is_refused(shipped):
    from scp.models.checkpoint import CheckpointError
    from scp.models.factory import load_checkpoint

    other = MODELS / "scp-hotpotqa-deepsets.safetensors"
    shipped.write_bytes(other.read_bytes())  # another model under this name ...
    card = shipped.with_suffix(".json")
    doc = json.loads(card.read_text())
    doc["model"] = other.name  # ... and its card's model field renamed to match the swapped-in file
    card.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(shipped)
    message = one_line(caught.value)
    assert str(shipped) in message and other.name in message and "renamed" in message


def test_a_json_of_another_kind_beside_a_model_is_not_a_card(shipped):
    from scp.models.factory import load_checkpoint

    shipped.with_suffix(".json").write_text('{"notes": "mine"}')
    load_checkpoint(shipped)


# ------------------------------------------------------------------------------------ lock paths


def test_a_lock_file_that_is_a_symlink_or_a_folder_is_one_clear_line(tmp_path):
    locks = tmp_path / ".locks"
    locks.mkdir()
    (locks / "a.lock").symlink_to(tmp_path / "elsewhere")
    (locks / "b.lock").mkdir()
    for name, words in [("a.lock", "is a symbolic link to"), ("b.lock", "is a directory")]:
        with pytest.raises(InputError) as caught:
            with exclusive_lock(locks / name, "notebook x"):
                pass
        message = one_line(caught.value)
        assert str(locks / name) in message and words in message and "notebook x" in message
    assert not (tmp_path / "elsewhere").exists()  # the link was not followed


def test_a_locks_folder_that_is_a_file_is_one_clear_line(tmp_path):
    (tmp_path / ".locks").write_text("mine")
    with pytest.raises(InputError) as caught:
        with exclusive_lock(tmp_path / ".locks" / "a.lock", "store entry a"):
            pass
    message = one_line(caught.value)
    assert f"{tmp_path / '.locks'}" in message and "is a file, not a folder" in message
    assert (tmp_path / ".locks").read_text() == "mine"
    os.symlink(tmp_path / "gone", tmp_path / ".dangling")
    with pytest.raises(InputError, match="a symbolic link to .*which does not exist, not a folder"):
        with exclusive_lock(tmp_path / ".dangling" / "a.lock", "store entry a"):
            pass
