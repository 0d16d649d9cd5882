"""scp.experiments.maxshapley: MaxShapley against enumeration of its max-sum game, the MuSiQue queries, the coalition
table
and its estimators (read through scp.core.games.LookupGame), the prefix-tree LM scorer
(scp.llm.readers.prefix_tree_logprob, against answer_logprob), and the aggregation."""

import itertools
import math

import numpy as np
import pytest

from scp.core.closed_forms import max_shapley
from scp.core.enumeration import exact, shapley_from_table
from scp.core.games import LookupGame, MaxSumGame, TableGame, all_coalitions
from scp.core.monte_carlo import monte_carlo
from scp.experiments import maxshapley as ms
from scp.pruning import methods


def enumerated_shapley(game) -> np.ndarray:
    """φ_i = Σ_{S ⊆ N∖{i}} |S|!(n−|S|−1)!/n! (v(S∪{i}) − v(S)), written out subset by subset."""
    n = game.n_players
    phi = np.zeros(n)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for subset in itertools.combinations(others, size):
                c = np.zeros((2, n), dtype=bool)
                c[:, list(subset)] = True
                c[1, i] = True
                without, with_i = game(c)
                phi[i] += weight * (with_i - without)
    return phi


def relevance_cases(seed=0):
    """Random small relevance matrices with weights, with ties (values on a coarse grid) and zeros."""
    rng = np.random.default_rng(seed)
    cases = []
    for n, m in [(1, 1), (2, 1), (3, 2), (4, 3), (5, 2), (6, 4), (7, 3)]:
        r = rng.integers(0, 4, size=(n, m)) / 2.0  # many ties, about a quarter zeros
        r[rng.integers(n), :] = 0.0  # a source relevant to nothing
        if m > 1:
            r[:, rng.integers(m)] = r[0, 0]  # a key point every source ties on
        w = rng.uniform(0.1, 2.0, size=m)
        w[rng.integers(m)] = 0.0 if m > 1 else w[0]  # a key point with weight 0
        cases.append((r, w))
    cases.append((np.zeros((4, 2)), np.array([0.5, 0.5])))  # all zeros: every φ_i = 0
    cases.append((np.ones((5, 3)), np.full(3, 1 / 3)))  # all tied: φ_i = v(N)/n
    return cases


@pytest.mark.parametrize("case", range(len(relevance_cases())))
def test_max_shapley_equals_enumeration_of_its_max_sum_game(case):
    r, w = relevance_cases()[case]
    game = MaxSumGame(r, w)
    phi = max_shapley(r, w)
    np.testing.assert_allclose(phi, enumerated_shapley(game), atol=1e-12)
    np.testing.assert_allclose(phi, exact(game).values, atol=1e-12)
    assert phi.sum() == pytest.approx(game.grand_value - game.empty_value, abs=1e-12)  # efficiency


@pytest.mark.parametrize("case", range(len(relevance_cases())))
def test_max_shapley_equals_shapiq_exact_computer(case):
    shapiq = pytest.importorskip("shapiq")
    r, w = relevance_cases()[case]
    game = MaxSumGame(r, w)
    n = game.n_players
    sv = shapiq.ExactComputer(n_players=n, game=lambda C: game(np.asarray(C, bool)))("SV", 1)
    np.testing.assert_allclose(max_shapley(r, w), [sv[(i,)] for i in range(n)], atol=1e-10)


def test_full_shapley_of_a_max_sum_table_is_max_shapley():
    r, w = relevance_cases()[5]
    table = ms.CoalitionTable(
        values=MaxSumGame(r, w).table(),
        tokens=np.ones(2 ** r.shape[0], dtype=int),
        tokens_run=None,
        seconds=0.0,
        scorer="none",
    )
    np.testing.assert_allclose(shapley_from_table(table.values), max_shapley(r, w), atol=1e-12)


# ------------------------------------------------------------------------------------------ key points


def test_hop_question_resolves_references_and_the_kb_form():
    assert ms.hop_question("#1 >> father", ["Robert Peel"]) == "What is the father of Robert Peel?"
    assert ms.hop_question("Who   is the spouse of #2?", ["a", "Ann"]) == "Who is the spouse of Ann?"
    assert ms.hop_question("Who issued it?", []) == "Who issued it?"
    with pytest.raises(ValueError, match="#2"):
        ms.hop_question("Where was #2 born?", ["only one"])


