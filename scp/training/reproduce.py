"""Does a training run reproduce a reference checkpoint?  ``make reproduce`` and the README's training block.

Training is deterministic given its inputs: the same code, config, input tensors (``inputs_fingerprint``), torch
version, thread count, CPU kernel set and device give bit-identical weights (``weights_fingerprint``).  So a run is
checked against a reference in one of two ways, whichever applies:

- where the recorded environment and the inputs fingerprint both match, the weights fingerprint must be equal;
- otherwise (another machine, or embeddings that differ in their last bits) the best validation AUC must be within
  ``tolerance`` of the reference's.

Two references:

- ``shipped``: ``scp train --preset structure --val-dataset hotpotqa`` (:data:`SHIPPED_COMMAND`), the full recipe of
  ``models/scp-hotpotqa-best.safetensors`` (about 15 min on one core, cold embedding cache included).  Run by
  ``make reproduce`` before a release.
- ``quick``: the same preset on the first 64 training and 32 validation examples for 2 epochs
  (:data:`QUICK_COMMAND`, about 3 min), whose record is ``tests/data/quick_train.json``.  The README shows it and
  ``make test`` runs and checks it, as the record was made: one torch thread, a cold embedding cache
  (:func:`quick_environment`).

``python -m scp.training.reproduce shipped|quick`` trains and checks; ``quick --record`` rewrites the quick reference.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from scp.errors import InputError
from scp.paths import ROOT, SHIPPED_MODEL

__all__ = [
    "SHIPPED_COMMAND",
    "QUICK_COMMAND",
    "ENVIRONMENT_KEYS",
    "Comparison",
    "reference_of",
    "compare",
    "quick_environment",
]

SHIPPED_COMMAND = "scp train --preset structure --val-dataset hotpotqa --out runs/reproduce"
QUICK_COMMAND = (
    "scp train --preset structure --val-dataset hotpotqa --max-train-examples 64 --max-val-examples 32 "
    "--epochs 2 --out runs/quick"
)

QUICK_REFERENCE = ROOT / "tests" / "data" / "quick_train.json"
ENVIRONMENT_KEYS = ("torch", "threads", "cpu_capability", "device")
TOLERANCE = {"shipped": 0.02, "quick": 0.03}  # validation AUC, where bit identity cannot be expected


def reference_of(checkpoint_path: str | Path) -> dict:
    """What a run is compared on: config, data hash, environment, inputs and weights fingerprints, epoch, AUC."""
    from scp.models.factory import load_checkpoint

    _, _, ckpt = load_checkpoint(checkpoint_path)
    return {
        "config": ckpt["config"],
        "data_hash": ckpt["data_hash"],
        "environment": ckpt["environment"],
        "inputs_fingerprint": ckpt["inputs_fingerprint"],
        "weights_fingerprint": ckpt["weights_fingerprint"],
        "epoch": ckpt["epoch"],
        "val_auc": ckpt["val_metrics"]["auc"],
    }


def _plain(value):
    """``value`` as JSON reads it back (tuples become lists), so a record compares equal to its checkpoint."""
    return json.loads(json.dumps(value))


@dataclass
class Comparison:
    """The outcome of checking a run against a reference (see the module docstring)."""

    same_environment: dict
    same_inputs: bool
    bit_identical: bool
    val_auc: float
    reference_auc: float
    tolerance: float
    passed: bool
    why: str

    def describe(self) -> str:
        same = ", ".join(f"{k} {'=' if v else '≠'}" for k, v in self.same_environment.items())
        return (
            f"{'PASS' if self.passed else 'FAIL'}: {self.why} (environment: {same}; inputs "
            f"{'=' if self.same_inputs else '≠'}; validation AUC {self.val_auc:.4f} vs {self.reference_auc:.4f})"
        )


def compare(mine: dict, reference: dict, tolerance: float) -> Comparison:
    """Check the run described by ``mine`` (:func:`reference_of` of its best checkpoint) against ``reference``."""
    if _plain(mine["config"]) != _plain(reference["config"]) or mine["data_hash"] != reference["data_hash"]:
        raise InputError("the run was trained with another config or other data than its reference: not comparable")
    same_env = {k: mine["environment"].get(k) == reference["environment"].get(k) for k in ENVIRONMENT_KEYS}
    same_inputs = mine["inputs_fingerprint"] == reference["inputs_fingerprint"]
    identical = mine["weights_fingerprint"] == reference["weights_fingerprint"] and mine["epoch"] == reference["epoch"]
    gap = abs(mine["val_auc"] - reference["val_auc"])
    if all(same_env.values()) and same_inputs:
        passed = identical
        why = "bit-identical weights" if identical else "same environment and inputs, yet other weights"
    else:
        passed = gap <= tolerance
        why = f"environment or inputs differ: validation AUC within ±{tolerance} required, gap {gap:.4f}"
    return Comparison(same_env, same_inputs, identical, mine["val_auc"], reference["val_auc"], tolerance, passed, why)


def quick_environment(cache_dir: str | Path) -> dict:
    """The environment the quick run is recorded and tested in: one torch thread, a cold embedding cache (the
    cache's batches, and so the embeddings' last bits, then depend on nothing run before)."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "SCP_CACHE_DIR": str(cache_dir)}


def _train(command: str, env: dict | None = None) -> Path:
    argv = shlex.split(command)[1:]
    # --force: the folder is this check's own, and a rerun replaces the previous run there (scp train refuses a
    # folder holding a run otherwise)
    if subprocess.run([sys.executable, "-m", "scp", *argv, "--force"], cwd=ROOT, env=env).returncode != 0:
        raise SystemExit(f"`{command}` failed")
    return ROOT / argv[argv.index("--out") + 1] / "best.safetensors"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scp.training.reproduce", description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["shipped", "quick"])
    parser.add_argument("--record", action="store_true", help="quick only: write the run as the new reference")
    args = parser.parse_args(argv)
    if args.record and args.which != "quick":
        parser.error("--record rewrites the quick reference only; the shipped model is shipped by notebook 13")
    command = SHIPPED_COMMAND if args.which == "shipped" else QUICK_COMMAND
    print(f"$ {command}", flush=True)
    with tempfile.TemporaryDirectory(prefix="scp-cold-cache-") as cache:
        mine = reference_of(_train(command, quick_environment(cache) if args.which == "quick" else None))
    if args.record:
        QUICK_REFERENCE.parent.mkdir(parents=True, exist_ok=True)
        QUICK_REFERENCE.write_text(json.dumps({"command": command, **mine}, indent=1) + "\n")
        print(f"reference written to {QUICK_REFERENCE.relative_to(ROOT)}")
        return 0
    reference = reference_of(SHIPPED_MODEL) if args.which == "shipped" else json.loads(QUICK_REFERENCE.read_text())
    result = compare(mine, reference, TOLERANCE[args.which])
    print(result.describe())
    print(json.dumps(asdict(result), indent=1))
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
