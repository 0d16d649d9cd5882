"""Each notebook's "The paper's claims" table: the paper's words in quotes, where it says them, our number with its
interval, and a verdict from one short list (scp.suite.quoted.paper_claims); every quoted passage is found in the
paper's text (``../shared/paper``, beside the data); tests/test_quoted.py checks the table's other numbers against the
records like any other markdown; README's tally is generated from the tables."""

import json
import os
import re
from pathlib import Path

import pytest

from scp.errors import DataFormatError
from scp.suite import gallery
from scp.suite.quoted import (
    CLAIMS_HEADING,
    PAPER,
    PAPERS,
    VERDICTS,
    find_quote,
    misquotes,
    n_to_decide,
    paper_claims,
    quoted_numbers,
    tally,
    verdict_of,
)
from scp.suite.runner import NOTEBOOKS, ROOT, notebook_names

NAMES = notebook_names()
PAPER_DIR = Path(os.environ.get("SCP_DATA_DIR", ROOT.parent / "shared" / "data")).resolve().parent / "paper"
"""The texts of the papers: ``$SCP_DATA_DIR/../paper`` (``../shared/paper`` beside the repository by default)."""

WITHOUT_CLAIMS = {
    "00_cooperative_games_tutorial": "a tutorial on cooperative games; Theorem 3.1's bound is notebook 04's claim",
    "14_attribution_against_contextcite": "a comparison with ContextCite, a peer the SCP paper does not discuss",
}
"""Notebooks that quote no claim of the paper, and why; every other notebook has a claims table."""


def _notebook(tmp_path, *markdown: str):
    path = tmp_path / "nb.ipynb"
    cells = [{"cell_type": "markdown", "metadata": {}, "source": text} for text in markdown]
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


HEADER = f"{CLAIMS_HEADING}\n\n| claim (the paper's words) | where | ours | verdict |\n|---|---|---|---|\n"


@pytest.mark.parametrize("name", NAMES)
def test_a_notebooks_claims_table_is_well_formed(name):
    claims = paper_claims(NOTEBOOKS / f"{name}.ipynb")
    assert all(verdict_of(c) in VERDICTS for c in claims)
    if name not in WITHOUT_CLAIMS:
        assert claims, f"{name}: no '{CLAIMS_HEADING}' table quoting the paper"


@pytest.mark.skipif(not PAPER_DIR.is_dir(), reason=f"the papers' texts are not here ({PAPER_DIR} is absent)")
@pytest.mark.parametrize("name", NAMES)
def test_every_quoted_claim_is_the_papers_words(name):
    paper = (PAPER_DIR / PAPERS.get(name, PAPER)).read_text(encoding="utf-8")
    claims = paper_claims(NOTEBOOKS / f"{name}.ipynb")
    assert all(c.quotes() for c in claims)
    wrong = misquotes(claims, paper)
    assert not wrong, f"{name}: quoted as {PAPERS.get(name, PAPER)}'s words but not found in it:\n" + "\n".join(wrong)


PAPER_TEXT = (
    "Figure 4:Ablation studies\\. Table[20](https://arxiv.org/html/2607.16209#A3.T20)shows it\\. \\(b\\) Recall "
    "improves with more Monte\\-Carlo samples; the defaultM=50M=50is "
    "marked\\. Notably, downgrading the embedding input \\(SentenceTransformer\\) to a shallow lexical model "
    "\\(Word2Vec\\) induces only a∼\\\\sim3% drop in AUC on\nHotpotQA while retaining strong multi\\-hop performance\\."
)


@pytest.mark.parametrize(
    "quote",
    [
        "(b) Recall improves with more Monte-Carlo samples",
        "Monte-Carlo samples; the default",  # the text file lost the space before an inline formula
        "induces only a ∼3% drop in AUC on HotpotQA",  # a line break in the text; its LaTeX source after the ∼
        "downgrading the embedding input … induces only a ∼3% drop",  # an elision between two parts, in order
        "Ablation studies. … (b) Recall improves",
        "Table 20 shows it.",  # a link in the text: its words stay, its target goes
    ],
)
def test_a_quote_is_found_whatever_the_whitespace_and_escapes(quote):
    assert find_quote(quote, PAPER_TEXT)


