"""One figure style for the suite, a colour, line style and marker per method, uncertainty bands, reproducible saving.

- :func:`style` sets seaborn's ``ticks`` theme at the paper's caption size (8 pt), embeds TrueType fonts
  (``pdf.fonttype = 42``) and drops the top and right spines.  Notebooks call it once and never set rcParams.
- :func:`figure` makes a one-column (3.3 in) or two-column (6.9 in) figure.
- :data:`STYLES` is the one registry of figure styles: every method, estimator and reader of the method registry
  (:mod:`scp.pruning.methods`, by name) and every reference element (``"bound"``, ``"full context"``,
  ``"closed book"``) has one :class:`Style` (a colour of :data:`PALETTE`, line style, marker), no two the same colour
  and line style, no two drawn in one figure (:data:`DRAWN_TOGETHER`) the same colour; exact Shapley is black.
  :func:`style_of`, :func:`color`, :func:`linestyle` and :func:`marker` look a key up by name, label or alias
  (``"scp"``, ``"SCP"``, ``"loo"``, ``"Monte Carlo"``).
- :data:`CATEGORIES` colours what is no method (classes of units, question types) from Paul Tol's "muted" colours
  that no method takes; :func:`category_color` reads it.
- :func:`band` draws the mean over samples as a line with a 95% CI band (bootstrap via
  :func:`scp.core.metrics.aggregate`, or a Student-t interval).
- :func:`save` writes ``figures/<name>.pdf`` and a 200 dpi ``.png`` without timestamps, so rerunning an
  unchanged notebook leaves the files byte-identical; :func:`save_table` writes ``results/<name>.csv`` and a
  JSON with the rows and their provenance.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from scp.errors import InputError
from scp.io import atomic_open, jsonable
from scp.pruning import methods
from scp.suite.notebook import Saved, resolve_out_dir

COLUMN_WIDTH = 3.3
"""Width of a one-column figure, in inches."""
PAGE_WIDTH = 6.9
"""Width of a two-column (full page width) figure, in inches."""
FONT_SIZE = 8
"""Text size in points (the caption size)."""
DPI = 200
"""Resolution of saved PNGs."""


OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky blue": "#56B4E9",
    "bluish green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish purple": "#CC79A7",
    "grey": "#999999",
}
"""The Okabe–Ito colour-blind-safe palette (plus a neutral grey)."""

TOL = {
    "dark red": "#663333",
    "rose": "#CC6677",
    "olive": "#999933",
    "green": "#117733",
    "teal": "#44AA99",
    "purple": "#AA4499",
    "dark blue": "#222255",
    "dark cyan": "#225555",
    "dark green": "#225522",
    "dark yellow": "#666633",
    "gold": "#DDAA33",
    "magenta": "#EE3377",
}
"""Colours of Paul Tol's "muted", "dark", "high-contrast" and "vibrant" schemes that extend :data:`OKABE_ITO` where a
figure draws more methods than it has colours (Okabe–Ito's yellow is too pale for a line on white: no method takes
it)."""

PALETTE = {**OKABE_ITO, **TOL}
"""Every colour a method or reference element may take."""


class Style(NamedTuple):
    """How every figure draws one method or reference element."""

    color: str
    linestyle: str
    marker: str


_C = PALETTE
STYLES: dict[str, Style] = {
    # the SCP network and its trained variants: one colour each, SCP vermillion
    "scp": Style(_C["vermillion"], "-", "o"),
    "scp-loo": Style(_C["dark red"], "--", "D"),
    "scp-transferred": Style(_C["olive"], ":", "s"),
    "paper-network": Style(_C["rose"], "-.", "P"),
    "convex-deepsets": Style(_C["green"], ":", "D"),
    # Shapley values and allocations of a game: exact Shapley black, Monte Carlo reddish purple, LOO orange
    "exact": Style(_C["black"], "-", "*"),
    "full": Style(_C["black"], "--", "*"),
    "mc": Style(_C["reddish purple"], "-", "o"),
    "mc_antithetic": Style(_C["reddish purple"], "--", "s"),
    "loo": Style(_C["orange"], "-", "D"),
    "least-core": Style(_C["blue"], "-.", "D"),
    "shapiq": Style(_C["sky blue"], ":", "+"),
    "kernelshap": Style(_C["bluish green"], "-.", "P"),
    "maxshapley_lm": Style(_C["blue"], "--", "h"),
    "maxshapley_minilm": Style(_C["sky blue"], "--", "H"),
    "greedy": Style(_C["dark cyan"], ":", "v"),
    # ContextCite (notebook 14): one colour, its two ablation budgets told apart by line style
    "contextcite-32": Style(_C["magenta"], "--", "s"),
    "contextcite-64": Style(_C["magenta"], "-", "s"),
    # rankers: the pointwise control blue, BM25 bluish green, MiniLM sky blue, the others a colour each
    "pointwise": Style(_C["blue"], "-", "s"),
    "bm25": Style(_C["bluish green"], "-", "^"),
    "tfidf": Style(_C["purple"], "--", "<"),
    "cosine": Style(_C["sky blue"], "-", "v"),
    "cross-encoder": Style(_C["dark blue"], "-.", "P"),
    "llmlingua2": Style(_C["gold"], "-", "X"),
    "provence": Style(_C["teal"], "-.", "d"),
    "ecs": Style(_C["orange"], "--", "D"),
    "ecs-free": Style(_C["dark yellow"], ":", "P"),
    # chance and reference elements
    "random": Style(_C["grey"], "-", "x"),
    "random-order": Style(_C["grey"], ":", "x"),
    "bound": Style(_C["grey"], "--", ""),
    "full context": Style(_C["black"], ":", "p"),
    "closed book": Style(_C["dark green"], "-.", "P"),
}
"""The style of every method (by its registry name) and reference element (bounds and reference lines; the whole
context and no context of notebook 10); tests/test_plot.py checks that no two share a colour and line style, that
no two drawn in one figure (:data:`DRAWN_TOGETHER`) share a colour unless they are one :data:`FAMILIES`, and that
every registered method has one."""
del _C

DRAWN_TOGETHER: dict[str, frozenset[str]] = {
    "rankers (02, 03, 06, 09, 10)": frozenset(
        {
            "scp",
            "scp-loo",
            "pointwise",
            "random",
            "bm25",
            "cosine",
            "cross-encoder",
            "llmlingua2",
            "provence",
            "tfidf",
            "scp-transferred",
            "full context",
            "closed book",
        }
    ),
    "evidence selection (12)": frozenset({"ecs", "ecs-free", "tfidf", "bm25", "scp", "pointwise"}),
    "trained networks (01, 07, 13)": frozenset(
        {"scp", "pointwise", "paper-network", "convex-deepsets", "scp-transferred", "bm25"}
    ),
    "estimators of a game (00, 04, 05, 08)": frozenset(
        {"exact", "mc", "mc_antithetic", "loo", "least-core", "shapiq", "kernelshap", "greedy", "bound"}
    ),
    "attribution judged by the reader (14)": frozenset(
        {"scp", "scp-loo", "pointwise", "bm25", "cosine", "random", "loo", "contextcite-32", "contextcite-64"}
    ),
    "LM-call budgets (11)": frozenset(
        {"full", "loo", "mc", "mc_antithetic", "kernelshap", "maxshapley_lm", "maxshapley_minilm", "random-order"}
    ),
}
"""Which methods the suite's figures draw side by side: within one set, colours differ (but in :data:`FAMILIES`)."""

