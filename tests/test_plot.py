import json
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib as mpl  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

import scp.experiments.attribution  # noqa: E402, F401  (registers ContextCite's methods)
import scp.experiments.ecs  # noqa: E402, F401  (registers ECS's methods)
import scp.experiments.maxshapley  # noqa: E402, F401  (registers FullShapley, KernelSHAP, MaxShapley, random order)
from scp.pruning import methods  # noqa: E402
from scp.suite import plot  # noqa: E402
from scp.suite.notebook import repo_root  # noqa: E402


def _demo_figure():
    fig, ax = plot.figure("column")
    samples = np.random.default_rng(0).random((3, 20))
    plot.band(ax, [10, 20, 50], samples, label="Monte Carlo")
    plot.band(ax, [10, 20, 50], samples * 2, label="loo", ci="t")
    ax.set(xscale="log", xlabel="permutations $M$", ylabel=r"$\hat\phi_i$")
    ax.legend()
    return fig


def test_save_writes_pdf_and_png_where_asked(tmp_path):
    paths = plot.save(_demo_figure(), "99_demo/error", tmp_path)
    assert paths == [tmp_path / "figures" / "99_demo" / "error.pdf", tmp_path / "figures" / "99_demo" / "error.png"]
    pdf, png = (p.read_bytes() for p in paths)
    assert pdf.startswith(b"%PDF") and png.startswith(b"\x89PNG")
    assert b"CreationDate" not in pdf and b"ModDate" not in pdf  # no timestamps
    assert b"/FontFile2" in pdf  # TrueType embedded (pdf.fonttype 42)
    assert b"Software" not in png[:2000]
    from PIL import Image

    with Image.open(paths[1]) as im:
        assert round(im.info["dpi"][0]) == plot.DPI


def test_rerun_is_byte_identical(tmp_path):
    first = [p.read_bytes() for p in plot.save(_demo_figure(), "99_demo/error", tmp_path / "a")]
    mtimes = [p.stat().st_mtime_ns for p in (tmp_path / "a" / "figures" / "99_demo").iterdir()]
    again = plot.save(_demo_figure(), "99_demo/error", tmp_path / "a")  # a fresh figure, same content
    assert [p.read_bytes() for p in again] == first
    assert [p.stat().st_mtime_ns for p in (tmp_path / "a" / "figures" / "99_demo").iterdir()] == mtimes
    other = plot.save(_demo_figure(), "99_demo/error", tmp_path / "b")
    assert [p.read_bytes() for p in other] == first


def test_save_default_is_the_repository_and_names_must_be_relative(tmp_path):
    assert plot._target("figures", "00_x/panel", None) == repo_root() / "figures" / "00_x" / "panel"
    for bad in ("/abs/panel", "../escape", ""):
        with pytest.raises(ValueError, match="relative path"):
            plot.save(_demo_figure(), bad, tmp_path)


def test_style_and_figure_sizes():
    fig, ax = plot.figure("column")
    assert fig.get_size_inches()[0] == pytest.approx(plot.COLUMN_WIDTH)
    assert fig.get_size_inches()[1] == pytest.approx(plot.COLUMN_WIDTH * 0.62)
    fig, axes = plot.figure("page", aspect=0.5, ncols=2)
    assert fig.get_size_inches() == pytest.approx([plot.PAGE_WIDTH, plot.PAGE_WIDTH * 0.5])
    assert len(axes) == 2
    assert mpl.rcParams["font.size"] == 8 and mpl.rcParams["pdf.fonttype"] == 42
    assert not mpl.rcParams["axes.spines.top"] and not mpl.rcParams["axes.spines.right"]
    with pytest.raises(ValueError, match="kind"):
        plot.figure("poster")
    with pytest.raises(ValueError, match="aspect"):
        plot.figure("column", aspect=0)


def test_one_style_per_method_and_element_no_two_alike():
    from matplotlib.lines import Line2D
    from matplotlib.markers import MarkerStyle

    assert set(plot.STYLES) == {*methods.names(), *plot.ELEMENTS}  # every registered method has a style
    pairs = [(s.color, s.linestyle) for s in plot.STYLES.values()]
    assert len(set(pairs)) == len(pairs), [k for k, s in plot.STYLES.items() if pairs.count((s.color, s.linestyle)) > 1]
    for key, s in plot.STYLES.items():
        assert s.color in plot.PALETTE.values() and s.linestyle in Line2D.lineStyles, key
        assert s.marker == "" if key == "bound" else MarkerStyle(s.marker).get_path().vertices.size, key
    assert plot.color("exact") == plot.color("FullShapley (exact, $2^n$)") == plot.OKABE_ITO["black"]


