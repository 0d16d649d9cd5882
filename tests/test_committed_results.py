"""The committed results are valid by their content (scp.suite.graph.landing_problems): each notebook's results folder
was made from a clean tree at a commit in HEAD's history, its tables name its run, and a notebook that is up to date
read the trained models its producers' runs recorded.  Results of different commits stand side by side; staleness
is a status that README's suite line names, not a failure."""

import pytest

from scp.suite.gallery import staleness_line
from scp.suite.graph import declared, landing_problems, read_provenance, status, uncovered_reads
from scp.suite.runner import ROOT, notebook_names

NAMES = notebook_names()


def test_the_committed_results_stand_by_their_content():
    assert landing_problems() == []


@pytest.mark.parametrize("name", NAMES)
def test_each_run_lists_what_it_read_and_only_what_it_declares(name):
    prov = read_provenance(name)
    decl = declared(name)
    shown = {e["path"].split("/")[1] for e in prov["data_files"]}
    assert shown == {d.split("/")[0] for d in decl.data}, f"{name} read {shown}, declares {decl.data}"
    assert {e["path"] for e in prov["models"] if e["path"].startswith("models/")} == set(decl.models)
    assert all(len(e["sha256"]) == 64 and e["bytes"] > 0 for e in prov["data_files"] + prov["models"])
    assert prov["versions"]["scp"] and prov["versions"]["numpy"] and prov["wall_time_s"] > 0
    others = {n: read_provenance(n) for n in NAMES if n != name}
    if status([name])[name]:  # a stale run may have read trained runs whose producers' runs were replaced since
        return
    assert uncovered_reads(decl, prov, others) == []


def test_the_readme_names_what_is_stale():
    """Staleness is a status: README's suite line says which notebooks are stale and why (``test_suite.py`` keeps
    that line equal to ``--status``), so it is never silent."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert staleness_line(status()) in readme