FAMILIES = (
    frozenset({"exact", "full"}),
    frozenset({"mc", "mc_antithetic"}),
    frozenset({"random", "random-order"}),
    frozenset({"contextcite-32", "contextcite-64"}),
)
"""Two forms of one estimator: one colour, told apart by line style and marker."""

ELEMENTS = ("bound", "full context", "closed book")
"""The keys of :data:`STYLES` that are no method: bounds and reference lines, and notebook 10's reference
conditions."""

CATEGORIES = {
    "supporting": "#882255",  # wine
    "distractor": "#BBBBBB",  # grey
    "bridge": "#332288",  # indigo
    "comparison": "#DDCC77",  # sand
}
"""Colours of what is no method: the two classes of units and the question types (Paul Tol's colour-blind-safe
"muted" palette, apart from the method colours)."""

__all__ = [
    "COLUMN_WIDTH",
    "DPI",
    "CATEGORIES",
    "ELEMENTS",
    "FONT_SIZE",
    "OKABE_ITO",
    "PALETTE",
    "TOL",
    "DRAWN_TOGETHER",
    "FAMILIES",
    "PAGE_WIDTH",
    "STYLES",
    "Saved",
    "Style",
    "band",
    "category_color",
    "color",
    "draw_tree",
    "figure",
    "linestyle",
    "marker",
    "save",
    "save_table",
    "style",
    "style_of",
    "tree_layout",
]


