"""Checkpoints cannot execute code, are verified from their bytes before any tensor is built, and a checkpoint whose
checksums hold but whose content does not fit is one CheckpointError naming the file (never a KeyError, TypeError
or RuntimeError traceback).  Legacy ``.pt`` files are read only through ``torch.load(weights_only=True)``."""

import json
import pickle
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from scp.cli import main
from scp.data.embedders import RandomEmbedder
from scp.data.features import build_contexts
from scp.models import checkpoint
from scp.models.checkpoint import CheckpointError, LegacyCheckpointWarning
from scp.models.config import TrainConfig
from scp.models.factory import CHECKPOINT_FORMAT, load_checkpoint, read_checkpoint, weights_fingerprint
from scp.pruning.pruner import ShapleyPruner
from scp.training.loop import train

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "models").glob("*.safetensors"))
QUERIES = [f"what is the capital of country {i}" for i in range(12)]


def toy_contexts(embedder):
    rng = np.random.default_rng(0)
    units, labels = [], []
    for i, _ in enumerate(QUERIES):
        both = [f"the capital of country {i} is city {i}", f"country {i} has its capital at the river"] + [
            f"unrelated sentence {j} about topic {rng.integers(1000)}" for j in range(4)
        ]
        units.append(both)
        labels.append([1, 1, 0, 0, 0, 0])
    ctx = build_contexts(QUERIES, units, embedder, ("cos",), labels_list=labels, ids=[str(i) for i in range(12)])
    return ctx[:8], ctx[8:]


