"""Papermill runner: execute notebooks with their parameter files.

``python -m scp.runner --all`` runs every ``notebooks/<name>.ipynb`` with ``params/<name>.yaml`` (the full run);
``--smoke`` uses the ``smoke:`` section of the same file instead (tiny values the tests use).  Executed copies
go to ``runs/`` (ignored by git); notebooks write their own figures under ``figures/`` and tables under
``results/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def load_params(name: str, smoke: bool = False, params_dir: Path = ROOT / "params") -> dict:
    """The full-run parameters of a notebook, or its ``smoke`` overrides applied on top of them."""
    path = params_dir / f"{name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no parameter file {path} for notebook {name!r}")
    params = yaml.safe_load(path.read_text()) or {}
    if not isinstance(params, dict):
        raise ValueError(f"{path} must hold a mapping of parameter names to values")
    smoke_values = params.pop("smoke", {}) or {}
    return {**params, **smoke_values} if smoke else params


def run_notebook(name: str, smoke: bool = False, out_dir: Path = ROOT / "runs", **overrides) -> Path:
    """Execute ``notebooks/<name>.ipynb`` with papermill and return the executed copy's path."""
    import papermill

    source = ROOT / "notebooks" / f"{name}.ipynb"
    if not source.is_file():
        raise FileNotFoundError(f"no notebook {source}")
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / f"{name}{'.smoke' if smoke else ''}.ipynb"
    params = {**load_params(name, smoke), **overrides}
    papermill.execute_notebook(str(source), str(output), parameters=params, cwd=str(ROOT / "notebooks"),
                               kernel_name="python3", progress_bar=False)
    return output


def notebook_names() -> list[str]:
    return sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scp.runner", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook names (without .ipynb)")
    parser.add_argument("--all", action="store_true", help="run every notebook")
    parser.add_argument("--smoke", action="store_true", help="tiny parameters (the `smoke:` section)")
    args = parser.parse_args(argv)
    names = notebook_names() if args.all else args.names
    if not names:
        print("No notebooks to run yet: notebooks/ is empty. The figure notebooks arrive with the notebook issue;"
              " until then `make figures` has nothing to regenerate.")
        return 0
    for name in names:
        print(f"running {name} ({'smoke' if args.smoke else 'full'} parameters) ...", flush=True)
        print(f"  -> {run_notebook(name, smoke=args.smoke)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
