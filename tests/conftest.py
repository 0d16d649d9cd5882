import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("SCP_DATA_DIR", str((ROOT.parent / "shared" / "data").resolve()))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = Path(os.environ["SCP_DATA_DIR"])
    if not path.is_dir():
        raise RuntimeError(f"SCP_DATA_DIR={path} is not a directory; the tests need the shared data samples")
    return path


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """Run a notebook once per test session with its smoke parameters into a temporary folder (never into
    figures/); returns (executed copy, out_dir).  Tests of one notebook in several files share the run."""
    from scp.runner import run_notebook

    cache = {}

    def get(name):
        if name not in cache:
            out = tmp_path_factory.mktemp(name)
            cache[name] = (run_notebook(name, smoke=True, out_dir=out), out)
        return cache[name]

    return get
