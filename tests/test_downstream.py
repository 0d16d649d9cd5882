"""scp.experiments.downstream: contexts built from pruner scores, the per-condition rows of a real reader, paired
tables."""

import numpy as np
import pytest

from scp.data.datasets import Example
from scp.experiments.downstream import (
    CLOSED_BOOK,
    FULL,
    build_conditions,
    kept_units,
    paired_table,
    read_conditions,
    summary_table,
)
from scp.experiments.reranking import method_scores


def example(k: int = 0) -> Example:
    units = ["Zorbia is a small country.", "Its capital is Plimton.", "Wool is its main export.", "Bananas are yellow."]
    return Example(
        id=f"z{k}",
        query="What is the capital of Zorbia?",
        units=units,
        labels=[0, 1, 0, 0],
        titles=["Zorbia"] * 3 + ["Banana"],
        paragraph_ids=[0, 0, 0, 1],
        answers=["Plimton"],
        dataset="toy",
        granularity="sentence",
        meta={"type": "bridge"},
    )


def test_kept_units_are_the_top_units_in_their_original_order():
    units = ["a", "b", "c", "d", "e"]
    assert kept_units(units, [0.1, 0.9, 0.5, 0.7, 0.0], 0.6) == ("b", "c", "d")  # ⌈0.6·5⌉ = 3
    assert kept_units(units, [1, 1, 1, 1, 1], 0.4) == ("a", "b")  # ties: earlier first
    assert kept_units(units, [0, 0, 0, 0, 1], 0.01) == ("e",)  # at least one
    with pytest.raises(ValueError, match="keep_ratio"):
        kept_units(units, [0] * 5, 0)
    with pytest.raises(ValueError, match="5 units but 4 scores"):
        kept_units(units, [0] * 4, 0.5)


def test_build_conditions_lists_every_example_and_ratio():
    exs = [example(0), example(1)]
    scores = {"bm25": [np.array([0.0, 3.0, 1.0, 2.0])] * 2, "random": [np.arange(4.0)] * 2}
    conds = build_conditions(exs, scores, {"bm25": [0.25, 0.5], "random": [0.5]}, with_title=False)
    assert len(conds) == 2 * (2 + 3)
    by = {(c.example, c.method, c.keep_ratio): c.units for c in conds}
    assert by[(0, FULL, 1.0)] == exs[0].units and by[(1, CLOSED_BOOK, 0.0)] == ()
    assert by[(0, "bm25", 0.25)] == ("Its capital is Plimton.",)
    assert by[(0, "bm25", 0.5)] == ("Its capital is Plimton.", "Bananas are yellow.")  # original order
    assert by[(1, "random", 0.5)] == ("Wool is its main export.", "Bananas are yellow.")
    one = {"bm25": scores["bm25"][:1]}
    titled = build_conditions(exs[:1], one, {"bm25": [0.25]}, full=False, closed_book=False)
    assert [c.units for c in titled] == [("Zorbia: Its capital is Plimton.",)]
    with pytest.raises(ValueError, match="without scores"):
        build_conditions(exs, scores, {"cosine": [0.5]})
    with pytest.raises(ValueError, match="1 score vectors for 2 examples"):
        build_conditions(exs, {"bm25": scores["bm25"][:1]}, {"bm25": [0.5]})


def test_method_scores_of_a_baseline_and_its_errors():
    exs = [example(0)]
    [bm25] = method_scores(exs, "bm25", with_title=False)
    assert bm25.shape == (4,) and int(np.argmax(bm25)) in (0, 1)  # the units that share the query's words
    with pytest.raises(ValueError, match="unknown method"):
        method_scores(exs, "oracle")
    with pytest.raises(ValueError, match="needs --checkpoint"):
        method_scores(exs, "scp")
    with pytest.raises(ValueError, match=r"needs checkpoints\['pointwise'\]"):
        method_scores(exs, "pointwise", {"best": "unused.safetensors"})
    with pytest.raises(ValueError, match="no examples"):
        method_scores([], "bm25")


def rows_for(values_a, values_b, metric="f1"):
    rows = []
    for k, (a, b) in enumerate(zip(values_a, values_b)):
        for method, v in (("scp", a), ("bm25", b)):
            rows.append(
                {
                    "dataset": "toy",
                    "id": f"q{k}",
                    "method": method,
                    "keep_ratio": 0.5,
                    "context_tokens": 10,
                    "lm_seconds": 1.0,
                    metric: v,
                }
            )
    return rows


def test_paired_and_summary_tables():
    rows = rows_for([1.0, 0.5, 0.75, 1.0], [0.5, 0.25, 0.5, 0.5])
    [paired] = paired_table(rows, [(("scp", 0.5), ("bm25", 0.5))], ("f1",), n_boot=200)
    assert paired["difference"] == pytest.approx(0.375) and paired["n_examples"] == 4
    assert paired["ci_low"] > 0 and paired["verdict"] == "A above B"
    summary = {r["method"]: r for r in summary_table(rows, ("f1",), n_boot=200)}
    assert summary["scp"]["f1"] == pytest.approx(0.8125) and summary["bm25"]["n_examples"] == 4
    assert summary["scp"]["f1_ci_low"] <= 0.8125 <= summary["scp"]["f1_ci_high"]
    [tie] = paired_table(rows_for([1.0, 0.0], [0.0, 1.0]), [(("scp", 0.5), ("bm25", 0.5))], ("f1",), n_boot=200)
    assert tie["verdict"] == "tie"
    with pytest.raises(ValueError, match="no example was read under both"):
        paired_table(rows, [(("scp", 0.5), ("cosine", 0.5))], ("f1",))


@pytest.mark.slow
def test_read_conditions_with_the_local_reader():
    torch = pytest.importorskip("torch")
    pytest.importorskip("gguf")
    from scp.llm.readers import LocalReader, answer_logprob

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        lm = LocalReader(max_new_tokens=12)
        exs = [example(0)]
        scores = {"bm25": method_scores(exs, "bm25", with_title=False)}
        conds = build_conditions(exs, scores, {"bm25": [0.25]}, with_title=False)
        rows = {r["method"]: r for r in read_conditions(lm, exs, conds)}
        assert set(rows) == {FULL, CLOSED_BOOK, "bm25"}
        assert rows[FULL]["answer"] and rows[FULL]["gold"] == "Plimton"  # (a 135M reader may misspell it)
        assert rows[CLOSED_BOOK]["n_kept"] == 0 and rows[CLOSED_BOOK]["context_tokens"] == 0
        # the answer-bearing contexts make the gold answer far likelier than no context
        assert rows[FULL]["logprob"] > rows[CLOSED_BOOK]["logprob"] + 1
        assert rows["bm25"]["logprob"] > rows[CLOSED_BOOK]["logprob"] + 1
        direct = answer_logprob(lm, [exs[0].query], [list(conds[2].units)], ["Plimton"])
        assert rows["bm25"]["logprob"] == pytest.approx(float(direct[0]), abs=1e-3)
        assert all(r["lm_seconds"] > 0 and 0 <= r["em"] <= r["f1"] <= 1 for r in rows.values())
    finally:
        torch.set_num_threads(threads)
