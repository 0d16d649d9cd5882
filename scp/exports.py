"""Public names of a package loaded from their modules on first use (PEP 562), so importing the package is cheap.

A package declares ``{module: (name, ...)}`` and binds what :func:`lazy_exports` returns::

    __getattr__, __dir__, __all__ = lazy_exports(__name__, {"scp.pruning.pruner": ("ShapleyPruner",)})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(
    package: str, api: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``: each name of ``api`` comes from its module when first
    asked for and is then bound in the package (later lookups are plain attribute reads)."""
    module_of = {name: module for module, names in api.items() for name in names}
    if len(module_of) != sum(len(names) for names in api.values()):
        raise ValueError(f"{package}: a public name is listed under two modules")

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(module_of))

    return __getattr__, __dir__, sorted(module_of)
