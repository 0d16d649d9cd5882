"""The gallery and the README's notebook table are generated from what is on disk, and are up to date."""

import re

from scp.suite import gallery as suite
from scp.suite.runner import notebook_names


def test_every_notebook_is_listed_and_every_figure_has_a_caption():
    assert set(notebook_names()) <= set(suite.NOTEBOOKS)
    gallery = suite.gallery()  # raises on a figure without a caption
    for name in notebook_names():
        for png in suite.figures_of(name):
            assert f"({name}/{png.name})" in gallery


def test_committed_gallery_and_readme_table_are_current():
    assert (suite.ROOT / "figures" / "README.md").read_text() == suite.gallery() + "\n"
    readme = (suite.ROOT / "README.md").read_text()
    table = re.search(r"<!-- suite-table -->\n(.*?)<!-- /suite-table -->", readme, re.S).group(1)
    assert table == suite.readme_table() + "\n"
    timing = re.search(r"<!-- figures-time -->\n(.*?)<!-- /figures-time -->", readme, re.S).group(1)
    assert timing == suite.figures_time() + "\n"


def test_every_folder_of_figures_is_in_the_gallery():
    gallery = suite.gallery()
    folders = {png.parent.name for png in (suite.ROOT / "figures").glob("*/*.png")}
    assert "bench" in folders and folders <= set(suite.NOTEBOOKS) | set(suite.OTHER_FIGURES)
    for png in (suite.ROOT / "figures").glob("*/*.png"):
        assert f"({png.parent.name}/{png.name})" in gallery, f"{png} is not in figures/README.md"


def test_wall_time_is_read_from_the_provenance(tmp_path):
    (tmp_path / "results" / "x").mkdir(parents=True)
    (tmp_path / "results" / "x" / "a.json").write_text('{"provenance": {"wall_time_s": 12.5}}')
    (tmp_path / "results" / "x" / "b.json").write_text('{"provenance": {"wall_time_s": 80.0}}')
    assert suite.wall_time("x", tmp_path) == 80.0 and suite.wall_time("y", tmp_path) is None
    # run.finish() writes results/NAME/provenance.json: its wall_time_s is the whole run's, and it wins
    (tmp_path / "results" / "x" / "provenance.json").write_text('{"wall_time_s": 95.5, "notebook": "x"}')
    assert suite.wall_time("x", tmp_path) == 95.5


