"""The package's layout as the README shows it, read from the tree: ``python -m scp.suite.layout`` rewrites the
table between the ``layout-table`` markers of ``README.md`` (a test keeps it equal to the tree).

One row per subpackage (and the CLI and the foundation modules), bottom layer first, in the order of the
import-linter layers contract in ``pyproject.toml``: what it holds (the first sentence of its docstring), its lines
of code and its modules with theirs.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

from scp.io import replace_section
from scp.paths import ROOT

MARKERS = ("<!-- layout-table -->", "<!-- /layout-table -->")


def layers(root: Path = ROOT) -> list[list[str]]:
    """The import-linter layers of ``pyproject.toml``, bottom first: each a list of dotted module names."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    return [[m.strip() for m in layer.split("|")] for layer in reversed(contract["layers"])]


def _summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    first = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", first).replace("``", "`")  # reST roles read as code in markdown
    return re.split(r"(?<=\.)\s", first, maxsplit=1)[0].rstrip(".")


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def layout_table(root: Path = ROOT) -> str:
    """The markdown table: package, lines, what it holds, its modules (lines each)."""
    rows = ["| layer | package | lines | what | modules (lines) |", "|---|---|--:|---|---|"]
    for depth, layer in enumerate(layers(root)):
        for name in layer:
            path = root / name.replace(".", "/")
            if path.is_dir():
                modules = sorted(p for p in path.glob("*.py") if p.name != "__init__.py")
                summary, shown = _summary(path / "__init__.py"), f"`{name.replace('.', '/')}/`"
            else:
                modules, path = [path.with_suffix(".py")], path.with_suffix(".py")
                summary, shown = _summary(path), f"`{name.replace('.', '/')}.py`"
            total = sum(_lines(p) for p in path.glob("*.py")) if path.is_dir() else _lines(path)
            listed = ", ".join(f"`{p.stem}` {_lines(p)}" for p in modules) if path.is_dir() else ""
            rows.append(f"| {depth} | {shown} | {total:,} | {summary} | {listed} |")
    api = root / "scp" / "__init__.py"
    rows.append(f"| top | `scp/__init__.py` | {_lines(api)} | {_summary(api)} |  |")
    return "\n".join(rows)


def write_readme(root: Path = ROOT) -> bool:
    """Rewrite README.md's layout table; True when it changed."""
    return replace_section(root / "README.md", "layout-table", layout_table(root))


def main(argv: list[str] | None = None) -> int:
    import argparse

    argparse.ArgumentParser(
        prog="python -m scp.suite.layout", description="Rewrite README.md's layout table from the package's modules."
    ).parse_args(argv)
    print("README.md layout table", "updated" if write_readme() else "unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
