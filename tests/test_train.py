"""Training: the loss, one step, checkpoints, determinism, resume, bad configs, the pruner API."""

import numpy as np
import pytest
import torch

from scp.core.permutations import derive_seed
from scp.data.embedders import RandomEmbedder
from scp.data.features import build_contexts, collate, context_key
from scp.models import checkpoint
from scp.models.checkpoint import CheckpointError
from scp.models.config import TrainConfig
from scp.models.factory import build_model, load_checkpoint
from scp.models.pointwise import PointwiseScorer
from scp.pruning.evaluation import SCPRanker
from scp.pruning.pruner import ShapleyPruner
from scp.training.loop import differentiable_scores, pairwise_margin_loss, train

QUERIES = [f"what is the capital of country {i}" for i in range(24)]


def toy_contexts(embedder, features=("cos", "bm25z")):
    """Each context: 2 supporting sentences sharing words with the query, 6 unrelated ones."""
    rng = np.random.default_rng(0)
    units, labels = [], []
    for i in range(len(QUERIES)):
        pos = [f"the capital of country {i} is city {i}", f"country {i} has its capital at the river"]
        neg = [f"unrelated sentence number {j} about topic {rng.integers(1000)}" for j in range(6)]
        order = rng.permutation(8)
        both = pos + neg
        units.append([both[k] for k in order])
        labels.append([1 if k < 2 else 0 for k in order])
    ctx = build_contexts(QUERIES, units, embedder, features, labels_list=labels, ids=[str(i) for i in range(24)])
    return ctx[:16], ctx[16:]


def small_config(**kw):
    base = dict(
        embedder="random",
        query_mode="product_concat",
        features=("cos", "bm25z"),
        hidden=16,
        latent=8,
        epochs=2,
        n_permutations=6,
        eval_permutations=6,
        batch_size=8,
        dropout=0.1,
    )
    return TrainConfig(**{**base, **kw})


def test_loss_zero_when_positives_lead_by_margin_and_positive_otherwise():
    labels = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    lead = torch.tensor([[0.5, 0.3, 0.35, 0.5]])
    assert pairwise_margin_loss(lead, labels, mask, 0.15).item() == 0.0
    close = torch.tensor([[0.5, 0.4, 0.3, 0.5]])  # pairs (0,1),(3,1) miss the margin by 0.05
    assert pairwise_margin_loss(close, labels, mask, 0.15).item() == pytest.approx(0.05 * 2 / 4)
    # padding never counts: a padded "negative" with a huge score changes nothing
    padded = torch.tensor([[0.5, 0.3, 0.35, 0.5, 9.0]])
    mask5 = torch.tensor([[True, True, True, True, False]])
    assert pairwise_margin_loss(padded, torch.cat([labels, torch.zeros(1, 1)], 1), mask5, 0.15).item() == 0.0
    with pytest.raises(ValueError, match="pair"):
        pairwise_margin_loss(lead, torch.ones(1, 4), mask, 0.15)


@pytest.mark.parametrize("model", ["deepsets", "pointwise"])
def test_one_step_lowers_the_loss(model):
    tr, _ = toy_contexts(RandomEmbedder(32))
    config = small_config(model=model, dropout=0.0)
    torch.manual_seed(0)
    net = build_model(config, 32)
    batch = collate(tr)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)

    def loss():
        scores = differentiable_scores(net, batch, 6, False, seed=1)
        return pairwise_margin_loss(scores, batch.labels, batch.mask, 0.15)

    before = loss()
    opt.zero_grad()
    before.backward()
    opt.step()
    with torch.no_grad():
        after = loss()
    assert after.item() < before.item()


