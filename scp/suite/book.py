"""The executed suite as a static site: Jupyter Book 1.x (Sphinx, offline), one page per notebook with the outputs
of the run that made ``results/``, typeset math, the figures, the gallery, README and BENCHMARKS.

- ``python -m scp.suite.book collect [NAME ...]`` keeps the executed copy of a notebook's committed run
  (``runs/NAME.ipynb``, which ``scp run`` writes) as ``book/executed/NAME.json``, small: every figure output of
  a cell that saves that figure (``plot.save(fig, "NAME/stem", …)``) becomes a link to the committed
  ``figures/NAME/stem.png``, so the page shows the committed file and the copy holds no image bytes.  It is
  refused unless the copy is that run's: the values the copy's cells recorded equal ``results/NAME/records.json``
  and its papermill start lies within the run's provenance (``started_at`` … + ``wall_time_s``).
- ``python -m scp.suite.book build [--out DIR] [--only NAME ...]`` (``make book``) stages the pages under
  ``DIR/src`` — the repository's layout, so every relative link of README.md resolves — with a provenance note on
  top of each notebook page (commit, run time, parameters, data files), and builds ``DIR/html`` with execution
  off.  MathJax 3 is served from the site itself (``django-static-mathjax``), so math typesets offline.  ``DIR`` is
  an empty or new folder, or one a build made (its marker ``DIR/.scp-book`` lists the files it wrote): a rebuild
  replaces those and nothing else, and a folder holding anything else is refused in one line.
- ``python -m scp.suite.book check [--out DIR]`` opens every page in headless Chromium (:mod:`scp.suite.browser`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from scp.errors import InputError, MissingFileError, SCPError
from scp.io import atomic_open, read_json
from scp.paths import ROOT

EXECUTED = Path("book") / "executed"
"""Where the small executed copies are committed, as ``book/executed/NAME.json``: notebook JSON with its outputs,
named so that no notebook tool takes it for a source notebook (whose outputs are stripped) and strips it."""
OUT = Path("build") / "book"
"""Default output folder (ignored by git): ``src/`` the staged pages, ``html/`` the site."""
PAGES = ("README.md", "figures/README.md", "BENCHMARKS.md", "params/README.md", "results/README.md")
"""The Markdown pages besides the notebooks, in the site's order after the notebooks (README is the root)."""
RECORD_MIME = "application/scp+json"
MAX_COPY_BYTES = 400_000
"""An executed copy larger than this is refused: it would be a bulky output."""
_SAVE = re.compile(r"""plot\.save\(\s*[\w.\[\]]+\s*,\s*f?["']([^"'{}]+)["']""")  # after {run.name} → NAME
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


def _names(root: Path) -> list[str]:
    return sorted(p.stem for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _recorded(nb: dict) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            values.update(out.get("data", {}).get(RECORD_MIME, {}))
    return values


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, allow_nan=True) == json.dumps(b, sort_keys=True, allow_nan=True)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def check_copy(name: str, nb: dict, root: Path = ROOT) -> dict:
    """The committed provenance of ``name`` if ``nb`` is the executed copy of that run, else :class:`InputError`."""
    prov = read_json(root / "results" / name / "provenance.json", what=f"results/{name}/provenance.json")
    records = read_json(root / "results" / name / "records.json", what=f"results/{name}/records.json")
    papermill = nb.get("metadata", {}).get("papermill", {})
    if papermill.get("exception"):
        raise InputError(f"the executed copy of {name} stopped on an error: it is not a finished run")
    recorded = _recorded(nb)
    differ = sorted(k for k in set(recorded) | set(records) if not _same(recorded.get(k), records.get(k)))
    if differ:
        raise InputError(
            f"the executed copy of {name} is not the run behind results/{name}: {len(differ)} recorded values "
            f"differ from records.json (first: {differ[0]})"
        )
    if not papermill.get("start_time") or not prov.get("started_at"):
        raise InputError(f"the executed copy of {name} or its provenance says no start time")
    start, began = _time(papermill["start_time"]), _time(prov["started_at"])
    if not began - timedelta(minutes=5) <= start <= began + timedelta(seconds=prov.get("wall_time_s", 0) + 300):
        raise InputError(f"the executed copy of {name} ran at {start}, not in the committed run ({began})")
    return prov


