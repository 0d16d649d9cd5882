"""The committed results are clean runs: every results folder of a notebook made from a clean tree at the commit its
provenance names, the up-to-date ones in one run, with the data files and models it read (scp.suite.notebook
provenance, scp.suite.graph)."""

import json

import pytest

from scp.suite.gallery import CODE_REASONS, staleness_line
from scp.suite.graph import declared, read_provenance, status, uncovered_reads
from scp.suite.runner import ROOT, notebook_names

NAMES = notebook_names()


def _provenances():
    return {n: read_provenance(n) for n in NAMES}


def test_one_run_and_a_clean_tree_across_the_up_to_date_suite():
    """Every results folder was made from a clean tree, and its tables name its own run.  The notebooks that are up
    to date come from one run (one commit), so the trained runs they share (``after``) are the same models; results
    of an earlier run are stale, and the next test allows that only because code changed, which README says."""
    provs = _provenances()
    missing = [n for n, p in provs.items() if p is None]
    assert not missing, f"no results/NAME/provenance.json for {missing}: run them (scp run all)"
    assert all(p["git"]["dirty"] is False for p in provs.values())
    for name in NAMES:  # every table's JSON names its notebook's run
        for path in sorted((ROOT / "results" / name).glob("*.json")):
            if path.name in ("records.json", "provenance.json"):
                continue
            git = json.loads(path.read_text())["provenance"]["git"]
            assert git["commit"] == provs[name]["git"]["commit"] and git["dirty"] is False, path
    current = status()
    runs = {provs[n]["git"]["commit"] for n, why in current.items() if not why}
    assert len(runs) <= 1, f"the up-to-date results come from several commits: {runs}"


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
    assert uncovered_reads(decl, prov, others) == []


def test_stale_only_because_code_changed_and_the_readme_says_so():
    """The committed results are what the committed parameters and inputs give, and their outputs are the files
    the run wrote.  The one staleness allowed is code changed after the run (the notebook's code cells or the
    ``scp`` modules it imports; markdown is no input), and then README's suite table says how many notebooks it
    leaves stale (``test_suite.py`` keeps that line equal to ``--status``), so it is never silent."""
    stale = {n: why for n, why in status().items() if why}
    other = {n: [r for r in why if not r.startswith((*CODE_REASONS, "it comes after "))] for n, why in stale.items()}
    assert not any(other.values()), other
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert staleness_line(status()) in readme
