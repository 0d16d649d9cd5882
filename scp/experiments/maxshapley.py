"""MaxShapley against LM-utility Shapley estimators on multi-hop QA sources (notebook 11).

MaxShapley attributes an answer to its sources through the utility U(S) = Σ_j w_j max_{i∈S} r_ij, where j
runs over the answer's key points and r_ij ≥ 0 is how much source i supports key point j.  Its Shapley values
are exact in O(n·m log n) (:func:`scp.core.closed_forms.max_shapley`, one sort per key point), so the only LM cost is
the n·m relevance scores.  The reference it is compared with, FullShapley, is the exact Shapley value of an
LM utility over all 2^n coalitions of sources.

- :func:`select_queries` / :func:`choose_sources`: a MuSiQue example (paragraph units) as a :class:`Query`:
  its gold supporting paragraphs plus the distractors with the highest BM25 score against the question, as
  ``"Title: paragraph"`` texts in a seeded random order, with the key points of :func:`key_points`.
- :func:`key_points`: the hops of MuSiQue's question decomposition as (sub-question, sub-answer) pairs, with
  ``#k`` replaced by hop k's answer and the knowledge-base form ``"X >> relation"`` phrased as a question.
- :func:`lm_relevance`: r_ij = max(0, log P(a_j | q_j, source i) − log P(a_j | q_j, no context)), and
  :func:`embedding_relevance`: r_ij = max(0, cos(e("q_j a_j"), e(source i))), each with its cost.
- :func:`coalition_order`, :func:`full_shapley_table`: U(S) = log P(a* | q, S) for every S ⊆ N in one scoring
  call (:func:`scp.llm.readers.score_sequences`, by default the prefix tree of
  :func:`scp.llm.readers.prefix_tree_logprob`), ordered so that neighbouring coalitions share their context prefix.
- :func:`estimator_rows`: FullShapley, leave-one-out, Monte Carlo (uniform and antithetic) and shapiq's
  KernelSHAP on one table, each reading it through a :class:`scp.core.games.LookupGame` (which counts the
  distinct coalitions asked for and their LM tokens), each row with its Jaccard@K against the gold sources,
  Kendall τ_b against FullShapley and its cost; :func:`maxshapley_row` the same for a MaxShapley attribution;
  :func:`summarize_by_budget` aggregates rows per (method, budget) over queries with bootstrap CIs;
  :func:`draw_methods` draws one panel.

Importing this module registers the methods of the comparison that :mod:`scp.pruning.methods` does not hold
already (leave-one-out and Monte Carlo, uniform and antithetic, are there): ``full`` (FullShapley), ``kernelshap``,
``maxshapley_lm``, ``maxshapley_minilm`` and ``random-order`` (the chance line), with their labels, colours and
markers.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scp.core.closed_forms import max_shapley
from scp.core.enumeration import leave_one_out, shapley_from_table
from scp.core.games import LookupGame, all_coalitions
from scp.core.metrics import aggregate, jaccard_at_k, kendall_tau_b
from scp.core.monte_carlo import monte_carlo
from scp.core.permutations import derive_seed
from scp.errors import InputError
from scp.llm.readers import score_sequences
from scp.pruning import methods
from scp.pruning.methods import Method

__all__ = [
    "KEY_POINT_SOURCE",
    "PAPER",
    "CoalitionTable",
    "Query",
    "Relevance",
    "choose_sources",
    "coalition_order",
    "draw_methods",
    "embedding_relevance",
    "estimator_rows",
    "full_shapley_table",
    "hop_question",
    "kernel_shap",
    "key_points",
    "lm_relevance",
    "maxshapley_row",
    "random_jaccard",
    "score_row",
    "snap_ties",
    "TIE_DIGITS",
    "select_queries",
    "summarize_by_budget",
]

KEY_POINT_SOURCE = "MuSiQue question decomposition"
"""Where the key points j come from (recorded with every result)."""

for _method in (
    Method("full", "FullShapley (exact, $2^n$)", needs_reader=True),
    Method("kernelshap", "KernelSHAP (shapiq)"),
    Method(
        "maxshapley_lm",
        "MaxShapley (LM relevance)",
        needs_reader=True,
        aliases=("maxshapley",),
    ),
    Method(
        "maxshapley_minilm",
        "MaxShapley (MiniLM relevance)",
        aliases=("MaxShapley (embeddings)",),
    ),
    Method("random-order", "random order"),
):
    methods.register(_method)
del _method

PAPER = {"dataset": "MuSiQue", "jaccard_maxshapley": 0.76, "jaccard_fullshapley": 0.83, "token_share": 0.062}
"""The seed paper's MuSiQue headline: Jaccard@K of MaxShapley and FullShapley against the gold sources, and
MaxShapley's tokens as a share of FullShapley's (6.2%).  The paper's numbers, never ours."""


