import os
from pathlib import Path

import pytest

from scp.suite.runner import PINNED_KERNELS  # imports no torch

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("SCP_DATA_DIR", str((ROOT.parent / "shared" / "data").resolve()))
# The tests' own processes compute with the kernels `scp run` pins for its stage workers and notebook kernels
# (scp.suite.runner.PINNED_KERNELS, set before torch loads), so an in-process result and a kernel's or worker's agree
# bit for bit on an AVX-512 machine too, and the embedding cache they share holds one set of bits per text.
for _var, _value in PINNED_KERNELS.items():
    os.environ.setdefault(_var, _value)
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs one worker per core: one torch thread each (notebook kernels inherit it) instead of
    # every worker's torch spreading over all cores
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)


def notebook_of(item) -> str | None:
    """The notebook a test executes (via ``smoke_run``): its ``name`` parameter, else its module's ``NAME``."""
    if "smoke_run" not in getattr(item, "fixturenames", ()):
        return None
    params = getattr(getattr(item, "callspec", None), "params", {})
    return params.get("name") or getattr(item.module, "NAME", None) or item.name.removeprefix("test_")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``--dist loadgroup``) every test of one notebook runs in the same worker, so the
    notebook executes once per session however many files test it.  Tests marked ``run_first`` (the longest:
    README's training block, ~13 min on one thread) are scheduled first, so they overlap the rest of the suite
    instead of running at its end (``make test`` keeps collection order: ``--no-loadscope-reorder``)."""
    for item in items:
        name = notebook_of(item)
        if name:
            item.add_marker(pytest.mark.xdist_group(name))
    items.sort(key=lambda item: item.get_closest_marker("run_first") is None)  # stable: the rest keep their order


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
    from scp.suite.runner import run_notebook

    cache = {}

    def get(name):
        if name not in cache:
            out = tmp_path_factory.mktemp(name)
            cache[name] = (run_notebook(name, smoke=True, out_dir=out), out)
        return cache[name]

    return get


@pytest.fixture(autouse=True)
def fresh_lineage():
    """Each test starts with no file noted as read or written: :mod:`scp.lineage` is per process, and one test's
    loads (e.g. the reader's GGUF) must not show up in another test's provenance."""
    from scp import lineage

    lineage.reset()
    yield


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread in this test module, its thread count restored afterwards: as a one-thread worker process
    (the embedding stage's, a Ray worker with one CPU) computes, whose results depend on it in the last bits."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def one_thread_reader():
    """SmolLM2 (scp.llm.readers.LocalReader, 8 answer tokens) on one torch thread, the test module's thread count
    restored afterwards: two OpenMP threads were about ten times slower per forward pass on a shared 2-core machine."""
    import torch

    from scp.llm.readers import LocalReader

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield LocalReader(max_new_tokens=8)
    torch.set_num_threads(threads)
