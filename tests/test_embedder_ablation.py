"""One SCP model per embedder (scp.experiments.embedder_ablation): TF-IDF fitted on the training split, others via
train_or_load."""

import os

import pytest

from scp.data.embedders import hub_reachable
from scp.errors import ModelUnavailableError
from scp.experiments.embedder_ablation import TFIDF, tfidf_config_name, train_with_embedder
from scp.pruning.pruner import ShapleyPruner

TINY = dict(epochs=1, max_train_examples=12, max_val_examples=4, hidden=16, latent=8)


def test_tfidf_run_is_trained_once_and_loads_with_its_fitted_embedder(tmp_path, data_dir):
    run = train_with_embedder(TFIDF, tmp_path, tfidf_dim=16, **TINY)
    assert run.config.embedder == tfidf_config_name(16) == "tfidf-svd/d16"
    assert run.embedder.id.startswith("tfidf-svd:d16:seed0:corpus-") and run.embedder.dim == 16
    assert run.train_seconds > 0 and run.n_params > 0 and run.checkpoint.is_file()
    stamp = os.stat(run.checkpoint).st_mtime_ns
    again = train_with_embedder(TFIDF, tmp_path, tfidf_dim=16, **TINY)  # a finished run is reused
    assert again.checkpoint == run.checkpoint and os.stat(run.checkpoint).st_mtime_ns == stamp
    assert again.embedder.id == run.embedder.id  # the fit is deterministic
    pruner = ShapleyPruner.from_checkpoint(run.checkpoint, embedder=run.embedder, n_permutations=4)
    values = pruner.rank(
        "Who wrote Hamlet?", ["Shakespeare wrote it.", "It is in France."], titles=["Hamlet", "Paris"]
    ).values
    assert values.shape == (2,)


def test_other_embedders_go_through_train_or_load(tmp_path, data_dir):
    run = train_with_embedder("random", tmp_path, **TINY)
    assert run.config.embedder == "random" and run.embedder.id == "random:d64:seed0"
    assert run.checkpoint.parent.parent == tmp_path and run.train_seconds > 0
    ShapleyPruner.from_checkpoint(run.checkpoint, embedder=run.embedder)  # ids and dimensions match


@pytest.mark.skipif(hub_reachable(timeout=1.0), reason="the hub is reachable: bert-base would download")
def test_bert_base_is_unavailable_offline(tmp_path, data_dir):
    with pytest.raises(ModelUnavailableError):
        train_with_embedder("bert-base", tmp_path, **TINY)


def test_embedding_seconds_times_the_wrapped_embedder_round_robin(tmp_path):
    from scp.data.embedders import CachedEmbedder, get_embedder
    from scp.experiments.embedder_ablation import embedding_seconds

    cached = CachedEmbedder(get_embedder("random", dim=8), cache_dir=tmp_path)
    seconds = embedding_seconds(
        {"cached random": cached, "random": get_embedder("random", dim=16)}, [f"text {i}" for i in range(50)], repeats=2
    )
    assert list(seconds) == ["cached random", "random"]
    assert all(len(v) == 2 and all(t > 0 for t in v) for v in seconds.values())
    assert cached.n_encoded == 0 and len(cached.cache) == 0  # the cache was bypassed
    with pytest.raises(ValueError):
        embedding_seconds({"random": get_embedder("random")}, ["a"], repeats=0)