# ------------------------------------------------------------------------------------------- queries


@dataclass
class Query:
    """One attribution problem: a question with its gold answer, n sources and the key points.

    ``sources`` are ``"Title: paragraph"`` texts in the order they are shown to the LM; ``labels[i] = 1``
    marks a gold supporting paragraph; ``key_points`` are (sub-question, sub-answer) pairs; ``paragraphs``
    the index of each source among the example's paragraphs.
    """

    id: str
    question: str
    answer: str
    sources: list[str]
    labels: np.ndarray
    key_points: list[tuple[str, str]]
    paragraphs: list[int]
    hop_type: str = ""
    meta: dict = field(default_factory=dict)

    @property
    def n_sources(self) -> int:
        return len(self.sources)

    @property
    def n_gold(self) -> int:
        return int(self.labels.sum())

    @property
    def weights(self) -> np.ndarray:
        """w_j = 1/m for each of the m key points."""
        m = len(self.key_points)
        return np.full(m, 1.0 / m)

    def head(self, k: int) -> Query:
        """The same question with only its first ``k`` sources (e.g. a smaller 2^k table for timing)."""
        if not 1 <= k <= self.n_sources:
            raise InputError(f"k must be in 1..{self.n_sources}; got {k}")
        return dataclasses.replace(
            self, sources=self.sources[:k], labels=self.labels[:k], paragraphs=self.paragraphs[:k]
        )


_HOP_REF = re.compile(r"#(\d+)")


def hop_question(question: str, answers: Sequence[str]) -> str:
    """A decomposition hop as a plain question: ``#k`` becomes hop k's answer (``answers[k-1]``), and the
    knowledge-base form ``"X >> relation"`` becomes ``"What is the relation of X?"``.

    Args:
        question: the hop's question as MuSiQue writes it.
        answers: the answers of the earlier hops, in order.

    Returns:
        The question, stripped.
    """

    def sub(match: re.Match) -> str:
        k = int(match.group(1))
        if not 1 <= k <= len(answers):
            raise InputError(f"hop question {question!r} refers to #{k} but only {len(answers)} earlier answers")
        return answers[k - 1]

    text = _HOP_REF.sub(sub, question).strip()
    if ">>" in text:
        subject, relation = (part.strip() for part in text.split(">>", 1))
        text = f"What is the {relation} of {subject}?"
    return " ".join(text.split())


