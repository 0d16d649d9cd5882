"""The executed suite as a static site: Jupyter Book 1.x (Sphinx, offline), one page per notebook with the outputs
of the run that made ``results/``, typeset math, the figures, the gallery, README and BENCHMARKS.

- ``python -m scp.suite.book collect [NAME ...]`` keeps the executed copy of a notebook's committed run
  (``runs/NAME.ipynb``, which ``scp run`` writes) as ``book/executed/NAME.json``, small: every figure output of
  a cell that saves that figure (``plot.save(fig, "NAME/stem", …)``) becomes a link to the committed
  ``figures/NAME/stem.png``, so the page shows the committed file and the copy holds no image bytes.  It is
  refused unless the copy is that run's: the values the copy's cells recorded equal ``results/NAME/records.json``
  and its papermill start lies within the run's provenance (``started_at`` … + ``wall_time_s``).  The copy names
  paths relative to the repository (:func:`relative_outputs`): a run writes into ``runs/scratch/NAME`` before its
  folders land, and its outputs name that scratch folder on the machine it ran on.
- ``python -m scp.suite.book build [--out DIR] [--only NAME ...]`` (``make book``) stages the pages under
  ``DIR/src`` — the repository's layout, so every relative link of README.md resolves — and builds ``DIR/html``
  with execution off.  The book opens on a page for readers (:func:`landing`: what SCP is, the paper, the headline
  table and figure read from ``results/02_reranking_auc``, how to run it, the chapters); each notebook is a
  numbered chapter with its provenance on top (commit, run time, parameters, files read), a warning banner when
  ``scp run all --status`` finds it stale, its parameter cells folded and papermill's removed, its recorded values
  as one rounded table and no machine path in its outputs (:func:`stage`); README, BENCHMARKS, the gallery and
  the other Markdown pages carry their provenance too (:func:`page_provenance`).  MathJax 3 is served from the
  site itself (``django-static-mathjax``), so math typesets offline.  ``DIR`` is an empty or new folder, or one a
  build made (its marker ``DIR/.scp-book`` lists the files it wrote): a rebuild replaces those and nothing else,
  and a folder holding anything else is refused in one line.
- ``python -m scp.suite.book check [--out DIR] [--screenshots [PAGE ...]]`` opens every page in headless Chromium
  (:mod:`scp.suite.browser`) and saves screenshots (alone: :data:`SCREENSHOTS`) under ``DIR/screenshots``.
"""

from __future__ import annotations

import argparse
import html
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


_SCRATCH_RUN = r"(?:/[^\s'\"/\\]+)+/runs/(?:scratch|check)/{name}"
_SITE_PACKAGES = re.compile(r"(?:/[^\s'\"/\\]+)+/site-packages/")
_KERNEL_FILE = re.compile(r"/tmp/ipykernel_\d+/\d+\.py")
_HOME = re.compile(r"(?<![\w.~/-])(?:/root|/home/[^/\s'\"\\]+|/Users/[^/\s'\"\\]+)(?=/)")
_TEMP = re.compile(r"(?<![\w.~/-])(?:/tmp|/var/tmp|/var/folders|/private/var|/private/tmp)/(?:[^\s'\"/\\]+/)*")


def _run_root(nb: dict) -> str | None:
    """The folder of the checkout a notebook ran in, from papermill's ``input_path`` (``<it>/notebooks/NAME.ipynb``)."""
    path = nb.get("metadata", {}).get("papermill", {}).get("input_path")
    if isinstance(path, str) and path.startswith("/") and Path(path).parent.name == "notebooks":
        return str(Path(path).parent.parent)
    return None


def repository_paths(text: str, name: str, run_root: str | None = None) -> str:
    """``text`` with the machine's paths made repository-relative: a run's scratch folder
    (``…/runs/scratch/NAME/figures/NAME`` is where ``figures/NAME`` was written before it landed), the checkout it
    ran in (``run_root``), an installed package (``site-packages/…``, as provenance names a model file), a cell's
    code file (``/tmp/ipykernel_…/….py``: ``[cell]``); any other temporary folder keeps only its file name, a home
    folder becomes ``~``."""
    scratch = _SCRATCH_RUN.format(name=re.escape(name))
    text = re.sub(scratch + "/", "", text)
    text = re.sub(scratch + r"(?![\w/-])", ".", text)
    if run_root and run_root != "/":
        text = re.sub(re.escape(run_root.rstrip("/")) + r"/", "", text)
        text = re.sub(re.escape(run_root.rstrip("/")) + r"(?![\w/.-])", ".", text)
    text = _SITE_PACKAGES.sub("site-packages/", text)
    text = _KERNEL_FILE.sub("[cell]", text)
    text = _HOME.sub("~", text)
    return _TEMP.sub("…/", text)