def test_cold_run_times_come_from_the_executed_notebooks(tmp_path):
    import json

    import nbformat
    import pytest

    clone = tmp_path / "clone"
    (clone / "runs").mkdir(parents=True)
    spans = {  # 00 and 01 side by side, 02 after a pause that must not count
        "00_cooperative_games_tutorial": ("2026-01-01T10:00:00+00:00", "2026-01-01T10:00:15+00:00", 15.0),
        "01_train_value_network": ("2026-01-01T10:00:05+00:00", "2026-01-01T10:39:00+00:00", 2335.0),
        "02_reranking_auc": ("2026-01-01T12:00:00+00:00", "2026-01-01T12:01:00+00:00", 60.0),
    }
    for name, (start, end, seconds) in spans.items():
        nb = nbformat.v4.new_notebook()
        nb.metadata["papermill"] = {"duration": seconds, "start_time": start, "end_time": end}
        nbformat.write(nb, clone / "runs" / f"{name}.ipynb")
    nbformat.write(nbformat.v4.new_notebook(), clone / "runs" / "scratch.ipynb")  # not a suite notebook
    for name, commit in (("00_cooperative_games_tutorial", "a" * 40), ("01_train_value_network", "a" * 40)):
        (clone / "results" / name).mkdir(parents=True)
        (clone / "results" / name / "provenance.json").write_text(
            json.dumps({"git": {"commit": commit, "dirty": False}})
        )
    (clone / "runs" / "suite_run.json").write_text(json.dumps({"ran": [], "up_to_date": list(spans), "wall_s": 41.5}))
    assert suite.run_durations(clone / "runs")["01_train_value_network"] == 2335.0
    assert suite.busy_seconds(clone / "runs", spans) == pytest.approx(39 * 60 + 60)
    root = tmp_path / "root"
    path = suite.record_cold_run(clone, root, note="two shared cores")
    record = json.loads(path.read_text())
    assert record["notebooks"] == {name: seconds for name, (_, _, seconds) in spans.items()}
    assert record["total_s"] == pytest.approx(2410.0) and record["note"] == "two shared cores"
    assert record["busy_s"] == pytest.approx(2400.0) and record["results_commits"] == ["a" * 40]
    assert suite.cold_run(root)["last_run"]["wall_s"] == 41.5
    (root / "notebooks").mkdir()
    (root / "notebooks" / "00_cooperative_games_tutorial.ipynb").write_text("{}")
    table = suite.readme_table(root)
    assert "| not run yet |" in table and "Results made at commit `aaaaaaa`: 3 notebooks, 40.2 min" in table
    assert "busy 40.0 min of wall clock" in table and "ran no notebook (3 up to date; `scp run all` took 42 s)" in table
    assert "That `make figures` took" not in table  # no whole-run wall clock was recorded
    stages = {"training": {"embedding_s": 600.0, "stage_s": 1800.0, "trained": 97}}
    (clone / "runs" / "stages.json").write_text(json.dumps(stages))
    suite.record_cold_run(clone, root, note="two shared cores", wall_s=4800.0)
    assert (
        "The cold `make figures` took 80.0 min of wall clock on " in suite.readme_table(root)
        and "set-up and planning 10.0 min, the embedding stage 10.0 min, the training stage 20.0 min (97 models "
        "trained), the notebooks 40.0 min."
        in suite.readme_table(root)
    )
    record["results_commits"] = ["b" * 40 + " (dirty)"]  # a dirty tree stays visible in the README line
    record["wall_s"] = 4800.0
    path.write_text(json.dumps(record))
    assert "Results made at commit `bbbbbbb` (dirty): 3 notebooks" in suite.readme_table(root)
    assert "--status" not in suite.readme_table(root)  # another tree: no staleness line unless it is given
    stale = {"00_cooperative_games_tutorial": [], "01_train_value_network": ["code changed: scp.io"]}
    assert (
        "1 of 2 notebooks up to date; stale: `01_train_value_network` (code changed: scp.io). A stale notebook's"
        in suite.readme_table(root, stale)
    )
    every = suite.staleness_line({"00_cooperative_games_tutorial": ["code changed: scp.io", "input x changed"]})
    assert "0 of 1 notebooks up to date; stale: `00_cooperative_games_tutorial` (code changed: scp.io; input x" in every
    assert suite.staleness_line({"00_cooperative_games_tutorial": []}).endswith(
        "all 1 notebooks are up to date with their code, parameters and inputs."
    )
    models = [f"model changed: runs/models/m{i} is not the one 02's run wrote" for i in range(3)]
    line = suite.staleness_line({"00_cooperative_games_tutorial": ["parameters changed: seed", *models]})
    assert "(parameters changed: seed; model changed: 3 of them)" in line
    with pytest.raises(ValueError, match="no executed notebook"):
        suite.record_cold_run(tmp_path / "empty", root)
    # a later run with the store filled: its own record and line; it made the results the table names
    (clone / "runs" / "stages.json").write_text(json.dumps({"training": {"stage_s": 60.0, "trained": 0, "hits": 96}}))
    later = {"ran": list(spans), "up_to_date": [], "wall_s": 2700.0, "started_at": "2026-12-07T02:00:00+00:00"}
    (clone / "runs" / "suite_run.json").write_text(json.dumps(later))
    (clone / "results" / "00_cooperative_games_tutorial" / "provenance.json").write_text(
        json.dumps({"git": {"commit": "c" * 40, "dirty": False}})
    )
    suite.record_cold_run(clone, root, wall_s=2760.0, target=suite.FILLED_RUN)
    assert suite.cold_run(root)["results_commits"] == ["b" * 40 + " (dirty)"]  # the cold record stays
    table = suite.readme_table(root)
    assert (
        "The run with the store filled took 46.0 min" in table and "(0 models trained, 96 found in the store)" in table
    )
    assert "Results made at commit `aaaaaaa`, `ccccccc`: 3 notebooks" in table
    assert "reran 3 notebooks in 46.0 min (`results/suite/filled_store_run.json`)" in suite.figures_time(root)