def key_points(decomposition: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The key points of a MuSiQue example: one (sub-question, sub-answer) pair per hop of its decomposition
    (``Example.meta["decomposition"]``), with the references to earlier hops resolved (:func:`hop_question`)."""
    answers: list[str] = []
    points = []
    for hop in decomposition:
        points.append((hop_question(hop["question"], answers), str(hop["answer"]).strip()))
        answers.append(str(hop["answer"]).strip())
    if not points:
        raise InputError("the example has no question decomposition: no key points")
    return points


def choose_sources(example, n_sources: int, seed: int = 0) -> Query:
    """The sources of one MuSiQue example (paragraph granularity): every gold supporting paragraph plus the
    non-gold paragraphs with the highest BM25 score against the question (the hardest distractors) up to
    ``n_sources``, shuffled with a generator seeded by ``derive_seed(seed, example.id)``.

    Args:
        example: a :class:`scp.data.datasets.Example` with one unit per paragraph and ``meta["decomposition"]``.
        n_sources: n, the number of sources (must exceed the number of gold paragraphs).
        seed: the run seed.

    Returns:
        A :class:`Query` whose answer is ``example.answers[0]``.
    """
    from scp.pruning.rankers import BM25Ranker

    if example.granularity != "paragraph":
        raise InputError(f"choose_sources needs paragraph units; {example.id} has {example.granularity} units")
    texts = example.unit_texts(with_title=True)
    labels = np.asarray(example.labels)
    gold = np.flatnonzero(labels == 1).tolist()
    if not 0 < len(gold) < n_sources:
        raise InputError(f"{example.id} has {len(gold)} gold paragraphs; n_sources = {n_sources} needs 1..n−1")
    bm25 = BM25Ranker().score(example.query, texts)
    others = sorted(np.flatnonzero(labels == 0).tolist(), key=lambda i: (-bm25[i], i))
    chosen = gold + others[: n_sources - len(gold)]
    if len(chosen) < n_sources:
        raise InputError(f"{example.id} has only {len(chosen)} paragraphs; n_sources = {n_sources}")
    order = np.random.default_rng(derive_seed(seed, example.id)).permutation(n_sources)
    chosen = [chosen[k] for k in order]
    return Query(
        id=example.id,
        question=example.query,
        answer=example.answers[0],
        sources=[texts[i] for i in chosen],
        labels=labels[chosen].astype(np.int64),
        key_points=key_points(example.meta["decomposition"]),
        paragraphs=chosen,
        hop_type=example.meta.get("hop_type", ""),
        meta={"bm25": [float(bm25[i]) for i in chosen]},
    )


def select_queries(examples: Sequence, n_queries: int, n_sources: int, seed: int = 0) -> list[Query]:
    """The first ``n_queries`` examples (in the given order) that have a question decomposition and fewer
    gold paragraphs than ``n_sources``, as :class:`Query` objects (:func:`choose_sources`)."""
    out = []
    for ex in examples:
        if len(out) == n_queries:
            break
        if ex.meta.get("decomposition") and 0 < sum(ex.labels) < n_sources:
            out.append(choose_sources(ex, n_sources, seed))
    if len(out) < n_queries:
        raise InputError(f"only {len(out)} examples qualify; n_queries = {n_queries}")
    return out


# ------------------------------------------------------------------------------------------- relevance


@dataclass
class Relevance:
    """A relevance matrix r (n sources × m key points) with what it cost: ``lm_calls`` sequences scored by
    the LM, ``lm_tokens`` their prompt + answer tokens, ``lm_tokens_run`` the tokens the LM actually ran
    (shared prefixes once), ``embedded_texts`` texts sent to an embedder, and the wall ``seconds``.
    ``method`` names how r was obtained."""

    values: np.ndarray
    method: str
    lm_calls: int = 0
    lm_tokens: int = 0
    lm_tokens_run: int = 0
    embedded_texts: int = 0
    seconds: float = 0.0
    meta: dict = field(default_factory=dict)


def lm_relevance(lm, query: Query, scorer: str = "tree") -> Relevance:
    """r_ij = max(0, log P(a_j | q_j, source i) − log P(a_j | q_j, no context)): the gain in log-probability
    of key point j's answer from reading source i alone.

    n·m + m sequences are scored in one call of :func:`score_sequences` (the m sequences of a source share it
    as a prompt prefix, which the ``"tree"`` scorer runs once).

    Args:
        lm: a :class:`scp.llm.readers.LocalReader`.
        query: the :class:`Query`.
        scorer: see :func:`score_sequences`.

    Returns:
        A :class:`Relevance`; ``meta`` holds the raw log-probabilities (``logp``, n × m) and the no-context
        baselines (``logp_no_context``, m).
    """
    qs, ans = [q for q, _ in query.key_points], [a for _, a in query.key_points]
    n, m = query.n_sources, len(qs)
    contexts = [s for s in query.sources for _ in qs] + [""] * m
    scored = score_sequences(lm, qs * (n + 1), contexts, ans * (n + 1), scorer)
    logp, base = scored.logp[: n * m].reshape(n, m), scored.logp[n * m :]
    return Relevance(
        values=np.maximum(logp - base[None, :], 0.0),
        method="lm",
        lm_calls=len(contexts),
        lm_tokens=int(scored.tokens.sum()),
        lm_tokens_run=int(scored.tokens_run or scored.tokens.sum()),
        seconds=scored.seconds,
        meta={"logp": logp.tolist(), "logp_no_context": base.tolist()},
    )


def embedding_relevance(embedder, query: Query) -> Relevance:
    """r_ij = max(0, cos(e("q_j a_j"), e(source i))) with any :class:`scp.data.embedders.Embedder` (MiniLM in the
    notebook): no LM call; n + m texts embedded."""
    points = [f"{q} {a}" for q, a in query.key_points]
    t0 = time.perf_counter()
    vectors = np.asarray(embedder.encode(points + list(query.sources)), dtype=np.float64)
    seconds = time.perf_counter() - t0
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    k = len(points)
    cos = vectors[k:] @ vectors[:k].T
    return Relevance(
        values=np.maximum(cos, 0.0),
        method=f"embedding:{getattr(embedder, 'id', 'embedder')}",
        embedded_texts=len(points) + query.n_sources,
        seconds=seconds,
    )


# ------------------------------------------------------------------------------------ the 2^n table


def coalition_order(n: int) -> np.ndarray:
    """All 2^n bitmasks (player i ↔ bit i) in lexicographic order of the membership vector (c_0, …, c_{n−1}):
    coalitions next to each other agree on the first players, and player 0's source comes first in the
    context, so consecutive prompts share their longest prefixes."""
    masks = list(range(2**n))
    return np.array(sorted(masks, key=lambda m: [(m >> i) & 1 for i in range(n)]), dtype=np.int64)


@dataclass
class CoalitionTable:
    """U(S) for every coalition S (``values``, indexed by bitmask), with the prompt + answer tokens of each
    coalition's sequence (``tokens``), the tokens the LM actually ran (``tokens_run``, ``None`` when not
    counted), the wall ``seconds`` of the LM call and the ``scorer`` used."""

    values: np.ndarray
    tokens: np.ndarray
    tokens_run: int | None
    seconds: float
    scorer: str

    @property
    def n_players(self) -> int:
        return int(round(math.log2(self.values.size)))


def full_shapley_table(lm, query: Query, scorer: str = "tree") -> CoalitionTable:
    """U(S) = log P(a* | q, S) for all 2^n coalitions S of the query's sources, in one LM scoring call.

    S's context is its sources in the query's order (the empty coalition reads :data:`scp.llm.readers.EMPTY_CONTEXT`).
    Coalitions are passed in :func:`coalition_order`, so neighbours share their longest context prefix (what
    ``"batched-reuse"`` exploits within a batch and ``"tree"`` exploits across all of them).

    Args:
        lm: a :class:`scp.llm.readers.LocalReader`.
        query: the :class:`Query` (its ``answer`` is a*).
        scorer: see :func:`score_sequences`.

    Returns:
        A :class:`CoalitionTable`.
    """
    n = query.n_sources
    order = coalition_order(n)
    contexts = [[query.sources[i] for i in range(n) if (m >> i) & 1] for m in order]
    scored = score_sequences(lm, [query.question] * len(order), contexts, [query.answer] * len(order), scorer)
    values, tokens = np.empty(2**n), np.empty(2**n, dtype=np.int64)
    values[order], tokens[order] = scored.logp, scored.tokens
    return CoalitionTable(
        values=values, tokens=tokens, tokens_run=scored.tokens_run, seconds=scored.seconds, scorer=scorer
    )


def kernel_shap(game, budget: int, seed: int) -> np.ndarray:
    """Shapley values of ``game`` by shapiq's KernelSHAP (``shapiq.approximator.KernelSHAP``, default
    sampling without the pairing trick) with ``budget`` coalitions, sampled with ``random_state=seed``."""
    from shapiq.approximator import KernelSHAP

    n = game.n_players
    iv = KernelSHAP(n, random_state=int(seed)).approximate(int(budget), lambda C: game(np.asarray(C, bool)))
    return np.array([iv[(i,)] for i in range(n)], dtype=np.float64)


# ------------------------------------------------------------------------------------------- scoring


TIE_DIGITS = 9
"""Values within about 10^-9 of an attribution's largest magnitude count as tied when ranked (:func:`snap_ties`)."""