def relative_outputs(nb: dict, name: str) -> dict:
    """``nb`` with :func:`repository_paths` applied to every output, to its metadata and to papermill's injected
    cell; the code cells' own source and the recorded values (:data:`RECORD_MIME`) are left as they ran."""
    root = _run_root(nb)

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return repository_paths(value, name, root)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: v if k == RECORD_MIME else walk(v) for k, v in value.items()}
        return value

    for cell in nb["cells"]:
        cell["outputs"] = walk(cell.get("outputs", [])) if cell["cell_type"] == "code" else cell.get("outputs")
        if cell.get("outputs") is None:
            cell.pop("outputs", None)
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            cell["source"] = walk(cell["source"])
    nb["metadata"] = walk(nb.get("metadata", {}))
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
        data = (json.dumps(relative_outputs(slim(nb, name), name), indent=1, ensure_ascii=False) + "\n").encode()
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


def _markdown(text: str, **metadata: Any) -> dict:
    return {"cell_type": "markdown", "metadata": dict(metadata), "source": text}


def _when(prov: dict) -> str:
    started = prov.get("started_at")
    try:
        return _time(started).strftime("%Y-%m-%d %H:%M UTC") if started else "at an unknown time"
    except ValueError:
        return str(started)


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return "an unknown time"
    if seconds >= 5400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _provenance_cell(name: str, prov: dict) -> dict:
    """The page's provenance: the run's commit, start and wall time, its parameters, and (folded) the files it read
    with their sha256."""
    git = prov.get("git") or {}
    files = [*prov.get("data_files", []), *prov.get("models", [])]
    listed = "\n".join(f"- `{f.get('path')}` (sha256 `{str(f.get('sha256'))[:12]}…`)" for f in files)
    cores = (prov.get("machine") or {}).get("cpu_count") if isinstance(prov.get("machine"), dict) else None
    where = f" on {cores} CPU cores" if isinstance(cores, int) else ""
    text = (
        "````{admonition} Provenance\n:class: note scp-provenance\n\n"
        f"The outputs on this page are those of the run that made `results/{name}/`: commit "
        f"`{str(git.get('commit', 'unknown'))[:12]}`{' (dirty tree)' if git.get('dirty') else ''}, started "
        f"{_when(prov)}, {_duration(prov.get('wall_time_s'))}{where}; parameters `params/{name}.yaml`. "
        f"Rerun it with `scp run {name}`.\n"
    )
    if files:
        text += f"\n```{{dropdown}} {len(files)} file{'s' if len(files) != 1 else ''} read, by sha256\n{listed}\n```\n"
    return _markdown(text + "````")


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


def _stale_cell(name: str, reasons: Sequence[str], changed: bool) -> dict:
    """The banner of a page whose notebook is stale (``reasons``: :func:`scp.suite.graph.status`'s) or whose code
    changed since the run shown (``changed``): one short paragraph, the reasons folded below it."""
    title = "Stale: this page shows an older run" if reasons else "Changed since this run"
    text = f"`````{{admonition}} {title}\n:class: warning scp-stale\n\n"
    if reasons:
        first = reasons[0] if len(reasons[0]) <= 140 else reasons[0][:139] + "…"
        more = f"; and {len(reasons) - 1} more" if len(reasons) > 1 else ""
        text += f"`scp run all --status` finds this notebook's results out of date at this commit ({first}{more}). "
    if changed:
        text += (
            f"`notebooks/{name}.ipynb` has other code cells now than the run shown here, so this page keeps that "
            "run's code and text as they were. "
        )
    else:
        text += "The page shows the run its provenance names, not yet rerun. "
    text += f"`scp run {name}` brings it up to date.\n"
    if len(reasons) > 1:
        listed = "\n".join(f"- {r}" for r in reasons)
        text += f"\n````{{dropdown}} All {len(reasons)} reasons\n{listed}\n````\n"
    return _markdown(text + "`````")


