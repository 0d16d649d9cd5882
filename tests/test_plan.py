"""scp.experiments.plan says every model a notebook trains: the run folders of the committed full runs' provenance,
the configs of the functions the notebooks call with their smoke parameters, and the text of the cells whose configs
it repeats (no notebook is run here; tests/test_nb_*.py also check the smoke runs they make, see
:func:`smoke_plan_problems`)."""

import dataclasses
import json
import re
from pathlib import Path

import pytest

from scp.errors import InputError
from scp.experiments import interaction as ia
from scp.experiments import plan
from scp.experiments.embedder_ablation import TFIDF, tfidf_config_name
from scp.experiments.reranking import per_dataset_config
from scp.models.config import config_from_preset
from scp.suite.sources import resolve_params
from scp.training.runs import run_name

ROOT = Path(__file__).resolve().parents[1]
RUN = re.compile(r"(?:^|/)runs/models/([^/]+)/")
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TRAINING = sorted(plan.PLANS)


def provenance_runs(prov: dict) -> set[str]:
    """The ``runs/models/<run>`` folders a run's provenance names, read (``models``) or written."""
    entries = [*prov.get("models", ()), *prov.get("models_written", ())]
    return {m.group(1) for e in entries if (m := RUN.search(e["path"]))}


def trained_outside(name: str, params: dict) -> set[str]:
    """Runs the notebook may write without train_or_load: 06's TF-IDF model, and its hub embedders' where the hub
    is reachable."""
    if name != "06_embedder_ablation":
        return set()
    overrides = {"seed": params["seed"], **params["train_overrides"]}
    names = [tfidf_config_name(params["tfidf_dim"]) if e == TFIDF else e for e in params["embedders"]]
    return {
        run_name(config_from_preset(params["preset"], embedder=e, **overrides))
        for e in names
        if e.startswith("tfidf-svd/") or e in plan.HUB_EMBEDDERS or "/" in e
    }


def plan_problems(name: str, params: dict, prov: dict, chosen=None) -> list[str]:
    """What differs between the plan and the run folders a run's provenance names ([] when none)."""
    planned = {run_name(c) for c in plan.trained_configs(name, params, **({"chosen": chosen} if chosen else {}))}
    ran = provenance_runs(prov)
    problems = [f"{name}: planned, not in its provenance: {r}" for r in sorted(planned - ran)]
    problems += [
        f"{name}: in its provenance, not planned: {r}" for r in sorted(ran - planned - trained_outside(name, params))
    ]
    return problems


def smoke_plan_problems(name: str, executed: Path, out: Path) -> list[str]:
    """For tests/test_nb_*.py, on the smoke run they made: its provenance's run folders are the plan's (a fresh
    folder of runs, so each was trained by this notebook through train_or_load, or is one of
    :func:`trained_outside`)."""
    from scp.suite.notebook import read_records

    prov = json.loads((out / "results" / name / "provenance.json").read_text())
    chosen = read_records(executed).get("chosen_variant") if name == "13_interaction_aware" else None
    return plan_problems(name, resolve_params(name, smoke=True), prov, chosen)


# ------------------------------------------------------------------------------ against the committed full runs


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_plan_is_what_the_committed_full_run_trained_or_read(name):
    path = ROOT / "results" / name / "provenance.json"
    if not path.is_file():
        pytest.skip(f"no committed full run of {name}")
    prov = json.loads(path.read_text())
    chosen = None
    if name == "13_interaction_aware":
        # 13's committed run is marked stale (older code), but its configs are today's: with the variant it chose
        # (its records) the plan is exactly its run folders; the smoke test below checks 13 too
        chosen = json.loads((ROOT / "results" / name / "records.json").read_text())["chosen_variant"]
    assert plan_problems(name, resolve_params(name), prov, chosen) == []


def test_only_06_trains_outside_train_or_load_and_the_committed_06_did():
    name = "06_embedder_ablation"
    params = resolve_params(name)
    tfidf = run_name(
        config_from_preset(params["preset"], embedder=tfidf_config_name(params["tfidf_dim"]), seed=params["seed"])
    )
    prov = json.loads((ROOT / "results" / name / "provenance.json").read_text())
    assert tfidf in provenance_runs(prov) and tfidf not in {run_name(c) for c in plan.trained_configs(name, params)}
    assert {run_name(c) for c in plan.trained_configs(name, params)} == provenance_runs(prov) - {tfidf}


