"""The book (``make book``): the executed copies it is built from are the committed runs', small; a smoke book of two
notebooks and every Markdown page builds offline and passes the browser check in headless Chromium (every page
loads, every image loads, math is typeset, every internal link resolves, no console error)."""

from __future__ import annotations

import copy
import json

import pytest

from scp.errors import InputError
from scp.paths import ROOT
from scp.suite import book
from scp.suite.browser import check_site

NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SMOKE = ["00_cooperative_games_tutorial", "08_landscape_of_context"]  # the tutorial, and a figure-heavy one


def executed(name: str) -> dict:
    return json.loads((ROOT / book.EXECUTED / f"{name}.json").read_text())


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_each_notebook_has_the_executed_copy_of_its_committed_run_and_it_is_small(name):
    path = ROOT / book.EXECUTED / f"{name}.json"
    assert path.is_file(), f"no {path.relative_to(ROOT)}: python -m scp.suite.book collect {name} after its run"
    assert path.stat().st_size <= book.MAX_COPY_BYTES
    nb = executed(name)
    book.check_copy(name, nb, ROOT)  # its recorded values are results/NAME/records.json, its start the run's
    images = [o for c in nb["cells"] for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert not images, "a saved figure is linked to figures/, not embedded"
    links = {
        o["data"]["text/markdown"].split("](../figures/", 1)[1].removesuffix(".png)")
        for c in nb["cells"]
        for o in c.get("outputs", [])
        if "text/markdown" in o.get("data", {})
    }
    committed = {f"{name}/{p.stem}" for p in (ROOT / "figures" / name).glob("*.png")}
    assert links == committed, f"{name}: the page links {sorted(links)}, figures/{name} holds {sorted(committed)}"


def test_a_copy_that_is_not_the_committed_run_is_refused():
    nb = executed("00_cooperative_games_tutorial")
    changed = copy.deepcopy(nb)
    for cell in changed["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {}).get(book.RECORD_MIME)
            if data:
                data[next(iter(data))] = "another value"
                break
        else:
            continue
        break
    with pytest.raises(InputError, match="recorded values differ from records.json"):
        book.check_copy("00_cooperative_games_tutorial", changed, ROOT)
    failed = copy.deepcopy(nb)
    failed["metadata"]["papermill"]["exception"] = True
    with pytest.raises(InputError, match="stopped on an error"):
        book.check_copy("00_cooperative_games_tutorial", failed, ROOT)
    late = copy.deepcopy(nb)
    late["metadata"]["papermill"]["start_time"] = "2031-01-01T00:00:00+00:00"
    with pytest.raises(InputError, match="not in the committed run"):
        book.check_copy("00_cooperative_games_tutorial", late, ROOT)


def test_a_page_whose_notebook_changed_keeps_its_runs_code_and_text_and_says_so(tmp_path):
    name = "00_cooperative_games_tutorial"
    (tmp_path / "notebooks").mkdir()
    source = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    (tmp_path / "notebooks" / f"{name}.ipynb").write_text(json.dumps(source))
    nb = executed(name)
    ran_markdown = [c["source"] for c in nb["cells"] if c["cell_type"] == "markdown"]
    same = copy.deepcopy(nb)
    assert book.current_text(name, same, tmp_path)  # the same code: today's markdown
    markdown = next(c for c in source["cells"] if c["cell_type"] == "markdown")
    markdown["source"] = "# A text fixed after the run"
    code = next(
        c for c in source["cells"] if c["cell_type"] == "code" and "parameters" not in c["metadata"].get("tags", [])
    )
    (tmp_path / "notebooks" / f"{name}.ipynb").write_text(json.dumps(source))
    fixed = copy.deepcopy(nb)
    assert book.current_text(name, fixed, tmp_path)
    assert "".join(next(c for c in fixed["cells"] if c["cell_type"] == "markdown")["source"]) == markdown["source"]
    code["source"] = "print('a new cell body')"
    (tmp_path / "notebooks" / f"{name}.ipynb").write_text(json.dumps(source))
    changed = copy.deepcopy(nb)
    assert not book.current_text(name, changed, tmp_path)  # other code: the run's own text stays
    assert [c["source"] for c in changed["cells"] if c["cell_type"] == "markdown"] == ran_markdown
    assert "Changed since this run" in book._changed_cell(name)["source"]


def test_slim_links_each_saved_figure_instead_of_embedding_it():
    nb = {
        "metadata": {},
        "cells": [
            {
                "cell_type": "code",
                "source": 'plot.save(fig, "05_shapley_vs_loo/recall_vs_permutations", out_dir)',
                "outputs": [
                    {"output_type": "display_data", "data": {"image/png": "iVBOR...", "text/plain": "<Figure>"}},
                    {"output_type": "execute_result", "data": {"text/plain": "Saved(...)"}},
                ],
            }
        ],
    }
    (cell,) = book.slim(nb, "05_shapley_vs_loo")["cells"]
    assert [o["data"] for o in cell["outputs"]] == [
        {"text/plain": "Saved(...)"},
        {"text/markdown": "![recall_vs_permutations](../figures/05_shapley_vs_loo/recall_vs_permutations.png)"},
    ]


@pytest.fixture(scope="module")
def smoke_site(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    return book.build(out, SMOKE), out


def test_the_smoke_book_builds_offline_and_passes_the_browser_check(smoke_site):
    html, out = smoke_site
    pages = sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html") if "_static" not in p.parts)
    for page in [f"notebooks/{n}.html" for n in SMOKE] + [p.replace(".md", ".html") for p in book.PAGES]:
        assert page in pages
    report = check_site(html, screenshots=["notebooks/00_cooperative_games_tutorial.html"], shots_dir=out / "shots")
    print(report.describe())
    assert report.ok, report.describe()
    assert report.pages >= len(SMOKE) + len(book.PAGES) and report.images > 0 and report.math > 50
    assert report.links > 50 and report.screenshots[0].stat().st_size > 10_000
    first = (html / "notebooks" / f"{SMOKE[0]}.html").read_text()
    assert "Provenance." in first and "commit" in first  # each page says which run made it


def test_the_browser_check_fails_on_a_broken_page(tmp_path):
    (tmp_path / "index.html").write_text(
        '<html><body><img src="missing.png"><a href="nowhere.html">x</a><a href="#no-such-id">y</a>'
        "<script>console.error('boom')</script></body></html>"
    )
    report = check_site(tmp_path)
    problems = "\n".join(report.problems)
    assert not report.ok
    for expected in ("image missing.png does not load", "link nowhere.html resolves to no file", "no-such-id", "boom"):
        assert expected in problems


def _fake_root(tmp_path, name: str):
    """A repository of one notebook: its source, its committed results and its executed copy."""
    root = tmp_path / "repo"
    for rel in (f"notebooks/{name}.ipynb", f"results/{name}/provenance.json", f"results/{name}/records.json"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes((ROOT / rel).read_bytes())
    (root / book.EXECUTED).mkdir(parents=True)
    return root, root / book.EXECUTED / f"{name}.json"


def _edited(nb: dict) -> dict:
    for out in (o for c in nb["cells"] for o in c.get("outputs", [])):
        data = out.get("data", {}).get(book.RECORD_MIME)
        if data:
            data[next(iter(data))] = "another value"
            return nb
    raise AssertionError("no recorded value in the executed copy")


BAD_COPIES = {  # how the executed copy is broken: (write it, words of the one line)
    "missing": (lambda copy, text: None, "no book/executed/"),
    "truncated": (lambda copy, text: copy.write_text(text[: len(text) // 2]), "book/executed/"),
    "100,000 levels deep": (lambda copy, text: copy.write_text("[" * 100_000 + "]" * 100_000), "deep"),
    "a symlink to a non-JSON file": (
        lambda copy, text: (copy.with_name("notes.txt").write_text("my notes"), copy.symlink_to("notes.txt")),
        "book/executed/",
    ),
    "edited": (
        lambda copy, text: copy.write_text(json.dumps(_edited(json.loads(text)))),
        "recorded values differ from records.json",
    ),
}


@pytest.mark.parametrize("case", BAD_COPIES)
def test_book_build_on_a_bad_executed_copy_is_one_line_and_exit_2(case, tmp_path, monkeypatch, capsys):
    name = "00_cooperative_games_tutorial"
    root, copy = _fake_root(tmp_path, name)
    write, words = BAD_COPIES[case]
    write(copy, (ROOT / book.EXECUTED / f"{name}.json").read_text())
    built = book.build
    monkeypatch.setattr(book, "build", lambda out, names: built(out, names, root=root))
    assert book.main(["build", "--out", str(tmp_path / "site"), "--only", name]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("python -m scp.suite.book build: error: ") and words in err, err


def test_book_check_with_no_site_and_an_unknown_notebook_are_one_line_from_the_command_line(tmp_path):
    import subprocess
    import sys

    for argv, words in [
        (["check", "--out", str(tmp_path / "no-site")], "no HTML pages under"),
        (["build", "--out", str(tmp_path / "site"), "--only", "99_nope"], "unknown notebook 99_nope"),
    ]:
        proc = subprocess.run(
            [sys.executable, "-m", "scp.suite.book", *argv], capture_output=True, text=True, cwd=ROOT, timeout=120
        )
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and words in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