def test_key_points_follow_the_decomposition():
    decomposition = (
        {"question": "Green >> performer", "answer": "Steve Hillage", "paragraph": 3},
        {"question": "Where was #1 born?", "answer": " Chingford ", "paragraph": 7},
    )
    assert ms.key_points(decomposition) == [
        ("What is the performer of Green?", "Steve Hillage"),
        ("Where was Steve Hillage born?", "Chingford"),
    ]
    with pytest.raises(ValueError, match="decomposition"):
        ms.key_points(())


@pytest.fixture(scope="module")
def musique():
    from scp.experiments.reranking import load_test_split

    return load_test_split("musique", granularity="paragraph")


def test_choose_sources_keeps_the_gold_and_the_hardest_distractors(musique):
    from scp.pruning.rankers import BM25Ranker

    ex = next(e for e in musique if e.n_positive == 2)
    q = ms.choose_sources(ex, 6, seed=0)
    texts = ex.unit_texts(with_title=True)
    assert q.n_sources == 6 and q.n_gold == 2 and q.answer == ex.answers[0]
    assert [texts[p] for p in q.paragraphs] == q.sources
    assert set(np.flatnonzero(ex.labels)) <= set(q.paragraphs)
    assert q.labels.tolist() == [ex.labels[p] for p in q.paragraphs]
    bm25 = BM25Ranker().score(ex.query, texts)
    chosen = [p for p in q.paragraphs if not ex.labels[p]]
    rest = [p for p in range(ex.n_units) if not ex.labels[p] and p not in chosen]
    assert min(bm25[chosen]) >= max(bm25[rest])  # the hardest distractors
    assert len(q.key_points) == len(ex.meta["decomposition"]) and q.weights.sum() == pytest.approx(1.0)
    assert ms.choose_sources(ex, 6, seed=0).sources == q.sources  # seeded
    orders = {tuple(ms.choose_sources(ex, 6, seed=s).paragraphs) for s in range(5)}
    assert len(orders) > 1 and all(sorted(o) == sorted(q.paragraphs) for o in orders)  # shuffled
    with pytest.raises(ValueError, match="gold"):
        ms.choose_sources(ex, 2, seed=0)


def test_select_queries_skips_examples_with_too_many_gold_sources(musique):
    queries = ms.select_queries(musique, 3, 4, seed=0)
    assert len(queries) == 3 and all(q.n_gold < 4 and q.n_sources == 4 for q in queries)
    with pytest.raises(ValueError, match="qualify"):
        ms.select_queries(musique[:2], 3, 4)


# ---------------------------------------------------------------------------------------- the table


def test_coalition_order_is_lexicographic_in_the_membership_vector():
    order = ms.coalition_order(4)
    assert sorted(order.tolist()) == list(range(16)) and order[0] == 0 and order[-1] == 15
    members = all_coalitions(4)[order].astype(int).tolist()
    assert members == sorted(members)
    assert order[1] == 8  # {3}: only the last source differs from ∅


def test_lookup_game_counts_distinct_coalitions_and_their_tokens():
    rng = np.random.default_rng(1)
    n = 5
    values, tokens = rng.normal(size=2**n), rng.integers(1, 100, size=2**n)
    game = LookupGame(values, tokens)
    game(np.zeros((3, n), bool))  # three times ∅: one coalition
    assert game.n_coalitions == 1 and game.n_tokens == tokens[0]
    for m in (1, 4, 10):
        g = LookupGame(values, tokens)
        res = monte_carlo(g, m, seed=0)
        assert g.n_coalitions <= res.n_evaluations == m * (n - 1) + 2
        assert g.n_tokens == tokens[g.seen].sum()
    np.testing.assert_allclose(res.values, monte_carlo(TableGame(values), 10, seed=0).values)


def test_kernel_shap_at_the_full_budget_is_exact():
    pytest.importorskip("shapiq")
    game = LookupGame(TableGame.random(5, seed=2).values)
    np.testing.assert_allclose(ms.kernel_shap(game, 32, seed=0), exact(TableGame(game.values)).values, atol=1e-8)
    assert game.n_coalitions == 32
    small = LookupGame(game.values)
    ms.kernel_shap(small, 12, seed=0)
    assert small.n_coalitions <= 12