def test_full_plans_share_the_per_dataset_models():
    runs = {n: {run_name(c) for c in plan.trained_configs(n, resolve_params(n))} for n in TRAINING}
    assert runs["09_compression_and_transfer"] == runs["02_reranking_auc"]  # 09 trains nothing 02 does not
    assert (
        runs["10_downstream_qa"] < runs["02_reranking_auc"]
        and runs["12_entropic_context_shaping"] < runs["10_downstream_qa"]
    )
    assert runs["04_mc_budget_and_bounds"] < runs["02_reranking_auc"]
    assert not runs["06_embedder_ablation"] & set().union(*(r for n, r in runs.items() if n != "06_embedder_ablation"))


# ------------------------------------------------------------------------------------------- smoke parameters


@pytest.mark.parametrize("name", TRAINING)
def test_smoke_plans_are_distinct_runs_paper_first_and_most_expensive_first(name):
    configs = plan.trained_configs(name, resolve_params(name, smoke=True))
    names = [run_name(c) for c in configs]
    assert configs and len(set(names)) == len(names)
    paper = [plan._is_paper(c) for c in configs]
    assert paper == sorted(paper, reverse=True)
    for group in (True, False):
        costs = [plan.training_cost(c) for c, p in zip(configs, paper) if p is group]
        assert costs == sorted(costs, reverse=True)
    assert plan.trained_configs(name, resolve_params(name, smoke=True)) == configs  # stable


def recorded(monkeypatch, module, attr="train_or_load"):
    """Replace ``module.attr`` (train_or_load) by a recorder that trains nothing; returns the recorded configs."""
    seen = []

    def fake(config, root, *args, **kwargs):
        seen.append(config)
        return Path(root) / run_name(config) / "best.safetensors"

    monkeypatch.setattr(module, attr, fake)
    return seen


@pytest.mark.parametrize(
    "name, keys",
    [
        ("02_reranking_auc", ["datasets"]),
        ("09_compression_and_transfer", ["train_datasets", "per_query_datasets"]),
        ("10_downstream_qa", ["datasets"]),
        ("12_entropic_context_shaping", ["datasets"]),
    ],
)
def test_smoke_plans_of_train_checkpoints_are_its_configs(name, keys, monkeypatch, tmp_path):
    from scp.experiments import reranking

    params = resolve_params(name, smoke=True)
    seen = recorded(monkeypatch, reranking)
    for key in keys:  # as the notebook calls it
        reranking.train_checkpoints(params[key], ("best", "pointwise"), tmp_path, params["train_overrides"])
    assert {run_name(c): c for c in seen} == {run_name(c): c for c in plan.trained_configs(name, params)}


def test_smoke_plan_of_06_is_train_with_embedders_configs(monkeypatch, tmp_path):
    from scp.experiments import embedder_ablation

    name = "06_embedder_ablation"
    params = resolve_params(name, smoke=True)
    seen = recorded(monkeypatch, embedder_ablation)
    monkeypatch.setattr(embedder_ablation, "training_seconds", lambda path: 0.0)
    monkeypatch.setattr(embedder_ablation, "read_checkpoint", lambda path, keys: {"n_params": 1})
    monkeypatch.setattr(embedder_ablation, "get_embedder", lambda name: None)
    monkeypatch.setattr(embedder_ablation, "CachedEmbedder", lambda embedder, cache_dir: None)
    local = [e for e in params["embedders"] if e != TFIDF and e not in plan.HUB_EMBEDDERS]
    assert set(params["embedders"]) - set(local) == {"tfidf", "bert-base"}
    for e in local:  # cell 6's call
        embedder_ablation.train_with_embedder(
            e,
            tmp_path,
            params["preset"],
            tfidf_dim=params["tfidf_dim"],
            seed=params["seed"],
            **params["train_overrides"],
        )
    assert seen == sorted(plan.trained_configs(name, params), key=lambda c: local.index(c.embedder))


