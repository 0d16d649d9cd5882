"""`scp run` loses nothing and runs no parameter as code: parameters are plain values, type-checked (inside
mappings and for ``None`` defaults too) and written into the injected cell by a serializer that cannot produce code;
one writer per notebook; the figures/ + results/ swap is one recoverable step; ``--status`` sees missing or changed
outputs and unreadable provenance; ``--check`` compares every table file; a run into the checkout refuses any
uncommitted change (scp.suite.runner, scp.suite.graph, scp.suite.check)."""

import ast
import base64

import pytest

from scp.suite import runner
from scp.suite.notebook import read_records
from scp.suite.runner import ParameterError, main, parse_overrides, resolve_params
from tests.test_runner import project, write_notebook  # noqa: F401 - project is a fixture

PARAMS_CELL = (
    "max_train_examples = None  # int, declared by the runner\n"
    "train_overrides = {}  # any plain entries\n"
    "redundancy = {'n_copies': 1, 'seed': 0}  # typed entries\n"
    "name = 'x'  # text\n"
    "other = None  # no declared type\n"
    "out_dir = None  # set by the runner"
)
RECORD_CELL = (
    "from scp.suite.notebook import record\n"
    "record('seen', {'max_train_examples': max_train_examples, 'train_overrides': train_overrides, 'name': name})"
)


@pytest.fixture
def hostile(project):  # noqa: F811 - the fixture imported above
    write_notebook(project / "notebooks" / "05_values.ipynb", PARAMS_CELL, RECORD_CELL)
    (project / "params" / "05_values.yaml").write_text(
        "max_train_examples: null\ntrain_overrides: {}\nredundancy: {n_copies: 1, seed: 0}\nname: x\nother: null\n"
    )
    return project


def _payload(marker):
    """Text that, written unescaped between double quotes of a Python cell (papermill writes bytes that way),
    creates ``marker``."""
    code = f'"+str(open(r"{marker}","w").close())+"'
    return base64.b64encode(code.encode()).decode()


@pytest.mark.parametrize(
    "override",
    ["max_train_examples=!!binary {payload}", "train_overrides={{epochs: !!binary {payload}}}"],
    ids=["top-level", "dict entry"],
)
def test_a_binary_parameter_never_runs_as_code(hostile, tmp_path, capsys, override):
    marker = tmp_path / "marker"
    argv = ["05_values", "--out", str(tmp_path / "out"), "-p", override.format(payload=_payload(marker))]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "binary is no parameter value" in err and "Traceback" not in err
    assert not marker.exists()


def test_a_value_given_through_the_python_api_is_checked_before_the_kernel(hostile, tmp_path):
    marker = tmp_path / "marker"
    code = base64.b64decode(_payload(marker))
    for params in ({"max_train_examples": code}, {"train_overrides": {"epochs": code}}, {"name": {1, 2}}):
        with pytest.raises(ParameterError, match="takes numbers, text, true/false, null"):
            runner.run("05_values", params=params, out_dir=tmp_path / "out", echo=None)
    assert not marker.exists() and not (tmp_path / "out" / "runs" / "05_values.ipynb").exists()


def test_text_that_looks_like_code_arrives_as_text(hostile, tmp_path):
    marker = tmp_path / "marker"
    text = f'"; open(r"{marker}", "w").close(); x = "\\\' \'\'\' """ \n#'
    params = {"name": text, "train_overrides": {"lr": 0.5, text: [text, None, True]}}
    path = runner.run("05_values", params=params, out_dir=tmp_path / "out", echo=None)["05_values"]
    seen = read_records(path)["seen"]
    assert seen == {"max_train_examples": None, "train_overrides": params["train_overrides"], "name": text}
    assert not marker.exists()


@pytest.mark.parametrize(
    "value",
    [None, True, 3, -2.5, 1e-300, "a'b\"c\\d\n", [], [1, [2, {"k": "v"}]], {"a": {"b": [None]}}, (1, "x")],
)
def test_the_injected_literal_is_the_value_and_nothing_else(value):
    source = runner.python_literal(value)
    assert ast.literal_eval(source) == (list(value) if isinstance(value, tuple) else value)
    assert isinstance(ast.parse(source, mode="eval").body, (ast.Constant, ast.List, ast.Dict, ast.UnaryOp))


@pytest.mark.parametrize("value", [b"x", {1, 2}, {1: "a"}, object(), [b"x"], {"k": {"j": bytearray(b"x")}}])
def test_the_injected_literal_refuses_anything_but_plain_data(value):
    with pytest.raises(ParameterError, match="a parameter value must be"):
        runner.python_literal(value)


@pytest.mark.parametrize(
    "override, problem",
    [
        ("d=2024-01-01", "a timestamp is no parameter value"),
        ("s=!!set {a: null}", "a set is no parameter value"),
        ("p=!!omap [a: 1]", "a omap is no parameter value"),
        ("x=!!python/name:os.system", "could not determine a constructor"),
        ("a=[&x [1, 2], *x]", "an alias (*name) is no value here"),
        ("deep=" + "[" * 100 + "]" * 100, "nested deeper than 64 levels"),
    ],
)
def test_overrides_are_plain_values_only(override, problem):
    with pytest.raises(ParameterError) as info:
        parse_overrides([override])
    message = str(info.value)
    assert problem in message and len(message.splitlines()) == 1 and len(message) < 300


def test_none_defaults_declare_their_type_and_mapping_entries_are_checked(hostile):
    ok = resolve_params("05_values", overrides=parse_overrides(["max_train_examples=24", "redundancy={n_copies: 2}"]))
    assert ok["max_train_examples"] == 24 and ok["redundancy"] == {"n_copies": 2}
    assert resolve_params("05_values", overrides={"max_train_examples": None, "other": None})["other"] is None
    for override, expected in [
        (
            "max_train_examples=abc",
            "parameter max_train_examples of notebook 05_values expects an integer "
            "(its default is None, declared int); got 'abc'",
        ),
        ("max_train_examples=[1]", "expects an integer"),
        ("other=3", "parameter other of notebook 05_values has the default None and no declared type"),
        (
            "redundancy={n_copies: many}",
            "parameter redundancy.n_copies of notebook 05_values expects an integer (its default is 1); got 'many'",
        ),
        ("redundancy={seed: [0]}", "parameter redundancy.seed"),
    ]:
        with pytest.raises(ParameterError, match="^-p: ") as info:
            resolve_params("05_values", overrides=parse_overrides([override]))
        assert expected in str(info.value), override


def test_every_none_default_of_the_suite_declares_its_type():
    used = set()
    for name in runner.notebook_names():
        nulls = {k for k, v in runner._literal_defaults(name).items() if v is None and k != "out_dir"}
        assert nulls <= set(runner.NULL_DEFAULT_TYPES), f"{name}: {nulls} default to None with no declared type"
        used |= nulls
        resolve_params(name, smoke=True)  # the smoke values of None defaults fit the declared types
    assert used == set(runner.NULL_DEFAULT_TYPES)  # no declaration of a parameter no notebook has
