"""The peers our estimators are compared with, at equal budget on the same game: every Shapley-value approximator
of the installed shapiq."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def shapiq_methods() -> dict[str, tuple[Callable, dict]]:
    """Every Shapley-value approximator of the installed shapiq: name -> (constructor(n, seed), approximate kwargs).

    Interaction approximators are included where they are asked for the Shapley value (kADD-SHAP, order-1
    RegressionFSII, SPEX with index "SV"); SVARMIQ with index "SV" is SVARM itself, and ProxySPEX needs lightgbm,
    which the project does not install.  {} if shapiq is not installed."""
    try:
        from shapiq import approximator as A
    except ImportError:
        return {}
    return {
        "shapiq PermutationSamplingSV": (lambda n, s: A.PermutationSamplingSV(n, random_state=s), {"all_in_one": True}),
        "shapiq KernelSHAP": (lambda n, s: A.KernelSHAP(n, random_state=s), {}),
        "shapiq KernelSHAP (pairing)": (lambda n, s: A.KernelSHAP(n, pairing_trick=True, random_state=s), {}),
        "shapiq RegressionFSII (order 1, pairing)": (
            lambda n, s: A.RegressionFSII(n, max_order=1, pairing_trick=True, random_state=s),
            {},
        ),
        "shapiq kADDSHAP (pairing)": (lambda n, s: A.kADDSHAP(n, pairing_trick=True, random_state=s), {}),
        "shapiq UnbiasedKernelSHAP (pairing)": (
            lambda n, s: A.UnbiasedKernelSHAP(n, pairing_trick=True, random_state=s),
            {},
        ),
        "shapiq SVARM": (lambda n, s: A.SVARM(n, random_state=s), {}),
        "shapiq SVARM (pairing)": (lambda n, s: A.SVARM(n, pairing_trick=True, random_state=s), {}),
        "shapiq OwenSamplingSV": (lambda n, s: A.OwenSamplingSV(n, random_state=s), {}),
        "shapiq StratifiedSamplingSV": (lambda n, s: A.StratifiedSamplingSV(n, random_state=s), {}),
        "shapiq SPEX (index SV)": (lambda n, s: A.SPEX(n=n, index="SV", max_order=1, random_state=s), {}),
    }


def shapiq_values(iv, n: int) -> np.ndarray:
    """φ_i from shapiq's InteractionValues; a player missing from a sparse result (SPEX) has value 0."""
    lookup = iv.interaction_lookup
    return np.array([iv.values[lookup[(i,)]] if (i,) in lookup else 0.0 for i in range(n)], dtype=np.float64)