def test_smoke_plan_of_13_is_interactions_configs(monkeypatch, tmp_path):
    import scp.models.factory
    import scp.training.runs

    name = "13_interaction_aware"
    params = resolve_params(name, smoke=True)
    seen = recorded(monkeypatch, scp.training.runs)
    monkeypatch.setattr(scp.models.factory, "load_checkpoint", lambda path: (None, None, None))
    variants, overrides = params["variants"], params["train_overrides"]
    ia.train_variants(variants, params["seeds"], tmp_path, **overrides)  # cell 4
    models = {run_name(c) for c in seen}
    seeds = params["curve_seeds"]

    def curve(config, curve_seeds, mixed):  # cell 20, as curve_rows trains it
        return {
            run_name(c)
            for s in curve_seeds
            for c in ia.curve_configs(dataclasses.replace(config, seed=s), params["curve_sizes"], s in mixed).values()
        }

    paper = curve(ia.config_from_preset("paper", **{**params["paper_overrides"], **overrides}), seeds["paper"], [])
    assert paper and models | paper == {run_name(c) for c in plan.trained_configs(name, params, chosen=())}
    for chosen in variants:  # whichever variant cell 12 chooses
        set_cfg, control_cfg = ia.variant_configs(chosen, **overrides)
        chosen_curves = curve(set_cfg, seeds["set"], seeds["mixed"]) | curve(control_cfg, seeds["set"], seeds["mixed"])
        assert models | paper | chosen_curves == {
            run_name(c) for c in plan.trained_configs(name, params, chosen=chosen)
        }
    everything = {run_name(c) for c in plan.trained_configs(name, params)}
    assert everything == set().union(
        *({run_name(c) for c in plan.trained_configs(name, params, chosen=v)} for v in variants)
    )


def test_chosen_variant_reads_the_validation_aucs(monkeypatch, tmp_path):
    import scp.models.factory

    name = "13_interaction_aware"
    params = resolve_params(name, smoke=True)
    assert plan.chosen_variant(params, tmp_path) is None  # nothing trained yet
    aucs = {}
    for i, v in enumerate(params["variants"]):
        for s in params["seeds"]:
            run = run_name(ia.variant_configs(v, s, **params["train_overrides"])[0])
            (tmp_path / run).mkdir()
            (tmp_path / run / "best.safetensors").write_bytes(b"")
            aucs[run] = 0.6 + 0.1 * i
    monkeypatch.setattr(
        scp.models.factory, "read_checkpoint", lambda p, keys: {"val_metrics": {"auc": aucs[p.parent.name]}}
    )
    assert plan.chosen_variant(params, tmp_path) == params["variants"][-1]


def normalized(text: str) -> str:
    return re.sub(r"\s+", "", text)


# the statements of the notebooks' cells that the planner repeats (plan._plan_01, _plan_04, _plan_07): a change
# there fails here, naming the planner to update
MIRRORED = {
    ("01_train_value_network", 4): (
        "common = dict(embedder=embedder, seed=seed, max_train_examples=max_train_examples,"
        " max_val_examples=max_val_examples)",
        "config = config_from_preset(preset, datasets=(dataset,), val_dataset=dataset, query_mode=query_mode,"
        " n_permutations=n_permutations, epochs=epochs, **common)",
        "checkpoint = train_or_load(config, models)",
    ),
    ("01_train_value_network", 9): (
        'recipes = {"paper network (3.03M)": config_from_preset("paper", unit_repr="title", epochs=5,'
        " n_permutations=20, datasets=(dataset,), **common),"
        ' "SCP": config_from_preset("best", datasets=(dataset,), val_dataset=dataset, **common),'
        ' "pointwise control": config_from_preset("pointwise", datasets=(dataset,), val_dataset=dataset, **common),}',
        "recipes = {k: dataclasses.replace(c, epochs=min(c.epochs, max_epochs)) for k, c in recipes.items()}",
        "paths = {k: train_or_load(c, models) for k, c in recipes.items()}",
    ),
    ("04_mc_budget_and_bounds", 6): (
        'config = config_from_preset("best", datasets=(train_dataset,), val_dataset=train_dataset, **train_overrides)',
        'paths = {"SCP, transferred": train_or_load(config, run.models_dir),',
    ),
    ("07_convex_deepsets", 4): (
        "shrink = dict(max_train_examples=max_train_examples, max_val_examples=max_val_examples)",
        'recipes = {"DeepSets": lambda d, s: config_from_preset("best", datasets=(d,), val_dataset=d, seed=s,'
        ' **shrink), "ConvexDeepSets": lambda d, s: config_from_preset("best", model="convex", skip=False,'
        " datasets=(d,), val_dataset=d, seed=s, **shrink),}",
        "configs = {(d, k, s): dataclasses.replace(make(d, s), epochs=min(make(d, s).epochs, max_epochs))"
        " for d in datasets for k, make in recipes.items() for s in train_seeds}",
        "paths = {key: train_or_load(c, run.models_dir) for key, c in configs.items()}",
    ),
}


