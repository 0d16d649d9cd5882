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
