"""Each notebook's "The paper's claims" table: the paper's words in quotes, where it says them, our number, and a
verdict from one short list (scp.suite.quoted.paper_claims); tests/test_quoted.py checks its numbers against the
records like any other markdown."""

import json

import pytest

from scp.errors import DataFormatError
from scp.suite.quoted import CLAIMS_HEADING, VERDICTS, paper_claims, verdict_of
from scp.suite.runner import NOTEBOOKS, notebook_names

NAMES = notebook_names()


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


def test_claims_are_read_with_their_verdicts(tmp_path):
    path = _notebook(
        tmp_path,
        "## Other text\n\n| a | b | c | d |\n|---|---|---|---|\n| not | a | claims | table |",
        HEADER
        + '| "BM25 dominates fact recall in long contexts" | Fig. 3d | BM25 1.00, SCP 0.60 | reproduced |\n'
        + '| "crosses LOO exact" near `a|b` | Fig. 4c | $x|y$ | not tested here: our grid stops at M = 100 |\n',
    )
    claims = paper_claims(path)
    assert [verdict_of(c) for c in claims] == ["reproduced", "not tested here"]
    assert claims[1].where == "Fig. 4c" and claims[1].ours == "$x|y$"


@pytest.mark.parametrize(
    "row, problem",
    [
        ("| SCP is better | Table 3 | 0.9 | reproduced |", "not quoted in the paper's words"),
        ('| "SCP is better" | Table 3 | 0.9 | mostly |', "verdict 'mostly' is none of"),
        ('| "SCP is better" | Table 3 | 0.9 | not tested here |', "is none of"),
        ('| "SCP is better" |  | 0.9 | reproduced |', "neither where"),
        ('| "SCP is better" | Table 3 | reproduced |', "3 cells"),
    ],
)
def test_a_malformed_claim_is_one_line_naming_its_row(tmp_path, row, problem):
    with pytest.raises(DataFormatError, match=problem):
        paper_claims(_notebook(tmp_path, HEADER + row + "\n"))
