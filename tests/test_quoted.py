"""Every number quoted in a notebook's markdown is one its last full run recorded (scp.suite.quoted)."""

import json
from pathlib import Path

import pytest
import yaml

from scp.suite.quoted import quoted_numbers, unmatched, values_of
from scp.suite.runner import PARAMS, ROOT, load_params, notebook_names

CONSTANTS = Path(__file__).with_name("quoted_constants.yaml")


def test_numbers_are_read_as_printed():
    text = (
        "## 3 Results\nTable 19 and Fig. 3a of notebook 02 (Amos et al. 2017, `x = 0.5`, MiniLM-L6-v2): the credit "
        "moves 0.094 → 0.073 [−0.003, +0.002], 45.8% of 282,000 triples, 1.70× faster, shortfall 1.5e-11, 10⁻⁹."
    )
    got = [(q.value, q.decimals, q.percent) for q in quoted_numbers(text)]
    assert got == [
        (1e-9, 9, False),
        (0.094, 3, False),
        (0.073, 3, False),
        (-0.003, 3, False),
        (0.002, 3, False),
        (45.8, 1, True),
        (282000.0, 0, False),
        (1.7, 2, False),
        (1.5e-11, 12, False),
    ]


def test_a_number_matches_at_its_printed_precision_only():
    values = [0.09412, -0.0031, 0.458, 282000, 1.7049, 1.52e-11]
    text = "0.094, 0.0941, by 0.003, 45.8%, 282,000, 1.70×, 1.5e-11, and 7 seeds"
    assert unmatched(text, values) == []
    wrong = unmatched("0.095, 0.09413, 47%, 282,001, 1.71× and 12 seeds", values)
    assert [q.text for q in wrong] == ["0.095", "0.09413", "47%", "282,001", "1.71×", "12"]


def test_a_table_cell_holding_a_list_gives_its_numbers(tmp_path):
    (tmp_path / "t.csv").write_text('variant,auc ci,note\nx,"[0.9322934, 0.9641350]",[not json\n')
    values = values_of(tmp_path)
    assert 0.9322934 in values and 0.964135 in values
    assert unmatched("AUC [0.932, 0.964]", values) == [] and [q.text for q in unmatched("0.933", values)] == ["0.933"]


def _markdown(name):
    cells = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["cells"]
    return [("".join(c["source"]), i) for i, c in enumerate(cells) if c["cell_type"] == "markdown"]


@pytest.mark.parametrize("name", notebook_names())
def test_every_number_in_the_text_is_recorded(name):
    results = ROOT / "results" / name
    assert (results / "records.json").is_file(), f"{name}: no results/{name}/records.json (run it: scp run {name})"
    constants = yaml.safe_load(CONSTANTS.read_text())
    listed = [*constants.get("all", []), *(constants.get(name) or [])]
    values = values_of(results, load_params(name, params_dir=PARAMS), listed)
    problems = [f"cell {i}: {q}" for text, i in _markdown(name) for q in unmatched(text, values)]
    assert not problems, f"{name}: numbers in the text that no record, table, parameter or constant holds:\n" + (
        "\n".join(problems)
    )
