"""Every code block in README.md runs as written (the shipped checkpoint, the shared data)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```(python|bash)\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
# `make test` / `make figures` are the README's two set-up commands: this test runs inside the first one, and the
# second is the notebook suite itself (tests/test_notebooks.py runs every notebook), so they are not re-entered here.
RUNNABLE = [(lang, code) for lang, code in BLOCKS if not code.lstrip().startswith("make ")]


def test_readme_has_code_to_run():
    assert sum(lang == "python" for lang, _ in RUNNABLE) >= 2 and sum(lang == "bash" for lang, _ in RUNNABLE) >= 1


@pytest.mark.parametrize("index", range(len(RUNNABLE)))
def test_readme_block_runs_as_written(index, tmp_path):
    lang, code = RUNNABLE[index]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    if lang == "python":
        command = [sys.executable, "-c", code]
    else:
        command = ["bash", "-euo", "pipefail", "-c", code]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, f"README block {index} ({lang}) failed:\n{code}\n{proc.stderr[-3000:]}"
