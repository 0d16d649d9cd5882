"""Where tensors go and how a network runs: a device asked for is checked against what torch can see here, before
any work, and :func:`eval_mode` runs a network without dropout, restoring its mode afterwards.

Asking for ``"cuda"`` on a machine without a visible GPU is an :class:`~scp.errors.InputError` naming the device
and what torch sees, not an assertion deep inside torch or a job waiting for a GPU that never comes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from scp.errors import InputError

if TYPE_CHECKING:
    import torch

__all__ = ["default_device", "eval_mode", "resolve_device"]


def default_device() -> str:
    """``"cuda"`` when torch sees a GPU, else ``"cpu"`` (results do not depend on it beyond floating-point rounding)."""
    import torch  # lazily: the embedders and baselines that ask need not load torch before they must

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``torch.device(device)`` (``None``: :func:`default_device`), refused unless torch can use it here."""
    import torch

    if device is None:
        return torch.device(default_device())
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise InputError(f"device {device!r} is not a torch device ({error}); use 'cpu', 'cuda' or 'cuda:N'") from None
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            built = "with" if torch.backends.cuda.is_built() else "without"
            raise InputError(
                f"device {str(dev)!r} was asked for, but torch sees no CUDA GPU here (torch "
                f"{torch.__version__}, built {built} CUDA); use device='cpu' or run on a GPU machine"
            )
        if dev.index is not None and dev.index >= count:
            raise InputError(
                f"device {str(dev)!r} was asked for, but torch sees {count} CUDA GPU(s) (cuda:0–cuda:{count - 1})"
            )
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise InputError(f"device {str(dev)!r} was asked for, but torch sees no Apple MPS device here")
    elif dev.type != "cpu":
        raise InputError(f"device {str(dev)!r} is not supported here; use 'cpu' or 'cuda'")
    return dev


@contextmanager
def eval_mode(net: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """``net`` in eval mode (no dropout) inside the block, back in the mode it had after it, even on an error.

    Gradients are left as they are: wrap the block in ``torch.no_grad()`` where none are needed."""
    was_training = net.training
    if was_training:
        net.eval()
    try:
        yield net
    finally:
        if was_training:
            net.train()
