"""Seeds and uniform random permutations, the randomness of every Monte-Carlo estimator.

A run has one seed; each context draws its permutations from its own seed ``derive_seed(seed, key)`` (key: a hash
of its text), so its estimate is independent of the batch it is scored in.  M permutations π_1..π_M of n players
are the row-wise argsort of an (M, n) uniform matrix; antithetic sampling pairs each π with its reverse.  The
standard error of a mean marginal is sd/√t over the t i.i.d. draws (antithetic pair means count as one draw).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np
import torch

from scp.core.memory import check_memory
from scp.core.selection import is_integer
from scp.errors import InputError

__all__ = [
    "PERMUTATION_BYTES",
    "check_flag",
    "check_permutation_count",
    "check_permutations",
    "derive_seed",
    "padded_permutations",
    "resolve_seed",
    "sample_permutations",
    "std_errors",
]

PERMUTATION_BYTES = 24
"""Bytes :func:`sample_permutations` holds per player per permutation: the uniform draws (float64), their argsort
(int64) and, with antithetic pairs, the stacked copy."""


def resolve_seed(seed: int | None) -> int:
    """The given seed, or a fresh one drawn from OS entropy (recorded in results so runs can be repeated)."""
    if seed is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if not is_integer(seed) or seed < 0:
        raise InputError(f"seed must be a non-negative integer or None; got {seed!r}")
    return int(seed)


def derive_seed(seed: int | None, key: str) -> int:
    """A per-context seed from a run seed and a key naming the context (e.g. a hash of its text): the first 8 bytes
    of sha256(seed ‖ key).

    Drawing each context's permutations from its own seed makes its Shapley estimate independent of which
    other contexts share its batch, of their order, and of the padding width.
    """
    digest = hashlib.sha256(f"{resolve_seed(seed)}\0{key}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "little") % (2**63)


def check_flag(value, name: str) -> None:
    """``value`` is a bool (Python or NumPy): an option such as ``antithetic`` is on or off, not "no" or NaN."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name} must be True or False; got {value!r} ({type(value).__name__})")


def check_permutation_count(n_permutations: int, antithetic: bool) -> None:
    """M is an integer ≥ 1 (not a bool), ``antithetic`` a bool, and M even with antithetic pairs."""
    check_flag(antithetic, "antithetic")
    if not is_integer(n_permutations) or n_permutations < 1:
        raise InputError(f"the number of permutations M must be an integer ≥ 1; got {n_permutations!r}")
    if antithetic and n_permutations % 2:
        raise InputError(
            f"antithetic sampling pairs each permutation with its reverse: M must be even; got {n_permutations}"
        )


def sample_permutations(
    n_players: int, n_permutations: int, seed: int | None = None, antithetic: bool = False
) -> np.ndarray:
    """(M, n) uniform random permutations; with ``antithetic`` rows 2k+1 reverse rows 2k.  Refused before drawing
    when their :data:`PERMUTATION_BYTES` per entry exceed the memory available
    (:func:`scp.core.memory.check_memory`)."""
    check_permutation_count(n_permutations, antithetic)
    check_memory(
        PERMUTATION_BYTES * int(n_permutations) * int(n_players),
        f"sampling M = {n_permutations:,} permutations of n = {n_players:,} players",
        "use fewer permutations (a smaller budget or n_permutations)",
    )
    rng = np.random.default_rng(resolve_seed(seed))
    m = n_permutations // 2 if antithetic else n_permutations
    perms = np.argsort(rng.random((m, n_players)), axis=1)
    if antithetic:
        perms = np.stack([perms, perms[:, ::-1]], axis=1).reshape(n_permutations, n_players)
    return perms


def check_permutations(permutations, n: int) -> np.ndarray:
    """Explicit permutations as an (M ≥ 1, n) int64 array, every row a permutation of 0..n−1."""
    perms = np.asarray(permutations)
    if perms.ndim != 2 or perms.shape[1] != n or perms.shape[0] < 1:
        raise InputError(f"permutations must be (M ≥ 1, {n}); got shape {perms.shape}")
    if not (np.sort(perms, axis=1) == np.arange(n)).all():
        raise InputError("every row of permutations must be a permutation of 0..n-1")
    return perms.astype(np.int64)


def padded_permutations(
    n_units: Sequence[int], width: int, n_permutations: int, antithetic: bool, seeds: Sequence[int]
) -> torch.Tensor:
    """(b, M, width) permutations: row i holds :func:`sample_permutations` (n_i, M, seeds[i]) of its valid
    units, followed by its padding positions in order.  Each row depends only on its own n_i and seed."""
    out = np.empty((len(n_units), n_permutations, width), dtype=np.int64)
    for i, (n, seed) in enumerate(zip(n_units, seeds)):
        out[i, :, :n] = sample_permutations(n, n_permutations, seed, antithetic)
        out[i, :, n:] = np.arange(n, width)
    return torch.from_numpy(out)


def std_errors(marginals: np.ndarray | torch.Tensor, antithetic: bool):
    """Per-player standard error sd/√t of the mean marginal over the permutation axis (−2).

    Antithetic pairs are averaged first, so the pair means are the t i.i.d. draws; NaN when t < 2.
    """
    if antithetic:
        shape = marginals.shape
        marginals = marginals.reshape(*shape[:-2], shape[-2] // 2, 2, shape[-1]).mean(-2)
    m = marginals.shape[-2]
    if m < 2:
        return marginals[..., 0, :] * float("nan")
    if isinstance(marginals, torch.Tensor):
        return marginals.std(dim=-2) / math.sqrt(m)
    return marginals.std(axis=-2, ddof=1) / math.sqrt(m)