def _contrast_on_white(hex_color: str) -> float:
    """WCAG 2 contrast ratio of a colour against white: (1 + 0.05) / (L + 0.05), L the relative luminance."""
    rgb = [int(hex_color[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 1.05 / (0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2] + 0.05)


def test_methods_drawn_together_never_share_a_colour_and_every_colour_shows_on_white():
    from itertools import combinations

    assert set().union(*plot.DRAWN_TOGETHER.values()) <= set(plot.STYLES)
    family = {key: f for f in plot.FAMILIES for key in f}
    for figure, keys in plot.DRAWN_TOGETHER.items():
        for a, b in combinations(sorted(keys), 2):
            same_family = a in family and b in family[a]
            assert same_family or plot.STYLES[a].color != plot.STYLES[b].color, (figure, a, b)
    for f in plot.FAMILIES:
        assert len({plot.STYLES[k].color for k in f}) == 1, f
    # the defects issue 43 saw: SCP and SCP-LOO, TF-IDF and BM25, ConvexDeepSets and Monte Carlo shared a colour
    for a, b in (("scp", "scp-loo"), ("tfidf", "bm25"), ("convex-deepsets", "mc"), ("scp", "paper-network")):
        assert plot.color(a) != plot.color(b), (a, b)
    # Okabe–Ito's yellow (contrast 1.3 on white) drew ECS and closed book; every line colour now reaches 2.0
    contrast = {key: round(_contrast_on_white(s.color), 2) for key, s in plot.STYLES.items()}
    low = {key: c for key, c in contrast.items() if c < 2.0}
    assert not low, low


def test_styles_are_found_by_name_label_or_alias():
    assert (
        plot.style_of("loo") == plot.style_of("Leave-One-Out") == plot.style_of(" leave_one_out ") == plot.STYLES["loo"]
    )
    assert plot.color("SCP") == plot.color("deepsets") == plot.OKABE_ITO["vermillion"] and plot.linestyle("scp") == "-"
    assert plot.marker("mc") == plot.marker("Monte Carlo") == "o"
    assert plot.style_of("Closed Book") == plot.STYLES["closed book"] and plot.marker("bound") == ""
    assert plot.style_of("my new method") is None
    for lookup in (plot.color, plot.linestyle, plot.marker):
        with pytest.raises(KeyError, match="no style for 'my new method'"):
            lookup("my new method")


def test_categories_take_no_method_colour():
    assert not set(plot.CATEGORIES.values()) & {s.color for s in plot.STYLES.values()}
    assert len(set(plot.CATEGORIES.values())) == len(plot.CATEGORIES)
    assert plot.category_color("Bridge") == plot.CATEGORIES["bridge"]
    with pytest.raises(KeyError, match="no category colour for 'scp'"):
        plot.category_color("scp")


def _style_keys(code: str):
    """The string literals a notebook cell passes to plot.color/linestyle/marker/style_of, and to plot.band as the
    label it takes its style from."""
    import ast

    for node in ast.walk(ast.parse(code)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if not (isinstance(node.func.value, ast.Name) and node.func.value.id == "plot"):
            continue
        if node.func.attr in ("color", "linestyle", "marker", "style_of"):
            args = node.args[:1]
        elif node.func.attr == "band" and not any(k.arg == "color" for k in node.keywords):  # styled by its label
            args = [*node.args[3:4], *(k.value for k in node.keywords if k.arg == "label")]
        else:
            continue
        yield from (a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str))


def test_every_method_the_notebooks_name_has_a_style():
    import nbformat

    seen, unknown = set(), set()
    for path in sorted((repo_root() / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
                for key in _style_keys(code):
                    seen.add(key)
                    if plot.style_of(key) is None:
                        unknown.add(f"{path.name}: {key!r}")
    assert not unknown, sorted(unknown)
    assert {"exact", "Monte Carlo", "bound", "closed book"} <= seen  # the scan finds the notebooks' keys


def test_band_t_interval_and_bootstrap():
    x = np.array([1.0, 2.0])
    samples = np.array([[1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 2.0, np.nan]])
    fig, ax = plot.figure("column")
    line, mean, low, high = plot.band(ax, x, samples, label="exact", ci="t")
    half = stats.t.ppf(0.975, 3) * np.std([1, 2, 3, 4], ddof=1) / 2
    assert mean == pytest.approx([2.5, 2.0])
    assert low[0] == pytest.approx(2.5 - half) and high[0] == pytest.approx(2.5 + half)
    assert low[1] == high[1] == pytest.approx(2.0)  # nan skipped, no spread
    assert line.get_color() == plot.color("exact") and line.get_label() == "exact" and line.get_linestyle() == "-"
    _, mean_b, low_b, high_b = plot.band(ax, x, samples, label="Monte Carlo")
    assert plot.band(ax, x, samples, label="scp-loo")[0].get_linestyle() == "--"  # the method's line style
    assert plot.band(ax, x, samples, label="scp-loo", ls=":")[0].get_linestyle() == ":"  # unless overridden
    assert (low_b <= mean_b).all() and (mean_b <= high_b).all() and low_b[0] < high_b[0]
    _, _, low_1, _ = plot.band(ax, [1.0], [[3.0]], label="one sample", color="k")
    assert math.isnan(low_1[0])  # one sample: no band
    n_fills = len(ax.collections)
    plot.band(ax, x, samples, label="leave-one-out", hatch="////")  # a hatched band: no fill, the line's colour
    hatched = ax.collections[n_fills]
    assert hatched.get_hatch() == "////" and len(hatched.get_facecolor()) == 0  # facecolor "none"
    assert mpl.colors.same_color(hatched.get_edgecolor()[0][:3], plot.color("loo"))
    with pytest.raises(ValueError, match="shape"):
        plot.band(ax, [1, 2, 3], samples, label="x")
    with pytest.raises(ValueError, match="ci"):
        plot.band(ax, x, samples, label="x", ci="normal")


def test_save_table_writes_csv_and_json_with_provenance(tmp_path):
    df = pd.DataFrame(
        {
            "method": ["exact", "loo"],
            "value": [1 / 3, -0.0],
            "n": [3, 4],
            "vec": [np.array([0.5, 0.25]), np.array([1.0, 0.0])],
        }
    )
    prov = {"parameters": {"seed": 0}, "wall_time_s": 1.5}
    csv_path, json_path = plot.save_table(df, "99_demo/table", tmp_path, provenance=prov)
    assert csv_path == tmp_path / "results" / "99_demo" / "table.csv"
    assert json_path == tmp_path / "results" / "99_demo" / "table.json"
    back = pd.read_csv(csv_path)
    assert back["value"].tolist() == [1 / 3, 0.0]  # full precision
    doc = json.loads(json_path.read_text())
    assert doc["columns"] == ["method", "value", "n", "vec"]
    assert doc["rows"][0] == {"method": "exact", "value": 1 / 3, "n": 3, "vec": [0.5, 0.25]}
    assert doc["provenance"] == prov
    before = csv_path.read_bytes()
    plot.save_table(df.to_dict(orient="records"), "99_demo/table", tmp_path, provenance=prov)
    assert csv_path.read_bytes() == before
    plot.save_table({"a": [1, 2], "b": ["x", "y"]}, "99_demo/cols", tmp_path)
    assert (tmp_path / "results" / "99_demo" / "cols.csv").read_text() == "a,b\n1,x\n2,y\n"
    with pytest.raises(ValueError, match="lengths"):
        plot.save_table({"a": [1, 2], "b": [1]}, "99_demo/bad", tmp_path)


def test_saved_paths_show_as_one_line(tmp_path):
    fig = _demo_figure()
    saved = plot.save(fig, "99_test/line", out_dir=tmp_path)
    assert saved == [tmp_path / "figures" / "99_test" / "line.pdf", tmp_path / "figures" / "99_test" / "line.png"]
    assert repr(saved) == "saved line (pdf, png) in figures/99_test"  # no machine path (issue 43)
    assert "PosixPath" not in repr(saved) and str(tmp_path) not in repr(saved)
