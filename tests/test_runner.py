import pytest

from scp.runner import load_params, main


def test_params_full_and_smoke(tmp_path):
    (tmp_path / "demo.yaml").write_text("n: 1000\nseed: 0\nsmoke:\n  n: 5\n")
    assert load_params("demo", params_dir=tmp_path) == {"n": 1000, "seed": 0}
    assert load_params("demo", smoke=True, params_dir=tmp_path) == {"n": 5, "seed": 0}
    (tmp_path / "bad.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="mapping"):
        load_params("bad", params_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="parameter file"):
        load_params("missing", params_dir=tmp_path)


def test_unknown_notebook_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="no notebook"):
        main(["no_such_notebook"])
