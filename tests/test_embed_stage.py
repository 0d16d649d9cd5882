"""scp.data.embed_stage: grouped-by-token-length encoding equals one text per pass bit for bit, the multi-process
cache fill stores what a one-thread CachedEmbedder would, and every text a dataset's contexts embed is listed."""

import numpy as np
import pytest

import scp.data.embed_stage as stage
from scp.data.datasets import load_dataset
from scp.data.embed_stage import dataset_texts, encode_by_length, fill_cache, main, token_lengths
from scp.data.embedders import CachedEmbedder, Embedder, EmbeddingCache, RandomEmbedder, get_embedder, text_key
from scp.data.features import contexts_from_examples
from scp.errors import InputError, InputTypeError, ModelUnavailableError


@pytest.fixture(scope="module")
def hotpot_texts():
    return dataset_texts("hotpotqa")


@pytest.fixture(scope="module")
def sample(hotpot_texts):
    """~600 real HotpotQA texts spread over the whole list: queries and "Title: sentence" units, 6 to 256 tokens."""
    return hotpot_texts[::70]


@pytest.fixture(scope="module")
def minilm(one_thread):
    return get_embedder("minilm")


def test_dataset_texts_are_exactly_what_contexts_from_examples_embeds(hotpot_texts):
    class Recorder(Embedder):
        id, dim = "recorder", 2

        def __init__(self):
            self.seen = []

        def _encode(self, texts, batch_size, show_progress):
            self.seen.extend(texts)
            return np.zeros((len(texts), 2))

    examples = load_dataset("hotpotqa")
    recorder = Recorder()
    contexts_from_examples(examples, recorder, features=(), with_title=True)
    assert hotpot_texts == list(dict.fromkeys(recorder.seen))
    assert len(hotpot_texts) == len(set(hotpot_texts)) > 10 * len(examples)
    assert any(": " in t for t in hotpot_texts[len(examples) :])  # "Title: sentence" units
    bare = dataset_texts("hotpotqa", with_title=False)
    assert set(bare) == {ex.query for ex in examples} | {u for ex in examples for u in ex.units}
    with pytest.raises(InputError, match="unknown dataset 'nope'"):
        dataset_texts("nope")
    with pytest.raises(InputError, match="no split"):
        dataset_texts("hotpotqa", split="train")


def test_encode_by_length_is_bit_identical_to_one_text_per_pass_minilm(minilm, sample):
    assert len(sample) >= 500
    lengths = token_lengths(minilm, sample)
    assert len(np.unique(lengths)) > 50 and lengths.min() < 16 <= lengths.max()
    one_at_a_time = minilm.encode(sample)  # padded: one text per forward pass
    grouped = encode_by_length(minilm, sample)
    assert grouped.dtype == np.float32 and grouped.shape == one_at_a_time.shape and grouped.flags.c_contiguous
    assert grouped.tobytes() == one_at_a_time.tobytes()
    batched = {s for s in stage._SAME_BITS if s[0] == minilm.id}
    assert len(batched) > 20  # the grouped path really ran in batches, not one text at a time everywhere
    assert encode_by_length(minilm, sample[:40], batch_size=7).tobytes() == one_at_a_time[:40].tobytes()


def test_encode_by_length_is_bit_identical_wordllama(sample):
    wordllama = get_embedder("wordllama")
    texts = [*sample, ""]  # "" has no tokens: the zero vector
    grouped = encode_by_length(wordllama, texts)
    assert grouped.tobytes() == wordllama.encode(texts).tobytes()
    assert not grouped[-1].any()


def test_non_padded_embedder_is_just_encode():
    emb = RandomEmbedder(dim=8)
    texts = ["a", "bb", "a", "ccc"]
    assert encode_by_length(emb, texts, batch_size=2).tobytes() == emb.encode(texts).tobytes()
    assert encode_by_length(emb, []).shape == (0, 8)


