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
    for name, seconds in (("00_cooperative_games_tutorial", 15.0), ("01_train_value_network", 2323.6)):
        nb = nbformat.v4.new_notebook()
        nb.metadata["papermill"] = {"duration": seconds}
        nbformat.write(nb, clone / "runs" / f"{name}.ipynb")
    nbformat.write(nbformat.v4.new_notebook(), clone / "runs" / "scratch.ipynb")  # not a suite notebook
    assert suite.run_durations(clone / "runs")["01_train_value_network"] == 2323.6
    root = tmp_path / "root"
    path = suite.record_cold_run(clone, root, note="two shared cores")
    record = json.loads(path.read_text())
    assert record["notebooks"] == {"00_cooperative_games_tutorial": 15.0, "01_train_value_network": 2323.6}
    assert record["total_s"] == pytest.approx(2338.6) and record["note"] == "two shared cores"
    assert suite.cold_run_time("01_train_value_network", root) == 2323.6
    assert suite.cold_run_time("02_reranking_auc", root) is None
    with pytest.raises(ValueError, match="no executed notebook"):
        suite.record_cold_run(tmp_path / "empty", root)