def test_estimator_rows_identities():
    pytest.importorskip("shapiq")
    rng = np.random.default_rng(4)
    n = 5
    table = ms.CoalitionTable(
        values=rng.normal(size=2**n),
        tokens=rng.integers(50, 500, size=2**n),
        tokens_run=None,
        seconds=0.0,
        scorer="none",
    )
    query = ms.Query(
        id="q",
        question="?",
        answer="a",
        sources=["s"] * n,
        labels=np.array([1, 0, 0, 1, 0]),
        key_points=[("q", "a")],
        paragraphs=list(range(n)),
    )
    rows = ms.estimator_rows(table, query, [2, 3], [8, 32], seeds=[0, 1])
    by = {(r["method"], r["budget"], r["seed"]): r for r in rows}
    full = by[("full", 32, None)]
    assert full["tau"] == 1.0 and full["n_coalitions"] == 32 and full["n_tokens"] == table.tokens.sum()
    assert by[("loo", 6, None)]["n_coalitions"] == 6
    assert ("mc_antithetic", 3, 0) not in by and ("mc_antithetic", 2, 1) in by  # antithetic needs even M
    assert by[("kernelshap", 32, 0)]["tau"] == pytest.approx(1.0)
    phi = shapley_from_table(table.values)
    assert full["jaccard"] == ms.score_row(phi, query.labels, phi)["jaccard"]
    assert len(rows) == 2 + 2 * (2 + 1 + 2)


def test_values_equal_up_to_rounding_rank_as_ties():
    """KernelSHAP's values of symmetric players at B < n differ in their last bits (seen in notebook 11: three
    players at 0.32107226789010657, ...081 and ...088); scored, they are ties, as if exactly equal."""
    noisy = [0.06582191317971217, 0.32107226789010657, -0.3839574313139342, 0.3210722678901081, 0.3210722678901088]
    tied = [0.06582191317971217, 0.3210722678901081, -0.3839574313139342, 0.3210722678901081, 0.3210722678901081]
    reference, labels = [0.5, 0.4, -0.1, 0.2, 0.1], [0, 1, 0, 0, 1]
    assert ms.score_row(noisy, labels, reference) == ms.score_row(tied, labels, reference)
    assert len(set(ms.snap_ties(noisy))) == 3 and ms.snap_ties([0.0, 0.0]).tolist() == [0.0, 0.0]
    assert ms.snap_ties([1.0, 1.0 + 1e-6]).tolist() != [1.0, 1.0]  # a real difference stays


def test_score_row_and_random_jaccard():
    row = ms.score_row([0.9, 0.1, 0.8, 0.0], [1, 0, 1, 0], [3.0, 2.0, 1.0, 0.0])
    assert row["jaccard"] == 1.0 and row["tau"] == pytest.approx(4 / 6)  # 5 concordant, 1 discordant
    assert ms.score_row([1.0, 0.0, 0.0, 0.0], [0, 1, 1, 0], [1.0, 1.0, 1.0, 1.0])["jaccard"] == pytest.approx(1 / 3)
    assert math.isnan(ms.score_row([1.0, 0.0], [1, 0], [2.0, 2.0])["tau"])  # constant reference
    assert ms.random_jaccard(4, 2) == pytest.approx(1 / 6 + 4 / 6 / 3)
    assert ms.random_jaccard(5, 5) == 1.0
    rng = np.random.default_rng(0)
    sims = [len({0, 1, 2} & set(rng.permutation(6)[:3])) for _ in range(20000)]
    assert ms.random_jaccard(6, 3) == pytest.approx(np.mean([x / (6 - x) for x in sims]), abs=0.01)


def test_summarize_by_budget_averages_seeds_then_queries():
    rows = [
        {
            "query": q,
            "method": "mc",
            "budget": 2,
            "seed": s,
            "n_coalitions": 10 + s,
            "n_tokens": 100 * (q + 1),
            "jaccard": float(q == 0),
            "tau": 0.5 * s,
        }
        for q in range(3)
        for s in range(2)
    ]
    rows += [
        {
            "query": q,
            "method": "full",
            "budget": 8,
            "seed": None,
            "n_coalitions": 8,
            "n_tokens": 800,
            "jaccard": 1.0,
            "tau": 1.0,
        }
        for q in range(3)
    ]
    out = {r["method"]: r for r in ms.summarize_by_budget(rows, n_boot=200, seed=0)}
    mc = out["mc"]
    assert mc["n_queries"] == 3 and mc["n_coalitions"] == 10.5 and mc["n_tokens"] == 200.0
    assert mc["jaccard"] == pytest.approx(1 / 3) and mc["tau"] == pytest.approx(0.25)
    assert mc["jaccard_ci_low"] <= mc["jaccard"] <= mc["jaccard_ci_high"]
    assert (
        out["full"]["tau"] == 1.0 and out["full"]["label"] == "FullShapley (exact, $2^n$)" == methods.get("full").label
    )