def style_of(key: str) -> Style | None:
    """The :class:`Style` of a figure key: an element of :data:`ELEMENTS`, else a method of the registry
    (:func:`scp.pruning.methods.find`: its name, label or an alias; case-insensitive); ``None`` for neither."""
    folded = str(key).strip().casefold()
    if folded in ELEMENTS:
        return STYLES[folded]
    method = methods.find(key)
    return None if method is None else STYLES.get(method.name)


def _style(key: str) -> Style:
    found = style_of(key)
    if found is None:
        known = ", ".join([*ELEMENTS, *methods.names()])
        raise KeyError(f"no style for {key!r}; register the method and give it a style in STYLES (known: {known})")
    return found


def color(key: str) -> str:
    """The fixed colour of a method (its name, label or alias) or figure element; ``KeyError`` naming the known
    ones for anything else."""
    return _style(key).color


def linestyle(key: str) -> str:
    """The fixed line style of a method or figure element (see :func:`color`)."""
    return _style(key).linestyle


def marker(key: str) -> str:
    """The fixed marker of a method or figure element (see :func:`color`)."""
    return _style(key).marker


def category_color(key: str) -> str:
    """The colour of a category that is no method (:data:`CATEGORIES`: ``"supporting"``, ``"bridge"``, …);
    ``KeyError`` naming the known ones for anything else."""
    try:
        return CATEGORIES[str(key).strip().casefold()]
    except KeyError:
        raise KeyError(f"no category colour for {key!r}; known: {', '.join(CATEGORIES)}") from None


def style() -> None:
    """Set the suite's style: seaborn ``ticks`` theme, 8 pt text, embedded TrueType fonts, no top/right spines."""
    import matplotlib as mpl
    import seaborn as sns

    sns.set_theme(context="paper", style="ticks", palette=list(OKABE_ITO.values())[:8], font="DejaVu Sans")
    mpl.rcParams.update(
        {
            "font.size": FONT_SIZE,
            "axes.titlesize": FONT_SIZE,
            "axes.labelsize": FONT_SIZE,
            "xtick.labelsize": FONT_SIZE - 1,
            "ytick.labelsize": FONT_SIZE - 1,
            "legend.fontsize": FONT_SIZE - 1,
            "legend.title_fontsize": FONT_SIZE,
            "figure.titlesize": FONT_SIZE,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "legend.frameon": False,
            "pdf.fonttype": 42,
            "ps.fonttype": 42,
            "svg.fonttype": "none",
            "figure.dpi": 180,  # inline in a notebook: a column figure about 600 px wide (files use savefig.dpi)
            "savefig.dpi": DPI,
            "savefig.bbox": "tight",
            "savefig.pad_inches": 0.02,
            "lines.linewidth": 1.2,
            "lines.markersize": 4,
            "axes.linewidth": 0.6,
            "xtick.major.width": 0.6,
            "ytick.major.width": 0.6,
            "grid.linewidth": 0.4,
            "image.cmap": "viridis",
            "figure.constrained_layout.use": True,
        }
    )


