"""The public API: every name ``scp`` exports resolves to the object its module defines, ``import scp`` loads no
torch, and the README's quick start runs on the names it shows."""

import subprocess
import sys

import scp


def test_every_exported_name_is_the_defining_modules_object():
    import importlib

    import scp.core
    import scp.suite

    for package in (scp, scp.core, scp.suite):
        assert package.__all__ and set(package.__all__) <= set(dir(package))
        for name in package.__all__:
            value = getattr(package, name)
            home = getattr(value, "__module__", None)
            if home is not None and not isinstance(value, type(scp)):  # classes and functions: defined where listed
                assert getattr(importlib.import_module(home), name) is value, (package.__name__, name)
    assert scp.ESTIMATORS is importlib.import_module("scp.core.estimators").ESTIMATORS
    assert "ShapleyPruner" in dir(scp) and "exact" in dir(scp.core)


def test_an_unknown_name_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        scp.nope  # noqa: B018


def test_import_scp_loads_no_torch():
    code = "import sys, scp; assert 'torch' not in sys.modules, 'torch'; print(scp.__version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == scp.__version__


def test_estimate_from_the_top_level():
    result = scp.estimate(scp.GloveGame([0, 1], [2]), "exact")
    assert result.values.tolist() == [1 / 6, 1 / 6, 2 / 3]