def snap_ties(values) -> np.ndarray:
    """``values`` rounded to :data:`TIE_DIGITS` decimals of their largest magnitude s: x ↦ s·round(x/s, 9).

    Values equal in exact arithmetic can differ in their last bits (KernelSHAP with fewer coalitions than players
    gives symmetric players one value, up to the solver's rounding); ranked as they are, that noise decides
    their order, and τ_b and Jaccard@K with it, differently on another machine or run.  Snapped, they tie."""
    v = np.asarray(values, dtype=np.float64)
    scale = float(np.max(np.abs(v))) if v.size else 0.0
    return v if scale == 0.0 or not np.isfinite(scale) else np.round(v / scale, TIE_DIGITS) * scale


def score_row(values, labels, reference) -> dict[str, float]:
    """Jaccard@K of an attribution's top-K sources against the gold ones (K = number of gold sources; ties
    towards the lower index) and Kendall τ_b against the reference attribution (``nan`` when either is
    constant), both on values whose noise-level differences are snapped to ties (:func:`snap_ties`)."""
    labels = np.asarray(labels)
    k = int(labels.sum())
    values, reference = snap_ties(values), snap_ties(reference)
    return {"jaccard": jaccard_at_k(values, labels.astype(np.float64), k), "tau": kendall_tau_b(values, reference)}


