"""What a trained value network is, how it trained and how it scores: one card per ``best.safetensors``.

A run of :func:`scp.training.loop.train` (or :func:`scp.training.runs.train_or_load`) leaves ``best.safetensors`` (the
weights of
the epoch with the highest validation AUC) beside ``last.safetensors`` (the state after the last epoch).  Both carry
the training ``history``, but ``best.safetensors`` only up to its own epoch, so the learning curve is read from
``last.safetensors``.

- :func:`training_history`: one row per epoch (training loss, validation AUC and its bootstrap CI, seconds).
- :func:`model_card`: parameter count, training seconds, best validation AUC and epoch, and the config.
- :func:`evaluate_checkpoint`: :func:`scp.pruning.evaluation.evaluate` of the network on labelled examples, read the way
it was
  trained ("Title: sentence" units when ``unit_repr == "title"``), scored by Monte-Carlo Shapley values with M
  permutations (or by its outputs, for the pointwise control).

Training seconds are those the run measured when it trained, also when :func:`scp.training.runs.train_or_load` reuses
it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scp.errors import MissingFileError
from scp.models.factory import MODEL_ENTRIES, read_checkpoint

__all__ = ["model_card", "evaluate_checkpoint", "training_history"]


def _last_path(best_path) -> Path:
    best = Path(best_path)
    last = best.with_name("last.safetensors")
    if not last.is_file():
        raise MissingFileError(
            f"no {last.name} beside {best}: the learning curve is read from the last epoch's "
            "checkpoint that scp.training.loop writes next to best.safetensors"
        )
    return last


def training_history(best_path) -> list[dict[str, Any]]:
    """The learning curve of the run that wrote ``best_path``, one row per epoch.

    Args:
        best_path: a ``best.safetensors`` written by :func:`scp.training.loop.train` (``last.safetensors`` must lie
        beside
            it).

    Returns:
        ``[{"epoch", "train_loss", "val_auc", "val_auc_ci_low", "val_auc_ci_high", "seconds"}, …]``, ``seconds``
        cumulative since the start of training, for every epoch run so far.
    """
    state = read_checkpoint(_last_path(best_path), ("history",))
    return [
        {
            "epoch": h["epoch"],
            "train_loss": h["train_loss"],
            "val_auc": h["val_auc"],
            "val_auc_ci_low": h["val_auc_ci"][0],
            "val_auc_ci_high": h["val_auc_ci"][1],
            "seconds": h["seconds"],
        }
        for h in state["history"]
    ]


def model_card(best_path) -> dict[str, Any]:
    """Size, training cost and validation score of a trained network.

    Args:
        best_path: a ``best.safetensors`` written by :func:`scp.training.loop.train` (``last.safetensors`` must lie
        beside
            it).

    Returns:
        ``{"model", "n_params", "epochs", "best_epoch", "train_seconds", "best_val_auc", "best_val_auc_ci_low",
        "best_val_auc_ci_high", "n_train", "n_val", "config"}``; ``config`` is the
        :class:`scp.models.config.TrainConfig`
        as a dict and ``train_seconds`` the wall time of all epochs (validation included).
    """
    best = read_checkpoint(best_path, MODEL_ENTRIES + ("n_params", "epoch", "val_metrics", "n_train", "n_val"))
    last = read_checkpoint(_last_path(best_path), ("epoch", "seconds"))
    val = best["val_metrics"]
    return {
        "model": best["config"]["model"],
        "n_params": int(best["n_params"]),
        "epochs": int(last["epoch"]),
        "best_epoch": int(best["epoch"]),
        "train_seconds": float(last["seconds"]),
        "best_val_auc": float(val["auc"]),
        "best_val_auc_ci_low": float(val["auc_ci"][0]),
        "best_val_auc_ci_high": float(val["auc_ci"][1]),
        "n_train": int(best["n_train"]),
        "n_val": int(best["n_val"]),
        "config": dict(best["config"]),
    }


def evaluate_checkpoint(
    best_path,
    examples: Sequence,
    n_permutations: int = 50,
    seed: int = 0,
    keep_ratios: Sequence[float] = (0.5,),
    n_boot: int = 1000,
    cache_dir=None,
) -> dict:
    """Pairwise AUC (bootstrap CI), R@keep and compression of a trained network on ``examples``.

    Args:
        best_path: a checkpoint written by :func:`scp.training.loop.train`.
        examples: labelled :class:`scp.data.datasets.Example` objects (e.g. a test split).
        n_permutations: M, permutations of the Monte-Carlo Shapley estimate per context.
        seed: seeds the permutations (per context, with its text) and the bootstrap.
        keep_ratios: keep ratios of R@keep and compression.
        n_boot: bootstrap resamples of every CI.
        cache_dir: embedding cache (``None``: ``$SCP_CACHE_DIR``).

    Returns:
        The record of :func:`scp.pruning.evaluation.evaluate` (``auc`` with ``mean`` and ``ci``, ``recall@r``, …); units
        are
        read as the network was trained (``units`` says which).
    """
    from scp.models.config import TrainConfig
    from scp.pruning.evaluation import evaluate, make_ranker

    config = TrainConfig(**read_checkpoint(best_path, MODEL_ENTRIES)["config"])
    ranker = make_ranker("scp", str(best_path), cache_dir=cache_dir, n_permutations=n_permutations, seed=seed)
    return evaluate(list(examples), ranker, config.with_title, keep_ratios, n_boot=n_boot, seed=seed)
