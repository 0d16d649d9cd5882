"""scp.lineage: the files a process read and wrote, as notebook provenance lists them."""

import numpy as np

from scp import lineage
from scp.data.datasets import load_dataset
from scp.models import checkpoint


def test_loaders_note_what_they_read_and_write(tmp_path, data_dir):
    lineage.reset()
    load_dataset("hotpotqa", split="test", limit=2)
    (data,) = lineage.reads("data")
    assert data.is_relative_to(data_dir.resolve()) and "hotpotqa" in data.parts
    path = tmp_path / "m.safetensors"
    checkpoint.save({"format": "scp-test", "w": np.zeros(3, dtype=np.float32)}, path)
    checkpoint.load(path)
    assert lineage.writes("model") == [path.resolve()]
    assert lineage.reads("model") == []  # written by this process: listed as written, not read
    info = lineage.describe(path, relative_to=tmp_path)
    assert info["path"] == "m.safetensors" and info["bytes"] == path.stat().st_size and len(info["sha256"]) == 64
    lineage.reset()
    assert lineage.reads() == [] and lineage.writes() == []


def test_sha256_follows_a_rewritten_file(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"a")
    first = lineage.sha256(path)
    path.write_bytes(b"bb")
    assert lineage.sha256(path) != first
