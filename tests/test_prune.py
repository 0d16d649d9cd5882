import numpy as np
import pytest

from scp.core.selection import select
from scp.pruning.result import prune, regex_tokens

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
    assert caught[0].filename == __file__  # attributed to the caller's line, not to scp/pruning/result.py


def test_ties_broken_by_position():
    assert select([1.0, 1.0, 1.0], top_k=2)[0].tolist() == [0, 1]


def test_custom_tokenizer_is_named():
    r = prune(SENTS, SCORES, top_k=1, tokenizer=str.split, tokenizer_name="whitespace")
    assert r.tokenizer == "whitespace" and r.kept_tokens == 6


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(), "exactly one"),
        (dict(top_k=1, keep_ratio=0.5), "exactly one"),
        (dict(top_k=0), "top_k"),
        (dict(keep_ratio=1.5), "keep_ratio"),
        (dict(threshold="median"), "threshold"),
        (dict(token_budget=-1), "token_budget"),
        (dict(keep_ratio="0.5"), r"keep_ratio must be a number in \(0, 1\]; got '0.5' \(str\)"),
        (dict(top_k=2.0), "top_k must be an integer"),
        (dict(token_budget=True), "token_budget"),
    ],
)
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


@pytest.mark.parametrize("value", [np.float32(0.5), np.float64(0.5), np.float16(0.5), np.int64(1)])
def test_numpy_scalars_are_numbers(value):
    from scp.core.selection import check_criterion, keep_count

    assert check_criterion(keep_ratio=value) == f"keep_ratio={value}"
    kept = prune(SENTS, SCORES, keep_ratio=value).kept_indices
    assert list(kept) == select(SCORES, keep_ratio=float(value))[0].tolist()
    assert keep_count(4, value) == max(1, int(np.ceil(float(value) * 4)))
    assert prune(SENTS, SCORES, threshold=value).criterion == f"threshold={value}"
    assert prune(SENTS, SCORES, top_k=np.int32(2)).kept_indices == prune(SENTS, SCORES, top_k=2).kept_indices
    assert prune(SENTS, SCORES, token_budget=np.int64(5)).criterion == "token_budget=5"


@pytest.mark.parametrize(
    "value", [np.float32("nan"), float("nan"), np.float32(1.5), np.float64(0.0), np.bool_(True), True, np.float32(-0.1)]
)
def test_numpy_keep_ratio_still_rejects_nan_bools_and_out_of_range(value):
    from scp.core.selection import keep_count

    with pytest.raises(ValueError, match=r"keep_ratio must be a number in \(0, 1\]"):
        prune(SENTS, SCORES, keep_ratio=value)
    with pytest.raises(ValueError, match=r"keep_ratio must be a number in \(0, 1\]"):
        keep_count(4, value)


class _Words:
    """A deterministic toy embedder (what ShapleyPruner needs)."""

    dim, id = 8, "toy"

    def encode(self, texts, batch_size=256, show_progress=False):
        return np.asarray([np.random.default_rng(sum(map(ord, t))).normal(size=8) for t in texts], np.float32)


def test_shapley_pruner_takes_a_numpy_keep_ratio():
    import torch

    from scp.models.config import TrainConfig
    from scp.models.factory import build_model
    from scp.pruning.pruner import ShapleyPruner

    config = TrainConfig(query_mode="product_concat", features=("cos", "bm25z"), hidden=16, latent=8, skip=True)
    torch.manual_seed(0)
    pruner = ShapleyPruner(build_model(config, 8), config, _Words(), n_permutations=8)
    sentences = [f"sentence {i} about topic {i % 3}." for i in range(6)]
    out = pruner.prune("what about topic 1?", sentences, keep_ratio=np.float32(0.5))
    assert out.kept_indices == pruner.prune("what about topic 1?", sentences, keep_ratio=0.5).kept_indices
    assert len(out.kept_indices) == 3
    with pytest.raises(ValueError, match="keep_ratio"):
        pruner.prune("what about topic 1?", sentences, keep_ratio=np.float32("nan"))


def test_a_numpy_criterion_is_described_by_the_python_number_it_holds():
    """np.float32(0.3) is 0.30000001192…, which keeps 4 of 10 units where 0.3 keeps 3: the description (written to
    scp prune's settings, which decide whether an output may be resumed) must not read "keep_ratio=0.3" for both."""
    from scp.core.selection import check_criterion

    scores = list(range(10))
    value = np.float32(0.3)
    keep, desc = select(scores, keep_ratio=value)
    assert desc == f"keep_ratio={float(value)!r}" == "keep_ratio=0.30000001192092896"
    assert keep.tolist() == select(scores, keep_ratio=float(value))[0].tolist() and len(keep) == 4
    keep, desc = select(scores, keep_ratio=0.3)
    assert keep.tolist() == [7, 8, 9] and desc == "keep_ratio=0.3"
    assert (
        check_criterion(top_k=np.int64(3)) == "top_k=3"
        and check_criterion(keep_ratio=np.float64(0.5)) == "keep_ratio=0.5"
    )