def _chapter(name: str) -> int | None:
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() else None


def number_headings(nb: dict, chapter: int) -> None:
    """Chapter numbers, as a book has them: the notebook's title ``# T`` becomes ``# N. T`` and a numbered section
    ``## k T`` becomes ``## N.k. T`` (unnumbered sections, such as the claims and the conclusion, stay so)."""
    titled = False
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        lines = _source(cell).split("\n")
        fence = False
        for i, line in enumerate(lines):
            if line.lstrip().startswith(("```", "~~~")):
                fence = not fence
            if fence:
                continue
            if line.startswith("# ") and not titled:
                lines[i], titled = f"# {chapter}. {line[2:].lstrip()}", True
            elif m := re.match(r"## (\d+)\.?\s+(.*)", line):
                lines[i] = f"## {chapter}.{m.group(1)}. {m.group(2)}"
        cell["source"] = "\n".join(lines)


_NOTHING = re.compile(r"\(?None(?:, None)*,?\)?")


def drop_none_results(nb: dict) -> None:
    """Drop a cell's displayed result that says nothing (``None``, ``(None, None)``: the value of a set-up line
    such as ``plot.style(), torch.set_num_threads(n)``)."""
    for cell in nb["cells"]:
        cell_outputs = cell.get("outputs")
        if cell_outputs:
            cell["outputs"] = [
                o
                for o in cell_outputs
                if not (
                    o.get("output_type") == "execute_result"
                    and set(o.get("data", {})) == {"text/plain"}
                    and _NOTHING.fullmatch("".join(o["data"]["text/plain"]).strip())
                )
            ]


def hide_parameters(nb: dict) -> None:
    """The ``parameters`` cell folded behind a "Show the parameters" toggle (``hide-cell``) and papermill's
    ``injected-parameters`` cell removed from the page (``remove-cell``): tags the book honours, on the staged copy
    only (the notebooks keep their cells; the provenance note names ``params/NAME.yaml``, whose values they are)."""
    for cell in nb["cells"]:
        meta = cell.setdefault("metadata", {})
        tags = list(meta.get("tags", []))
        if "injected-parameters" in tags:
            meta["tags"] = [*tags, "remove-cell"]
        elif "parameters" in tags:
            meta["tags"] = [*tags, "hide-cell"]
            meta["mystnb"] = {"code_prompt_show": "Show the parameters", "code_prompt_hide": "Hide the parameters"}


def _number(x: float) -> str:
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "∞" if x > 0 else "−∞"
    if x == int(x) and abs(x) < 1e15:
        text = f"{int(x):,}" if abs(x) >= 1e4 else str(int(x))
    elif 1e-3 <= abs(x) < 1e4:
        text = f"{x:.4g}"
    elif 1e4 <= abs(x) < 1e12:
        text = f"{x:,.0f}"
    else:
        text = f"{x:.3g}"
    return text.replace("-", "−")


def _rounded(value: Any, depth: int = 0) -> str:
    """A recorded value as a reader reads it: numbers to 4 significant digits, lists as ``[a, b]``, mappings as
    ``key: value`` pairs, long text cut."""
    if isinstance(value, bool) or value is None:
        return "—" if value is None else str(value).lower()
    if isinstance(value, (int, float)):
        return _number(float(value))
    if isinstance(value, list):
        return "[" + ", ".join(_rounded(v, depth + 1) for v in value) + "]"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_rounded(v, depth + 1)}" for k, v in value.items())
    text = str(value)
    return text if len(text) <= 160 else text[:157] + "…"