def test_fill_cache_two_workers_stores_the_bits_of_a_one_thread_cached_embedder(minilm, sample, tmp_path):
    texts = sample[::5] + sample[::5][:10]  # 10 repeated texts count once
    distinct = list(dict.fromkeys(texts))
    counts = fill_cache("minilm", texts, jobs=2, cache_dir=tmp_path / "filled")
    assert counts["texts"] == len(texts) and counts["distinct"] == len(distinct) == len(texts) - 10
    assert (counts["cached"], counts["encoded"], counts["jobs"], counts["workers"]) == (0, len(distinct), 2, 2)
    assert counts["embedder"] == "minilm" and counts["cache_id"] == minilm.cache_id and counts["seconds"] > 0

    reference = CachedEmbedder(get_embedder("minilm"), cache_dir=tmp_path / "reference").encode(texts)
    filled = EmbeddingCache(minilm.cache_id, minilm.dim, tmp_path / "filled")
    stored = np.stack(filled.get([text_key(t) for t in texts]))
    assert stored.tobytes() == reference.tobytes()
    reader = CachedEmbedder(get_embedder("minilm"), cache_dir=tmp_path / "filled")
    assert reader.encode(texts).tobytes() == reference.tobytes() and reader.n_encoded == 0

    again = fill_cache("minilm", texts, jobs=2, cache_dir=tmp_path / "filled")
    assert (again["cached"], again["encoded"], again["workers"]) == (len(distinct), 0, 0)
    more = fill_cache("minilm", [*texts, "A text not seen before."], jobs=2, cache_dir=tmp_path / "filled")
    assert (more["cached"], more["encoded"], more["workers"]) == (len(distinct), 1, 1)


def test_fill_cache_and_cli_with_a_non_padded_embedder(tmp_path, capsys):
    texts = [f"text {i}" for i in range(50)]
    counts = fill_cache("random", texts, jobs=2, cache_dir=tmp_path)
    assert counts["encoded"] == 50 and counts["workers"] == 2
    emb = RandomEmbedder()
    stored = np.stack(EmbeddingCache(emb.cache_id, emb.dim, tmp_path).get([text_key(t) for t in texts]))
    assert stored.tobytes() == emb.encode(texts).tobytes()

    assert main(["--embedder", "random", "--dataset", "fever", "-j", "1", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "embedder=random" in out and "encoded=" in out and "texts/s" in out


def test_bad_inputs_are_clear_errors(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailableError, match="no-such-embedder"):
        fill_cache("no-such-embedder", ["a"], cache_dir=tmp_path)
    with pytest.raises(InputError, match="jobs must be >= 1"):
        fill_cache("random", ["a"], jobs=0, cache_dir=tmp_path)
    with pytest.raises(InputTypeError, match="jobs must be an int"):
        fill_cache("random", ["a"], jobs="2", cache_dir=tmp_path)
    with pytest.raises(InputTypeError, match=r"texts\[1\] is a int"):
        fill_cache("random", ["a", 3], cache_dir=tmp_path)
    with pytest.raises(InputTypeError, match="single string"):
        fill_cache("random", "abc", cache_dir=tmp_path)
    with pytest.raises(InputTypeError, match="embedder_name must be a str"):
        fill_cache(None, ["a"], cache_dir=tmp_path)
    with pytest.raises(InputError, match="batch_size"):
        fill_cache("random", ["a"], batch_size=0, cache_dir=tmp_path)
    with pytest.raises(InputError, match="tfidf"):
        fill_cache("tfidf", ["a"], cache_dir=tmp_path)
    with pytest.raises(InputTypeError, match=r"texts\[0\] is a bytes"):
        encode_by_length(RandomEmbedder(), [b"a"])
    with pytest.raises(InputError, match="lone surrogate"):
        fill_cache("wordllama", ["caf\udce9"], cache_dir=tmp_path)
    assert not list(tmp_path.rglob("shard-*"))  # nothing was written
