"""The model store (scp.suite.model_store): trained runs kept by their lineage outside the work tree, trained once
by single-thread workers, materialized into runs/models where train_or_load only loads them; and the runner's
training stage that fills it before any notebook starts."""

import json
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import pytest
import torch

from scp.lineage import sha256
from scp.models.config import config_from_preset
from scp.models.factory import read_checkpoint
from scp.suite import model_store, runner
from scp.training.runs import run, run_name, train_or_load
from tests.test_incremental import checkout, commit, git  # noqa: F401 - the fixture and its helpers
from tests.test_runner import write_notebook

TINY = dict(epochs=1, max_train_examples=12, max_val_examples=4, hidden=16, latent=8)


def tiny(preset="best", **extra):
    return config_from_preset(preset, datasets=("hotpotqa",), val_dataset="hotpotqa", **{**TINY, **extra})


def weights(path):
    from safetensors.torch import load_file

    return load_file(str(path))


def test_a_model_is_trained_once_by_its_lineage_and_then_only_loaded(data_dir, tmp_path):
    store = tmp_path / "store"
    configs = [tiny(), tiny("pointwise"), tiny()]  # the same training under two names is one entry
    planned = model_store.entries(configs, store)
    assert len(planned) == 2 and len({e.key for e in planned}) == 2
    first = model_store.train_missing(planned, jobs=2)
    assert (first.planned, first.hits, first.trained) == (2, 0, 2)
    again = model_store.train_missing(model_store.entries(configs, store), jobs=2)
    assert (again.hits, again.trained) == (2, 0)  # a hit needs no provenance: the key is the lineage
    for entry in planned:
        record = json.loads((entry.path / model_store.LINEAGE_FILE).read_text())
        assert record["key"] == entry.key == model_store.key_of(record["lineage"])
        assert record["lineage"]["threads"] == 1 and record["lineage"]["torch"] == torch.__version__
        (shown,) = record["lineage"]["data_files"]
        assert shown.startswith("$SCP_DATA_DIR/hotpotqa/") and len(record["lineage"]["data_files"][shown]) == 64
        assert record["best_sha256"] == sha256(entry.path / "best.safetensors")
    # materialized into a checkout's runs/models: train_or_load finds it finished and loads it, training nothing
    runs_dir = tmp_path / "runs"
    folder = model_store.materialize(planned[0], runs_dir)
    assert folder.name == run_name(planned[0].config)
    mtime = (folder / "best.safetensors").stat().st_mtime_ns
    assert train_or_load(planned[0].config, runs_dir / "models") == folder / "best.safetensors"
    assert (folder / "best.safetensors").stat().st_mtime_ns == mtime
    assert model_store.materialize(planned[0], runs_dir) == folder  # already there: kept
    # the stage's single-thread training gives the weights a one-thread training gives: the same config trained in a
    # fresh process whose torch starts on one thread (the stage worker's set-up; pytest's own torch, started on more
    # threads outside xdist and set to one afterwards, trained other last bits)
    with ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=model_store._one_thread) as pool:
        own = pool.submit(run, planned[0].config, tmp_path / "own", progress=False).result().best_path
    mine, stored = weights(own), weights(planned[0].path / "best.safetensors")
    assert mine.keys() == stored.keys() and all(torch.equal(mine[k], stored[k]) for k in mine)
    assert read_checkpoint(own, ("epoch",))["epoch"] == 1


def test_the_key_follows_every_part_of_the_lineage(data_dir, tmp_path, monkeypatch):
    base = model_store.entries([tiny()], tmp_path)[0]
    assert model_store.entries([tiny(seed=1)], tmp_path)[0].key != base.key
    assert (
        model_store.entries([tiny(max_train_examples=10)], tmp_path)[0].lineage["train_ids"]
        != base.lineage["train_ids"]
    )
    record = dict(base.lineage, embeddings={**base.lineage["embeddings"], "sha256": "0" * 64})
    assert model_store.key_of(record) != base.key  # other vectors for the same texts: another model
    monkeypatch.setattr(model_store, "training_code", lambda: "1" * 64)
    assert model_store.entries([tiny()], tmp_path)[0].key != base.key  # a change to the training code path
    with pytest.raises(Exception, match="at least one worker"):
        model_store.train_missing([], jobs=0)


def test_the_training_code_path_is_what_training_imports_not_the_whole_package():
    from scp.suite.graph import SCP_SOURCE, _closure

    modules = _closure(model_store.TRAINING_ROOTS, SCP_SOURCE)
    assert {"scp.training.loop", "scp.training.runs", "scp.data.features", "scp.models.value_net"} <= modules
    assert not modules & {"scp.suite.model_store", "scp.suite.runner", "scp.llm.readers", "scp.experiments.niah"}


PLANNED_NOTEBOOK = (
    "from scp.suite import record, start\nfrom scp.models.config import config_from_preset\n"
    "from scp.training.runs import train_or_load\nfrom scp.lineage import sha256\nrun = start('01_a', globals())",
    "config = config_from_preset('best', datasets=('hotpotqa',), val_dataset='hotpotqa', epochs=1,"
    " max_train_examples=12, max_val_examples=4, hidden=16, latent=8)\n"
    "path = train_or_load(config, run.models_dir)\nfrom scp.models.factory import load_checkpoint\n"
    "load_checkpoint(path)\nrecord('sha', sha256(path))\nrun.finish()",
)


