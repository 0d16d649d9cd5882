"""Ship a trained run into ``models/``: the one explicit, recorded step that changes a committed model.

No notebook writes ``models/``: notebooks 03, 04, 05, 06, 08 and the benchmarks read the files there as committed
inputs (declared in ``params/NAME.yaml``, :mod:`scp.suite.graph`), so a model changes only when someone runs
``scp ship RUN --as NAME --chosen-by "…"`` and commits the result.  :func:`ship` copies the run's
``best.safetensors`` to ``models/NAME.safetensors`` and writes ``models/NAME.json``, its card: the run that made it
(folder name = :func:`scp.training.runs.run_name` of its config), the file's size and sha256, the weights
fingerprint, the config, the validation AUC and epoch, why it was chosen, when, and the commit.

Nothing in ``models/`` changes until the copy is verified: the run's bytes are read once and checked as a
checkpoint (outside ``models/``), then the model and its card are written beside their places and renamed into
them one right after the other, so a failed ship leaves the committed model, its card and the folder as they
were.  A ship killed between the two renames (SIGKILL) leaves the new model beside the old card, which loading
refuses (its sha256 differs), and the card's temporary file ``models/.NAME.json.XXXXXXXX.tmp``: the next ship of
that name removes such temporaries of its own naming (saying so) and writes both again.  A run's checkpoint that
is (or links to) the model or card it would be shipped as is refused before anything is copied.  One ship per
model name writes at a time (a lock ``models/.NAME.lock``, ignored by git).  Loading a model whose
card lies beside it checks the card's sha256 (:mod:`scp.models.checkpoint`).  :func:`card_of` reads a card back;
:func:`write_card` writes one for a model already in ``models/``.
"""

from __future__ import annotations

import glob
import json
import re
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scp.errors import InputError, MissingFileError
from scp.io import atomic_open_many, exclusive_lock, jsonable, read_json, write_json
from scp.lineage import sha256
from scp.overwrite import refuse_inputs_as_outputs
from scp.paths import MODELS, ROOT

__all__ = ["card_of", "ship", "write_card"]


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _card(model: Path, name: str, run: str, chosen_by: str, shipped: str) -> dict[str, Any]:
    """The card of the verified checkpoint file ``model``, shipped as ``name`` (its file name in ``models/``)."""
    from scp.models.config import TrainConfig
    from scp.models.factory import read_checkpoint
    from scp.training.runs import run_name

    ckpt = read_checkpoint(model, ("config", "weights_fingerprint", "val_metrics", "epoch", "n_params"))
    config = ckpt["config"]
    return {
        "model": name,
        "run": run,
        "run_of_config": run_name(TrainConfig(**config)),
        "bytes": model.stat().st_size,
        "sha256": sha256(model),
        "weights_fingerprint": ckpt["weights_fingerprint"],
        "n_params": ckpt["n_params"],
        "best_epoch": ckpt["epoch"],
        "val_auc": ckpt["val_metrics"].get("auc"),
        "config": config,
        "chosen_by": chosen_by,
        "shipped": shipped,
        "commit": _commit(),
    }


_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def ship(run: str | Path, name: str, chosen_by: str, models_dir: Path | None = None) -> Path:
    """Copy ``run``'s ``best.safetensors`` to ``models/NAME.safetensors`` and write its card ``models/NAME.json``,
    both or neither (see the module docstring).

    Args:
        run: a trained run's folder (``runs/models/<run_name>``) or its ``best.safetensors``.
        name: the file stem under ``models/`` (``scp-hotpotqa-best``).
        chosen_by: why this run: the notebook and table that chose it (``"13_interaction_aware: highest mean
            validation AUC in variants.csv"``).
        models_dir: default the repository's ``models/``.

    Returns:
        The path of the shipped model.

    Raises:
        CheckpointError: the run's file is not a sound checkpoint (nothing in ``models/`` changed).
        SCPError: another ``scp ship`` of ``name`` is running.
    """
    source = Path(run)
    source = source / "best.safetensors" if source.is_dir() else source
    if not source.is_file():
        raise MissingFileError(f"no trained run at {run} (give runs/models/<run> or its best.safetensors)")
    if not _STEM.fullmatch(name or "") or name.endswith(".safetensors"):
        raise InputError(f"--as takes a file stem such as scp-hotpotqa-best, not {name!r}")
    if not chosen_by.strip():
        raise InputError("say why this run is shipped (--chosen-by): the notebook and table that chose it")
    models = Path(models_dir or MODELS)
    target = models / f"{name}.safetensors"
    card_path = target.with_suffix(".json")
    refuse_inputs_as_outputs(  # shipping a model onto itself (or its card) is refused, not copied over itself
        [("the shipped model", target), ("its card", card_path)], [("the run's checkpoint", source)]
    )
    with tempfile.TemporaryDirectory() as private:
        checked = Path(private) / "best.safetensors"  # the bytes shipped, verified where models/ does not see them
        checked.write_bytes(source.read_bytes())
        shipped = datetime.now(UTC).isoformat(timespec="seconds")
        card = _card(checked, target.name, source.parent.name, chosen_by, shipped)
        with exclusive_lock(models / f".{name}.lock", f"models/{name}"):
            _remove_stale_temporaries([target, card_path])
            with atomic_open_many([target, card_path]) as (model_file, card_file):
                model_file.write(checked.read_bytes())
                card_file.write(json.dumps(card, indent=1, default=jsonable).encode())
    return target


def _temporary_names(path: Path) -> re.Pattern:
    """The names of :func:`scp.io.atomic_open_many`'s temporary files for ``path``: ``.NAME.XXXXXXXX.tmp``
    (:func:`tempfile.mkstemp`'s eight characters)."""
    return re.compile(re.escape(f".{path.name}.") + r"[a-z0-9_]{8}" + re.escape(".tmp"))


def _remove_stale_temporaries(paths: list[Path]) -> list[Path]:
    """Delete the temporary files an earlier ship of these paths left behind: a ship killed (SIGKILL, power
    loss) after writing them, or between its two renames, leaves ``models/.NAME.json.XXXXXXXX.tmp``; nothing
    else writes names of that form, and the ship lock is held, so no running ship owns them.  Returns them."""
    removed = []
    for path in paths:
        pattern = _temporary_names(path)
        for stale in sorted(path.parent.glob(f".{glob.escape(path.name)}.*.tmp")):
            if pattern.fullmatch(stale.name) and stale.is_file() and not stale.is_symlink():
                stale.unlink()
                removed.append(stale)
    if removed:
        print(
            f"scp ship: removed {len(removed)} temporary file(s) an interrupted ship left: "
            + ", ".join(p.name for p in removed),
            file=sys.stderr,
        )
    return removed


def write_card(model: str | Path, chosen_by: str, shipped: str) -> Path:
    """Write the card of a model already in ``models/`` (its run named by the config it carries)."""
    model = Path(model)
    card = _card(model, model.name, run="", chosen_by=chosen_by, shipped=shipped)
    card["run"] = card["run_of_config"]
    path = model.with_suffix(".json")
    write_json(card, path)
    return path


def card_of(model: str | Path) -> dict[str, Any]:
    """The card beside a model in ``models/`` (``models/NAME.json``), read with a bounded depth
    (:func:`scp.io.read_json`: a damaged card is one :class:`~scp.errors.DataFormatError`)."""
    path = Path(model).with_suffix(".json")
    if not path.is_file():
        raise MissingFileError(f"no model card {path}: models are shipped with `scp ship`, which writes one")
    return read_json(path, f"model card {path}")
