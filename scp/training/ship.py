"""Ship a trained run into ``models/``: the one explicit, recorded step that changes a committed model.

No notebook writes ``models/``: notebooks 03, 04, 05, 06, 08 and the benchmarks read the files there as committed
inputs (declared in ``params/NAME.yaml``, :mod:`scp.suite.graph`), so a model changes only when someone runs
``scp ship RUN --as NAME --chosen-by "…"`` and commits the result.  :func:`ship` copies the run's
``best.safetensors`` atomically to ``models/NAME.safetensors`` and writes ``models/NAME.json``, its card: the run
that made it (folder name = :func:`scp.training.runs.run_name` of its config), the file's size and sha256, the
weights fingerprint, the config, the validation AUC and epoch, why it was chosen, when, and the commit.
:func:`card_of` reads a card back; :func:`write_card` writes one for a model already in ``models/``.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scp.errors import InputError, MissingFileError
from scp.io import atomic_open, write_json
from scp.lineage import sha256
from scp.paths import MODELS, ROOT

__all__ = ["card_of", "ship", "write_card"]


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _card(model: Path, run: str, chosen_by: str, shipped: str) -> dict[str, Any]:
    from scp.models.config import TrainConfig
    from scp.models.factory import read_checkpoint
    from scp.training.runs import run_name

    ckpt = read_checkpoint(model, ("config", "weights_fingerprint", "val_metrics", "epoch", "n_params"))
    config = ckpt["config"]
    return {
        "model": model.name,
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


def ship(run: str | Path, name: str, chosen_by: str, models_dir: Path | None = None) -> Path:
    """Copy ``run``'s ``best.safetensors`` to ``models/NAME.safetensors`` and write its card ``models/NAME.json``.

    Args:
        run: a trained run's folder (``runs/models/<run_name>``) or its ``best.safetensors``.
        name: the file stem under ``models/`` (``scp-hotpotqa-best``).
        chosen_by: why this run: the notebook and table that chose it (``"13_interaction_aware: highest mean
            validation AUC in variants.csv"``).
        models_dir: default the repository's ``models/``.

    Returns:
        The path of the shipped model.
    """
    source = Path(run)
    source = source / "best.safetensors" if source.is_dir() else source
    if not source.is_file():
        raise MissingFileError(f"no trained run at {run} (give runs/models/<run> or its best.safetensors)")
    if not name or "/" in name or name.endswith(".safetensors"):
        raise InputError(f"--as takes a file stem such as scp-hotpotqa-best, not {name!r}")
    if not chosen_by.strip():
        raise InputError("say why this run is shipped (--chosen-by): the notebook and table that chose it")
    target = Path(models_dir or MODELS) / f"{name}.safetensors"
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(target, "wb") as f:
        f.write(source.read_bytes())
    shipped = datetime.now(UTC).isoformat(timespec="seconds")
    write_json(_card(target, source.parent.name, chosen_by, shipped), target.with_suffix(".json"))
    return target


def write_card(model: str | Path, chosen_by: str, shipped: str) -> Path:
    """Write the card of a model already in ``models/`` (its run named by the config it carries)."""
    model = Path(model)
    card = _card(model, run="", chosen_by=chosen_by, shipped=shipped)
    card["run"] = card["run_of_config"]
    path = model.with_suffix(".json")
    write_json(card, path)
    return path


def card_of(model: str | Path) -> dict[str, Any]:
    """The card beside a model in ``models/`` (``models/NAME.json``)."""
    import json

    path = Path(model).with_suffix(".json")
    if not path.is_file():
        raise MissingFileError(f"no model card {path}: models are shipped with `scp ship`, which writes one")
    return json.loads(path.read_text(encoding="utf-8"))