def slim(nb: dict, name: str) -> dict:
    """``nb`` without image bytes: each figure a cell saves (``plot.save(fig, "NAME/stem", …)``, also written
    ``f"{run.name}/stem"``) becomes a link to the committed ``figures/NAME/stem.png`` in that cell's outputs, and
    every inline image is dropped (the drafts a figure shows in the cells that build it before it is saved)."""
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        text = "".join(cell["source"]).replace("{run.name}", name)
        outputs = [o for o in cell.get("outputs", []) if "image/png" not in o.get("data", {})]
        for stem in _SAVE.findall(text):
            link = f"![{Path(stem).name}](../figures/{stem}.png)"
            outputs.append({"output_type": "display_data", "metadata": {}, "data": {"text/markdown": link}})
        cell["outputs"] = outputs
        for out in outputs:
            out.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
    nb["metadata"].pop("widgets", None)
    return nb


def collect(names: Sequence[str] | None = None, root: Path = ROOT) -> tuple[list[Path], dict[str, str]]:
    """Write ``book/executed/NAME.json`` from ``runs/NAME.ipynb``, checked against the committed run first
    (:func:`check_copy`).  Named notebooks must pass; by default every executed copy under ``runs/`` is tried and
    those that are not the committed run's (an older run, a smoke run's leftovers) are skipped.  Returns the
    files written and ``{name: why skipped}``."""
    explicit = bool(names)
    names = list(names) if names else [n for n in _names(root) if (root / "runs" / f"{n}.ipynb").is_file()]
    written, skipped = [], {}
    for name in names:
        source = root / "runs" / f"{name}.ipynb"
        if not source.is_file():
            raise MissingFileError(f"no executed copy runs/{name}.ipynb: run scp run {name} first")
        nb = read_json(source, what=f"runs/{name}.ipynb")
        try:
            check_copy(name, nb, root)
        except SCPError as error:
            if explicit:
                raise
            skipped[name] = str(error)
            continue
        data = (json.dumps(slim(nb, name), indent=1, ensure_ascii=False) + "\n").encode()
        if len(data) > MAX_COPY_BYTES:
            raise InputError(
                f"the executed copy of {name} is {len(data):,} bytes after slimming (> {MAX_COPY_BYTES:,})"
            )
        target = root / EXECUTED / f"{name}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(target, "wb") as f:
            f.write(data)
        written.append(target)
    return written, skipped


# --------------------------------------------------------------------------------------------------------- build


def _provenance_cell(name: str, prov: dict) -> dict:
    git = prov.get("git", {})
    files = [*prov.get("data_files", []), *prov.get("models", [])]
    data = ", ".join(f"`{f['path']}` (sha256 `{f['sha256'][:12]}`)" for f in files) or "none"
    text = (
        f"**Provenance.** These are the outputs of the run that made `results/{name}/`: commit "
        f"`{str(git.get('commit', 'unknown'))[:12]}`{' (dirty tree)' if git.get('dirty') else ''}, started "
        f"{prov.get('started_at', 'unknown')}, {prov.get('wall_time_s', float('nan')):.0f} s; parameters "
        f"`params/{name}.yaml`; files read: {data}. Rerun it with `scp run {name}`."
    )
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def current_text(name: str, nb: dict, root: Path = ROOT) -> bool:
    """Give the executed copy ``nb`` the markdown of ``notebooks/NAME.ipynb`` as it is now (a text fixed after the
    run, which needs no rerun: only code cells decide the results) when its code cells — papermill's injected
    parameters aside — are the notebook's; returns whether they are.  When they are not, the copy keeps the run's
    own code and text, which belong together, and the page says the notebook changed since (:func:`_changed_cell`)."""
    source = read_json(root / "notebooks" / f"{name}.ipynb", what=f"notebooks/{name}.ipynb")["cells"]
    ran = [c for c in nb["cells"] if "injected-parameters" not in c.get("metadata", {}).get("tags", [])]
    kinds = [c["cell_type"] for c in source] == [c["cell_type"] for c in ran]
    if not kinds or any(_source(a) != _source(b) for a, b in zip(source, ran) if a["cell_type"] == "code"):
        return False
    for now, cell in zip(source, ran):
        if cell["cell_type"] == "markdown":
            cell["source"] = now["source"]
    return True