@pytest.mark.parametrize("model", ["deepsets", "context", "convex"])
def test_scores_by_length_equal_the_padded_batch(model):
    """Contexts of one exact length at a time (no padding): the padded batch's values and gradients, to float
    rounding (a context's permutations depend on its seed and length only); 0 on padding."""
    emb = RandomEmbedder(32)
    queries = QUERIES[:6]
    units = [[f"sentence {j} of context {i}" for j in range(3 + (i % 3) * 2)] for i in range(6)]
    labels = [[1] + [0] * (len(u) - 1) for u in units]
    ctx = build_contexts(queries, units, emb, ("cos",), labels_list=labels)
    config = small_config(model=model, features=("cos",), dropout=0.0, width=8, heads=2)
    torch.manual_seed(0)
    net = build_model(config, 32)
    batch = collate(ctx)
    assert sorted(r for rows, _ in batch.length_groups() for r in rows) == list(range(6))
    assert all(part.mask.all() for _, part in batch.length_groups())  # no padding left

    def scores_and_grads(by_length):
        net.zero_grad()
        scores = differentiable_scores(net, batch, 6, False, seed=2, by_length=by_length)
        pairwise_margin_loss(scores, batch.labels, batch.mask, 0.15).backward()
        return scores.detach(), [p.grad.clone() for p in net.parameters() if p.grad is not None]

    grouped, grads = scores_and_grads(True)
    padded, grads_padded = scores_and_grads(False)
    assert grouped.shape == padded.shape == batch.mask.shape
    assert (grouped[~batch.mask] == 0).all()
    torch.testing.assert_close(grouped, padded, rtol=0, atol=1e-5)
    assert len(grads) == len(grads_padded)
    for a, b in zip(grads, grads_padded):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_checkpoint_round_trip_seed_determinism_and_resume(tmp_path):
    emb = RandomEmbedder(32)
    tr, va = toy_contexts(emb)
    config = small_config(epochs=2)
    a = train(config, tr, va, tmp_path / "a", emb.id, progress=False)
    b = train(config, tr, va, tmp_path / "b", emb.id, progress=False)
    wa, wb = checkpoint.load(a.last_path)["weights"], checkpoint.load(b.last_path)["weights"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)  # same seed, same weights
    # interrupted after epoch 1, resumed: the same final state as the uninterrupted run
    train(config, tr, va, tmp_path / "c", emb.id, progress=False, stop_after_epochs=1)
    assert checkpoint.load(tmp_path / "c" / "last.safetensors")["epoch"] == 1
    c = train(config, tr, va, tmp_path / "c", emb.id, progress=False, resume=True)
    wc = checkpoint.load(c.last_path)["weights"]
    assert all(torch.equal(wa[k], wc[k]) for k in wa)

    def strip(history):
        return [{k: v for k, v in h.items() if k != "seconds"} for h in history]

    assert strip(c.history) == strip(a.history)
    # a different seed gives different weights
    d = train(small_config(epochs=1, seed=1), tr, va, tmp_path / "d", emb.id, progress=False)
    wd = checkpoint.load(d.last_path)["weights"]
    assert not all(torch.equal(wa[k], wd[k]) for k in wa)
    # round trip: the loaded checkpoint scores exactly as the saved weights do
    model, cfg, ckpt = load_checkpoint(a.best_path)
    assert cfg == config and ckpt["embedder_id"] == emb.id and "auc" in ckpt["val_metrics"] and ckpt["data_hash"]
    fresh = build_model(config, 32)
    fresh.load_state_dict(checkpoint.load(a.best_path)["weights"])
    fresh.eval()
    batch = collate(va)
    torch.testing.assert_close(
        differentiable_scores(model, batch, 6, False, 3),
        differentiable_scores(fresh, batch, 6, False, 3),
        rtol=0,
        atol=0,
    )
    pruner = ShapleyPruner.from_checkpoint(a.best_path, embedder=emb, n_permutations=6, seed=3)
    r1 = pruner.rank(QUERIES[0], ["the capital of country 0 is city 0", "cats purr", "dogs bark"])
    r2 = ShapleyPruner.from_checkpoint(a.best_path, embedder=emb, n_permutations=6, seed=3).rank(
        QUERIES[0], ["the capital of country 0 is city 0", "cats purr", "dogs bark"]
    )
    np.testing.assert_array_equal(r1.values, r2.values)
    units = ["the capital of country 0 is city 0", "cats purr", "dogs bark"]
    assert r1.n_permutations == 6 and r1.seed == derive_seed(3, context_key(QUERIES[0], units))


def test_mismatched_embedder_is_a_clear_error(tmp_path):
    emb = RandomEmbedder(32)
    tr, va = toy_contexts(emb)
    res = train(small_config(epochs=1), tr, va, tmp_path, emb.id, progress=False)
    with pytest.raises(ValueError, match="embedder"):
        ShapleyPruner.from_checkpoint(res.best_path, embedder=RandomEmbedder(32, seed=1))
    with pytest.raises(ValueError, match="-d"):
        load_checkpoint(res.best_path, embed_dim=16)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.safetensors")