def figure(kind: str = "column", aspect: float | None = None, nrows: int = 1, ncols: int = 1, **kwargs):
    """A new figure in the suite's style, one column (3.3 in) or a full page (6.9 in) wide.

    Args:
        kind: ``"column"`` or ``"page"``.
        aspect: height / width of the whole figure (default 0.62 for a column, 0.33 for a page).
        nrows, ncols: panels, as in :func:`matplotlib.pyplot.subplots`.
        **kwargs: passed on to :func:`matplotlib.pyplot.subplots` (``sharey=True``, …).

    Returns:
        ``(fig, ax)``, with ``ax`` an array when there are several panels.
    """
    import matplotlib.pyplot as plt

    widths = {"column": COLUMN_WIDTH, "page": PAGE_WIDTH}
    if kind not in widths:
        raise InputError(f"kind must be 'column' or 'page'; got {kind!r}")
    if aspect is None:
        aspect = 0.62 if kind == "column" else 0.33
    if not aspect > 0:
        raise InputError(f"aspect must be > 0; got {aspect}")
    style()
    width = widths[kind]
    return plt.subplots(nrows, ncols, figsize=(width, width * aspect), **kwargs)


def _interval(samples: np.ndarray, ci: str, level: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from scipy import stats

    from scp.core.metrics import aggregate

    mean, low, high = (np.full(samples.shape[0], np.nan) for _ in range(3))
    for k, row in enumerate(samples):
        row = row[~np.isnan(row)]
        if row.size == 0:
            continue
        mean[k] = row.mean()
        if row.size < 2:
            continue
        if ci == "bootstrap":
            agg = aggregate(row, seed=seed, ci=level)
            low[k], high[k] = agg.ci_low, agg.ci_high
        else:
            half = stats.t.ppf((1 + level) / 2, row.size - 1) * row.std(ddof=1) / math.sqrt(row.size)
            low[k], high[k] = mean[k] - half, mean[k] + half
    return mean, low, high


def band(
    ax,
    x: Sequence[float],
    samples,
    label: str,
    ci: str = "bootstrap",
    level: float = 0.95,
    color: str | None = None,
    marker: str | None = None,
    seed: int = 0,
    alpha: float = 0.25,
    hatch: str | None = None,
    **line_kw,
):
    """Plot the mean of ``samples`` against ``x`` with a shaded confidence band for that mean.

    Args:
        ax: a matplotlib axes.
        x: the k positions (e.g. budgets M).
        samples: (k, r) values, r repeats per position (the sample axis is the last one); ``nan`` is skipped.
        label: legend label; also picks the method's colour, line style and marker when it names one (see
            :func:`style_of`).
        ci: ``"bootstrap"`` (percentile bootstrap of the mean, :func:`scp.core.metrics.aggregate`) or ``"t"``
            (Student-t interval).
        level: confidence level of the band (0.95).
        color, marker: override the method's colour or marker.
        seed: seed of the bootstrap resampling.
        alpha: opacity of the band.
        hatch: a matplotlib hatch pattern (e.g. ``"////"``): draw the band as hatch lines in the line's colour, with
            no fill, so that it stays apart from a filled band it overlaps (``None``: a filled band).
        **line_kw: passed to ``ax.plot`` (``ls`` overrides the method's line style).

    Returns:
        ``(line, mean, low, high)``: the line artist and the plotted statistics (arrays of length k).
    """
    if ci not in ("bootstrap", "t"):
        raise InputError(f"ci must be 'bootstrap' or 't'; got {ci!r}")
    if not 0 < level < 1:
        raise InputError(f"level must lie in (0, 1); got {level}")
    x = np.asarray(x, dtype=np.float64)
    s = np.asarray(samples, dtype=np.float64)
    if s.ndim == 1:
        s = s[:, None]
    if s.ndim != 2 or s.shape[0] != x.size:
        raise InputError(f"samples must have shape (len(x), repeats) = ({x.size}, r); got {np.shape(samples)}")
    found = style_of(label)
    c = color if color is not None else (found.color if found else None)
    m = marker if marker is not None else (found.marker if found else None)
    if found and "ls" not in line_kw and "linestyle" not in line_kw:
        line_kw["ls"] = found.linestyle
    mean, low, high = _interval(s, ci, level, seed)
    (line,) = ax.plot(x, mean, label=label, color=c, marker=m or None, **line_kw)
    if np.isfinite(low).any():
        if hatch is None:
            ax.fill_between(x, low, high, color=line.get_color(), alpha=alpha, linewidth=0)
        else:
            ax.fill_between(
                x, low, high, facecolor="none", edgecolor=line.get_color(), hatch=hatch, alpha=alpha, linewidth=0
            )
    return line, mean, low, high


# ------------------------------------------------------------------------------------------------- saving


def _target(kind: str, name: str, out_dir) -> Path:
    rel = Path(name)
    if rel.is_absolute() or ".." in rel.parts or not rel.name:
        raise InputError(f"name must be a relative path such as 'NN_slug/panel'; got {name!r}")
    return resolve_out_dir(out_dir) / kind / rel


def _write_if_changed(path: Path, data: bytes) -> Path:
    if not (path.is_file() and path.read_bytes() == data):
        with atomic_open(path, "wb") as f:
            f.write(data)
    return path


def save(fig, name: str, out_dir: str | Path | None = None, formats: Iterable[str] = ("pdf", "png")) -> Saved:
    """Write ``<out_dir>/figures/<name>.pdf`` and ``.png`` (200 dpi) without timestamps; return their paths.

    Args:
        fig: a matplotlib figure.
        name: ``"NN_slug/panel"`` (no extension).
        out_dir: the folder holding ``figures/``; ``None`` means the repository root.
        formats: file types to write.

    Returns:
        The paths written, in the order of ``formats``.  Unchanged files are not rewritten (their bytes
        and modification times stay as they were).
    """
    metadata = {
        "pdf": {"CreationDate": None, "ModDate": None, "Producer": None},
        "png": {"Software": None},
        "svg": {"Date": None},
    }
    paths = []
    for fmt in formats:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=DPI, metadata=metadata.get(fmt))
        base = _target("figures", name, out_dir)
        paths.append(_write_if_changed(base.with_name(f"{base.name}.{fmt}"), buf.getvalue()))
    return Saved(paths)


