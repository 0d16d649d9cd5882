"""scp ship: the one recorded way a trained run becomes a committed model under models/."""

import json

import pytest

from scp.cli import main
from scp.errors import InputError, MissingFileError
from scp.lineage import sha256
from scp.paths import MODELS
from scp.training.ship import card_of, ship


def test_ship_copies_the_run_and_writes_its_card(tmp_path):
    run = tmp_path / "runs" / "models" / "hotpotqa-deepsets-8ae0470755"
    run.mkdir(parents=True)
    (run / "best.safetensors").write_bytes((MODELS / "scp-hotpotqa-best.safetensors").read_bytes())
    target = ship(run, "scp-test", chosen_by="a test: the only run", models_dir=tmp_path / "models")
    assert target.read_bytes() == (run / "best.safetensors").read_bytes()
    card = card_of(target)
    assert card["run"] == run.name == card["run_of_config"]  # the folder is the run name of the config it holds
    assert card["sha256"] == sha256(target) and card["chosen_by"] == "a test: the only run"
    assert card["val_auc"] > 0.9 and card["config"]["model"] == "deepsets"
    with pytest.raises(InputError, match="say why"):
        ship(run, "scp-test", chosen_by=" ", models_dir=tmp_path / "models")
    with pytest.raises(InputError, match="file stem"):
        ship(run, "x.safetensors", chosen_by="x", models_dir=tmp_path / "models")
    with pytest.raises(MissingFileError, match="no trained run"):
        ship(tmp_path / "nope", "x", chosen_by="x", models_dir=tmp_path / "models")


def test_every_committed_model_has_a_card_that_matches_it():
    models = sorted(MODELS.glob("*.safetensors"))
    assert models
    for model in models:
        card = json.loads(model.with_suffix(".json").read_text())
        assert card["sha256"] == sha256(model), model.name
        assert card["run"] == card["run_of_config"] and card["chosen_by"] and card["shipped"]


def test_ship_on_the_command_line(tmp_path, capsys):
    assert main(["ship", str(tmp_path / "nope"), "--as", "x", "--chosen-by", "y"]) == 2
    assert "no trained run" in capsys.readouterr().err


# ---------------------------------------------------------------- issue 25: nothing lost, the card checked


def shipped_run(tmp_path, name="hotpotqa-deepsets-8ae0470755", source="scp-hotpotqa-best"):
    run = tmp_path / "runs" / "models" / name
    run.mkdir(parents=True)
    (run / "best.safetensors").write_bytes((MODELS / f"{source}.safetensors").read_bytes())
    return run


def snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_failed_ship_changes_nothing_in_models(tmp_path, capsys):
    from scp.models.checkpoint import CheckpointError

    models = tmp_path / "models"
    ship(shipped_run(tmp_path), "scp-test", chosen_by="the good run", models_dir=models)
    before = snapshot(models)
    bad = tmp_path / "bad"
    bad.mkdir()
    blob = bytearray((MODELS / "scp-hotpotqa-best.safetensors").read_bytes())
    blob[-10] ^= 0xFF  # one flipped byte in the weights: the file's checksum no longer matches
    (bad / "best.safetensors").write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match="corrupted"):
        ship(bad, "scp-test", chosen_by="the bad run", models_dir=models)
    with pytest.raises(CheckpointError):
        ship(bad, "scp-new", chosen_by="the bad run", models_dir=models)  # no rejected file left either
    assert snapshot(models) == before  # the model, its card and the folder's listing as they were
    assert card_of(models / "scp-test.safetensors")["chosen_by"] == "the good run"


def test_the_command_line_ship_of_a_bad_run_is_one_line_and_leaves_models_alone(tmp_path, capsys, monkeypatch):
    import scp.training.ship as shipping

    models = tmp_path / "models"
    ship(shipped_run(tmp_path), "scp-test", chosen_by="the good run", models_dir=models)
    before = snapshot(models)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "best.safetensors").write_text('{"not": "a checkpoint"}\n')
    monkeypatch.setattr(shipping, "MODELS", models)
    assert main(["ship", str(tmp_path / "bad"), "--as", "scp-test", "--chosen-by", "y"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scp ship: error:") and err.count("\n") == 1
    assert snapshot(models) == before


def test_two_ships_of_one_name_do_not_run_at_once(tmp_path):
    import fcntl

    from scp.errors import SCPError

    models = tmp_path / "models"
    models.mkdir()
    with open(models / ".scp-test.lock", "w") as held:  # another scp ship of scp-test, mid-way
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(SCPError, match="models/scp-test is being written by another process"):
            ship(shipped_run(tmp_path), "scp-test", chosen_by="x", models_dir=models)
    assert sorted(p.name for p in models.iterdir()) == [".scp-test.lock"]
    assert ship(tmp_path / "runs" / "models" / "hotpotqa-deepsets-8ae0470755", "scp-test", "x", models).is_file()
    assert "models/.*.lock" in (MODELS.parent / ".gitignore").read_text().splitlines()  # the lock is never committed


def test_a_model_swapped_under_its_card_is_refused_naming_both_hashes(tmp_path):
    from scp.models.checkpoint import CheckpointError
    from scp.models.factory import load_checkpoint

    models = tmp_path / "models"
    target = ship(shipped_run(tmp_path), "scp-test", chosen_by="x", models_dir=models)
    load_checkpoint(target)  # as shipped: loads
    other = MODELS / "scp-hotpotqa-deepsets.safetensors"
    target.write_bytes(other.read_bytes())  # a valid checkpoint, but not the shipped one
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(target)
    message = str(caught.value)
    assert card_of(target)["sha256"] in message and sha256(other) in message
    assert "changed after shipping" in message and "\n" not in message


def test_a_deeply_nested_card_is_one_clear_error(tmp_path):
    from scp.errors import DataFormatError
    from scp.models.factory import load_checkpoint

    models = tmp_path / "models"
    target = ship(shipped_run(tmp_path), "scp-test", chosen_by="x", models_dir=models)
    target.with_suffix(".json").write_text("[" * 100_000 + "]" * 100_000)
    for read in (card_of, load_checkpoint):
        with pytest.raises(DataFormatError, match="model card .*scp-test.json nests lists or objects deeper"):
            read(target)