def records_table(values: dict[str, Any], name: str) -> str:
    """One compact HTML table of a notebook's recorded values, rounded (:func:`_rounded`); a value ``K_ci`` beside
    ``K`` is shown in ``K``'s row as its interval."""
    rows = []
    for key, value in values.items():
        if key.endswith("_ci") and key[:-3] in values:
            continue
        ci = values.get(f"{key}_ci")
        interval = _rounded(ci) if isinstance(ci, list) and len(ci) == 2 else ""
        rows.append(
            f"<tr><td><code>{html.escape(key)}</code></td><td>{html.escape(_rounded(value))}</td>"
            f"<td>{html.escape(interval)}</td></tr>"
        )
    return (
        f'<div class="scp-records"><p>{len(values)} recorded values, rounded to 4 significant digits; the exact '
        f"ones are in <code>results/{html.escape(name)}/records.json</code>.</p>"
        "<table><thead><tr><th>record</th><th>value</th><th>interval (<code>_ci</code>)</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def tabulate_records(nb: dict, name: str) -> None:
    """Every recorded value's output (one box each, at full precision) replaced by one :func:`records_table`, where
    the last cell that records shows its first record."""
    holders = [c for c in nb["cells"] if any(RECORD_MIME in o.get("data", {}) for o in c.get("outputs", []))]
    if not holders:
        return
    values = _recorded(nb)
    for cell in holders:
        first = next(i for i, o in enumerate(cell["outputs"]) if RECORD_MIME in o.get("data", {}))
        cell["outputs"] = [o for o in cell["outputs"] if RECORD_MIME not in o.get("data", {})]
    table = {"output_type": "display_data", "metadata": {}, "data": {"text/html": records_table(values, name)}}
    holders[-1]["outputs"].insert(first, table)


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


PAPER = {
    "authors": "Yanqiao Chen, Dongsheng Hou, Yuhan Rui, Zhen Cao and Yepang Liu",
    "title": "Shapley Context Pruning: A Cooperative Game Perspective for Context Reranking and Pruning",
    "arxiv": "2607.16209",
}
HEADLINE = "02_reranking_auc"
"""The notebook whose committed table and figure the landing page shows: the paper's Table 3 and Fig. 3a."""
HEADLINE_METHODS = ("scp", "pointwise", "bm25", "cosine", "random")
LANDING = "intro.md"
"""The book's first page, written by :func:`landing` (README follows it as a chapter of its own)."""
_VARIANT_NAMES = {"hotpotqa": "HotpotQA", "2wiki": "2Wiki", "msmarco": "MS MARCO", "fever": "FEVER"}


def _variant(variant: str) -> str:
    if variant.startswith("musique-"):
        unit, title = variant.split("-")[1:3]
        return f"MuSiQue {unit}s, {'titled' if title == 'title' else 'bare'}"
    return _VARIANT_NAMES.get(variant, variant)


def _ci(row: dict, key: str) -> str:
    """A value and its interval in a table cell: the value, and below it the interval in small type."""
    return f"**{row[key]:.3f}**<br><small>{row[key + '_ci_low']:.3f}–{row[key + '_ci_high']:.3f}</small>"


def _headline(root: Path, names: Sequence[str]) -> list[str]:
    """The landing page's result: the committed AUC table of :data:`HEADLINE` (95% CIs), the paired differences
    that decide it, and its figure; nothing typed by hand."""
    folder = root / "results" / HEADLINE
    table, pairs = folder / "auc_by_method.json", folder / "paired_differences.json"
    if not table.is_file():
        return []
    rows = [r for r in read_json(table, what=str(table.relative_to(root)))["rows"] if r.get("status") == "ok"]
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    by = {(r["variant"], r["method"]): r for r in rows}
    methods = [m for m in HEADLINE_METHODS if any((v, m) in by for v in variants)]
    label = {m: next(r["label"] for r in rows if r["method"] == m) for m in methods}
    prov = read_json(root / "results" / HEADLINE / "provenance.json", what=f"results/{HEADLINE}/provenance.json")
    chapter = _chapter(HEADLINE)
    link = f"[chapter {chapter}](notebooks/{HEADLINE}.ipynb)" if HEADLINE in names else f"notebook `{HEADLINE}`"
    out = [
        "## The headline result",
        "",
        "The paper's Table 3 ranks each context's sentences and asks how often a supporting sentence comes before a "
        "distractor (pairwise AUC; 0.5 is chance). Chapter "
        f"{chapter} reruns it on the test splits here, with a pointwise control: the same network and training, "
        "but each sentence scored alone, so that the control has no coalitions to learn from. Pairwise AUC with "
        f"95% bootstrap intervals, from `results/{HEADLINE}/auc_by_method.json` (commit "
        f"`{str((prov.get('git') or {}).get('commit', 'unknown'))[:7]}`, {_when(prov)}; {link}):",
        "",
        "```{table} Pairwise AUC (bold) and its 95% bootstrap interval; n test questions per split",
        ":class: scp-headline",
        ":width: 100%",
        "",
        "| test split | n | " + " | ".join(label[m] for m in methods) + " |",
        "|---|---|" + "---|" * len(methods),
    ]
    for v in variants:
        n = next((int(by[v, m]["n_used"]) for m in methods if (v, m) in by), 0)
        cells = [_ci(by[v, m], "auc") if (v, m) in by else "n/a" for m in methods]
        out.append(f"| {_variant(v)} | {n} | " + " | ".join(cells) + " |")
    out.append("```")
    if pairs.is_file():
        diffs = [
            r
            for r in read_json(pairs, what=str(pairs.relative_to(root)))["rows"]
            if r.get("metric") == "auc" and r.get("a") == "scp" and r.get("status") == "ok"
        ]
        said = []
        for b in [m for m in methods if m != "scp"]:
            mine = [r for r in diffs if r["b"] == b]
            if not mine:
                continue
            above = sum(r["ci_low"] > 0 for r in mine)
            below = sum(r["ci_high"] < 0 for r in mine)
            said.append(
                f"above {label[b]} on {above}, below it on {below} and not separated from it on "
                f"{len(mine) - above - below}"
            )
        if said:
            out += [
                "",
                f"Paired by test question (SCP − other, 95% bootstrap CI, "
                f"`results/{HEADLINE}/paired_differences.json`), SCP is, of the {len(variants)} test splits, "
                + "; ".join(said)
                + ".",
            ]
    figure = root / "figures" / HEADLINE / "auc_by_dataset.png"
    if figure.is_file():
        from scp.suite.gallery import CAPTIONS

        caption = CAPTIONS.get(f"{HEADLINE}/auc_by_dataset", "Pairwise AUC per dataset.")
        out += [
            "",
            "```{figure} " + f"figures/{HEADLINE}/auc_by_dataset.png",
            ":width: 100%",
            ":alt: pairwise AUC per dataset",
            "",
            f"{caption} (`figures/{HEADLINE}/auc_by_dataset.png`)",
            "```",
        ]
    return out


def _readme_example(root: Path) -> list[str]:
    """README's first example of the shipped pruner (a code block that ``tests/test_readme.py`` runs), if any."""
    text = (root / "README.md").read_text() if (root / "README.md").is_file() else ""
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        if "ShapleyPruner" in block and "prune(" in block:
            return ["```python", block.rstrip("\n"), "```"]
    return []


def _title(root: Path, name: str) -> str:
    """A notebook's title: its first ``# `` heading."""
    path = root / "notebooks" / f"{name}.ipynb"
    cells = read_json(path, what=f"notebooks/{name}.ipynb")["cells"] if path.is_file() else []
    for cell in cells:
        if cell["cell_type"] == "markdown":
            for line in _source(cell).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return name


def landing(root: Path, names: Sequence[str]) -> str:
    """The book's first page, for a reader: what SCP is (the paper cited), the headline result and its figure
    (:func:`_headline`, read from the committed results), then how to run it, and the chapters."""
    from scp.suite.gallery import NOTEBOOKS, wall_time

    total = sum(t for n in names if (t := wall_time(n, root)) is not None)
    lines = [
        "# Shapley Context Pruning",
        "",
        "A retrieval-augmented model reads a long context of which only a few sentences matter. Shapley Context "
        "Pruning (SCP) treats the context as a cooperative game: its sentences $c_1, \\dots, c_n$ are the players, "
        "and a learned value network scores any coalition $S$ of them for the query,",
        "",
        "$$",
        "v(S;\\theta) = \\rho\\Big(\\sum_{c_i \\in S} \\psi(c_i)\\Big),",
        "$$",
        "",
        "a Deep Sets network: $\\psi$ maps each sentence (with the query) to a latent vector, $\\rho$ maps their sum "
        "to a value, so $v$ does not depend on the order of the sentences. Each sentence is credited with its "
        "Shapley value, what it adds to the sentences before it, averaged over every order of the $n$ sentences,",
        "",
        "$$",
        "\\phi_i(v) = \\frac{1}{n!} \\sum_{\\pi} \\Big[ v\\big(P_i^{\\pi} \\cup \\{c_i\\}\\big) - "
        "v\\big(P_i^{\\pi}\\big) \\Big],",
        "$$",
        "",
        "estimated by Monte Carlo over $M$ sampled orders $\\pi$; the network is trained so that supporting "
        "sentences get higher Shapley values than distractors, and the top-ranked sentences are kept.",
        "",
        "```{admonition} The paper",
        ":class: tip",
        "",
        f"{PAPER['authors']}, *{PAPER['title']}*, arXiv:{PAPER['arxiv']} "
        f"(<https://arxiv.org/abs/{PAPER['arxiv']}>). Chapters 11 and 12 reproduce two companion papers: "
        "*MaxShapley* and *Entropic Context Shaping*.",
        "```",
        "",
        "This book is the paper's experiments rerun: one chapter per notebook, each page the outputs of the run "
        "that made the committed figures and tables (its provenance on top), with the paper's claims beside ours. "
        f"The {len(names)} committed runs took {_duration(total)} of notebook time on 2 CPU cores.",
        "",
        *_headline(root, names),
        "",
        "## How to run it",
        "",
        "```bash",
        "make test      # a virtual environment, the package, lint and the tests",
        "make figures   # every figure and table again, with papermill (notebooks/ → figures/, results/)",
        "make book      # this book, built offline into build/book/html, then checked in headless Chromium",
        "scp run 02_reranking_auc          # one notebook (scp run all --status: which are stale, and why)",
        "```",
        "",
    ]
    example = _readme_example(root)
    if example:
        lines += ["The shipped pruner on a context (from the README, whose examples a test runs):", "", *example, ""]
    lines += [
        "The README has the rest: data, models, the model store, and the command line.",
        "",
        "## The chapters",
        "",
    ]
    for name in names:
        paper = NOTEBOOKS.get(name, ("", ""))[1]
        entry = f"{_chapter(name)}. [{_title(root, name)}](notebooks/{name}.ipynb)"
        lines.append(entry + (f" — {paper}." if paper else ""))
    head = _git(root, "rev-parse", "--short", "HEAD")
    provenance = [
        "```{admonition} Provenance",
        ":class: note scp-provenance",
        "",
        f"Written by `python -m scp.suite.book build`{f' at commit `{head}`' if head else ''} from the committed "
        f"results: the headline from `results/{HEADLINE}/` (its run named above), the run times from each "
        "notebook's `results/NAME/provenance.json`.",
        "```",
    ]
    return "\n".join([*lines, "", *provenance]) + "\n"


def _git(root: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


PAGE_SOURCES = {
    "README.md": "Its suite table and its section on the shipped pruner are written by `python -m scp.suite.gallery` "
    "from each notebook's `results/NAME/provenance.json` and the model cards under `models/`.",
    "figures/README.md": "Written by `python -m scp.suite.gallery` from `figures/`; each section says which run "
    "drew its figures.",
    "BENCHMARKS.md": "Its tables are written by `python -m scp.bench report` from `results/bench/*.json`{bench}.",
}


def _bench_runs(root: Path) -> str:
    dates, cpus = [], set()
    for path in sorted((root / "results" / "bench").glob("*.json")):
        try:
            data = read_json(path, what=str(path))
        except SCPError:
            continue
        env = data.get("env") or data.get("meta") or {}
        if isinstance(env, dict) and env.get("date"):
            dates.append(str(env["date"])[:16])
            if env.get("cpu"):
                cpus.add(f"{env['cpu']}, {env.get('logical_cores', '?')} cores")
    if not dates:
        return ""
    return f" (runs from {min(dates)} to {max(dates)}{' on ' + '; '.join(sorted(cpus)) if cpus else ''})"


def page_provenance(page: str, root: Path) -> str:
    """A Markdown page's provenance note: the commit that last changed it (or that it has uncommitted changes) and,
    for a generated page, what writes it and from what."""
    last = _git(root, "log", "-1", "--format=%h %cs", "--", page)
    dirty = _git(root, "status", "--porcelain", "--", page)
    if last is None:
        when = f"`{page}` as it is in this tree (not a git checkout)"
    elif not last:
        when = f"`{page}`, not yet committed"
    else:
        commit, date = last.split(" ", 1)
        when = f"`{page}` as committed at `{commit}` ({date})"
    if dirty:
        when += ", with uncommitted changes"
    head = _git(root, "rev-parse", "--short", "HEAD")
    text = f"This page is {when}{f'; the book was built at `{head}`' if head else ''}."
    source = PAGE_SOURCES.get(page)
    if source:
        text += " " + source.format(bench=_bench_runs(root) if "{bench}" in source else "")
    return f"```{{admonition}} Provenance\n:class: note scp-provenance\n\n{text}\n```"


def _with_provenance(text: str, note: str) -> str:
    """``text`` (Markdown) with ``note`` after its first ``# `` heading (at the top when it has none)."""
    lines = text.split("\n")
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith("# ")), 0)
    return "\n".join([*lines[:at], "", note, "", *lines[at:]])