@pytest.mark.parametrize(
    "scores",
    [
        [[0.9], [0.1], [0.5], [-0.2]],  # nested
        (x for x in SCORES),  # a generator
        b"\x01\x02\x03\x04",
        {0: 0.9, 1: 0.1, 2: 0.5, 3: -0.2},
        {0.9, 0.1, 0.5, -0.2},
        "0.9 0.1 0.5 -0.2",
        ["0.9", "0.1", "0.5", "-0.2"],
        [True, False, True, False],
        None,
        0.5,
    ],
    ids=["nested", "generator", "bytes", "dict", "set", "str", "strs", "bools", "None", "a number"],
)
def test_scores_that_are_no_sequence_of_numbers_are_one_scp_error_naming_them(scores):
    from scp.errors import InputTypeError

    with pytest.raises(InputTypeError, match=r"^scores must be a list or tuple of 4 finite numbers, one per sentence"):
        prune(SENTS, scores, top_k=1)


def test_scores_as_a_numpy_array_or_tuple_still_prune():
    assert prune(SENTS, np.asarray(SCORES, np.float32), top_k=2).kept_indices == (0, 2)
    assert prune(SENTS, tuple(np.float64(s) for s in SCORES), top_k=2).scores == tuple(SCORES)
    with pytest.raises(ValueError, match=r"scores\[1\] is inf"):
        prune(SENTS, [0.0, np.inf, 0.0, 0.0], top_k=1)


@pytest.mark.parametrize("path", [123, b"models/scp-hotpotqa-best.safetensors", "open file", None])
def test_a_checkpoint_that_is_no_path_is_one_scp_error(path, tmp_path):
    from scp.errors import InputTypeError
    from scp.models.factory import load_checkpoint
    from scp.pruning.pruner import ShapleyPruner

    with open("models/scp-hotpotqa-best.safetensors", "rb") as f:
        path = f if path == "open file" else path
        for load in (load_checkpoint, ShapleyPruner.from_checkpoint):
            with pytest.raises(InputTypeError, match=r"^the checkpoint must be a path \(a str or pathlib.Path"):
                load(path)


def test_score_contexts_of_what_is_no_context_is_one_scp_error():
    from scp.errors import InputTypeError
    from scp.models.config import TrainConfig
    from scp.models.factory import build_model
    from scp.models.scoring import score_contexts

    model = build_model(TrainConfig(query_mode="product_concat", features=("cos",), hidden=8, latent=4), 8)
    with pytest.raises(InputTypeError, match=r"contexts\[0\] is a int: 1$"):
        score_contexts(model, [1, 2])
    with pytest.raises(InputTypeError, match="got a int"):
        score_contexts(model, 5)
    assert score_contexts(model, []) == []


def test_a_huge_sentence_or_query_is_refused_before_any_embedding():
    from scp.models.config import TrainConfig
    from scp.models.factory import build_model
    from scp.pruning.pruner import MAX_UNIT_CHARS, ShapleyPruner

    class Refuses(_Words):
        def encode(self, texts, batch_size=256, show_progress=False):
            raise AssertionError("embedded")

    config = TrainConfig(query_mode="product_concat", features=("cos", "bm25z"), hidden=16, latent=8, skip=True)
    pruner = ShapleyPruner(build_model(config, 8), config, Refuses(), n_permutations=8)
    huge = "word " * (MAX_UNIT_CHARS // 5 + 1)  # 1,000,005 characters, no sentence boundary
    with pytest.raises(ValueError, match="^sentence 1 is 1,000,005 characters, above max_unit_chars=1,000,000; "):
        pruner.prune("what?", ["A short one.", huge], top_k=1)
    with pytest.warns(UserWarning, match="no sentence boundary"), pytest.raises(ValueError, match="^sentence 0 is 1,"):
        pruner.prune("what?", huge, top_k=1)
    with pytest.raises(ValueError, match="^the query is 1,000,005 characters"):
        pruner.prune(huge, ["A short one."], top_k=1)
    small = ShapleyPruner(build_model(config, 8), config, Refuses(), n_permutations=8, max_unit_chars=10)
    with pytest.raises(ValueError, match="^sentence 0 is 13 characters with its title, above max_unit_chars=10"):
        small.rank("what?", ["Short one."], titles=["T"])
    with pytest.raises(ValueError, match="max_unit_chars must be an integer ≥ 1"):
        ShapleyPruner(build_model(config, 8), config, Refuses(), max_unit_chars=0)