def _changed_cell(name: str) -> dict:
    text = (
        f"**Changed since this run.** `notebooks/{name}.ipynb` has other code cells now than the run shown here, so "
        f"this page keeps that run's code and text as they were; `scp run {name}` brings it up to date."
    )
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def _stale_cell(name: str, reasons: Sequence[str]) -> dict:
    shown = "; ".join(reasons[:6]) + (f"; and {len(reasons) - 6} more" if len(reasons) > 6 else "")
    text = (
        f"**Stale.** `scp run all --status` finds this notebook's results out of date at this commit ({shown}): "
        f"the page shows the run its provenance names, not yet rerun; `scp run {name}` brings it up to date."
    )
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)


def _mathjax() -> Path:
    """MathJax 3's browser files, from the PyPI package ``django-static-mathjax`` (no Django needed to copy them)."""
    from importlib.util import find_spec

    spec = find_spec("mathjax")
    folder = Path(spec.origin).parent / "static" / "mathjax" if spec and spec.origin else None
    if folder is None or not (folder / "es5" / "tex-chtml.js").is_file():
        raise MissingFileError("the book needs MathJax 3: pip install -e '.[book]' (django-static-mathjax)")
    return folder


def stage(src: Path, names: Sequence[str], root: Path = ROOT) -> list[str]:
    """Stage the pages under ``src``, a new folder; returns the staged page paths (relative, in site order)."""
    from scp.suite.graph import status

    if os.path.lexists(src):
        raise InputError(f"{src} exists: the pages are staged into a new folder, never over one")
    pages = []
    stale = status(list(names), root / "results", root=root) if Path(root).resolve() == ROOT.resolve() else {}
    for name in names:
        copy = root / EXECUTED / f"{name}.json"
        if not copy.is_file():
            raise MissingFileError(f"no {EXECUTED}/{name}.json: python -m scp.suite.book collect {name}")
        nb = read_json(copy, what=str(copy.relative_to(root)))
        prov = check_copy(name, nb, root)
        current = current_text(name, nb, root)
        nb["cells"].insert(1, _provenance_cell(name, prov))
        if not current:
            nb["cells"].insert(2, _changed_cell(name))
        elif stale.get(name):
            nb["cells"].insert(2, _stale_cell(name, stale[name]))
        for i, cell in enumerate(nb["cells"]):  # a record shows as its text; every cell has an id
            cell.setdefault("id", f"cell-{i}")
            for out in cell.get("outputs", []):
                out.get("data", {}).pop(RECORD_MIME, None)
        target = src / "notebooks" / f"{name}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(nb, ensure_ascii=False))
        pages.append(f"notebooks/{name}.ipynb")
        for png in sorted((root / "figures" / name).glob("*.png")):
            _copy(png, src / png.relative_to(root))
    for page in PAGES:
        _copy(root / page, src / page)
        pages.append(page)
    for png in sorted((root / "figures").rglob("*.png")):  # the gallery shows every figure
        _copy(png, src / png.relative_to(root))
    for page in pages:  # a link to a repository file that is not a page becomes a download of that file
        text = (src / page).read_text()
        for target in _LINK.findall(text):
            path = (root / Path(page).parent / target).resolve()
            if "://" in target or not path.is_file() or not path.is_relative_to(root.resolve()):
                continue
            rel = path.relative_to(root.resolve())
            if not (src / rel).exists():
                _copy(path, src / rel)
    shutil.copytree(_mathjax() / "es5", src / "_extra" / "mathjax" / "es5")  # served as is, not linked into pages
    _favicon(src / "_extra" / "favicon.png")
    _favicon(src / "_extra" / "favicon.ico")  # what a page without the link (index.html, a redirect) asks for
    return pages


def _favicon(path: Path) -> None:
    """A 32×32 icon (the method palette's vermillion), so no page asks the server for a missing favicon.ico."""
    from PIL import Image

    Image.new("RGB", (32, 32), (213, 94, 0)).save(path, format="PNG" if path.suffix == ".png" else "ICO")