def _gallery_runs(text: str, root: Path, names: Sequence[str]) -> str:
    """The gallery with, under each notebook's heading, the run that drew its figures (commit and start)."""
    out = []
    for line in text.split("\n"):
        out.append(line)
        name = line[3:].strip() if line.startswith("## ") else None
        path = root / "results" / str(name) / "provenance.json"
        if name and path.is_file():
            prov = read_json(path, what=f"results/{name}/provenance.json")
            commit = str((prov.get("git") or {}).get("commit", "unknown"))[:7]
            out += [
                "",
                f"*Drawn by the run at commit `{commit}`, {_when(prov)}, {_duration(prov.get('wall_time_s'))}.*",
            ]
    return "\n".join(out)


CSS = """/* The book's own style (staged as _static/scp.css). */
/* Code and text outputs wrap instead of scrolling sideways. */
div.cell_input pre, div.cell_output pre, div.highlight pre, div.output pre {
  white-space: pre-wrap;
  overflow-wrap: anywhere;
}
/* One compact table of a notebook's recorded values. */
div.scp-records { max-height: 32em; overflow-y: auto; font-size: 0.85em; }
div.scp-records table { width: 100%; table-layout: fixed; border-collapse: collapse; }
div.scp-records td, div.scp-records th { padding: 0.1em 0.6em; border-bottom: 1px solid #e5e5e5; text-align: left;
  overflow-wrap: anywhere; vertical-align: top; }
div.scp-records th { position: sticky; top: 0; background: var(--pst-color-background, #fff); }
div.scp-records th:nth-child(1) { width: 44%; }
div.scp-records th:nth-child(3) { width: 22%; }
div.scp-records td:nth-child(n+2) { font-variant-numeric: tabular-nums; }
div.admonition.scp-provenance { font-size: 0.9em; }
article table td small { white-space: nowrap; }
table.scp-headline td, table.scp-headline th { font-size: 0.85em; padding: 0.3em 0.45em; }
/* A notebook's data frames in smaller type, so that more of a wide one fits. */
div.cell_output table.dataframe { font-size: 0.8em; }
/* Long headings (a notebook's file name) wrap in the page's contents instead of scrolling it sideways. */
nav.bd-toc-nav a, .bd-sidebar-secondary a { overflow-wrap: anywhere; }
"""