def estimator_rows(
    table: CoalitionTable, query: Query, mc_budgets: Sequence[int], kernel_budgets: Sequence[int], seeds: Sequence[int]
) -> list[dict[str, Any]]:
    """Every table-based estimator on one query, scored against the gold labels and FullShapley.

    FullShapley (all 2^n coalitions) and leave-one-out are deterministic; Monte Carlo with M permutations
    (``mc_budgets``; uniform, and antithetic for even M) and KernelSHAP with B coalitions (``kernel_budgets``)
    run once per seed.  Each estimator reads a fresh :class:`LookupGame`, so its cost is the distinct
    coalitions it asked for and their LM tokens.

    Returns:
        Rows ``{query, method, budget, seed, n_coalitions, n_tokens, jaccard, tau}`` (``budget`` is M for
        Monte Carlo, B for KernelSHAP, 2^n for FullShapley and n + 1 for leave-one-out).
    """
    n = table.n_players
    full = shapley_from_table(table.values)
    rows = []

    def add(method, budget, seed, values, game):
        rows.append(
            {
                "query": query.id,
                "method": method,
                "budget": int(budget),
                "seed": seed,
                "n_coalitions": game.n_coalitions,
                "n_tokens": game.n_tokens,
                **score_row(values, query.labels, full),
            }
        )

    everything = LookupGame(table.values, table.tokens)
    everything(all_coalitions(n))
    add("full", 2**n, None, full, everything)
    game = LookupGame(table.values, table.tokens)
    add("loo", n + 1, None, leave_one_out(game).values, game)
    for seed in seeds:
        for m in mc_budgets:
            game = LookupGame(table.values, table.tokens)
            add("mc", m, seed, monte_carlo(game, int(m), seed=int(seed)).values, game)
            if m % 2 == 0:
                game = LookupGame(table.values, table.tokens)
                add("mc_antithetic", m, seed, monte_carlo(game, int(m), antithetic=True, seed=int(seed)).values, game)
        for b in kernel_budgets:
            game = LookupGame(table.values, table.tokens)
            add("kernelshap", b, seed, kernel_shap(game, b, seed), game)
    return rows


def maxshapley_row(relevance: Relevance, query: Query, reference) -> dict[str, Any]:
    """The MaxShapley attribution φ = max_shapley(r, w) (w_j = 1/m) of one query, scored like the estimators
    (:func:`score_row`); its cost is the LM sequences (``n_coalitions``) and tokens (``n_tokens``) of its
    relevance scores, as no utility is evaluated; ``budget`` is 0 (no sampling budget)."""
    phi = max_shapley(relevance.values, query.weights)
    method = "maxshapley_lm" if relevance.method == "lm" else "maxshapley_minilm"
    return {
        "query": query.id,
        "method": method,
        "budget": 0,
        "seed": None,
        "n_coalitions": relevance.lm_calls,
        "n_tokens": relevance.lm_tokens,
        **score_row(phi, query.labels, reference),
    }


def random_jaccard(n: int, k: int) -> float:
    """E[|A ∩ G| / |A ∪ G|] for a uniformly random k-subset A of n sources and a fixed k-subset G: the
    Jaccard@K of a random order (hypergeometric overlap x, Jaccard x / (2k − x))."""
    if not 0 < k <= n:
        raise InputError(f"need 0 < k <= n, got k={k}, n={n}")
    total = math.comb(n, k)
    return sum(math.comb(k, x) * math.comb(n - k, k - x) / total * x / (2 * k - x) for x in range(0, k + 1))