def test_committed_readme_shipped_model_numbers_are_current():
    readme = (suite.ROOT / "README.md").read_text()
    section = re.search(r"<!-- shipped-model -->\n(.*?)<!-- /shipped-model -->", readme, re.S).group(1)
    assert section == suite.shipped_model_section() + "\n", "run python -m scp.suite.gallery"


def _shipped_inputs(root):
    """A tree holding copies of the committed card, notebook 13's records and the ablations, to change."""
    import shutil

    for rel in (
        suite.SHIPPED_CARD,
        *(suite.INTERACTION / f for f in ("records.json", "provenance.json", "variants.json")),
        "results/ablations/ablations.json",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(suite.ROOT / rel, root / rel)


def test_shipped_model_section_follows_the_cards_and_records(tmp_path):
    import json

    import pytest

    from scp.errors import InputError

    _shipped_inputs(tmp_path)
    card_path, records_path = tmp_path / suite.SHIPPED_CARD, tmp_path / suite.INTERACTION / "records.json"
    card, records = json.loads(card_path.read_text()), json.loads(records_path.read_text())
    variants_path = tmp_path / suite.INTERACTION / "variants.json"
    table = json.loads(variants_path.read_text())
    shipped = next(r for r in table["rows"] if r["variant"] == "deepsets+structure" and r["model"] == "set")
    shipped.update({"auc mean": 0.9612, "auc ci": [0.9501, 0.9733], "diff_auc mean": 0.011})
    shipped.update({"diff_auc ci": [0.0021, 0.0202], "diff_bridge_auc ci": [0.0013, 0.0304]})
    variants_path.write_text(json.dumps(table))
    records["chosen_variant"] = "deepsets+structure"
    records_path.write_text(json.dumps(records))
    text = suite.shipped_model_section(tmp_path)
    assert "| SCP, shipped (`structure`) | **0.961** [0.950, 0.973] |" in text  # bold: CI > 0
    assert "chose it again" in text and "chosen by the committed run |" not in text
    assert (
        "recipe beats its matched pointwise control: the paired difference over 3 seeds is +0.011 [+0.002, +0.020]"
        in text
    )
    assert "`deepsets+structure` (+0.011" in text  # now among the set models that beat their controls
    provenance_path = tmp_path / suite.INTERACTION / "provenance.json"
    provenance = json.loads(provenance_path.read_text())
    shipped_path = f"runs/models/{card['run']}/best.safetensors"
    provenance["models_written"] = [{"path": shipped_path, "sha256": card["sha256"]}]
    for read in provenance.get("models") or []:  # a run that read the recipe from the store read the same bytes
        if read.get("path") == shipped_path:
            read["sha256"] = card["sha256"]
    provenance_path.write_text(json.dumps(provenance))
    assert "Seed 0 of its `deepsets+structure` rows below is the shipped file." in suite.shipped_model_section(tmp_path)
    card["chosen_by"] = "by hand"
    card_path.write_text(json.dumps(card))
    with pytest.raises(InputError, match="chosen_by names no notebook 13 variant"):
        suite.shipped_model_section(tmp_path)


def test_the_readme_bolds_an_auc_only_where_a_paired_ci_separates_it_from_its_partner():
    from scp.suite.gallery import _separated

    def rows(low, high):
        return {("v", "set"): {"diff_auc ci": [low, high]}, ("v", "control"): {}}

    assert _separated(rows(0.001, 0.008), ("v", "set")) and not _separated(rows(0.001, 0.008), ("v", "control"))
    assert _separated(rows(-0.008, -0.001), ("v", "control")) and not _separated(rows(-0.008, -0.001), ("v", "set"))
    assert not any(_separated(rows(-0.007, 0.002), ("v", kind)) for kind in ("set", "control"))  # a tie: no bold