def tiny_config(**kw):
    return TrainConfig(
        **{
            **dict(
                embedder="random",
                query_mode="product_concat",
                features=("cos",),
                hidden=8,
                latent=4,
                epochs=2,
                n_permutations=4,
                eval_permutations=4,
                batch_size=4,
            ),
            **kw,
        }
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(embedder, contexts, TrainResult) of a two-epoch run on toy contexts."""
    emb = RandomEmbedder(16)
    tr, va = toy_contexts(emb)
    out = tmp_path_factory.mktemp("tiny")
    return emb, (tr, va), train(tiny_config(), tr, va, out, emb.id, progress=False)


def one_line(error) -> str:
    message = str(error)
    assert "\n" not in message
    return message


# ------------------------------------------------------------------------------- (a) nothing is ever executed


class Armed:
    """Unpickling this calls ``open(target, "w")``: loading it creates ``target``."""

    def __init__(self, target: Path):
        self.target = str(target)

    def __reduce__(self):
        return (open, (self.target, "w"))


def evil_payload(target: Path) -> dict:
    return {
        "format": CHECKPOINT_FORMAT,
        "config": {},
        "embedder_id": "random-16",
        "embed_dim": 16,
        "weights": {"x": torch.zeros(2)},
        "hook": Armed(target),
        "checksum": "0" * 64,
    }


def write_evil(path: Path, target: Path, how: str) -> Path:
    if how == "torch.save":
        torch.save(evil_payload(target), path)
    else:  # a bare pickle stream, the pre-zip torch format
        path.write_bytes(pickle.dumps(evil_payload(target), protocol=2))
    return path


EVIL = [
    ("evil.pt", "torch.save"),
    ("evil.pt", "pickle"),
    ("evil.safetensors", "torch.save"),
    ("evil.safetensors", "pickle"),
]


def test_the_evil_files_are_armed(tmp_path):
    """Sanity check of the test itself: an unrestricted unpickler does run the payload."""
    for name, how in EVIL:
        target = tmp_path / f"{how}-{name}.created"
        path = write_evil(tmp_path / f"{name}.bin", target, how)  # torch.load reads *.safetensors as safetensors
        try:
            torch.load(path, weights_only=False)
        except RuntimeError:  # a bare pickle is not a torch file, but unpickling its first object ran the payload
            pass
        assert target.exists()
        target.unlink()


@pytest.mark.parametrize("name, how", EVIL)
def test_an_evil_pickle_is_refused_by_every_entry_point(name, how, tmp_path, tiny, capsys):
    target = tmp_path / "PWNED"
    evil = write_evil(tmp_path / name, target, how)

    with pytest.raises(CheckpointError, match="cannot be read") as info:
        checkpoint.load(evil)
    assert str(evil) in one_line(info.value)
    with pytest.raises(CheckpointError):
        load_checkpoint(evil)
    with pytest.raises(CheckpointError):
        ShapleyPruner.from_checkpoint(evil)
    with pytest.raises(CheckpointError):
        ShapleyPruner.from_checkpoint(evil, embedder=tiny[0])
    from scp.pruning.model_card import model_card

    (tmp_path / "last.safetensors").write_bytes(tiny[2].last_path.read_bytes())
    with pytest.raises(CheckpointError):
        model_card(evil)
    assert not target.exists()

    def cli(argv) -> str:
        capsys.readouterr()
        assert main([str(a) for a in argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        return err

    assert str(evil) in cli(
        [
            "eval",
            "--dataset",
            "hotpotqa",
            "--method",
            "scp",
            "--checkpoint",
            evil,
            "--limit",
            "2",
            "--out",
            tmp_path / "eval.json",
        ]
    )
    records = tmp_path / "in.jsonl"
    records.write_text(
        json.dumps({"question": "what is the capital?", "sentences": ["Paris is the capital.", "Cats purr."]}) + "\n"
    )
    assert str(evil) in cli(
        [
            "prune",
            "--checkpoint",
            evil,
            "--input",
            records,
            "--output",
            tmp_path / "out.jsonl",
            "--top-k",
            "1",
            "--no-progress",
        ]
    )
    cli(["convert-checkpoint", evil, tmp_path / "converted.safetensors"])
    assert not (tmp_path / "converted.safetensors").exists()
    # scp train --resume on a folder whose last checkpoint is the evil file (under the new name, or the old one)
    run = tmp_path / "run"
    run.mkdir()
    (run / ("last.safetensors" if name.endswith(".safetensors") else "last.pt")).write_bytes(evil.read_bytes())
    cli(
        [
            "train",
            "--embedder",
            "random",
            "--max-train-examples",
            "8",
            "--epochs",
            "1",
            "--quiet",
            "--out",
            run,
            "--resume",
        ]
    )
    emb, (tr, va), _ = tiny
    with pytest.raises((CheckpointError, ValueError)):
        train(tiny_config(), tr, va, run, emb.id, resume=True, progress=False)
    assert not target.exists()


def test_a_safetensors_checkpoint_is_never_unpickled(tiny, monkeypatch):
    def no_pickles(*args, **kwargs):
        raise AssertionError("torch.load called on a safetensors checkpoint")

    monkeypatch.setattr(torch, "load", no_pickles)
    monkeypatch.setattr(pickle, "loads", no_pickles)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_checkpoint(tiny[2].best_path)
        for path in SHIPPED:
            load_checkpoint(path)


# --------------------------------------------------------------- (b) verified from its bytes before tensors


def header_of(blob: bytes) -> tuple[int, dict]:
    n = struct.unpack("<Q", blob[:8])[0]
    return n, json.loads(blob[8 : 8 + n])


def test_the_file_is_standard_safetensors_with_scp_metadata(tiny):
    from safetensors import safe_open

    path = tiny[2].last_path
    with safe_open(str(path), framework="pt") as f:
        meta, keys = f.metadata(), set(f.keys())
    assert meta["scp_container"] == checkpoint.CONTAINER and len(meta["scp_sha256"]) == 64
    assert {"weights/psi.0.weight", "torch_rng", "optimizer/state/0/exp_avg"} <= keys
    assert json.loads(meta["scp"])["config"]["datasets"] == {"$tuple": ["hotpotqa"]}


def test_flipped_bytes_anywhere_are_caught_before_any_tensor_is_built(tiny, tmp_path, monkeypatch):
    import safetensors.torch

    blob = tiny[2].best_path.read_bytes()
    n, _ = header_of(blob)
    built = []
    real_load = safetensors.torch.load
    monkeypatch.setattr(safetensors.torch, "load", lambda data: built.append(1) or real_load(data))
    checkpoint.load(tiny[2].best_path)
    assert built == [1]  # the spy sees tensors being built
    built.clear()
    sha = blob.index(b'"scp_sha256":"')
    positions = sorted(
        {
            *range(8),
            *range(sha, sha + 80),
            *np.linspace(8, 8 + n - 1, 500).astype(int).tolist(),
            *np.linspace(8 + n, len(blob) - 1, 64).astype(int).tolist(),
        }
    )
    path = tmp_path / "flipped.safetensors"
    for at in positions:  # the length, the checksum, 500 places in the header, 64 in the data
        damaged = bytearray(blob)
        damaged[at] ^= 0x01
        path.write_bytes(bytes(damaged))
        with pytest.raises(CheckpointError) as info:
            checkpoint.load(path)
        assert str(path) in one_line(info.value)
        assert not built, f"tensors were built from a file with byte {at} flipped"


def test_a_valid_json_edit_of_the_header_is_caught(tiny, tmp_path):
    """Change the recorded epoch and a tensor's dtype: the header still parses, only the file checksum sees it."""
    blob = tiny[2].best_path.read_bytes()
    for old, new in [(b'\\"epoch\\":1', b'\\"epoch\\":2'), (b'"dtype":"F32"', b'"dtype":"I32"')]:
        assert old in blob
        path = tmp_path / "edited.safetensors"
        path.write_bytes(blob.replace(old, new, 1))
        with pytest.raises(CheckpointError, match="corrupted"):
            checkpoint.load(path)


def resealed(blob: bytearray) -> bytes:
    """``blob`` with its file checksum recomputed (as someone editing the file on purpose would)."""
    n, header = header_of(bytes(blob))
    claimed = header["__metadata__"]["scp_sha256"].encode()
    at = blob.index(b'"scp_sha256":"' + claimed) + len(b'"scp_sha256":"')
    blob[at : at + 64] = b"0" * 64
    import hashlib

    blob[at : at + 64] = hashlib.sha256(bytes(blob)).hexdigest().encode()
    return bytes(blob)


def test_the_content_checksum_is_checked_too(tiny, tmp_path):
    blob = bytearray(tiny[2].best_path.read_bytes())
    n, header = header_of(bytes(blob))
    start = 8 + n + header["weights/psi.0.weight"]["data_offsets"][0]
    blob[start] ^= 0x01
    path = tmp_path / "resealed.safetensors"
    path.write_bytes(resealed(blob))
    with pytest.raises(CheckpointError, match="content does not match") as info:
        checkpoint.load(path)
    assert str(path) in one_line(info.value)


def test_truncated_foreign_and_empty_files(tiny, tmp_path):
    blob = tiny[2].best_path.read_bytes()
    n, _ = header_of(blob)
    cases = {
        "short.safetensors": blob[: 8 + n + 10],
        "cut_header.safetensors": blob[: n // 2],
        "random.safetensors": np.random.default_rng(0).bytes(4096),
        "empty.safetensors": b"",
    }
    from safetensors.torch import save

    cases["plain.safetensors"] = save({"w": torch.zeros(3)}, metadata={"format": "pt"})
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(CheckpointError, match="cannot be read|is empty|not an SCP checkpoint") as info:
            checkpoint.load(path)
        assert str(path) in one_line(info.value)


def test_round_trip_is_exact_for_every_kind_of_value(tmp_path):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    payload = {
        "format": "demo",
        "opt": opt.state_dict(),
        "ints": {0: "a", -3: (1, 2.5)},
        "nan": float("nan"),
        "inf": [float("inf"), -float("inf")],
        "none": None,
        "flag": True,
        "bytes": b"\x00\xff",
        "$odd": {"$tensor": "not a tensor"},
        "empty": {},
        "array": np.arange(6, dtype=np.int16).reshape(2, 3),
        "tensors": [
            torch.tensor(1.5),
            torch.zeros(0, 4),
            torch.arange(5, dtype=torch.int64),
            torch.randn(3).to(torch.bfloat16),
            torch.tensor([True, False]),
            torch.randn(4, 4)[:, 1],
        ],  # a strided view
        "big": 2**70,
        "tiny": 5e-324,
        "text": "∅ – ψ",
    }
    path = tmp_path / "demo.safetensors"
    checksum = checkpoint.save(payload, path)
    back = checkpoint.load(path)
    assert back["checksum"] == checksum == checkpoint.content_checksum(payload)
    assert back["ints"] == {0: "a", -3: (1, 2.5)} and isinstance(back["ints"][-3], tuple)
    assert back["$odd"] == {"$tensor": "not a tensor"} and back["empty"] == {} and back["bytes"] == b"\x00\xff"
    assert np.isnan(back["nan"]) and back["inf"] == [float("inf"), -float("inf")] and back["big"] == 2**70
    assert back["array"].dtype == np.int16 and (back["array"] == payload["array"]).all()
    for a, b in zip(payload["tensors"], back["tensors"]):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    assert back["opt"]["param_groups"] == payload["opt"]["param_groups"]
    fresh = torch.optim.AdamW(model.parameters())
    fresh.load_state_dict(back["opt"])
    assert fresh.state_dict()["param_groups"] == opt.state_dict()["param_groups"]


# ------------------------------------------------------ (c) valid checksums, content that does not fit


def rewrite(src: Path, dst: Path, change) -> Path:
    payload = {k: v for k, v in checkpoint.load(src).items() if k != "checksum"}
    change(payload)
    checkpoint.save(payload, dst)  # fresh, valid checksums
    return dst


def _first_weight(p):
    return next(iter(p["weights"]))


DEFECTS = {
    "no embedder_id": (lambda p: p.pop("embedder_id"), "no 'embedder_id' entry"),
    "no config": (lambda p: p.pop("config"), "no 'config' entry"),
    "no weights": (lambda p: p.pop("weights"), "no 'weights' entry"),
    "no embed_dim": (lambda p: p.pop("embed_dim"), "no 'embed_dim' entry"),
    "unknown config key": (lambda p: p["config"].update(fancy=1), "unknown setting.*'fancy'"),
    "config value of the wrong type": (lambda p: p["config"].update(hidden="8"), "'hidden' is '8'"),
    "invalid config value": (lambda p: p["config"].update(hidden=0), "config is invalid.*hidden"),
    "config not a dict": (lambda p: p.update(config=["deepsets"]), "'config' entry is not"),
    "embed_dim a string": (lambda p: p.update(embed_dim="16"), "'embed_dim' entry is not"),
    "weights a list": (lambda p: p.update(weights=[torch.zeros(2)]), "'weights' entry is not"),
    "history of another shape": (lambda p: p.update(history=[{"epoch": 1}]), "'history' entry is not"),
    "missing weight": (lambda p: p["weights"].pop(_first_weight(p)), "missing weights"),
    "unexpected weight": (lambda p: p["weights"].update({"extra.weight": torch.zeros(2)}), "unexpected weights extra"),
    "weight of the wrong shape": (lambda p: p["weights"].update({"psi.0.weight": torch.zeros(3, 3)}), "has shape"),
    "weight of another dtype": (
        lambda p: p["weights"].update({"psi.0.weight": p["weights"]["psi.0.weight"].double()}),
        "torch.float64",
    ),
    "NaN weight": (lambda p: p["weights"]["psi.0.weight"].view(-1).__setitem__(0, float("nan")), "NaN"),
    "inf weight": (lambda p: p["weights"]["psi.0.weight"].view(-1).__setitem__(0, float("inf")), "NaN or infinite"),
    "other format": (lambda p: p.update(format="something-else"), "not an SCP checkpoint of format"),
}


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_a_checkpoint_that_does_not_fit_is_one_checkpoint_error(defect, tiny, tmp_path):
    change, words = DEFECTS[defect]
    path = rewrite(tiny[2].best_path, tmp_path / "defect.safetensors", change)
    with pytest.raises(CheckpointError, match=words) as info:
        load_checkpoint(path)
    assert str(path) in one_line(info.value)
    with pytest.raises(CheckpointError, match=words):
        ShapleyPruner.from_checkpoint(path)


def test_the_command_line_reports_a_defect_in_one_line(tiny, tmp_path, capsys):
    path = rewrite(tiny[2].best_path, tmp_path / "noembedder.safetensors", lambda p: p.pop("embedder_id"))
    assert (
        main(
            [
                "eval",
                "--dataset",
                "hotpotqa",
                "--method",
                "scp",
                "--checkpoint",
                str(path),
                "--limit",
                "2",
                "--out",
                str(tmp_path / "e.json"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and "embedder_id" in err


def test_model_card_and_resume_check_what_they_read(tiny, tmp_path):
    from scp.pruning.model_card import model_card, training_history

    emb, (tr, va), res = tiny
    run = tmp_path / "card"
    rewrite(res.best_path, run / "best.safetensors", lambda p: p.pop("val_metrics"))
    rewrite(res.last_path, run / "last.safetensors", lambda p: p.update(history="none"))
    with pytest.raises(CheckpointError, match="no 'val_metrics' entry"):
        model_card(run / "best.safetensors")
    with pytest.raises(CheckpointError, match="'history' entry is not"):
        training_history(run / "best.safetensors")
    # resuming needs the optimizer, scheduler and RNG state, and they must fit
    config = tiny_config(epochs=3)
    for name, change, words in [
        ("no optimizer", lambda p: p.pop("optimizer"), "no 'optimizer' entry"),
        ("rng", lambda p: p.update(torch_rng=torch.zeros(3)), "'torch_rng' entry is not"),
        ("groups", lambda p: p["optimizer"].update(param_groups=[]), "cannot be restored"),
        ("weights", lambda p: p["weights"].pop("psi.0.weight"), "missing weights psi.0"),
    ]:
        out = tmp_path / name.replace(" ", "_")
        partial = train(config, tr, va, out, emb.id, progress=False, stop_after_epochs=1)
        rewrite(partial.last_path, partial.last_path, change)
        with pytest.raises(CheckpointError, match=words) as info:
            train(config, tr, va, out, emb.id, resume=True, progress=False)
        assert str(partial.last_path) in one_line(info.value)


def _adam_moment(p):
    state = p["optimizer"]["state"]
    state[next(iter(state))]["exp_avg"] = torch.zeros(3, 3)


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda p: p.update(epoch=7), "after epoch 7, outside the run's plan of epochs 1 to 3"),
        (_adam_moment, "optimizer state 'exp_avg' of .* has shape \\(3, 3\\)"),
    ],
    ids=["epoch beyond the plan", "Adam moment of another shape"],
)
def test_resume_checks_the_epoch_and_the_optimizer_shapes(change, words, tiny, tmp_path):
    emb, (tr, va), _ = tiny
    config = tiny_config(epochs=3)
    partial = train(config, tr, va, tmp_path, emb.id, progress=False, stop_after_epochs=1)
    rewrite(partial.last_path, partial.last_path, change)  # re-sealed: its checksums hold
    before = partial.last_path.read_bytes()
    with pytest.raises(CheckpointError, match=words) as info:
        train(config, tr, va, tmp_path, emb.id, resume=True, progress=False)
    assert str(partial.last_path) in one_line(info.value)
    assert partial.last_path.read_bytes() == before  # nothing trained, nothing rewritten


def test_every_config_field_type_is_understood():
    import dataclasses

    from scp.models.config import _config_value_ok

    for f in dataclasses.fields(TrainConfig):
        assert _config_value_ok(getattr(TrainConfig(), f.name), str(f.type)), f.name


# -------------------------------------------------------------------------- (d) the shipped, converted models


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_models_are_safetensors_with_their_weights_fingerprint(path):
    assert len(SHIPPED) == 3 and not list((ROOT / "models").glob("*.pt"))
    assert path.read_bytes()[8:9] == b"{"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model, config, ckpt = load_checkpoint(path)
    assert ckpt["weights_fingerprint"] == weights_fingerprint(model)
    assert ckpt["checksum"] == checkpoint.content_checksum(ckpt)
    assert read_checkpoint(path, ("n_params", "val_metrics", "history", "epoch"))["n_params"] == sum(
        p.numel() for p in model.parameters()
    )


# ------------------------------------------------------------------------------ (e) legacy .pt, read safely


def test_a_legacy_checkpoint_loads_safely_with_a_warning_and_converts(tiny, tmp_path, capsys):
    emb, _, res = tiny
    payload = checkpoint.load(res.best_path)
    legacy = tmp_path / "best.pt"
    torch.save(payload, legacy)  # the old format: a torch.save pickle with its content checksum
    with pytest.warns(LegacyCheckpointWarning, match="legacy.*scp convert-checkpoint"):
        model, config, ckpt = load_checkpoint(legacy)
    assert weights_fingerprint(model) == payload["weights_fingerprint"] and ckpt["checksum"] == payload["checksum"]
    with pytest.warns(LegacyCheckpointWarning):
        ShapleyPruner.from_checkpoint(legacy, embedder=emb)

    new = tmp_path / "best.safetensors"
    assert main(["convert-checkpoint", str(legacy), str(new)]) == 0
    assert payload["checksum"] in capsys.readouterr().out
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model2, _, ckpt2 = load_checkpoint(new)
    assert weights_fingerprint(model2) == ckpt2["weights_fingerprint"] == payload["weights_fingerprint"]
    assert ckpt2["checksum"] == payload["checksum"]
    with pytest.raises(ValueError, match="must be named"):
        checkpoint.convert(legacy, tmp_path / "again.pt")

    # the legacy loader still checks the content checksum, and still refuses anything but plain values
    payload["weights"]["psi.0.weight"].view(-1)[0] += 1.0
    torch.save(payload, tmp_path / "tampered.pt")
    with pytest.raises(CheckpointError, match="corrupted"):
        load_checkpoint(tmp_path / "tampered.pt")
    torch.save({**payload, "extra": Path("x")}, tmp_path / "object.pt")
    with pytest.raises(CheckpointError, match="cannot be read"):
        load_checkpoint(tmp_path / "object.pt")


def test_a_legacy_last_checkpoint_is_named_when_resuming(tiny, tmp_path):
    emb, (tr, va), _ = tiny
    out = tmp_path / "old_run"
    partial = train(tiny_config(epochs=3), tr, va, out, emb.id, progress=False, stop_after_epochs=1)
    torch.save(checkpoint.load(partial.last_path), out / "last.pt")
    partial.last_path.unlink()
    with pytest.raises(ValueError, match="legacy format: scp convert-checkpoint"):
        train(tiny_config(epochs=3), tr, va, out, emb.id, resume=True, progress=False)
    checkpoint.convert(out / "last.pt", out / "last.safetensors")
    done = train(tiny_config(epochs=3), tr, va, out, emb.id, resume=True, progress=False)
    straight = train(tiny_config(epochs=3), tr, va, tmp_path / "straight", emb.id, progress=False)
    a, b = checkpoint.load(done.last_path)["weights"], checkpoint.load(straight.last_path)["weights"]
    assert all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------- (f) issue 17: a file that is no checkpoint at all, in short

FOREIGN = {
    "records.jsonl": b'{"question": "q", "sentences": ["a"]}\n',
    "notes.txt": b"my notes\n",
    "random.bin": np.random.default_rng(1).bytes(4096),
    "short.pt": b"xyz",
}


@pytest.mark.parametrize("name", sorted(FOREIGN))
def test_a_foreign_file_is_one_short_sentence_and_never_reaches_torch_load(name, tmp_path, monkeypatch, capsys):
    path = tmp_path / name
    path.write_bytes(FOREIGN[name])

    def no_torch_load(*args, **kwargs):
        raise AssertionError("torch.load called on a file that is no torch checkpoint")

    monkeypatch.setattr(torch, "load", no_torch_load)
    with pytest.raises(CheckpointError) as info:
        checkpoint.load(path)
    message = one_line(info.value)
    assert message.startswith(
        f"{path} is not an SCP checkpoint (neither a safetensors file nor a legacy torch checkpoint)"
    ), message
    assert "PyTorch" not in message and "weights_only" not in message, message
    assert len(message) - len(str(path)) < 200, message  # one short sentence besides the file's name
    assert main(["eval", "--dataset", "hotpotqa", "--method", "scp", "--limit", "1", "--checkpoint", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [f"scp eval: error: {message}"], err


def test_a_legacy_file_torch_refuses_gets_a_short_reason(tmp_path):
    torch.save({"format": CHECKPOINT_FORMAT, "where": Path("x"), "checksum": "0" * 64}, tmp_path / "object.pt")
    (tmp_path / "bare.pt").write_bytes(pickle.dumps({"format": CHECKPOINT_FORMAT}, protocol=4))
    blob = (tmp_path / "object.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(blob[: len(blob) // 2])
    reasons = {
        "object.pt": "it holds objects other than tensors and plain containers (such as pathlib.",
        "bare.pt": "it is a pickle that torch's safe loader cannot read",
        "cut.pt": "it is a damaged or truncated torch file (RuntimeError: PytorchStreamReader failed",
    }
    for name, reason in reasons.items():
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # torch's own note on the pickle protocol is not passed on
            with pytest.raises(CheckpointError) as info:
                checkpoint.load(tmp_path / name)
        message = one_line(info.value)
        assert message.startswith(f"checkpoint {tmp_path / name} cannot be read: {reason}"), message
        assert "PyTorch 2.6" not in message and "Weights only load failed" not in message, message
        assert message.endswith("retrain it with `scp train` or restore a good copy"), message