def test_pruner_api(tmp_path):
    emb = RandomEmbedder(32)
    tr, va = toy_contexts(emb)
    res = train(small_config(epochs=1), tr, va, tmp_path, emb.id, progress=False)
    pruner = ShapleyPruner.from_checkpoint(res.best_path, embedder=emb, n_permutations=4)
    text = "The capital of country 3 is city 3. Cats purr loudly. Dogs bark at night. Country 3 has a river."
    out = pruner.prune(QUERIES[3], text, keep_ratio=0.5)
    assert out.n_units == 4 and len(out.kept_indices) == 2 and 0 < out.kept_tokens < out.original_tokens
    assert pruner.prune(QUERIES[3], text, top_k=1).kept_tokens > 0
    assert pruner.prune(QUERIES[3], text, token_budget=8).kept_tokens <= 8
    exact = ShapleyPruner.from_checkpoint(res.best_path, embedder=emb, estimator="exact").rank(
        QUERIES[3], text.split(". ")
    )
    assert exact.method == "exact"
    with pytest.raises(ValueError, match="empty context"):
        pruner.rank(QUERIES[3], [])
    with pytest.raises(ValueError, match="max_units"):
        ShapleyPruner.from_checkpoint(res.best_path, embedder=emb, max_units=3).rank(QUERIES[3], ["a", "b", "c", "d"])
    with pytest.warns(UserWarning, match="duplicate"):
        dup = pruner.rank(QUERIES[3], ["country 3 capital", "cats purr", "country 3 capital"])
    assert dup.values.shape == (3,)
    assert pruner.rank(QUERIES[3], ["one sentence only"]).values.shape == (1,)
    with pytest.raises(ValueError, match="estimator"):
        ShapleyPruner.from_checkpoint(res.best_path, embedder=emb, estimator="kernel")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_permutations=0), "n_permutations"),
        (dict(embedder="no-such-embedder"), "unknown embedder"),
        (dict(model="transformer"), "model"),
        (dict(query_mode="member", features=("cos",)), "member"),
        (dict(model="pointwise", query_mode="member", features=()), "pointwise"),
        (dict(features=("idf",)), "feature"),
        (dict(margin=0.0), "margin"),
        (dict(n_permutations=5, antithetic=True), "even"),
    ],
)
def test_bad_configs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        small_config(**kwargs)


def test_no_positives_is_a_clear_error(tmp_path):
    emb = RandomEmbedder(32)
    tr, va = toy_contexts(emb)
    for c in tr:
        c.labels = torch.zeros_like(c.labels)
    with pytest.raises(ValueError, match="positive"):
        train(small_config(epochs=1), tr, va, tmp_path, emb.id, progress=False)
    assert isinstance(build_model(small_config(model="pointwise"), 32), PointwiseScorer)


def test_presets_and_ablation_grids_are_valid_configs():
    from scp.experiments.ablations import GRIDS
    from scp.models.config import PRESETS, config_from_preset

    for preset in PRESETS:
        config_from_preset(preset)
    for grid in GRIDS.values():
        for preset, overrides in grid.values():
            config_from_preset(preset, **overrides)
    paper = build_model(config_from_preset("paper"), 384)
    assert sum(p.numel() for p in paper.parameters()) == 3_026_433
    with pytest.raises(ValueError, match="preset"):
        config_from_preset("fancy")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    emb = RandomEmbedder(32)
    tr, va = toy_contexts(emb)
    out = tmp_path_factory.mktemp("trained")
    return emb, train(small_config(epochs=1), tr, va, out, emb.id, progress=False)


