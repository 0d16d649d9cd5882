"""scp.pruning.model_card: the learning curve, size, cost and scores of a trained network, read from its checkpoints."""

import numpy as np
import pytest

from scp.data.datasets import Example
from scp.data.embedders import RandomEmbedder
from scp.models.config import TrainConfig
from scp.models.factory import build_model
from scp.pruning.model_card import evaluate_checkpoint, model_card, training_history
from scp.training.loop import train

QUERIES = [f"what is the capital of country {i}" for i in range(12)]


def examples():
    out = []
    for i, q in enumerate(QUERIES):
        units = (
            f"the capital of country {i} is city {i}",
            f"unrelated sentence {i} about cats",
            f"country {i} has a river",
            f"dogs bark at number {i}",
        )
        out.append(
            Example(
                id=str(i),
                query=q,
                units=units,
                labels=(1, 0, 1, 0),
                titles=("", "", "", ""),
                paragraph_ids=(0, 1, 2, 3),
                answers=(f"city {i}",),
                dataset="toy",
                granularity="sentence",
            )
        )
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from scp.data.features import contexts_from_examples

    emb = RandomEmbedder(32)
    config = TrainConfig(
        embedder="random",
        query_mode="product_concat",
        features=("cos", "bm25z"),
        hidden=16,
        latent=8,
        epochs=2,
        n_permutations=4,
        eval_permutations=4,
        batch_size=4,
    )
    ctx = contexts_from_examples(examples(), emb, config.features, with_title=False)
    return emb, config, train(config, ctx[:8], ctx[8:], tmp_path_factory.mktemp("card"), emb.id, progress=False)


def test_history_and_card_match_the_training_result(trained):
    _, config, result = trained
    history = training_history(result.best_path)
    assert [h["epoch"] for h in history] == [1, 2]
    for h, r in zip(history, result.history):
        assert h["val_auc"] == r["val_auc"] and h["train_loss"] == r["train_loss"]
        assert h["val_auc_ci_low"] <= h["val_auc"] <= h["val_auc_ci_high"]
    card = model_card(result.best_path)
    assert card["n_params"] == sum(p.numel() for p in build_model(config, 32).parameters())
    assert card["epochs"] == 2 and card["best_val_auc"] == result.best_val_auc
    assert card["best_val_auc"] == max(h["val_auc"] for h in history)
    assert card["train_seconds"] == pytest.approx(result.seconds) and card["n_train"] == 8
    assert card["config"]["hidden"] == 16 and card["model"] == "deepsets"


def test_missing_last_checkpoint_is_a_clear_error(trained, tmp_path):
    best = tmp_path / "best.safetensors"
    best.write_bytes(trained[2].best_path.read_bytes())
    with pytest.raises(FileNotFoundError, match="last.safetensors"):
        training_history(best)


def test_evaluate_checkpoint_scores_every_example(trained, monkeypatch, tmp_path):
    import scp.data.embedders

    emb, _, result = trained
    monkeypatch.setattr(scp.data.embedders, "get_embedder", lambda name, **kw: emb)
    out = evaluate_checkpoint(result.best_path, examples(), n_permutations=4, seed=0, n_boot=50, cache_dir=tmp_path)
    assert out["n_examples"] == len(QUERIES) and out["units"] == "sentence"
    assert out["auc"]["ci"][0] <= out["auc"]["mean"] <= out["auc"]["ci"][1]
    assert np.isfinite(out["auc"]["mean"]) and 0 <= out["auc"]["mean"] <= 1
