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
