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
    record["results_commits"] = ["b" * 40 + " (dirty)"]  # a dirty tree stays visible in the README line
    path.write_text(json.dumps(record))
    assert "Results made at commit `bbbbbbb` (dirty): 3 notebooks" in suite.readme_table(root)
    assert "--status" not in suite.readme_table(root)  # another tree: no staleness line unless it is given
    stale = {"00_cooperative_games_tutorial": [], "01_train_value_network": ["code changed: scp.io"]}
    assert "1 of 2 notebooks up to date; 1 stale because `scp` code they import changed" in suite.readme_table(
        root, stale
    )
    assert suite.staleness_line({"00_cooperative_games_tutorial": []}).endswith(
        "all 1 notebooks are up to date with their code, parameters and inputs."
    )
    line = suite.staleness_line({"00_cooperative_games_tutorial": ["parameters changed: seed"]})
    assert line.endswith("0 of 1 notebooks up to date; stale for other reasons: parameters changed.")
    with pytest.raises(ValueError, match="no executed notebook"):
        suite.record_cold_run(tmp_path / "empty", root)