def stage(src: Path, names: Sequence[str], root: Path = ROOT) -> list[str]:
    """Stage the pages under ``src``, a new folder; returns the staged page paths (relative, in site order): the
    landing page (:func:`landing`), the notebooks, then the Markdown pages (:data:`PAGES`).

    Each notebook page is its executed copy with its provenance on top, a banner when the suite finds it stale
    (:func:`scp.suite.graph.status`) or its code changed since the run, its parameter cells hidden
    (:func:`hide_parameters`), its records as one table (:func:`tabulate_records`), chapter numbers
    (:func:`number_headings`) and no machine path in its outputs (:func:`relative_outputs`).  Each Markdown page
    gets its provenance (:func:`page_provenance`)."""
    from scp.suite.graph import status

    if os.path.lexists(src):
        raise InputError(f"{src} exists: the pages are staged into a new folder, never over one")
    src.mkdir(parents=True)
    (src / LANDING).write_text(landing(root, names))
    pages = [LANDING]
    stale = status(list(names), root / "results", root=root) if Path(root).resolve() == ROOT.resolve() else {}
    for name in names:
        copy = root / EXECUTED / f"{name}.json"
        if not copy.is_file():
            raise MissingFileError(f"no {EXECUTED}/{name}.json: python -m scp.suite.book collect {name}")
        nb = read_json(copy, what=str(copy.relative_to(root)))
        prov = check_copy(name, nb, root)
        current = current_text(name, nb, root)
        tabulate_records(nb, name)
        relative_outputs(nb, name)
        hide_parameters(nb)
        drop_none_results(nb)
        if _chapter(name) is not None:
            number_headings(nb, _chapter(name))
        nb["cells"].insert(1, _provenance_cell(name, prov))
        if not current or stale.get(name):
            nb["cells"].insert(2, _stale_cell(name, stale.get(name) or [], changed=not current))
        for i, cell in enumerate(nb["cells"]):  # every cell has an id
            cell.setdefault("id", f"cell-{i}")
        target = src / "notebooks" / f"{name}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(nb, ensure_ascii=False))
        pages.append(f"notebooks/{name}.ipynb")
        for png in sorted((root / "figures" / name).glob("*.png")):
            _copy(png, src / png.relative_to(root))
    for page in PAGES:
        _copy(root / page, src / page)
        text = (src / page).read_text()
        if page == "figures/README.md":
            text = _gallery_runs(text, root, names)
        (src / page).write_text(_with_provenance(text, page_provenance(page, root)))
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
    (src / "_static").mkdir()
    (src / "_static" / "scp.css").write_text(CSS)
    return pages