def config(pages: Sequence[str]) -> tuple[str, str]:
    """``_config.yml`` and ``_toc.yml`` of the staged book."""
    conf = {
        "title": "SCP — Shapley Context Pruning: the executed notebook suite",
        "author": "the SCP developers",
        "only_build_toc_files": True,
        "execute": {"execute_notebooks": "off"},
        "parse": {"myst_enable_extensions": ["dollarmath", "amsmath"], "myst_heading_anchors": 3},
        "html": {"use_repository_button": False},
        "sphinx": {
            "config": {
                "html_extra_path": ["_extra"],
                "html_favicon": "_extra/favicon.png",
                "html_context": {"default_mode": "light"},
                "mathjax_path": "../mathjax/es5/tex-chtml.js",
                "extensions": [  # Jupyter Book's own list without Thebe and comments (no live kernels, no network)
                    "sphinx_togglebutton",
                    "sphinx_copybutton",
                    "myst_nb",
                    "jupyter_book",
                    "sphinx_external_toc",
                    "sphinx_design",
                    "sphinx_book_theme",
                ],
                "html_show_sourcelink": False,
                "suppress_warnings": ["myst.header"],
            }
        },
    }
    notebooks = [p for p in pages if p.startswith("notebooks/")]
    others = [p for p in pages if not p.startswith("notebooks/") and p != "README.md"]
    toc = {
        "format": "jb-book",
        "root": "README",
        "parts": [
            {"caption": "Notebooks", "chapters": [{"file": p.rsplit(".", 1)[0]} for p in notebooks]},
            {"caption": "Figures, benchmarks and records", "chapters": [{"file": p.rsplit(".", 1)[0]} for p in others]},
        ],
    }
    return json.dumps(conf, indent=1), json.dumps(toc, indent=1)  # JSON is YAML


MARKER = ".scp-book"
"""The file ``book build`` keeps in its output folder: the files it wrote there (paths under ``src/`` and ``html/``,
relative to the folder).  A folder without it is built into only when it is empty; one with it only when every file
under its ``src/`` and ``html/`` is listed, and those are the only files a rebuild deletes."""
_SCRATCH = ".scp-book-build-"
"""Prefix of the scratch folder a build stages and runs Jupyter Book in, inside the output folder."""
_READS = ("notebooks", "params", "results", "figures", "book")
"""The repository's folders a build reads: the output folder is none of them and lies in none of them."""


def _entries_under(folder: Path) -> list[Path]:
    """Every entry under ``folder`` that is not a folder (a link to a folder included, never followed); ``folder``
    itself when it is not a folder."""
    if not os.path.lexists(folder):
        return []
    if folder.is_symlink() or not folder.is_dir():
        return [folder]
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = [d for d in dirnames if d not in links]
        found += [Path(dirpath, name) for name in (*filenames, *links)]
    return found


def _read_marker(out: Path) -> list[str]:
    """The files an earlier build wrote into ``out``, from its marker (refused when damaged or not its form)."""
    marker = out / MARKER
    try:
        files = read_json(marker, what=f"the marker {marker}").get("files")
    except (SCPError, AttributeError):
        files = None
    if not isinstance(files, list) or not all(
        isinstance(f, str) and f.split("/")[0] in ("src", "html") and ".." not in f.split("/") for f in files
    ):
        raise InputError(
            f"--out {out}: its marker {MARKER} is not one book build writes (damaged or edited), so it is not "
            "known which files there are the book's; give an empty or new folder"
        )
    return files


def _claim(out: Path, root: Path) -> list[str]:
    """Check, before any work, that the site may be built into ``out``; returns the files an earlier build wrote
    there (replaced by this one).  Refused: a file; the repository itself or a folder it reads the pages from; a
    folder that is not empty and holds no :data:`MARKER`; a marked folder with a file under ``src/`` or ``html/``
    that the marker does not list (a file of the user's, never deleted)."""
    if os.path.lexists(out) and not out.is_dir():
        raise InputError(f"--out {out} is not a folder; give an empty or new folder for the site")
    where, repo = out.resolve(), Path(root).resolve()
    if where == repo or any(where.is_relative_to(repo / name) for name in _READS) or repo.is_relative_to(where):
        raise InputError(
            f"--out {out} is the repository or a folder the book is built from ({', '.join(_READS)}); "
            "give an empty or new folder, such as the default build/book"
        )
    if not out.exists():
        return []
    if not (out / MARKER).is_file():
        entries = sorted(p.name for p in out.iterdir())
        if entries:
            raise InputError(
                f"--out {out} holds files book build did not write ({', '.join(entries[:3])}"
                f"{', …' if len(entries) > 3 else ''}; no {MARKER} marker): give an empty or new folder "
                "(a site built by an older version: remove the folder yourself)"
            )
        return []
    written = _read_marker(out)
    ours = set(written)
    foreign = [
        p for sub in ("src", "html") for p in _entries_under(out / sub) if p.relative_to(out).as_posix() not in ours
    ]
    if foreign:
        raise InputError(
            f"--out {out}: {foreign[0]} was not written by book build ({len(foreign)} such file(s) under src/ and "
            "html/, which a build replaces): move them away, or give another folder"
        )
    return written