def test_embedding_relevance_is_a_clipped_cosine():
    class Fixed:
        id = "fixed"

        def encode(self, texts):
            table = {"q a": [1.0, 0.0], "r s": [0.0, 1.0], "S1": [2.0, 0.0], "S2": [-1.0, 1.0], "S3": [0.0, -3.0]}
            return np.array([table[t] for t in texts])

    query = ms.Query(
        id="q",
        question="?",
        answer="a",
        sources=["S1", "S2", "S3"],
        labels=np.array([1, 0, 0]),
        key_points=[("q", "a"), ("r", "s")],
        paragraphs=[0, 1, 2],
    )
    rel = ms.embedding_relevance(Fixed(), query)
    np.testing.assert_allclose(rel.values, [[1, 0], [0, 1 / math.sqrt(2)], [0, 0]], atol=1e-12)
    assert rel.lm_calls == rel.lm_tokens == 0 and rel.embedded_texts == 5 and rel.method == "embedding:fixed"


# ---------------------------------------------------------------------------------------- LM scoring


@pytest.fixture(scope="module")
def lm():
    torch = pytest.importorskip("torch")
    from scp.errors import ModelUnavailableError
    from scp.llm.readers import LocalReader

    torch.set_num_threads(1)
    try:
        return LocalReader(batch_size=4)
    except ModelUnavailableError as error:
        pytest.skip(f"no local reader: {error}")


def tiny_query():
    return ms.Query(
        id="tiny",
        question="Where was the author of Green Fields born?",
        answer="Leeds",
        sources=[
            "Green Fields: a novel by Ann Hope.",
            "Ann Hope: a writer born in Leeds.",
            "Leeds: a city in England.",
        ],
        labels=np.array([1, 1, 0]),
        key_points=[("Who wrote Green Fields?", "Ann Hope"), ("Where was Ann Hope born?", "Leeds")],
        paragraphs=[0, 1, 2],
    )


def test_prefix_tree_scores_equal_answer_logprob(lm):
    from scp.llm.readers import answer_logprob, prefix_tree_logprob, score_sequences

    q = tiny_query()
    order = ms.coalition_order(3)
    contexts = [[q.sources[i] for i in range(3) if (m >> i) & 1] for m in order]
    questions = [q.question] * 7 + ["Who wrote Green Fields?"]
    contexts, answers = contexts[:7] + [q.sources[:1]], ["Leeds"] * 7 + ["Ann Hope"]
    tree = prefix_tree_logprob(lm, questions, contexts, answers)
    ref = answer_logprob(lm, questions, contexts, answers, allow_empty_context=True)
    np.testing.assert_allclose(tree.logp, ref, atol=2e-3)
    assert tree.tokens.sum() == sum(
        len(lm.prompt_ids(a, b)) + len(lm.answer_ids(c)) for a, b, c in zip(questions, contexts, answers)
    )
    assert 0 < tree.tokens_run < tree.tokens.sum()
    for scorer in ("batched", "batched-reuse"):
        other = score_sequences(lm, questions, contexts, answers, scorer)
        np.testing.assert_allclose(other.logp, ref, atol=2e-3)
        assert other.tokens.tolist() == tree.tokens.tolist() and other.tokens_run is None
    with pytest.raises(ValueError, match="scorer"):
        score_sequences(lm, questions, contexts, answers, "fast")
    with pytest.raises(ValueError, match="non-empty"):
        prefix_tree_logprob(lm, ["q"], ["c"], [" "])


def test_full_shapley_table_and_lm_relevance(lm):
    q = tiny_query()
    table = ms.full_shapley_table(lm, q)
    assert table.n_players == 3 and table.tokens[0] < table.tokens[7] and table.tokens_run < table.tokens.sum()
    phi = shapley_from_table(table.values)
    assert phi.sum() == pytest.approx(table.values[7] - table.values[0], abs=1e-9)
    rel = ms.lm_relevance(lm, q)
    assert rel.values.shape == (3, 2) and (rel.values >= 0).all() and rel.lm_calls == 8
    logp, base = np.array(rel.meta["logp"]), np.array(rel.meta["logp_no_context"])
    np.testing.assert_allclose(rel.values, np.maximum(logp - base, 0.0), atol=1e-12)
    assert rel.lm_tokens_run < rel.lm_tokens