def _records(table) -> tuple[list[str], list[dict[str, Any]]]:
    if hasattr(table, "to_dict") and hasattr(table, "columns"):  # a pandas DataFrame
        columns = [str(c) for c in table.columns]
        rows = [dict(zip(columns, r)) for r in table.itertuples(index=False, name=None)]
    elif isinstance(table, Mapping):  # {column: values}
        columns = [str(c) for c in table]
        lengths = {len(v) for v in table.values()}
        if len(lengths) > 1:
            raise InputError(f"columns have different lengths: {sorted(lengths)}")
        rows = [dict(zip(columns, vals)) for vals in zip(*table.values())]
    else:  # a sequence of row mappings
        rows = [dict(r) for r in table]
        columns = []
        for r in rows:
            columns += [str(k) for k in r if str(k) not in columns]
    return columns, [{c: jsonable(r.get(c)) for c in columns} for r in rows]


def save_table(table, name: str, out_dir: str | Path | None = None, provenance: Mapping | None = None) -> Saved:
    """Write ``<out_dir>/results/<name>.csv`` and ``<name>.json`` (rows at full precision plus provenance).

    Args:
        table: a pandas DataFrame, a mapping ``{column: values}`` or a sequence of row mappings.
        name: ``"NN_slug/table"`` (no extension).
        out_dir: the folder holding ``results/``; ``None`` means the repository root.
        provenance: what the table was computed from, e.g. :meth:`scp.suite.notebook.NotebookRun.provenance` or
            :func:`scp.suite.notebook.provenance`.

    Returns:
        ``[csv_path, json_path]``.  The JSON holds ``{"name", "columns", "rows", "provenance"}``; floats are
        written with ``repr`` precision (they read back exactly).
    """
    columns, rows = _records(table)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(columns)
    for r in rows:
        writer.writerow(
            [
                ""
                if r[c] is None
                else (
                    repr(r[c])
                    if isinstance(r[c], float)
                    else json.dumps(r[c])
                    if isinstance(r[c], (list, dict))
                    else r[c]
                )
                for c in columns
            ]
        )
    doc = {"name": name, "columns": columns, "rows": rows, "provenance": jsonable(provenance or {})}
    base = _target("results", name, out_dir)
    return Saved(
        [
            _write_if_changed(base.with_name(f"{base.name}.csv"), text.getvalue().encode()),
            _write_if_changed(base.with_name(f"{base.name}.json"), (json.dumps(doc, indent=1) + "\n").encode()),
        ]
    )


