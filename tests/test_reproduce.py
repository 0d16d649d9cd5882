"""scp.training.reproduce: a run is checked against its reference by bit identity where that applies, else by AUC."""

import json

import pytest

from scp.errors import InputError
from scp.training.reproduce import QUICK_COMMAND, QUICK_REFERENCE, compare

ENV = {"torch": "2.13.0", "threads": 1, "cpu_capability": "AVX2", "device": "cpu"}
REF = {
    "config": {"seed": 0},
    "data_hash": "d",
    "environment": ENV,
    "inputs_fingerprint": "i",
    "weights_fingerprint": "w",
    "epoch": 2,
    "val_auc": 0.90,
}


def run(**changes):
    return {**REF, **changes}


def test_same_environment_and_inputs_need_bit_identical_weights():
    assert compare(run(), REF, 0.03).passed
    result = compare(run(weights_fingerprint="other", val_auc=0.90), REF, 0.03)
    assert not result.passed and "yet other weights" in result.why  # the AUC does not excuse other bits here


def test_other_inputs_or_environment_fall_back_to_the_auc_tolerance():
    assert compare(run(inputs_fingerprint="j", weights_fingerprint="x", val_auc=0.92), REF, 0.03).passed
    assert not compare(run(inputs_fingerprint="j", weights_fingerprint="x", val_auc=0.86), REF, 0.03).passed
    other_env = {**ENV, "threads": 2}
    result = compare(run(environment=other_env, weights_fingerprint="x", val_auc=0.89), REF, 0.03)
    assert result.passed and result.same_environment["threads"] is False and "gap 0.0100" in result.why


def test_another_config_or_data_is_not_comparable():
    with pytest.raises(InputError, match="another config or other data"):
        compare(run(config={"seed": 1}), REF, 0.03)
    with pytest.raises(InputError, match="another config or other data"):
        compare(run(data_hash="e"), REF, 0.03)


def test_the_quick_reference_is_a_record_of_the_quick_command():
    reference = json.loads(QUICK_REFERENCE.read_text())
    assert reference["command"] == QUICK_COMMAND
    assert reference["config"]["max_train_examples"] == 64 and reference["config"]["max_val_examples"] == 32
    assert reference["config"]["epochs"] == 2 and 0.5 < reference["val_auc"] <= 1