def _damage(path, how):
    data = bytearray(path.read_bytes())
    if how == "flipped":
        middle = len(data) // 2
        data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    elif how == "truncated":
        data = data[: len(data) // 2]
    elif how == "empty":
        data = b""
    elif how == "random":
        data = np.random.default_rng(0).bytes(len(data))
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "how, match",
    [
        ("flipped", "corrupted|cannot be read"),
        ("truncated", "cannot be read"),
        ("empty", "empty"),
        ("random", "cannot be read"),
    ],
)
def test_damaged_checkpoints_are_refused_with_one_sentence(trained, tmp_path, how, match):
    emb, res = trained
    path = tmp_path / "best.safetensors"
    path.write_bytes(res.best_path.read_bytes())
    load_checkpoint(path)  # intact: loads
    _damage(path, how)
    with pytest.raises(CheckpointError, match=match) as info:
        load_checkpoint(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_weight_bytes_flipped_are_caught_by_the_checksum(trained, tmp_path):
    """Flip bytes inside a weight tensor's storage (the header parses fine): only the checksum sees it."""
    import json
    import struct

    emb, res = trained
    data = bytearray(res.best_path.read_bytes())
    n = struct.unpack("<Q", data[:8])[0]
    start = 8 + n + json.loads(data[8 : 8 + n])["weights/psi.0.weight"]["data_offsets"][0]
    data[start : start + 16] = bytes(b ^ 0x01 for b in data[start : start + 16])
    path = tmp_path / "tampered.safetensors"
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupted"):
        load_checkpoint(path)


def test_resume_needs_a_checkpoint_and_refuses_a_truncated_one(trained, tmp_path):
    emb, _ = trained
    tr, va = toy_contexts(emb)
    with pytest.raises(ValueError, match="cannot resume: no checkpoint"):
        train(small_config(epochs=2), tr, va, tmp_path / "empty", emb.id, resume=True, progress=False)
    res = train(small_config(epochs=2), tr, va, tmp_path / "run", emb.id, progress=False, stop_after_epochs=1)
    _damage(res.last_path, "truncated")
    with pytest.raises(CheckpointError, match="last.safetensors cannot be read"):
        train(small_config(epochs=2), tr, va, tmp_path / "run", emb.id, resume=True, progress=False)


def test_pruner_and_batched_ranker_agree_on_an_example(trained):
    """The same context gets the same Shapley values alone (pruner), in a batch, and at another position."""
    emb, res = trained
    pruner = ShapleyPruner.from_checkpoint(res.best_path, embedder=emb, n_permutations=8, seed=5)
    contexts = [
        [f"the capital of country {i} is city {i}", "cats purr", "dogs bark at night", f"river {i}"][: 2 + i]
        for i in range(3)
    ]
    queries = QUERIES[:3]
    batched = SCPRanker(pruner).score_many(queries, contexts)
    reversed_ = SCPRanker(pruner).score_many(queries[::-1], contexts[::-1])[::-1]
    for q, units, b, r in zip(queries, contexts, batched, reversed_):
        alone = pruner.rank(q, units).values
        np.testing.assert_allclose(b, alone, atol=1e-6)
        np.testing.assert_allclose(r, alone, atol=1e-6)


def test_pruner_validates_before_ranking_and_warns_where_surprising(trained):
    emb, res = trained
    pruner = ShapleyPruner.from_checkpoint(res.best_path, embedder=emb, n_permutations=4)

    def fail(*args, **kwargs):
        raise AssertionError("ranked before validating the criterion")

    pruner.rank = fail
    for bad in [dict(keep_ratio="0.5"), dict(top_k=0), dict(token_budget=-3), dict()]:
        with pytest.raises(ValueError, match="keep_ratio|top_k|token_budget|exactly one"):
            pruner.prune(QUERIES[0], ["a b", "c d"], **bad)
    pruner = ShapleyPruner.from_checkpoint(res.best_path, embedder=emb, n_permutations=4)
    with pytest.warns(UserWarning, match="no sentence boundary") as caught:
        out = pruner.prune(QUERIES[0], "one long clause without any full stop", keep_ratio=0.5)
    assert out.kept_indices == (0,) and caught[0].filename == __file__
    with pytest.warns(UserWarning, match="keeps no unit"):
        assert pruner.prune(QUERIES[0], ["the capital of country 0", "cats purr"], token_budget=0).kept_text == ""
    # exact Shapley beyond the default 16 players, when asked for
    exact = ShapleyPruner.from_checkpoint(
        res.best_path, embedder=emb, estimator="exact", estimator_options=dict(max_players=17)
    )
    assert exact.rank(QUERIES[0], [f"sentence {i}" for i in range(17)]).n_evaluations == 2**17


def test_train_or_load_reuses_only_the_same_config(tmp_path, data_dir, monkeypatch):
    from scp.training import runs as train_module

    monkeypatch.setenv("SCP_CACHE_DIR", str(tmp_path / "cache"))
    config = TrainConfig(
        embedder="random",
        query_mode="product_concat",
        features=("cos",),
        hidden=8,
        latent=4,
        epochs=1,
        n_permutations=4,
        eval_permutations=4,
        max_train_examples=12,
        max_val_examples=6,
    )
    first = train_module.train_or_load(config, tmp_path / "models")
    stamp = first.stat().st_mtime_ns
    assert train_module.train_or_load(config, tmp_path / "models") == first and first.stat().st_mtime_ns == stamp
    other = train_module.train_or_load(TrainConfig(**{**config.__dict__, "seed": 1}), tmp_path / "models")
    assert other != first and load_checkpoint(other)[1].seed == 1