# ---------------------------------------------------------------------------------------------- trees


def tree_layout(root) -> tuple[dict, list[tuple]]:
    """Positions for drawing a context tree (:class:`scp.core.theory.ContextNode`) with its players as leaves.

    Every player hangs below the smallest node that holds it; players are laid out left to right in
    depth-first order (children before the node's own players), all on the bottom row, and each node sits
    above the mean of its children, one row per depth (the root at y = 0, deeper rows at y = −1, −2, …).

    Args:
        root: the tree's root node (``players``, ``children``).

    Returns:
        ``(positions, edges)``: ``positions`` maps each node's player set (a frozenset) and each player (an int)
        to ``(x, y)``; ``edges`` lists ``(parent, child)`` keys, nodes before their players.
    """
    depth_of, order = {}, []

    def visit(node, depth):
        depth_of[node.players] = depth
        order.append(node)
        for child in node.children:
            visit(child, depth + 1)

    visit(root, 0)
    bottom = -(max(depth_of.values()) + 1)
    positions, edges, next_x = {}, [], [0]

    def place(node):
        xs = []
        for child in node.children:
            edges.append((node.players, child.players))
            xs.append(place(child))
        own = sorted(set(node.players) - set().union(*(c.players for c in node.children)))
        for player in own:
            positions[player] = (float(next_x[0]), float(bottom))
            next_x[0] += 1
            edges.append((node.players, player))
            xs.append(positions[player][0])
        positions[node.players] = (float(np.mean(xs)) if xs else float(next_x[0]), float(-depth_of[node.players]))
        return positions[node.players][0]

    place(root)
    return positions, edges


def draw_tree(
    ax,
    root,
    leaf_labels: Mapping[int, str] | None = None,
    leaf_colors: Mapping[int, str] | None = None,
    node_label=None,
    fontsize: float = FONT_SIZE - 1,
):
    """Draw a context tree as a tree: nodes as dots labelled by ``node_label(players)`` (default the number of
    players), players as coloured leaves with their labels rotated below.  Uses :func:`tree_layout`.

    Args:
        ax: a matplotlib axes (its axis lines are turned off).
        root: the root :class:`scp.core.theory.ContextNode`.
        leaf_labels: text under each player (default its index).
        leaf_colors: colour of each player's dot (default grey).
        node_label: a function of a node's frozenset of players returning its label (``None``: ``|S|``).
        fontsize: size of the labels.

    Returns:
        The ``positions`` of :func:`tree_layout`.
    """
    positions, edges = tree_layout(root)
    grey = OKABE_ITO["grey"]
    for parent, child in edges:
        (x0, y0), (x1, y1) = positions[parent], positions[child]
        ax.plot([x0, x1], [y0, y1], color=grey, lw=0.8, zorder=1)
    for key, (x, y) in positions.items():
        if isinstance(key, frozenset):
            ax.scatter([x], [y], s=40, color=OKABE_ITO["black"], zorder=2)
            text = str(len(key)) if node_label is None else node_label(key)
            ax.annotate(text, (x, y), xytext=(4, 3), textcoords="offset points", fontsize=fontsize)
        else:
            c = (leaf_colors or {}).get(key, grey)
            ax.scatter([x], [y], s=30, color=c, zorder=2, edgecolor="white", linewidth=0.5)
            ax.annotate(
                (leaf_labels or {}).get(key, str(key)),
                (x, y),
                xytext=(0, -6),
                textcoords="offset points",
                rotation=90,
                ha="center",
                va="top",
                fontsize=fontsize,
                color=c,
            )
    ax.set_axis_off()
    return positions