def _write_marker(out: Path, files: Sequence[str]) -> None:
    body = {"written_by": "python -m scp.suite.book build", "files": sorted(set(files))}
    with atomic_open(out / MARKER, "w") as f:
        json.dump(body, f, indent=0)


def _jupyter_book(src: Path, jb: Path) -> Path:
    """Run Jupyter Book on the staged ``src`` with its output under ``jb``; returns the built html folder."""
    script = Path(sys.executable).parent / "jupyter-book"
    if not script.is_file():
        raise MissingFileError("the book needs Jupyter Book 1.x: pip install -e '.[book]'")
    cmd = [str(script), "build", str(src), "--path-output", str(jb), "--keep-going"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise InputError(f"jupyter-book build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return jb / "_build" / "html"


def build(out: Path = ROOT / OUT, names: Sequence[str] | None = None, root: Path = ROOT) -> Path:
    """Stage and build the site; returns ``out/html``.  Sphinx warnings are printed, errors raise.

    ``out`` is an empty or new folder, or one an earlier build made (its :data:`MARKER` lists what it wrote):
    the pages are staged and built in a scratch folder inside it, then the files the earlier build wrote are
    deleted and the new ``src/`` and ``html/`` renamed into place.  Nothing else in ``out`` is touched."""
    out = Path(out)
    previous = _claim(out, root)
    names = list(names) if names else [n for n in _names(root) if (root / EXECUTED / f"{n}.json").is_file()]
    out.mkdir(parents=True, exist_ok=True)
    if not (out / MARKER).is_file():
        _write_marker(out, [])  # the folder is the book's from now on, so a build stopped halfway can be rerun
    for stale in sorted(out.glob(f"{_SCRATCH}*")):  # a build killed before cleaning its scratch folder
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale)
    with tempfile.TemporaryDirectory(dir=out, prefix=_SCRATCH) as scratch:
        scratch = Path(scratch)
        src = scratch / "src"
        pages = stage(src, names, root)
        conf, toc = config(pages)
        (src / "_config.yml").write_text(conf)
        (src / "_toc.yml").write_text(toc)
        shutil.move(str(_jupyter_book(src, scratch / "jb")), scratch / "html")
        new = [p.relative_to(scratch).as_posix() for sub in ("src", "html") for p in _entries_under(scratch / sub)]
        _write_marker(out, [*previous, *new])  # both, until the old files are gone and the new ones in place
        for rel in previous:
            path = out / rel
            if path.is_symlink() or path.is_file():
                path.unlink()
        for sub in ("src", "html"):
            if (out / sub).is_dir():
                for dirpath, _, _ in sorted(os.walk(out / sub), key=lambda w: -len(Path(w[0]).parts)):
                    os.rmdir(dirpath)  # only folders the book made, and emptied just now
            os.replace(scratch / sub, out / sub)
        _write_marker(out, new)
    return out / "html"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scp.suite.book", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="keep small executed copies of the committed runs under book/executed")
    c.add_argument("names", nargs="*")
    b = sub.add_parser("build", help="stage and build the site (html under --out)")
    b.add_argument("--out", type=Path, default=ROOT / OUT)
    b.add_argument("--only", nargs="*", default=None, metavar="NAME")
    k = sub.add_parser("check", help="open every page of a built site in headless Chromium")
    k.add_argument("--out", type=Path, default=ROOT / OUT)
    k.add_argument("--screenshots", nargs="*", default=(), metavar="PAGE")
    args = parser.parse_args(argv)
    try:
        return _command(args)
    except SCPError as error:  # bad input or a refused folder: one line, no traceback
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"{parser.prog} {args.command}: error: {message}", file=sys.stderr)
        return 2


def _command(args) -> int:
    if args.command == "collect":
        written, skipped = collect(args.names)
        for path in written:
            print(f"{path.relative_to(ROOT)}: {path.stat().st_size:,} bytes")
        for name, why in skipped.items():
            print(f"{name}: skipped, {why}")
    elif args.command == "build":
        print(f"site: {build(args.out, args.only)}/index.html")
    else:
        from scp.suite.browser import check_site

        report = check_site(args.out / "html", screenshots=args.screenshots, shots_dir=args.out / "screenshots")
        print(report.describe())
        return 0 if report.ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
