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
    assert "Changed since this run" in book._stale_cell(name, [], changed=True)["source"]


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
    assert "Provenance" in first and "commit" in first  # each page says which run made it


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


# ------------------------------------------------------------------------------------------- a book for readers


def test_the_browser_check_fails_on_what_a_reader_should_not_meet(tmp_path):
    long = "x = 1  # " + "a comment that runs on and on " * 12
    (tmp_path / "index.html").write_text(
        "<html><body><p>saved figures in /work/clone/runs/scratch/03_niah/figures/03_niah and /tmp/x/y.py</p>"
        '<div class="cell tag_parameters"><div class="cell_input"><pre>n = 10</pre></div></div>'
        '<div class="cell tag_injected-parameters"><div class="cell_input">'
        "<pre># Parameters\nn = 10\n</pre></div></div>"
        f'<div style="width: 300px"><pre style="overflow-x: auto">{long}</pre></div>'
        '<button class="search-button-field">Search</button><button class="search-button-field">Search</button>'
        '<article class="bd-article"><p>a page of the book with no provenance</p></article>'
        "</body></html>"
    )
    problems = "\n".join(check_site(tmp_path).problems)
    for expected in ("temporary or home paths", "parameter cells", "sideways", "2 search boxes", "no provenance"):
        assert expected in problems, problems
    fine = tmp_path / "fine"
    fine.mkdir()
    (fine / "favicon.ico").write_bytes(b"")  # what a page without an icon link asks for
    (fine / "index.html").write_text(
        "<html><body><p>the cache is ~/.cache/scp, and /tmp scripts; figures/03_niah</p>"
        '<div class="cell tag_parameters"><details><summary>Show the parameters</summary>'
        '<div class="cell_input"><pre>n = 10</pre></div></details></div>'
        f'<div style="width: 300px"><pre style="white-space: pre-wrap">{long}</pre></div>'
        '<button class="search-button-field">Search</button>'
        '<article class="bd-article"><div class="admonition scp-provenance">made by …</div></article></body></html>'
    )
    report = check_site(fine)
    assert report.ok, report.describe()


@pytest.mark.parametrize(
    ("text", "root", "expected"),
    [
        (
            "saved qa_by_method (pdf, png) in /work/regen/runs/scratch/10_downstream_qa/figures/10_downstream_qa",
            None,
            "saved qa_by_method (pdf, png) in figures/10_downstream_qa",
        ),
        ("out_dir = '/tmp/ab/runs/scratch/10_downstream_qa'", None, "out_dir = '.'"),
        ("/tmp/ipykernel_32685/3889522975.py:4: UserWarning: …", None, "[cell]:4: UserWarning: …"),
        (
            "/tmp/regen/scp/experiments/interaction.py:192: RuntimeWarning",
            "/tmp/regen",
            "scp/experiments/interaction.py:192: RuntimeWarning",
        ),
        ('File "/opt/venv/lib/python3.11/site-packages/torch/nn/x.py"', None, 'File "site-packages/torch/nn/x.py"'),
        ("read /root/.cache/scp/embeddings/a.npy", None, "read ~/.cache/scp/embeddings/a.npy"),
        ("wrote /tmp/tmpab12/cd/table.csv", None, "wrote …/table.csv"),
    ],
)
def test_outputs_name_paths_relative_to_the_repository(text, root, expected):
    assert (
        book.repository_paths(text, "10_downstream_qa" if "10_" in text else "13_interaction_aware", root) == expected
    )


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_no_page_of_a_notebook_shows_a_machine_path(name):
    from scp.suite.browser import MACHINE_PATH

    nb = book.relative_outputs(executed(name), name)
    shown = json.dumps([[c.get("outputs", []) for c in nb["cells"]], nb["metadata"]], ensure_ascii=False)
    run_root = book._run_root(executed(name))
    assert not MACHINE_PATH.findall(shown), MACHINE_PATH.findall(shown)[:3]
    assert run_root is None or run_root not in shown


def test_recorded_values_are_one_rounded_table():
    name = "10_downstream_qa"
    nb = executed(name)
    values = book._recorded(nb)
    book.tabulate_records(nb, name)
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    assert not [o for o in outputs if book.RECORD_MIME in o.get("data", {})]
    (table,) = [o["data"]["text/html"] for o in outputs if "scp-records" in o.get("data", {}).get("text/html", "")]
    assert table.count("<tr>") == 1 + len([k for k in values if not (k.endswith("_ci") and k[:-3] in values)])
    assert "0.09172161172161172" not in table and "<td>0.09172</td><td>[0.02667, 0.172]</td>" in table
    assert (
        book._rounded({"a": [0.123456, -2.5e-7], "b": None, "c": 123456.7}) == "a: [0.1235, −2.5e−07]; b: —; c: 123,457"
    )


