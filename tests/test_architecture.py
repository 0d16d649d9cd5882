"""The architecture holds: the import-linter layers of pyproject.toml are kept, a core module importing from a
higher layer breaks them (the check can fail), the README's layout table is the tree's, and no module of
scp.pruning or scp.suite imports, directly or through others of its package, a module that imports it."""

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scp.suite import layout

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess:
    """lint-imports on the package under ``root`` (its pyproject.toml, its scp/ first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_layers_contract_is_kept():
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_a_core_module_importing_a_higher_layer_breaks_the_contract(tmp_path):
    shutil.copytree(ROOT / "scp", tmp_path / "scp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    games = tmp_path / "scp" / "core" / "games.py"
    games.write_text(games.read_text() + "\nfrom scp.pruning.pruner import ShapleyPruner  # noqa: E402,F401\n")
    result = lint(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "scp.core is not allowed to import scp.pruning" in result.stdout
    assert "scp.core.games -> scp.pruning.pruner" in result.stdout


def test_readme_layout_table_is_the_tree():
    text = (ROOT / "README.md").read_text()
    start, end = layout.MARKERS
    shown = text[text.index(start) + len(start) : text.index(end)].strip()
    assert shown == layout.layout_table(ROOT), "README's layout table is stale: run python -m scp.suite.layout"


def import_graph(package: Path) -> dict[str, set[str]]:
    """``{module: the modules of the same package it imports}`` of one subpackage of scp, read from every import
    statement anywhere in each module (inside functions too: a lazy import is still a dependency)."""
    name = f"scp.{package.name}"
    modules = {f"{name}.{path.stem}": path for path in package.glob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in modules:
                graph[module].add(node.module)
            elif isinstance(node, ast.ImportFrom) and node.module == name:
                graph[module] |= {f"{name}.{a.name}" for a in node.names} & set(modules)
            elif isinstance(node, ast.Import):
                graph[module] |= {a.name for a in node.names if a.name in modules}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: each a path that ends at the module it starts from."""
    found, done = [], set()

    def visit(module: str, path: list[str]) -> None:
        for other in sorted(graph[module]):
            if other in path:
                found.append([*path[path.index(other) :], other])
            elif other not in done:
                visit(other, [*path, other])
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    return found


@pytest.mark.parametrize("package", ["pruning", "suite"])
def test_no_import_circle_inside_the_package(package):
    """The layers contract does not see circles inside one layer; this walk of every import statement does."""
    assert circles(import_graph(ROOT / "scp" / package)) == []


def test_a_lazy_import_that_closes_a_circle_is_found(tmp_path):
    package = tmp_path / "suite"
    shutil.copytree(ROOT / "scp" / "suite", package, ignore=shutil.ignore_patterns("__pycache__"))
    sources = package / "sources.py"
    sources.write_text(sources.read_text() + "\n\ndef _late():\n    from scp.suite.runner import run  # noqa: F401\n")
    assert ["scp.suite.sources", "scp.suite.runner", "scp.suite.sources"] in circles(import_graph(package))


def test_environment_yml_installs_the_extras_make_setup_installs():
    """``environment.yml`` (conda users) and ``make setup`` install the same extras, each one pyproject defines."""
    import tomllib

    extras = re.search(r"^EXTRAS \?= (\S+)$", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M).group(1)
    conda = re.search(r"-e \.\[([^\]]+)\]", (ROOT / "environment.yml").read_text(encoding="utf-8")).group(1)
    assert conda.split(",") == extras.split(",")
    defined = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert set(extras.split(",")) <= set(defined), set(extras.split(",")) - set(defined)
