"""One registry of estimators: an estimator added by register_estimator reaches the pruner and ``scp eval`` by name,
with no code change anywhere else; unknown names are refused with the choices listed."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from scp.core.estimators import ESTIMATORS, estimate, get_estimator, register_estimator, unregister_estimator
from scp.core.games import GloveGame, TableGame, check_game, evaluate_game
from scp.core.metrics import pairwise_auc
from scp.core.result import ShapleyResult, refuse_budget_below
from scp.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT = ROOT / "models" / "scp-hotpotqa-best.safetensors"
POINTWISE = ROOT / "models" / "pointwise-hotpotqa-best.safetensors"
CALLS: list[np.ndarray] = []


def singletons(game, *, budget=None, seed=None, scale=1.0) -> ShapleyResult:
    """A toy estimator: φ_i = scale·(v({i}) − v(∅)), n + 1 evaluations (seed unused)."""
    n = check_game(game)
    refuse_budget_below(budget, n + 1, "toy", n, "n + 1")
    values = evaluate_game(game, np.vstack([np.zeros((1, n), bool), np.eye(n, dtype=bool)]))
    phi = scale * (values[1:] - values[0])
    CALLS.append(phi)
    return ShapleyResult(values=phi, n_evaluations=n + 1, method="toy", seed=seed)


@pytest.fixture
def toy():
    CALLS.clear()
    entry = register_estimator("toy", singletons, "v({i}) − v(∅): each unit alone")
    yield entry
    unregister_estimator("toy")


def direct_singletons(model, context) -> np.ndarray:
    """v({i}) − v(∅) from full network forwards (not through any estimator or cached rows)."""
    n = context.n_units
    masks = torch.cat([torch.zeros(1, n, dtype=torch.bool), torch.eye(n, dtype=torch.bool)])
    extra = context.extra[None].expand(n + 1, -1, -1)
    with torch.no_grad():
        v = (
            model(context.units[None].expand(n + 1, -1, -1), context.query[None].expand(n + 1, -1), masks, extra)
            .double()
            .numpy()
        )
    return v[1:] - v[0]


def test_registry_entries_aliases_and_errors(toy):
    assert get_estimator("toy") is toy and toy.batched is None and ESTIMATORS["loo"] is ESTIMATORS["leave_one_out"]
    game = TableGame.random(4, seed=0)
    res = estimate(game, "toy", scale=2.0)
    np.testing.assert_allclose(res.values, 2.0 * (game(np.eye(4, dtype=bool)) - game.empty_value), atol=1e-12)
    assert estimate(game, "toy", budget=5).n_evaluations == 5
    with pytest.raises(InputError, match="toy on n = 4 players needs n \\+ 1 = 5 coalition evaluations; budget = 4"):
        estimate(game, "toy", budget=4)
    with pytest.raises(InputError, match="taken"):
        register_estimator("toy", singletons, "again")
    with pytest.raises(InputError, match=r"unknown estimator 'nope'; choose one of \[.*'toy'.*\]"):
        estimate(game, "nope")


def test_budget_is_shared_by_every_estimator():
    game = TableGame.random(5, seed=1)
    mc = estimate(game, "monte_carlo", budget=90, seed=0)
    assert mc.n_permutations == 22 and mc.n_evaluations == 90  # ⌊(90 − 2)/4⌋ permutations
    anti = estimate(game, "monte_carlo", budget=90, seed=0, antithetic=True)
    assert anti.n_permutations == 22 and anti.n_evaluations <= 90
    assert estimate(game, "monte_carlo", budget=93, seed=0, antithetic=True).n_permutations == 22  # even
    np.testing.assert_array_equal(mc.values, estimate(game, "monte_carlo", seed=0, n_permutations=22).values)
    adaptive = estimate(game, "adaptive", budget=300, seed=0, k=2, value_range=1.0)
    assert adaptive.n_evaluations <= 300 and adaptive.certificate is not None
    assert estimate(game, "exact", budget=32).n_evaluations == 32
    for method, budget, need in [
        ("exact", 31, "2\\^n = 32"),
        ("leave_one_out", 5, "n \\+ 1 = 6"),
        ("monte_carlo", 5, "one permutation, 1·\\(n − 1\\) \\+ 2 = 6"),
    ]:
        with pytest.raises(InputError, match=f"{method} on n = 5 players needs {need} coalition evaluations"):
            estimate(game, method, budget=budget)
    with pytest.raises(InputError, match="not both"):
        estimate(game, "monte_carlo", budget=90, n_permutations=10)
    with pytest.raises(InputError, match="budget"):
        estimate(game, "monte_carlo", budget=0)


def test_the_pruner_takes_a_registered_estimator_by_name(toy):
    from scp.data.features import build_contexts
    from scp.pruning.pruner import ShapleyPruner

    pruner = ShapleyPruner.from_checkpoint(CHECKPOINT, estimator="toy", estimator_options=dict(scale=3.0))
    sentences = [
        "Paris is the capital of France.",
        "The Eiffel Tower is in Paris.",
        "Cats purr.",
        "France borders Spain.",
    ]
    titles = ["France", "Eiffel Tower", "Cat", "France"]
    query = "What is the capital of France?"
    result = pruner.rank(query, sentences, titles)
    assert result.method == "toy" and len(CALLS) == 1
    units = pruner.units(sentences, titles)
    context = build_contexts([query], [units], pruner.embedder, pruner.config.features)[0]
    np.testing.assert_allclose(result.values, 3.0 * direct_singletons(pruner.model, context), atol=1e-6)
    kept = pruner.prune(query, sentences, titles=titles, top_k=2)
    assert list(kept.kept_indices) == sorted(np.argsort(-result.values, kind="stable")[:2].tolist())
    with pytest.raises(InputError, match=r"unknown estimator 'nope'; choose one of \[.*'toy'.*\]"):
        ShapleyPruner.from_checkpoint(CHECKPOINT, estimator="nope")
    with pytest.raises(InputError, match="control_variate"):
        ShapleyPruner.from_checkpoint(CHECKPOINT, estimator="toy", control_variate="position")
    if POINTWISE.is_file():
        with pytest.raises(InputError, match="estimator='toy' does not apply to this checkpoint"):
            ShapleyPruner.from_checkpoint(POINTWISE, estimator="toy")


def test_scp_eval_takes_a_registered_estimator_by_name(toy, tmp_path, capsys, data_dir):
    from scp.cli import main
    from scp.data.datasets import load_dataset, split_examples
    from scp.data.embedders import CachedEmbedder, get_embedder
    from scp.data.features import contexts_from_examples
    from scp.models.factory import load_checkpoint

    out = tmp_path / "toy.json"
    assert (
        main(
            [
                "eval",
                "--dataset",
                "hotpotqa",
                "--method",
                "scp",
                "--checkpoint",
                str(CHECKPOINT),
                "--estimator",
                "toy",
                "--limit",
                "3",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    record = json.loads(out.read_text())
    assert record["status"] == "ok" and record["estimator"] == "toy" and len(CALLS) == 3
    model, config, _ = load_checkpoint(CHECKPOINT)
    examples = split_examples(load_dataset("hotpotqa"), "test")[:3]
    contexts = contexts_from_examples(
        examples, CachedEmbedder(get_embedder(config.embedder)), config.features, config.with_title
    )
    for row, ex, context, phi in zip(record["per_example"], examples, contexts, CALLS):
        direct = direct_singletons(model, context)
        np.testing.assert_allclose(phi, direct, atol=1e-6)  # the toy ran on each context's game
        assert row["id"] == ex.id and row["auc"] == pytest.approx(pairwise_auc(phi, ex.labels), abs=0)
    capsys.readouterr()
    assert (
        main(
            [
                "eval",
                "--dataset",
                "hotpotqa",
                "--method",
                "scp",
                "--checkpoint",
                str(CHECKPOINT),
                "--estimator",
                "nope",
                "--limit",
                "3",
                "--out",
                str(tmp_path / "nope.json"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "unknown estimator 'nope'" in err and "'toy'" in err and "Traceback" not in err
    assert not (tmp_path / "nope.json").exists()
    assert (
        main(
            [
                "eval",
                "--dataset",
                "hotpotqa",
                "--method",
                "bm25",
                "--estimator",
                "toy",
                "--limit",
                "3",
                "--out",
                str(tmp_path / "bm25.json"),
            ]
        )
        == 2
    )
    assert "--estimator applies to method 'scp'" in capsys.readouterr().err


def test_an_unregistered_estimator_is_unknown_again():
    assert "toy" not in ESTIMATORS
    with pytest.raises(InputError, match="unknown estimator 'toy'"):
        get_estimator("toy")


def test_a_missing_or_unknown_option_is_refused_by_name():
    game = GloveGame([0, 1], [2])
    with pytest.raises(InputError, match="estimator 'adaptive': missing a required argument: 'k'"):
        estimate(game, "adaptive")
    with pytest.raises(InputError, match="estimator 'exact': got an unexpected keyword argument 'n_permutations'"):
        estimate(game, "exact", n_permutations=3)