def test_chapter_numbers_and_hidden_parameter_cells():
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": "# Title\n\n## 1 First\n```\n## 2 not a heading\n```"},
            {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "n = 1", "outputs": []},
            {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]}, "source": "n = 2", "outputs": []},
            {"cell_type": "markdown", "metadata": {}, "source": "## 2. Second\n## What this shows"},
        ]
    }
    nb["cells"][1]["outputs"] = [
        {"output_type": "execute_result", "data": {"text/plain": ["(None, None)"]}},
        {"output_type": "execute_result", "data": {"text/plain": ["(None, 2)"]}},
    ]
    book.number_headings(nb, 7)
    book.hide_parameters(nb)
    book.drop_none_results(nb)
    assert [o["data"]["text/plain"] for o in nb["cells"][1]["outputs"]] == [["(None, 2)"]]
    assert nb["cells"][0]["source"] == "# 7. Title\n\n## 7.1. First\n```\n## 2 not a heading\n```"
    assert nb["cells"][3]["source"] == "## 7.2. Second\n## What this shows"
    assert nb["cells"][1]["metadata"]["tags"] == ["parameters", "hide-cell"]
    assert nb["cells"][2]["metadata"]["tags"] == ["injected-parameters", "remove-cell"]


def _staged(tmp_path, monkeypatch, name: str, stale: list[str], current: bool) -> dict:
    from scp.suite import graph

    monkeypatch.setattr(graph, "status", lambda names, *a, **k: {n: stale for n in names})
    monkeypatch.setattr(book, "current_text", lambda *a, **k: current)
    book.stage(tmp_path / "src", [name], ROOT)
    return json.loads((tmp_path / "src" / "notebooks" / f"{name}.ipynb").read_text())


@pytest.mark.parametrize("current", [True, False])
def test_a_stale_notebooks_page_has_a_warning_banner(tmp_path, monkeypatch, current):
    name = "00_cooperative_games_tutorial"
    why = ["code changed: scp.core.selection", "model changed: runs/models/x is not the one 02's run read"]
    nb = _staged(tmp_path, monkeypatch, name, why, current)
    (banner,) = [c["source"] for c in nb["cells"] if "scp-stale" in "".join(c["source"])]
    assert "{admonition} Stale: this page shows an older run" in banner and ":class: warning" in banner
    assert why[0] in banner and "All 2 reasons" in banner and why[1] in banner
    assert ("has other code cells now" in banner) is (not current)
    fresh = _staged(tmp_path / "fresh", monkeypatch, name, [], True)
    assert not [c for c in fresh["cells"] if "scp-stale" in "".join(c["source"])]


def test_the_landing_page_is_for_readers():
    text = book.landing(ROOT, NOTEBOOKS)
    assert text.startswith("# Shapley Context Pruning\n")
    for words in (book.PAPER["authors"], book.PAPER["title"], f"arXiv:{book.PAPER['arxiv']}", "$$", "\\sum_{"):
        assert words in text
    assert "Σ_{" not in text and "| layout |" not in text
    rows = json.loads((ROOT / "results" / book.HEADLINE / "auc_by_method.json").read_text())["rows"]
    scp_hotpotqa = next(r for r in rows if r["variant"] == "hotpotqa" and r["method"] == "scp")
    assert f"**{scp_hotpotqa['auc']:.3f}**" in text  # the headline numbers are read from the committed table
    assert f"figures/{book.HEADLINE}/auc_by_dataset.png" in text
    assert text.index("## The headline result") < text.index("## How to run it") < text.index("## The chapters")
    for name in NOTEBOOKS:
        assert f"](notebooks/{name}.ipynb)" in text


def test_the_smoke_book_reads_like_a_book(smoke_site):
    html, _ = smoke_site
    landing = (html / "intro.html").read_text()
    assert "The headline result" in landing and "auc_by_dataset.png" in landing and "2607.16209" in landing
    assert 'url=intro.html"' in (html / "index.html").read_text() or "intro.html" in (html / "index.html").read_text()
    first = (html / "notebooks" / f"{SMOKE[0]}.html").read_text()
    assert "0. Cooperative games" in first and "0.1. Shapley values by hand" in first
    assert "Show the parameters" in first and "tag_injected-parameters" not in first
    for page in ("README.html", "BENCHMARKS.html", "figures/README.html"):
        text = (html / page).read_text()
        assert "Provenance" in text and ("committed at" in text or "not yet committed" in text), page
    gallery = (html / "figures" / "README.html").read_text()
    assert (
        'href="../notebooks/00_cooperative_games_tutorial.html"' in gallery and "Drawn by the run at commit" in gallery
    )