def summarize_by_budget(rows: Sequence[Mapping[str, Any]], n_boot: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """Rows of many queries aggregated per (method, budget): each query's metrics and costs are first
    averaged over seeds, then over queries, with percentile-bootstrap CIs over queries
    (:func:`scp.core.metrics.aggregate`).

    Returns:
        One row per (method, budget), in first-seen order: ``method, label, budget, n_queries,
        n_coalitions, n_tokens`` (means) and ``jaccard, jaccard_ci_low, jaccard_ci_high, tau, tau_ci_low,
        tau_ci_high, tau_n_excluded``.
    """
    groups: dict[tuple[str, int], dict[str, list]] = {}
    for r in rows:
        per_query = groups.setdefault((r["method"], r["budget"]), {}).setdefault(r["query"], [])
        per_query.append(r)
    out = []
    for (method, budget), queries in groups.items():
        means = {
            key: [
                float(np.nanmean([r[key] for r in rs])) if not all(np.isnan(r[key]) for r in rs) else math.nan
                for rs in queries.values()
            ]
            for key in ("jaccard", "tau", "n_coalitions", "n_tokens")
        }
        row = {
            "method": method,
            "label": methods.get(method).label,
            "budget": budget,
            "n_queries": len(queries),
            "n_coalitions": float(np.mean(means["n_coalitions"])),
            "n_tokens": float(np.mean(means["n_tokens"])),
        }
        for key in ("jaccard", "tau"):
            agg = aggregate(means[key], n_boot=n_boot, seed=seed)
            row.update({key: agg.mean, f"{key}_ci_low": agg.ci_low, f"{key}_ci_high": agg.ci_high})
        row["tau_n_excluded"] = aggregate(means["tau"], n_boot=1).n_excluded
        out.append(row)
    return out


# ------------------------------------------------------------------------------------------- plotting


def draw_methods(
    ax,
    summary: Sequence[Mapping[str, Any]],
    metric: str,
    cost: str,
    styles: Mapping[str, tuple[str, str, str]],
    chance: float | None = None,
    order: Sequence[str] = ("full", "loo", "mc", "mc_antithetic", "kernelshap", "maxshapley_lm", "maxshapley_minilm"),
) -> None:
    """One panel of the cost figure: ``metric`` (``"jaccard"`` or ``"tau"``) against ``cost``
    (``"n_tokens"`` or ``"n_coalitions"``) for every method of :func:`summarize_by_budget`'s rows.

    A method with several budgets is a line through its budgets with its 95% CI as error bars; a single-budget
    method is a marker with CI error bars; a method with zero cost (MaxShapley with embedding relevance: no
    LM call) is a horizontal line with its CI band; ``chance`` (a random order) is a horizontal line too.  Each
    method is drawn in its ``styles`` entry (name → (colour, line style, marker), :data:`scp.suite.plot.STYLES`)
    and named by its label.  The x axis is logarithmic, with plain numbers as tick labels.
    """
    import pandas as pd
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    df = pd.DataFrame(list(summary))
    for method in order:
        sub = df[df.method == method].sort_values(cost)
        if sub.empty:
            continue
        (colour, ls, mark), label = styles[method], methods.get(method).label
        y, low, high = sub[metric].to_numpy(), sub[f"{metric}_ci_low"].to_numpy(), sub[f"{metric}_ci_high"].to_numpy()
        if (sub[cost] <= 0).all():
            ax.axhline(y[0], color=colour, ls=ls, lw=0.9, label=f"{label}, no LM call")
            ax.axhspan(low[0], high[0], color=colour, alpha=0.12, lw=0)
        elif len(sub) > 1:  # CI error bars, not bands: the sampling estimators' bands overlap and merge
            ax.errorbar(
                sub[cost],
                y,
                yerr=[y - low, high - y],
                color=colour,
                ls=ls,
                marker=mark,
                markersize=3,
                elinewidth=0.6,
                capsize=1.5,
                label=label,
            )
        else:
            ax.errorbar(
                sub[cost],
                y,
                yerr=[y - low, high - y],
                color=colour,
                marker=mark,
                markersize=4.5,
                ls="none",
                elinewidth=0.8,
                capsize=2,
                label=label,
            )
    if chance is not None:
        colour, ls, _ = styles["random-order"]
        ax.axhline(chance, color=colour, ls=ls, lw=0.9, label=methods.get("random-order").label)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