@pytest.mark.parametrize(
    "quote",
    [
        "about 3 % drop with word2vec",  # the paraphrase notebook 06 once quoted
        "Recall improves with more Monte Carlo samples",  # a hyphen dropped
        "induces only a ∼4% drop in AUC on HotpotQA",  # a number changed
        "induces only a ~3% drop in AUC on HotpotQA",  # another character than the paper's ∼
        "induces only a ∼3% drop … downgrading the embedding input",  # both parts occur, but not in this order
        "Recall improves … the default M=100 is marked",  # the second part is not the paper's
    ],
)
def test_a_misquote_is_not_found(quote):
    assert not find_quote(quote, PAPER_TEXT)


def test_a_notebook_misquoting_the_paper_is_caught(tmp_path):
    right = '| "(b) Recall improves with more Monte-Carlo samples" | Fig. 4b caption | 0.93 [0.91, 0.95] | reproduced |'
    wrong = '| "Recall rises with more Monte-Carlo samples" | Fig. 4b caption | 0.93 [0.91, 0.95] | reproduced |'
    assert misquotes(paper_claims(_notebook(tmp_path, HEADER + right + "\n")), PAPER_TEXT) == []
    assert misquotes(paper_claims(_notebook(tmp_path, HEADER + wrong + "\n")), PAPER_TEXT) == [
        "Recall rises with more Monte-Carlo samples"
    ]


def test_claims_are_read_with_their_verdicts(tmp_path):
    path = _notebook(
        tmp_path,
        "## Other text\n\n| a | b | c | d |\n|---|---|---|---|\n| not | a | claims | table |",
        HEADER
        + '| "BM25 dominates fact recall in long contexts" | Fig. 3d | BM25 1.00 [1.00, 1.00] | reproduced |\n'
        + '| "crosses LOO exact" near `a|b` | Fig. 4c | $x|y$ | not tested here: our grid stops at M = 100 |\n'
        + '| "SCP is better" | Table 3 | 0.9 [0.8, 1.0] | contradicted |\n'
        + '| "SCP is better" | T. 3 | 0.9 | inconclusive: +0.039 [−0.040, +0.123] at n = 25; n ≈ 103 would decide |\n'
        + '| "SCP is better" | T. 3 | 0.9 | inconclusive: +0.000 [−0.007, +0.008] at n = 97; no n would decide |\n'
        + '| "1.3" and “−0.8” for S6 and S1 | Table 19 | one case, exact values, no CI | contradicted |\n'
        + '| "drops" | T. 17 | x | inconclusive: 0.894 [0.870, 0.915] against 0.906 at n = 100; n ≈ 310 would decide |'
        + "\n",
    )
    claims = paper_claims(path)
    assert [verdict_of(c) for c in claims] == [
        "reproduced",
        "not tested here",
        "contradicted",
        "inconclusive",
        "inconclusive",
        "contradicted",
        "inconclusive",
    ]
    assert claims[1].where == "Fig. 4c" and claims[1].ours == "$x|y$"
    assert claims[5].quotes() == ["1.3", "−0.8"]
    assert tally(claims) == {"reproduced": 1, "contradicted": 2, "inconclusive": 3, "not tested here": 1}


