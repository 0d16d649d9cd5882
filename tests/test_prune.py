import numpy as np
import pytest

from scp.prune import prune, regex_tokens, select

SENTS = ["Paris is the capital of France.", "It rains.", "The Eiffel Tower is in Paris, France.", "Cats purr."]
SCORES = [0.9, 0.1, 0.5, -0.2]


def test_top_k_keeps_order_and_reports_numbers():
    r = prune(SENTS, SCORES, top_k=2)
    assert r.kept_indices == (0, 2) and r.removed_indices == (1, 3)
    assert r.kept_text == "Paris is the capital of France. The Eiffel Tower is in Paris, France."
    assert r.original_tokens == sum(len(regex_tokens(s)) for s in SENTS) == 7 + 3 + 9 + 3
    assert r.kept_tokens == 16 and r.tokenizer == "regex-words"
    assert r.keep_rate == 0.5 and r.compression_rate == pytest.approx(1 - 16 / 22)
    assert r.as_dict()["kept_indices"] == [0, 2]


def test_keep_ratio_threshold_and_budget():
    assert prune(SENTS, SCORES, keep_ratio=0.5).kept_indices == (0, 2)
    assert prune(SENTS, SCORES, keep_ratio=0.1).kept_indices == (0,)  # at least one
    assert prune(SENTS, SCORES, keep_ratio=1.0).kept_indices == (0, 1, 2, 3)
    assert prune(SENTS, SCORES, threshold="mean").kept_indices == (0, 2)  # mean = 0.325
    assert prune(SENTS, SCORES, threshold=0.0).kept_indices == (0, 1, 2)
    # budget 10: sentence 0 (7 tokens) fits, 2 (9) does not, 1 (3) fits -> 10 tokens
    r = prune(SENTS, SCORES, token_budget=10)
    assert r.kept_indices == (0, 1) and r.kept_tokens == 10
    with pytest.warns(UserWarning, match="keeps no unit") as caught:
        assert prune(SENTS, SCORES, token_budget=0).kept_indices == ()
    assert caught[0].filename == __file__  # attributed to the caller's line, not to scp/prune.py


def test_ties_broken_by_position():
    assert select([1.0, 1.0, 1.0], top_k=2)[0].tolist() == [0, 1]


def test_custom_tokenizer_is_named():
    r = prune(SENTS, SCORES, top_k=1, tokenizer=str.split, tokenizer_name="whitespace")
    assert r.tokenizer == "whitespace" and r.kept_tokens == 6


@pytest.mark.parametrize("kwargs, match", [
    (dict(), "exactly one"), (dict(top_k=1, keep_ratio=0.5), "exactly one"), (dict(top_k=0), "top_k"),
    (dict(keep_ratio=1.5), "keep_ratio"), (dict(threshold="median"), "threshold"), (dict(token_budget=-1), "token_budget"),
    (dict(keep_ratio="0.5"), r"keep_ratio must be a number in \(0, 1\]; got '0.5' \(str\)"),
    (dict(top_k=2.0), "top_k must be an integer"), (dict(token_budget=True), "token_budget"),
])
def test_bad_criteria(kwargs, match):
    with pytest.raises(ValueError, match=match):
        prune(SENTS, SCORES, **kwargs)


def test_bad_inputs():
    with pytest.raises(ValueError, match="empty"):
        prune([], [], top_k=1)
    with pytest.raises(ValueError, match="scores"):
        prune(SENTS, SCORES[:2], top_k=1)
    with pytest.raises(ValueError, match="NaN"):
        prune(SENTS, [np.nan, 0, 0, 0], top_k=1)
    assert prune(["only one"], [0.0], keep_ratio=0.5).kept_indices == (0,)
