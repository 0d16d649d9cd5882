"""A keep count chosen per query: a threshold τ on the Shapley values (calibrated on validation to a target recall)
and the value fraction α (the shortest ranking prefix whose network value reaches a share of the best prefix's
gain), in select, ShapleyPruner.prune, the evaluation and scp prune."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from scp.core.selection import calibrate_threshold, select, value_prefix_count
from scp.data.datasets import load_dataset
from scp.pruning.pruner import ShapleyPruner

CHECKPOINT = Path(__file__).resolve().parents[1] / "models" / "scp-hotpotqa-best.safetensors"
POINTWISE = CHECKPOINT.with_name("pointwise-hotpotqa-best.safetensors")
pytestmark = pytest.mark.filterwarnings("ignore:this checkpoint was trained on 'Title:", "ignore:duplicate sentences")


def test_a_threshold_above_every_score_keeps_the_best_unit_alone():
    scores = [0.2, 0.7, 0.7, -0.1]
    assert select(scores, threshold=0.5)[0].tolist() == [1, 2]  # ties at τ are kept
    assert select(scores, threshold=0.71)[0].tolist() == [1]  # nothing reaches τ: the best (first of a tie)
    assert select(scores, threshold=-1.0)[0].tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "values, fraction, k",
    [
        ([0.0, 0.5, 0.8, 0.9, 1.0], 0.8, 2),  # monotone: v* = v(N), target 0.8 reached at k = 2
        ([0.0, 0.5, 0.8, 0.9, 1.0], 1.0, 4),
        ([0.0, 0.5, 0.8, 0.9, 1.0], 0.1, 1),
        ([0.6, 0.9, 1.0, 0.7, 0.3], 0.75, 1),  # falls after the peak: target 0.6 + 0.75·0.4 = 0.9, met at k = 1
        ([0.6, 0.9, 1.0, 0.7, 0.3], 0.76, 2),
        ([0.6, 0.9, 0.95, 1.0, 0.3], 0.9, 3),  # v(N) < v(∅): against v(N) one unit would always do
        ([0.5, 0.4, 0.3, 0.2], 0.9, 1),  # no prefix beats v(∅): one unit
        ([0.2, 0.2], 1.0, 1),
    ],
)
def test_value_prefix_count_is_the_first_prefix_reaching_the_share_of_the_peak_gain(values, fraction, k):
    got = value_prefix_count(values, fraction)
    assert got == k
    v = np.asarray(values)
    peak = v[1:].max()
    if peak > v[0]:  # the definition, independently: the smallest k ≥ 1 with v_k ≥ v_0 + α (v* − v_0)
        assert v[got] >= v[0] + fraction * (peak - v[0]) - 1e-12
        assert all(v[j] < v[0] + fraction * (peak - v[0]) for j in range(1, got))


@pytest.mark.parametrize(
    "values, fraction, words",
    [
        ([0.1], 0.5, "n + 1 ≥ 2 numbers"),
        ([0.1, np.nan], 0.5, "NaN"),
        ([0.0, 1.0], 0.0, "value_fraction must be a number in"),
        ([0.0, 1.0], 1.5, "value_fraction must be a number in"),
        ([0.0, 1.0], True, "value_fraction must be a number in"),
    ],
)
def test_value_prefix_count_refuses_bad_input(values, fraction, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        value_prefix_count(values, fraction)


def test_value_fraction_without_prefix_values_names_what_it_needs():
    with pytest.raises(ValueError, match="value_fraction needs the game's values of the ranking's prefixes"):
        select([0.1, 0.2], value_fraction=0.5)


def _mean_recall(scores, labels, tau):
    out = []
    for s, y in zip(scores, labels):
        y = np.asarray(y) > 0
        if y.any():
            kept = select(s, threshold=tau)[0]
            out.append(y[kept].sum() / y.sum())
    return float(np.mean(out))


@pytest.mark.parametrize("target", [0.3, 0.5, 0.8, 0.9, 0.95, 1.0])
def test_calibrated_threshold_is_the_largest_reaching_the_target_by_brute_force(target):
    rng = np.random.default_rng(int(target * 100))
    scores = [np.round(rng.normal(size=n), 2) for n in rng.integers(3, 15, size=40)]  # rounded: ties happen
    labels = [(rng.random(s.size) < 0.3).astype(int) for s in scores]
    labels[0][:] = 0  # a context without gold units is ignored
    tau = calibrate_threshold(scores, labels, target)
    candidates = sorted({float(x) for s in scores for x in s}, reverse=True)
    best = next(c for c in candidates if _mean_recall(scores, labels, c) >= target - 1e-12)
    assert tau == best
    assert _mean_recall(scores, labels, tau) >= target - 1e-12
    above = [c for c in candidates if c > tau]
    assert not above or _mean_recall(scores, labels, min(above)) < target


def test_calibration_refuses_what_it_cannot_use():
    with pytest.raises(ValueError, match="no context with a gold unit"):
        calibrate_threshold([[0.1, 0.2]], [[0, 0]], 0.9)
    with pytest.raises(ValueError, match="target_recall must be a number in"):
        calibrate_threshold([[0.1, 0.2]], [[0, 1]], 0.0)
    with pytest.raises(ValueError, match="context 0: 2 scores for 3 labels"):
        calibrate_threshold([[0.1, 0.2]], [[0, 1, 1]], 0.9)
    with pytest.raises(ValueError, match="NaN"):
        calibrate_threshold([[0.1, np.nan]], [[0, 1]], 0.9)


@pytest.fixture(scope="module")
def pruner(tmp_path_factory):
    return ShapleyPruner.from_checkpoint(CHECKPOINT, cache_dir=tmp_path_factory.mktemp("emb"), n_permutations=16)


@pytest.fixture(scope="module")
def examples(data_dir):
    return load_dataset("hotpotqa", split="test", limit=4)


def test_prefix_values_are_the_network_on_each_prefix(pruner, examples):
    """The one-batch prefix values equal a full forward of the network on each prefix (the game's definition)."""
    from scp.data.features import build_contexts
    from scp.models.game import ValueNetGame

    ex = examples[0]
    ctx = build_contexts([ex.query], [ex.unit_texts(with_title=True)], pruner.embedder, pruner.config.features)[0]
    scores = pruner.score_contexts([ctx])[0].values
    v = pruner.prefix_values([ctx], [scores])[0]
    order = np.argsort(-scores, kind="stable")
    game = ValueNetGame(pruner.model, ctx.units, ctx.query, ctx.extra)  # no cache: one forward per coalition
    for k in (0, 1, 3, ctx.n_units):
        coalition = np.zeros((1, ctx.n_units), dtype=bool)
        coalition[0, order[:k]] = True
        assert v[k] == pytest.approx(game(coalition)[0], abs=1e-6)
    assert v.shape == (ctx.n_units + 1,)


def test_prune_by_threshold_and_value_fraction_keeps_a_count_per_query(pruner, examples):
    counts = {"threshold": [], "value_fraction": []}
    for ex in examples:
        sentences, titles = list(ex.units), list(ex.titles)
        ranked = pruner.rank(ex.query, sentences, titles).values
        tau = float(np.quantile(ranked, 0.8))
        by_tau = pruner.prune(ex.query, sentences, titles=titles, threshold=tau)
        assert list(by_tau.kept_indices) == np.flatnonzero(ranked >= tau - 1e-12).tolist()
        assert by_tau.criterion == f"threshold={tau}" and list(by_tau.scores) == ranked.tolist()
        by_value = pruner.prune(ex.query, sentences, titles=titles, value_fraction=0.99)
        ctx_scores = np.asarray(by_value.scores)
        from scp.data.features import build_contexts

        ctx = build_contexts([ex.query], [ex.unit_texts(with_title=True)], pruner.embedder, pruner.config.features)
        k = value_prefix_count(pruner.prefix_values(ctx, [ctx_scores])[0], 0.99)
        assert list(by_value.kept_indices) == sorted(np.argsort(-ctx_scores, kind="stable")[:k].tolist())
        assert by_value.criterion == "value_fraction=0.99"
        counts["threshold"].append(len(by_tau.kept_indices))
        counts["value_fraction"].append(k)
    assert min(counts["value_fraction"]) >= 1


def test_a_pointwise_model_has_no_game_and_says_so_before_ranking(tmp_path):
    pointwise = ShapleyPruner.from_checkpoint(POINTWISE, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="a pointwise model scores each unit alone and has no value of a set"):
        pointwise.prune("Who?", ["Ann is here.", "Bob left."], value_fraction=0.9)
    kept = pointwise.prune("Who left?", ["Ann is here.", "Bob left."], threshold=1e9).kept_indices
    assert len(kept) == 1  # τ above every score: the best unit alone


def test_evaluation_reports_each_per_query_criterion(pruner, examples):
    from scp.pruning.evaluation import criterion_name, evaluate
    from scp.pruning.rankers import BM25Ranker
    from scp.pruning.shapley_ranker import SCPRanker

    ranker = SCPRanker(pruner)
    criteria = [{"threshold": 0.02}, {"value_fraction": 0.95}]
    result = evaluate(examples, ranker, True, (0.5,), n_boot=50, criteria=criteria)
    scores = ranker.score_many([e.query for e in examples], [e.unit_texts(with_title=True) for e in examples])
    for row, ex, s in zip(result["per_example"], examples, scores):
        kept = select(s, threshold=0.02)[0]
        gold = np.asarray(ex.labels) > 0
        assert row["kept@threshold=0.02"] == len(kept)
        assert row["recall@threshold=0.02"] == pytest.approx(gold[kept].sum() / gold.sum())
        assert 1 <= row["kept@value_fraction=0.95"] <= ex.n_units
    mean = np.mean([r["recall@value_fraction=0.95"] for r in result["per_example"]])
    assert result["recall@value_fraction=0.95"]["mean"] == pytest.approx(mean)
    assert criterion_name({"value_fraction": 0.95}) == "value_fraction=0.95"
    with pytest.raises(ValueError, match="a per-query criterion is one of"):
        criterion_name({"top_k": 3})
    with pytest.raises(ValueError, match="ranker 'bm25' scores units without a game"):
        evaluate(examples, BM25Ranker(), True, criteria=[{"value_fraction": 0.9}])


def test_scp_eval_calibrates_on_validation_and_applies_to_test(tmp_path, data_dir, capsys):
    from scp.cli import main
    from scp.data.datasets import load_dataset as load
    from scp.pruning.evaluation import make_ranker

    out = tmp_path / "e.json"
    argv = ["eval", "--dataset", "hotpotqa", "--method", "bm25", "--limit", "5", "--target-recall", "0.8"]
    assert main(argv + ["--threshold", "3.0", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    (cal,) = record["calibration"]
    validation = load("hotpotqa", split="validation")
    ranker = make_ranker("bm25")
    scores = ranker.score_many([e.query for e in validation], [e.unit_texts(with_title=False) for e in validation])
    assert cal["threshold"] == calibrate_threshold(scores, [e.labels for e in validation], 0.8)
    assert cal["n_validation"] == len(validation) and cal["criterion"] == f"threshold={cal['threshold']}"
    assert f"recall@{cal['criterion']}" in record and "kept@threshold=3.0" in record
    assert "target recall 0.8 on" in capsys.readouterr().out


def test_scp_prune_by_threshold_writes_what_the_pruner_keeps(tmp_path, pruner, examples):
    from scp.pruning import corpus

    records = [{"question": e.query, "sentences": list(e.units), "titles": list(e.titles)} for e in examples]
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    with torch.no_grad():
        corpus.prune_jsonl(src, dst, pruner=pruner, value_fraction=0.99, progress=False)
    rows = [json.loads(line) for line in dst.read_text().splitlines()]
    for record, row in zip(records, rows):
        ref = pruner.prune(record["question"], record["sentences"], titles=record["titles"], value_fraction=0.99)
        assert row["kept_indices"] == list(ref.kept_indices)
    assert json.loads((tmp_path / "out.jsonl.settings.json").read_text())["criterion"] == "value_fraction=0.99"


def test_the_integrations_take_the_per_query_criteria():
    from scp.integrations.documents import criterion_of

    assert criterion_of() == {"keep_ratio": 0.5}
    assert criterion_of(threshold=0.01) == {"threshold": 0.01}
    assert criterion_of(value_fraction=0.9) == {"value_fraction": 0.9}
    with pytest.raises(ValueError, match="give exactly one of"):
        criterion_of(threshold=0.01, top_k=2)


def test_the_per_query_tables_of_an_evaluation(pruner, data_dir):
    """scp.experiments.per_query on real records: one row per fixed ratio, calibrated threshold and value fraction,
    the kept counts behind each row, and the shape of the game along SCP's ranking."""
    from scp.experiments import per_query

    test = load_dataset("hotpotqa", split="test", limit=6)
    validation = load_dataset("hotpotqa", split="validation", limit=12)
    checkpoints = {"best": str(CHECKPOINT)}
    scp = per_query.evaluate_per_query_method(
        test,
        validation,
        "scp",
        checkpoints,
        keep_ratios=(0.3, 0.6),
        target_recalls=(0.8, 0.95),
        value_fractions=(0.9, 0.99),
        n_permutations=16,
        n_boot=50,
    )
    bm25 = per_query.evaluate_per_query_method(
        test, validation, "bm25", keep_ratios=(0.3, 0.6), target_recalls=(0.8, 0.95), n_boot=50
    )
    rows = per_query.table_rows({("hotpotqa", "scp"): scp, ("hotpotqa", "bm25"): bm25}, (0.3, 0.6), (0.9, 0.99))
    modes = [(r["method"], r["mode"], r["setting"]) for r in rows]
    assert modes == [
        ("scp", "keep ratio", 0.3),
        ("scp", "keep ratio", 0.6),
        ("scp", "threshold", 0.8),
        ("scp", "threshold", 0.95),
        ("scp", "value fraction", 0.9),
        ("scp", "value fraction", 0.99),
        ("bm25", "keep ratio", 0.3),
        ("bm25", "keep ratio", 0.6),
        ("bm25", "threshold", 0.8),
        ("bm25", "threshold", 0.95),
    ]
    for row in rows:
        result = scp if row["method"] == "scp" else bm25
        kept = per_query.kept_for(result, row["mode"], row["setting"])
        assert row["kept"] == pytest.approx(kept.mean()) and row["kept_median"] == np.median(kept)
        assert kept.min() >= 1 and row["n_test"] == len(test)
        fixed = [r for r in rows if r["method"] == row["method"] and r["mode"] == "keep ratio"]
        lo, hi = sorted(r["compression"] for r in fixed)
        assert np.isnan(row["recall_fixed_same_compression"]) == (not lo <= row["compression"] <= hi)
    recorded = per_query.recorded(rows, {("hotpotqa", "scp"): scp})
    assert recorded["per_query_hotpotqa_scp_value_fraction"]["setting"] == [0.9, 0.99]
    shape = recorded["game_shape_hotpotqa"]
    assert shape == per_query.game_shape(scp) and 0 <= shape["share_grand_below_empty"] <= 1
    assert shape["mean_v_peak"] >= max(shape["mean_v_empty"], shape["mean_v_grand"]) - 1e-12
