"""The gallery and the README's notebook table are generated from what is on disk, and are up to date."""

import re

from scp import suite
from scp.runner import notebook_names


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


def test_wall_time_is_read_from_the_provenance(tmp_path):
    (tmp_path / "results" / "x").mkdir(parents=True)
    (tmp_path / "results" / "x" / "a.json").write_text('{"provenance": {"wall_time_s": 12.5}}')
    (tmp_path / "results" / "x" / "b.json").write_text('{"provenance": {"wall_time_s": 80.0}}')
    assert suite.wall_time("x", tmp_path) == 80.0 and suite.wall_time("y", tmp_path) is None