@pytest.mark.parametrize(
    "row, problem",
    [
        ("| SCP is better | Table 3 | 0.9 | reproduced |", "not quoted in the paper's words"),
        ('| "SCP is better" | Table 3 | 0.9 | mostly |', "verdict 'mostly' is none of"),
        ('| "SCP is better" | Table 3 | 0.9 | not reproduced |', "is none of"),
        ('| "SCP is better" | Table 3 | 0.9 | not tested here |', "is none of"),
        ('| "SCP is better" |  | 0.9 | reproduced |', "neither where"),
        ('| "SCP is better" | Table 3 | reproduced |', "3 cells"),
        ('| "SCP is better" | Table 3 | 0.9 | reproduced |', "gives our interval"),
        ('| "SCP is better" | Table 3 | 0.9 [0.8, 1.0] | contradicted: mostly |', "is none of"),
        ('| "SCP is better" | Table 3 | 0.9 [0.8, 1.0] | inconclusive |', "an inconclusive verdict reads"),
        ('| "SCP is better" | T. 3 | x | inconclusive: +0.04 [−0.04, +0.12] at n = 25 |', "inconclusive verdict"),
        ('| "SCP is better" | T. 3 | x | inconclusive: +0.04 [+0.01, +0.12] at n = 25; n ≈ 9 would decide |', "no"),
        ('| "SCP is better" | T. 3 | x | inconclusive: +0.04 [−0.04, +0.12] at n = 25; n ≈ 30 would decide |', "100"),
        ('| "SCP is better" | T. 3 | x | inconclusive: +0.04 [−0.04, +0.12] at n = 25; no n would decide |', "100"),
        ('| "SCP is better" | T. 3 | x | inconclusive: 0.00 [−0.04, +0.12] at n = 25; n ≈ 30 would decide |', "no n"),
        ('| "SCP" | T. 3 | x | inconclusive: 0.89 [0.87, 0.92] against 0.86 at n = 9; n ≈ 9 would decide |', "0.86"),
        ('| "SCP" | T. 3 | x | inconclusive: 0.89 [0.87, 0.92] against 0.91 at n = 9; n ≈ 9 would decide |', "out 21"),
    ],
)
def test_a_malformed_claim_is_one_line_naming_its_row(tmp_path, row, problem):
    with pytest.raises(DataFormatError, match=re.escape(problem) if "'" not in problem else problem):
        paper_claims(_notebook(tmp_path, HEADER + row + "\n"))


def test_the_n_that_would_decide_scales_the_interval_as_one_over_root_n():
    assert n_to_decide(0.039, -0.040, 0.123, 25) == 103  # 25 · (0.079 / 0.039)² = 102.6
    assert n_to_decide(-0.059, -0.129, 0.010, 31) == 43  # the bound on the side of 0 is the upper one: 42.4
    assert n_to_decide(0.02, 0.01, 0.03, 50) == 50  # already decided
    assert n_to_decide(0.0, -0.01, 0.01, 50) is None


def test_the_papers_words_and_the_n_that_would_decide_are_not_checked_as_our_numbers():
    table = HEADER + (
        '| "EM 0.466 vs. 0.441 / 0.389 / 0.377" | App. C.3.3 | EM 0.250 [0.100, 0.400] | '
        "inconclusive: +0.039 [−0.040, +0.123] at n = 25; n ≈ 103 would decide |\n"
    )
    numbers = [q.value for q in quoted_numbers(table)]
    assert 0.466 not in numbers and 103 not in numbers
    assert {0.25, 0.1, 0.4, 0.039, -0.04, 0.123, 25} <= set(numbers)
    assert 0.466 in [q.value for q in quoted_numbers(table.replace(CLAIMS_HEADING, "## Elsewhere"))]


def test_the_readme_tally_is_current():
    readme = (ROOT / "README.md").read_text()
    section = re.search(r"<!-- claims-tally -->\n(.*?)<!-- /claims-tally -->", readme, re.S).group(1)
    assert section == gallery.claims_tally() + "\n", "run python -m scp.suite.gallery"
    total = sum(sum(tally(paper_claims(NOTEBOOKS / f"{name}.ipynb")).values()) for name in NAMES)
    assert f"| **all** | **{total}** |" in section