@pytest.mark.parametrize("where", sorted(MIRRORED))
def test_the_cells_the_planner_repeats_are_unchanged(where):
    name, index = where
    cell = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["cells"][index]
    source = normalized("".join(cell["source"]))
    for statement in MIRRORED[where]:
        assert normalized(statement) in source, f"{name} cell {index} changed: update scp.experiments.plan"


def test_inline_smoke_plans():
    p = resolve_params("04_mc_budget_and_bounds", smoke=True)
    assert plan.trained_configs("04_mc_budget_and_bounds", p) == [
        per_dataset_config("best", p["datasets"][0], **p["train_overrides"])
    ]
    p = resolve_params("07_convex_deepsets", smoke=True)
    configs = plan.trained_configs("07_convex_deepsets", p)
    assert len(configs) == len(p["datasets"]) * 2 * len(p["train_seeds"])
    assert {(c.datasets[0], c.model, c.seed, c.epochs, c.max_train_examples) for c in configs} == {
        (d, m, s, 1, 24) for d in p["datasets"] for m in ("deepsets", "convex") for s in p["train_seeds"]
    }
    p = resolve_params("01_train_value_network", smoke=True)
    configs = plan.trained_configs("01_train_value_network", p)
    assert [c.model for c in configs] == ["deepsets", "deepsets", "pointwise"] and plan._is_paper(configs[0])
    assert all(c.epochs == 1 and c.max_train_examples == 24 and c.max_val_examples == 8 for c in configs)


# ------------------------------------------------------------------------------------------------ bad input


def test_notebooks_that_train_nothing_plan_nothing():
    assert set(plan.PLANS) | set(plan.NO_TRAINING) == set(NOTEBOOKS)
    for name in plan.NO_TRAINING:
        assert plan.trained_configs(name, resolve_params(name)) == []


def test_a_bad_name_or_setting_is_an_input_error():
    with pytest.raises(InputError, match="unknown notebook 'nope'.*01_train_value_network.*13_interaction_aware"):
        plan.trained_configs("nope", {})
    with pytest.raises(InputError, match="lack 'datasets'"):
        plan.trained_configs("02_reranking_auc", {"train_overrides": {}})
    with pytest.raises(InputError, match="13_interaction_aware only"):
        plan.trained_configs("02_reranking_auc", resolve_params("02_reranking_auc"), chosen="deepsets")
    with pytest.raises(InputError, match="unknown training setting"):
        plan.trained_configs("02_reranking_auc", {**resolve_params("02_reranking_auc"), "train_overrides": {"x": 1}})


def test_smoke_plan_problems_reads_a_runs_provenance(tmp_path):
    name = "02_reranking_auc"
    runs = sorted(run_name(c) for c in plan.trained_configs(name, resolve_params(name, smoke=True)))

    def problems(names):
        entries = [{"path": f"runs/models/{r}/best.safetensors", "sha256": "0"} for r in names]
        (tmp_path / "results" / name).mkdir(parents=True, exist_ok=True)
        (tmp_path / "results" / name / "provenance.json").write_text(json.dumps({"models_written": entries}))
        return smoke_plan_problems(name, tmp_path / "unused.ipynb", tmp_path)

    assert problems(runs) == []
    assert problems(runs[1:]) == [f"{name}: planned, not in its provenance: {runs[0]}"]
    assert problems([*runs, "hotpotqa-deepsets-0000000000"]) == [
        f"{name}: in its provenance, not planned: hotpotqa-deepsets-0000000000"
    ]