def test_scp_run_trains_the_planned_models_first_and_the_notebook_only_loads(checkout, data_dir, tmp_path):  # noqa: F811
    write_notebook(checkout / "notebooks" / "01_a.ipynb", "n = 2  # size\nout_dir = None", *PLANNED_NOTEBOOK)
    (checkout / "params" / "01_a.yaml").write_text("n: 2\nsmoke:\n  n: 1\nsuite:\n  data: [hotpotqa]\n")
    commit(checkout, "01_a trains one model")
    store = tmp_path / "store"
    lines = []
    runner.run("01_a", echo=lambda *a, **k: lines.append(" ".join(map(str, a))), store=store, planner=_plan)
    assert any("1 models planned, 0 found in the store, 1 trained;" in line for line in lines), lines
    prov = json.loads((checkout / "results" / "01_a" / "provenance.json").read_text())
    assert prov["models_written"] == []  # the notebook loaded what the stage trained
    (read,) = [e for e in prov["models"] if e["path"].startswith("runs/models/")]
    entry = prov["store"][read["path"]]
    recorded = json.loads((checkout / "results" / "01_a" / "records.json").read_text())["sha"]
    assert entry["sha256"] == read["sha256"] == recorded
    assert (store / entry["key"] / "best.safetensors").is_file()
    commit(checkout, "results")
    lines.clear()
    runner.run("01_a", echo=lambda *a, **k: lines.append(" ".join(map(str, a))), store=store, planner=_plan, force=True)
    assert any("1 models planned, 1 found in the store, 0 trained;" in line for line in lines), lines


def _plan(name, params, models_root):
    return [tiny()] if name == "01_a" else []


def test_a_run_records_seconds_per_phase_summing_to_its_wall_time(checkout, data_dir, tmp_path):  # noqa: F811
    """The kernel times embedding and training (scp.suite.phases) without a name in the notebook's namespace."""
    write_notebook(
        checkout / "notebooks" / "01_a.ipynb",
        "n = 2  # size\nout_dir = None",
        *PLANNED_NOTEBOOK[:1],
        "record('names', sorted(k for k in globals() if not k.startswith('_') and 'phase' in k))",
        PLANNED_NOTEBOOK[1],
    )
    (checkout / "params" / "01_a.yaml").write_text("n: 2\nsmoke:\n  n: 1\nsuite:\n  data: [hotpotqa]\n")
    commit(checkout, "01_a trains one model itself")
    runner.run("01_a", echo=None)
    prov = json.loads((checkout / "results" / "01_a" / "provenance.json").read_text())
    phases = prov["phases"]
    assert set(phases) == {"embedding", "training", "scoring", "reader", "other"}
    assert abs(sum(phases.values()) - prov["wall_time_s"]) < 0.01 and phases["training"] > 0
    assert (
        phases["reader"] == 0
        and json.loads((checkout / "results" / "01_a" / "records.json").read_text())["names"] == []
    )


def test_phases_are_exclusive_and_sum_to_the_wall_time(tmp_path):
    from scp.suite import phases

    assert phases.phases({"embedding": 2.0, "training": 5.0}, 10.0) == {
        "embedding": 2.0,
        "training": 5.0,
        "scoring": 0.0,
        "reader": 0.0,
        "other": 3.0,
    }
    over = phases.phases({"training": 12.0, "embedding": 4.0}, 8.0)  # a clock stopped before the last call
    assert over["training"] == 6.0 and over["embedding"] == 2.0 and over["other"] == 0.0
    assert phases.read_totals(tmp_path / "none.json") == {}


def test_an_inner_phase_pauses_the_outer_one(tmp_path, monkeypatch):
    import time

    from scp.suite import phases

    monkeypatch.setattr(phases, "_file", tmp_path / "t.json")
    monkeypatch.setattr(phases, "_totals", {})
    embed = phases._wrap("embedding", lambda: time.sleep(0.2))
    train = phases._wrap("training", lambda: (time.sleep(0.1), embed(), time.sleep(0.1)))
    train()
    totals = phases.read_totals(tmp_path / "t.json")
    assert 0.19 < totals["embedding"] < 0.3 and 0.19 < totals["training"] < 0.3


def test_the_stage_trains_in_the_planners_priority_paper_first_then_longest(data_dir, tmp_path):
    from scp.experiments.plan import stage_priority

    paper = config_from_preset("paper", datasets=("hotpotqa",), val_dataset="hotpotqa", epochs=1, max_train_examples=12)
    small, long = tiny(), tiny(epochs=3)
    given = [small, long, paper]
    assert [e.config for e in model_store.entries(given, tmp_path)] == given  # no priority: the order given
    ordered = [e.config for e in model_store.entries(given, tmp_path, stage_priority)]
    assert ordered == [paper, long, small]
    assert [e.config for e in model_store.entries([small, small], tmp_path)] == [small]  # one lineage, one entry
