"""The architecture holds: the import-linter layers of pyproject.toml are kept, a core module importing from a
higher layer breaks them (the check can fail), and the README's layout table is the tree's."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

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
