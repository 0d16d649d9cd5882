"""The notebook suite: static checks on every notebook, then each one run with its smoke parameters.

Static checks follow the style guide (docs: notebook-style.md): one ``parameters`` cell whose values equal
``params/NAME.yaml``, no committed outputs, kernelspec python3, a title cell, short cells, no helper defined in two
notebooks.  The execution tests run each notebook into ``tmp_path`` (never into ``figures/``) and assert on the
values it recorded with :func:`scp.suite.notebook.record`.
"""

import ast
import json
from collections import defaultdict
from pathlib import Path

import nbformat
import pytest
import yaml

from scp.suite.graph import code_digests, declared, notebook_digest, read_provenance, uncovered_reads
from scp.suite.notebook import read_records
from scp.suite.runner import (
    PARAMS,
    check_params_in_sync,
    notebook_names,
    notebook_parameters,
    resolve_params,
)

NAMES = notebook_names()
ROOT = Path(__file__).resolve().parents[1]
MAX_LINES, MAX_COLUMNS = 15, 100


def read(name):
    return nbformat.read(str(ROOT / "notebooks" / f"{name}.ipynb"), as_version=4)


def code_cells(name):
    return [c for c in read(name).cells if c.cell_type == "code"]


def test_there_are_notebooks():
    assert "00_cooperative_games_tutorial" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_one_parameters_cell_equal_to_the_params_file(name):
    tagged = [c for c in read(name).cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{name}: {len(tagged)} cells tagged 'parameters'"
    declared = notebook_parameters(name)
    assert declared[-1] == "out_dir"
    raw = yaml.safe_load((PARAMS / f"{name}.yaml").read_text())
    assert set(raw) - {"smoke", "suite"} == set(declared) - {"out_dir"}
    assert set(raw.get("smoke") or {}) <= set(declared) - {"out_dir"}
    check_params_in_sync(name)  # same values, not only the same keys
    resolve_params(name, smoke=True)  # smoke values of the types of the defaults
    for line in tagged[0].source.splitlines():
        assert "#" in line, f"{name}: parameter without a comment: {line!r}"


@pytest.mark.parametrize("name", NAMES)
def test_committed_without_outputs(name):
    nb = read(name)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{name}: cell {i} has outputs"
            assert cell.execution_count is None, f"{name}: cell {i} has an execution count"
    assert nb.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("name", NAMES)
def test_skeleton(name):
    cells = read(name).cells
    assert cells[0].cell_type == "markdown" and cells[0].source.startswith("# ")
    assert cells[-1].cell_type == "markdown" and "What this shows" in cells[-1].source
    for i, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        lines = cell.source.splitlines()
        assert len(lines) <= MAX_LINES, f"{name}: cell {i} has {len(lines)} lines"
        assert max(map(len, lines)) <= MAX_COLUMNS, f"{name}: cell {i} is wider than {MAX_COLUMNS} columns"
        assert "plt.savefig" not in cell.source and "sys.path" not in cell.source and "%pip" not in cell.source
        if i > 1:
            assert cells[i - 1].cell_type == "markdown" or cells[i - 2].cell_type == "markdown", (
                f"{name}: cells {i - 1} and {i} are code cells with no markdown before them"
            )


def test_no_function_or_class_defined_in_two_notebooks():
    where = defaultdict(set)
    for name in NAMES:
        for cell in code_cells(name):
            source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    where[node.name].add(name)
    twice = {k: sorted(v) for k, v in where.items() if len(v) > 1}
    assert not twice, f"move these into scp (style guide section 4): {twice}"


# ------------------------------------------------------------------------------------------------ execution


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_and_saves_its_figures(name, smoke_run, request):
    if request.config.getoption("dist", "no") == "loadgroup" or request.config.getoption("loadgroup", False):
        # every test of one notebook on one worker, so the notebook runs once per session (tests/conftest.py)
        assert request.node.nodeid.endswith(f"@{name}"), f"xdist did not group {request.node.nodeid}"
    executed, out = smoke_run(name)
    pdfs = sorted((out / "figures" / name).glob("*.pdf"))
    assert pdfs, f"{name} saved no figure under {out / 'figures' / name}"
    assert all(p.with_suffix(".png").is_file() for p in pdfs)
    assert {p.parent for p in (out / "figures").rglob("*.pdf")} == {out / "figures" / name}
    assert read_records(executed), f"{name} recorded no value"
    # run.finish(): records.json holds what the notebook recorded; provenance.json what it read, and every read
    # is declared in the suite: section of params/NAME.yaml (the smoke run trains its own models)
    results = out / "results" / name
    assert json.loads((results / "records.json").read_text()) == read_records(executed)
    prov = read_provenance(name, out / "results")
    assert prov["inputs"] == {"notebook": notebook_digest(name), "code": code_digests(name)}
    assert isinstance(prov["git"]["dirty"], bool) and prov["git"]["commit"]
    assert uncovered_reads(declared(name), prov) == []
    cells = nbformat.read(str(executed), as_version=4).cells
    outputs = [o for cell in cells if cell.cell_type == "code" for o in cell.outputs]
    shown = [str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs]
    assert not any("TqdmWarning" in text for text in shown), f"{name}: tqdm found no ipywidgets (a pink warning)"
    assert not any("PosixPath(" in text for text in shown), f"{name}: a cell shows a list of paths"


def test_00_cooperative_games_tutorial(smoke_run):
    executed, out = smoke_run("00_cooperative_games_tutorial")
    r = read_records(executed)
    # identities
    assert r["glove_shapley"] == pytest.approx([2 / 3, 1 / 6, 1 / 6], abs=1e-12)
    assert r["majority_shapley"] == pytest.approx([7 / 12, 3 / 12, 1 / 12, 1 / 12], abs=1e-12)
    assert r["max_abs_exact_vs_by_hand"] < 1e-12 and r["max_abs_exact_vs_shapiq"] < 1e-12
    assert r["efficiency_error"] < 1e-12 and r["max_axiom_violation"] < 1e-12
    assert r["loo_per_sentence"] == [0.0, 0.0, 0.0, 0.0]  # copy, copy, partial, distractor
    assert r["shapley_per_sentence"] == pytest.approx([0.45, 0.45, 0.1, 0.0], abs=1e-12)
    assert r["glove_least_core_epsilon"] == pytest.approx(0.0, abs=1e-9)
    assert r["majority_least_core_epsilon"] == pytest.approx(1 / 3, abs=1e-9)
    assert r["max_abs_shapley_from_dividends"] < 1e-12
    # directions the figure claims
    assert r["mc_error_at_max_budget"] < r["mc_error_at_min_budget"]
    assert r["fraction_inside_bound"] == 1.0
    assert r["mc_error_at_max_budget"] < r["bound_at_max_budget"]
    # values from the reference smoke run (n = 6, M in {10, 100}, 10 repeats, seed 0)
    assert r["mc_error_at_min_budget"] == pytest.approx(0.199, abs=0.02)
    assert r["mc_error_at_max_budget"] == pytest.approx(0.065, abs=0.01)
    stems = {p.stem for p in (out / "figures" / "00_cooperative_games_tutorial").glob("*.pdf")}
    assert stems == {"mc_error_vs_permutations", "loo_vs_shapley_duplicates", "core_and_least_core"}
    tables = {p.name for p in (out / "results" / "00_cooperative_games_tutorial").iterdir()}
    assert {"small_games.csv", "small_games.json", "axioms.csv", "core_and_least_core.json"} <= tables
