"""Every code block in README.md runs as written (the shipped checkpoint, the shared data).

The bash block trains the shipped preset briefly (``scp.training.reproduce.QUICK_COMMAND``): that run is also the check
of
the README's reproducibility statement — bit-identical weights to the recorded reference run
(``tests/data/quick_train.json``) where the environment (torch version, threads, CPU kernel set, device) and the
inputs (embeddings, to the bit) match, otherwise the validation AUC within the stated tolerance.  The full recipe of
the shipped model is checked the same way by ``make reproduce`` (``python -m scp.training.reproduce shipped``).
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scp.models.config import SHIPPED_PRESET
from scp.training.reproduce import QUICK_COMMAND, QUICK_REFERENCE, TOLERANCE, compare, quick_environment, reference_of

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```(python|bash)\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
# `make test` / `make figures` are the README's two set-up commands: this test runs inside the first one, and the
# second is the notebook suite itself (tests/test_notebooks.py runs every notebook), so they are not re-entered here.
RUNNABLE = [(lang, code) for lang, code in BLOCKS if not code.lstrip().startswith("make ")]


def test_readme_has_code_to_run():
    assert sum(lang == "python" for lang, _ in RUNNABLE) >= 2
    assert sum(QUICK_COMMAND in code for lang, code in RUNNABLE if lang == "bash") == 1
    assert f"--preset {SHIPPED_PRESET} " in QUICK_COMMAND  # the quick run trains the recipe the README ships


def check_reproduces_reference(path: Path) -> None:
    reference = json.loads(QUICK_REFERENCE.read_text())
    assert reference["command"] == QUICK_COMMAND, (
        "tests/data/quick_train.json is stale: python -m scp.training.reproduce quick --record"
    )
    result = compare(reference_of(path), reference, TOLERANCE["quick"])
    print(result.describe())
    assert result.passed, result.describe()


@pytest.mark.parametrize(
    "index",
    [
        pytest.param(i, marks=[pytest.mark.run_first] if QUICK_COMMAND in code else [])
        for i, (_, code) in enumerate(RUNNABLE)
    ],
)
def test_readme_block_runs_as_written(index, tmp_path):
    lang, code = RUNNABLE[index]
    env = quick_environment(tmp_path / "cold-cache") if QUICK_COMMAND in code else dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    command = [sys.executable, "-c", code] if lang == "python" else ["bash", "-euo", "pipefail", "-c", code]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)  # hang guard: pytest-timeout
    assert proc.returncode == 0, f"README block {index} ({lang}) failed:\n{code}\n{proc.stderr[-3000:]}"
    if QUICK_COMMAND in code:
        out = QUICK_COMMAND.split("--out ")[1].split()[0]
        check_reproduces_reference(ROOT / out / "best.safetensors")


def _reader_facing_text():
    """(where, text) of every text a reader sees: the READMEs, the gallery and each notebook's markdown cells."""
    for path in ("README.md", "figures/README.md", "params/README.md", "results/README.md"):
        yield path, (ROOT / path).read_text()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "markdown":
                yield f"{path.name} cell {i}", "".join(cell["source"])


def test_reader_facing_text_speaks_of_research_not_of_our_tracker():
    tracker = re.compile(r"\b(?:issues?|goals?)\b", re.IGNORECASE)
    found = [f"{where}: {m.group()!r}" for where, text in _reader_facing_text() for m in tracker.finditer(text)]
    assert not found, "reader-facing text names our issue tracker's words; say it in research terms:\n" + "\n".join(
        found
    )


def test_no_text_renders_as_a_mailto_link():
    # Markdown (GFM, JupyterLab's marked) links x@y.z as an e-mail address: R@0.5 becomes mailto:R@0.5 unless in code
    email = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]*\w)+")
    found = []
    for where, text in _reader_facing_text():
        prose = re.sub(r"```.*?```|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$", " ", text, flags=re.S)
        found += [f"{where}: {m.group()!r}" for m in email.finditer(prose)]
    assert not found, "write these in backticks (`R@0.5`):\n" + "\n".join(found)
