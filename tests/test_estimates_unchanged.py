"""The estimator interface moved (scp.core.estimators, the batched scorer scp.models.scoring), the numbers did not.

tests/data/estimates_before_layout.json holds 58 estimator outputs on fixed seeds recorded with the API before the
move (commit 29043ec: scp.core.shapley.exact / monte_carlo / leave_one_out / deepsets_shapley,
scp.core.adaptive.adaptive_monte_carlo, scp.experiments.mc_budget.batched_scores and ShapleyPruner).  Every entry is
recomputed here through the new entry points, ``estimate(game, method, budget, seed, **options)``,
``score_contexts(model, contexts, …)`` and ``ShapleyPruner``: pure numpy games within 1e-9, value-network outputs
within 1e-6 (float32 networks; in practice they are bit-identical).
"""

import json
from pathlib import Path

import numpy as np
import pytest

from scp.core.estimators import estimate
from scp.core.games import GloveGame, MajorityGame, TableGame, UnanimityGame

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = json.loads((ROOT / "tests" / "data" / "estimates_before_layout.json").read_text())
CHECKPOINT = ROOT / "models" / "scp-hotpotqa-best.safetensors"
POINTWISE = ROOT / "models" / "pointwise-hotpotqa-best.safetensors"
NUMPY = dict(atol=1e-9, rtol=0)
NETWORK = dict(atol=1e-6, rtol=0)


def numpy_games():
    rng = np.random.default_rng(0)
    return {
        "glove": GloveGame([0, 1, 2], [3, 4]),
        "majority": MajorityGame([1, 2, 1, 3, 1], 4.0),
        "unanimity": UnanimityGame(6, [1, 3]),
        "table": TableGame(rng.random(2**5)),
    }


@pytest.mark.parametrize("name", ["glove", "majority", "unanimity", "table"])
def test_numpy_games_give_the_recorded_estimates(name):
    game = numpy_games()[name]
    np.testing.assert_allclose(estimate(game, "exact").values, GOLDEN[f"exact/{name}"], **NUMPY)
    np.testing.assert_allclose(estimate(game, "loo").values, GOLDEN[f"loo/{name}"], **NUMPY)
    mc = estimate(game, "monte_carlo", seed=3, n_permutations=64)
    np.testing.assert_allclose(mc.values, GOLDEN[f"mc/{name}"], **NUMPY)
    np.testing.assert_allclose(mc.std_errors, GOLDEN[f"mc_se/{name}"], **NUMPY)
    anti = estimate(game, "monte_carlo", seed=3, n_permutations=64, antithetic=True)
    np.testing.assert_allclose(anti.values, GOLDEN[f"mc_anti/{name}"], **NUMPY)
    adaptive = estimate(game, "adaptive", seed=5, k=2, value_range=1.0, max_permutations=256)
    np.testing.assert_allclose(adaptive.values, GOLDEN[f"adaptive/{name}"], **NUMPY)
    assert adaptive.n_permutations == GOLDEN[f"adaptive_m/{name}"] == adaptive.certificate.n_permutations


@pytest.fixture(scope="module")
def shipped():
    """The shipped model, its embedder and the first four HotpotQA test contexts ("Title: sentence" units)."""
    from scp.data.datasets import load_dataset, split_examples
    from scp.data.embedders import CachedEmbedder, get_embedder
    from scp.data.features import build_contexts
    from scp.models.factory import load_checkpoint

    model, config, _ = load_checkpoint(CHECKPOINT)
    embedder = CachedEmbedder(get_embedder(config.embedder))
    examples = split_examples(load_dataset("hotpotqa"), "test")[:4]
    contexts = build_contexts(
        [e.query for e in examples],
        [[f"{t}: {s}" for t, s in zip(e.titles, e.units)] for e in examples],
        embedder,
        config.features,
    )
    return model, embedder, examples, contexts


def test_value_network_games_give_the_recorded_estimates(shipped):
    from scp.models.game import ValueNetGame

    model, _, _, contexts = shipped
    for i, c in enumerate(contexts):
        game = ValueNetGame(model, c.units, c.query, c.extra, cache_psi=True)
        for key, method, options in [
            ("vn_mc", "monte_carlo", dict(n_permutations=50)),
            ("vn_mc_generic", "monte_carlo", dict(n_permutations=20, path="generic")),
            ("vn_mc_cv", "monte_carlo", dict(n_permutations=50, control_variate="position")),
            ("vn_loo", "leave_one_out", {}),
            ("vn_adaptive", "adaptive", dict(k=5, max_permutations=256)),
        ]:
            result = estimate(game, method, seed=7, **options)
            np.testing.assert_allclose(result.values, GOLDEN[f"{key}/{i}"], **NETWORK, err_msg=f"{key}/{i}")
            if method == "adaptive":
                assert result.n_permutations == GOLDEN[f"vn_adaptive_m/{i}"]


def test_the_batched_scorer_gives_the_recorded_estimates(shipped):
    from scp.models.scoring import score_contexts

    model, _, _, contexts = shipped
    for key, kwargs in [
        ("deepsets_batch", dict(n_permutations=50, seed=11)),
        ("batched_scores", dict(n_permutations=30, seed=2, by_length=True)),
    ]:
        results = score_contexts(model, contexts, "monte_carlo", **kwargs)
        assert len(results) == len(GOLDEN[key]) == 4
        for result, recorded in zip(results, GOLDEN[key]):
            np.testing.assert_allclose(result.values, recorded, **NETWORK, err_msg=key)


def test_the_pruner_gives_the_recorded_estimates(shipped):
    from scp.pruning.pruner import ShapleyPruner

    _, embedder, examples, _ = shipped
    e = examples[0]
    query, sentences, titles = e.query, list(e.units), list(e.titles)
    pruner = ShapleyPruner.from_checkpoint(CHECKPOINT, embedder=embedder, n_permutations=50, seed=0)
    np.testing.assert_allclose(pruner.rank(query, sentences, titles).values, GOLDEN["pruner_rank"], **NETWORK)
    kept = pruner.prune(query, sentences, keep_ratio=0.3, titles=titles).kept_indices
    assert list(map(int, kept)) == GOLDEN["pruner_kept"]
    for options in (dict(n_permutations="adaptive"), dict(estimator="adaptive")):
        adaptive = ShapleyPruner.from_checkpoint(CHECKPOINT, embedder=embedder, seed=0, **options)
        result = adaptive.rank(query, sentences, titles, top_k=3)
        np.testing.assert_allclose(result.values, GOLDEN["pruner_adaptive"], **NETWORK)
        assert result.certificate is not None and result.certificate.k == 3
    pointwise = ShapleyPruner.from_checkpoint(POINTWISE)
    np.testing.assert_allclose(pointwise.rank(query, sentences, titles).values, GOLDEN["pointwise_rank"], **NETWORK)


def test_every_recorded_entry_is_checked():
    checked = {
        f"{kind}/{name}"
        for kind in ("exact", "loo", "mc", "mc_se", "mc_anti", "adaptive", "adaptive_m")
        for name in numpy_games()
    }
    checked |= {
        f"{kind}/{i}"
        for kind in ("vn_mc", "vn_mc_generic", "vn_mc_cv", "vn_loo", "vn_adaptive", "vn_adaptive_m")
        for i in range(4)
    }
    checked |= {"deepsets_batch", "batched_scores", "pruner_rank", "pruner_kept", "pruner_adaptive", "pointwise_rank"}
    assert checked == set(GOLDEN) and len(GOLDEN) == 58