def _favicon(path: Path) -> None:
    """A 32×32 icon (the method palette's vermillion), so no page asks the server for a missing favicon.ico."""
    from PIL import Image

    Image.new("RGB", (32, 32), (213, 94, 0)).save(path, format="PNG" if path.suffix == ".png" else "ICO")


def config(pages: Sequence[str]) -> tuple[str, str]:
    """``_config.yml`` and ``_toc.yml`` of the staged book."""
    conf = {
        "title": "Shapley Context Pruning",
        "author": "the SCP developers",
        "only_build_toc_files": True,
        "execute": {"execute_notebooks": "off"},
        "parse": {"myst_enable_extensions": ["dollarmath", "amsmath"], "myst_heading_anchors": 3},
        "html": {"use_repository_button": False},
        "sphinx": {
            "config": {
                "html_extra_path": ["_extra"],
                "html_static_path": ["_static"],
                "html_css_files": ["scp.css"],
                "html_favicon": "_extra/favicon.png",
                "html_context": {"default_mode": "light"},
                "html_theme_options": {  # one search box: the sidebar's, not a second one in the header
                    "navbar_persistent": [],
                    "search_bar_text": "Search this book…",
                    "use_download_button": False,
                    "use_fullscreen_button": True,
                },
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
    others = [p for p in pages if not p.startswith("notebooks/") and p not in (LANDING, "README.md")]
    files = [p for p in ("README.md", *others) if p in pages]
    toc = {
        "format": "jb-book",
        "root": LANDING.rsplit(".", 1)[0] if LANDING in pages else "README",
        "parts": [
            {"caption": "Chapters", "chapters": [{"file": p.rsplit(".", 1)[0]} for p in notebooks]},
            {
                "caption": "The repository: README, figures, benchmarks, records",
                "chapters": [{"file": p.rsplit(".", 1)[0]} for p in files if LANDING in pages or p != "README.md"],
            },
        ],
    }
    return json.dumps(conf, indent=1), json.dumps(toc, indent=1)  # JSON is YAML


SCREENSHOTS = (
    "intro.html",
    "intro.html#the-headline-result",
    "notebooks/00_cooperative_games_tutorial.html",
    "notebooks/10_downstream_qa.html",
    "notebooks/10_downstream_qa.html#recorded-numbers",
    "BENCHMARKS.html",
)
"""The pages ``book check --screenshots`` saves when it names none: the landing page and its headline, notebooks
00 and 10 (10 also at its recorded values), and BENCHMARKS."""
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
    k.add_argument(
        "--screenshots",
        nargs="*",
        default=None,
        metavar="PAGE",
        help=f"save PNGs of these pages (page.html or page.html#anchor) under OUT/screenshots; "
        f"alone: {', '.join(SCREENSHOTS)}",
    )
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

        shots = SCREENSHOTS if args.screenshots == [] else args.screenshots or ()
        report = check_site(args.out / "html", screenshots=shots, shots_dir=args.out / "screenshots")
        print(report.describe())
        return 0 if report.ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
