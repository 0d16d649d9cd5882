"""The suite's sources: the notebooks under ``notebooks/`` (their names and ``parameters`` cells) and their
parameter files under ``params/`` (read, checked against the cell and resolved for one run), the order the declared
graph puts notebooks in, and the journal a cut replacement of a notebook's outputs leaves; below the runner, the
graph and the notebook set-up, which all read them (the runner re-exports them)."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from scp.errors import DataFormatError, InputError, MissingFileError
from scp.paths import NOTEBOOKS, PARAMS, ROOT, RUNS

RUNNER_KEYS = ("out_dir",)
"""Parameters the runner sets itself; they may not appear in parameter files or ``-p``."""

_OUTPUTS = ("figures", "results")  # the folders a run replaces (scp.suite.runner.OUTPUTS)


class RunnerError(Exception):
    """A problem the runner reports in its own words: a notebook that failed (``main`` exits with status 1)."""


class ParameterError(RunnerError, InputError):
    """A parameter file or ``-p`` override that does not fit the notebook's ``parameters`` cell (bad input:
    an :class:`~scp.errors.SCPError`, exit status 2)."""


def _show(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


# ------------------------------------------------------------------------------------------ notebooks


def notebook_names(notebooks_dir: Path | None = None) -> list[str]:
    """Names (file stems) of all notebooks under ``notebooks/``, in reading order (by their number)."""
    return sorted(p.stem for p in Path(notebooks_dir or NOTEBOOKS).glob("*.ipynb"))


def _notebook_path(name: str, notebooks_dir: Path | None = None) -> Path:
    path = Path(notebooks_dir or NOTEBOOKS) / f"{name}.ipynb"
    if not path.is_file():
        known = ", ".join(notebook_names(notebooks_dir)) or "none yet"
        raise MissingFileError(f"no notebook {_show(path)} (known notebooks: {known})")
    return path


def _inspect(name: str, notebooks_dir: Path | None = None) -> dict[str, dict]:
    import papermill

    path = _notebook_path(name, notebooks_dir)
    try:
        params = papermill.inspect_notebook(str(path))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # not JSON, not a notebook (an edit broke it)
        message = " ".join(str(exc).split())[:200]
        raise DataFormatError(f"notebook {_show(path)} cannot be read ({type(exc).__name__}: {message})") from None
    if not params:
        raise ParameterError(
            f"notebook {name} has no cell tagged 'parameters' (or papermill could not parse it: "
            "no annotations, no '=' in comments)"
        )
    return params


def notebook_parameters(name: str, notebooks_dir: Path | None = None) -> list[str]:
    """The parameter names declared by the notebook's ``parameters`` cell (papermill's inspection), in order."""
    return list(_inspect(name, notebooks_dir))


def notebook_defaults(name: str, notebooks_dir: Path | None = None) -> dict[str, Any]:
    """The values written in the notebook's ``parameters`` cell (Python literals), by name."""
    out = {}
    for key, info in _inspect(name, notebooks_dir).items():
        try:
            out[key] = ast.literal_eval(info["default"])
        except (ValueError, SyntaxError) as exc:
            raise ParameterError(f"notebook {name}: parameter {key} = {info['default']} is not a literal") from exc
    return out


_ANY = object()  # a default that is no literal: its type must be declared (NULL_DEFAULT_TYPES)

NULL_DEFAULT_TYPES = {
    "max_train_examples": "int",
    "max_val_examples": "int",
    "max_test_examples": "int",
    "max_validation_examples": "int",
    "variants": "list[str]",
}
"""The type of each parameter whose default in a ``parameters`` cell is ``None`` (or no literal), by name, in every
notebook: ``bool``, ``int``, ``float``, ``str``, ``list``, ``dict`` or ``list[bool|int|float|str]``; such a
parameter takes null or a value of that type, and one not named here takes only null.  Declared here rather than
in the notebooks, whose code cells are their digest (changing them would make their results stale)."""


def _literal_defaults(name: str, notebooks_dir: Path | None = None) -> dict[str, Any]:
    """Each name the notebook's ``parameters`` cell assigns → its literal default (``_ANY`` where the value is no
    Python literal); read with ``ast``, so a list over several lines is one value."""
    import nbformat

    nb = nbformat.read(str(_notebook_path(name, notebooks_dir)), as_version=4)
    cell = next((c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        return {}
    try:
        tree = ast.parse(cell.source)
    except SyntaxError as exc:
        raise ParameterError(
            f"notebook {name}: its parameters cell is not plain Python (line {exc.lineno}: {exc.msg})"
        ) from None
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        try:
            default = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            default = _ANY
        for target in targets:  # papermill declares plain names only (no ``a, b = 1, 2``)
            if isinstance(target, ast.Name):
                out[target.id] = default
    return out


def _prototype(declared: str) -> Any:
    """A default of the declared type (``"list[int]"`` → ``[0]``), so a value is checked as against a literal."""
    kind, _, element = declared.partition("[")
    blank = {"bool": False, "int": 0, "float": 0.0, "str": "", "list": [], "dict": {}}
    return [blank[element.rstrip("]")]] if element else blank[kind]


def _kind(value: Any) -> str | None:
    """The kind of a default that a value must match: bool, int, float, str, list or dict (None: no literal, or a
    ``None`` default, whose type the parameter file declares)."""
    if value is None or value is _ANY:
        return None
    for kind, types in (
        ("bool", bool),
        ("int", int),
        ("float", float),
        ("str", str),
        ("list", (list, tuple)),
        ("dict", dict),
    ):
        if isinstance(value, types):
            return kind
    return type(value).__name__


def _element_kind(default: Sequence) -> str | None:
    """The kind every element of a list default shares (int and float mixed: float), or None."""
    kinds = {_kind(v) for v in default}
    if kinds <= {"int", "float"} and kinds:
        return "float" if "float" in kinds else "int"
    return next(iter(kinds)) if len(kinds) == 1 and kinds <= {"bool", "str"} else None


_WORDS = {
    "bool": "true or false",
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "list": "a list",
    "dict": "a mapping",
}
_PLURAL = {"bool": "true/false values", "int": "integers", "float": "numbers", "str": "strings"}
_SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")  # 1e-3: YAML 1.1 reads it as a string
_PLAIN_WORDS = "numbers, text, true/false, null, and lists and mappings (with text keys) of them"


def _not_plain(value: Any, depth: int = 0) -> str | None:
    """What in ``value`` is no plain JSON-like value (None, bool, int, float, str, and lists and str-keyed dicts
    of them, nested at most 64 deep), or None when it all is.  Exact types only: a subclass may print as code."""
    from scp.io import MAX_JSON_DEPTH

    if depth > MAX_JSON_DEPTH:
        return f"a value nested deeper than {MAX_JSON_DEPTH} levels"
    if value is None or type(value) in (bool, int, float, str):
        return None
    if type(value) in (list, tuple):
        return next((bad for v in value if (bad := _not_plain(v, depth + 1))), None)
    if type(value) is dict:
        keys = next((f"a {type(k).__name__} key {_short(k)}" for k in value if type(k) is not str), None)
        return keys or next((bad for v in value.values() if (bad := _not_plain(v, depth + 1))), None)
    return f"a {type(value).__name__} ({_short(value)})"


def python_literal(value: Any) -> str:
    """``value`` (plain: :func:`_not_plain`) as Python source that evaluates to it and does nothing else: ``repr``
    of exact ``str``/``int``/``float``/``bool``/``None``, and brackets around those; anything else raises
    :class:`ParameterError`.  This writes the cell that papermill injects, so no parameter can become code."""
    bad = _not_plain(value)
    if bad is not None:
        raise ParameterError(f"a parameter value must be {_PLAIN_WORDS}; got {bad}")
    if type(value) is float and not math.isfinite(value):
        return f"float({str(value)!r})"
    if value is None or type(value) in (bool, int, float, str):
        return repr(value)
    if type(value) is dict:
        return "{" + ", ".join(f"{k!r}: {python_literal(v)}" for k, v in value.items()) + "}"
    return "[" + ", ".join(python_literal(v) for v in value) + "]"


def _fit(value: Any, kind: str | None) -> tuple[bool, Any]:
    """Whether ``value`` fits a default of ``kind``, and the value to use (``"1e-3"`` → 0.001 for a number)."""
    if kind is None:
        return False, value
    if kind == "float" and isinstance(value, str) and _SCIENTIFIC.fullmatch(value.strip()):
        return True, float(value)
    if kind == "bool":
        return isinstance(value, bool), value
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool), value
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool), value
    if kind == "str":
        return isinstance(value, str), value
    if kind == "list":
        return isinstance(value, (list, tuple)), value
    if kind == "dict":
        return isinstance(value, dict), value
    return False, value  # a literal of another kind (a set, bytes, a complex number): no parameter value


def _short(value: Any) -> str:
    """``repr(value)`` for a message: whole up to 80 characters, else its first 77 and its length, so that no
    message quotes a long value whole (a 120 kB ``-p`` text is shown as 77 characters and "120000 characters")."""
    text = repr(value)
    if len(text) <= 80:
        return text
    size = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters written out"
    return f"{text[:77]}... ({size})"


MAX_TEXT_CHARS = 1024
"""The longest text a parameter value holds (a name, a path, a short template), anywhere in it: a longer one is
refused before any kernel starts (where a notebook's error would quote it whole); a longer text belongs in a file,
passed by its path."""


def _long_text(value: Any, depth: int = 0) -> str | None:
    """The first text in ``value`` (nested in lists and mappings, keys included) longer than
    :data:`MAX_TEXT_CHARS`, or None."""
    if isinstance(value, str):
        return value if len(value) > MAX_TEXT_CHARS else None
    if isinstance(value, dict):
        value = [*value, *value.values()]
    if isinstance(value, (list, tuple)) and depth < 100:
        return next((text for v in value if (text := _long_text(v, depth + 1)) is not None), None)
    return None


def _checked(name: str, where: str, key: str, value: Any, default: Any, declared: str | None = None) -> Any:
    """``value`` if it is plain data (:func:`_not_plain`) and fits the type of ``default`` (for a ``None``
    default: the ``declared`` type; entries of a mapping default: each its own default's type), else
    :class:`ParameterError` naming the notebook, the key, the expected type and the value."""
    bad = _not_plain(value)
    if bad is not None:
        raise ParameterError(f"{where}: parameter {key} of notebook {name} takes {_PLAIN_WORDS}; got {bad}")
    described = f"its default is {_short(default)}"
    if default is None or default is _ANY:
        if value is None:
            return None
        if declared is None:
            raise ParameterError(
                f"{where}: parameter {key} of notebook {name} has the default None and no declared type "
                f"(scp.suite.runner.NULL_DEFAULT_TYPES), so it takes only null; got {_short(value)}"
            )
        default, described = _prototype(declared), f"its default is None, declared {declared}"
    kind = _kind(default)
    ok, value = _fit(value, kind)
    expected = _WORDS.get(kind or "", kind)
    element = _element_kind(default) if ok and kind == "list" and value and default else None
    if element is not None:
        fitted = [_fit(v, element) for v in value]
        if all(fits for fits, _ in fitted):
            value = type(value)(v for _, v in fitted)
        else:
            ok, expected = False, f"a list of {_PLURAL[element]}"
    long = _long_text(value) if ok else None
    if long is not None:
        raise ParameterError(
            f"{where}: parameter {key} of notebook {name} takes texts of at most {MAX_TEXT_CHARS} characters; "
            f"got {_short(long)} (a longer text belongs in a file, passed by its path)"
        )
    if ok and kind == "dict":
        return {k: _checked(name, where, f"{key}.{k}", v, default[k]) if k in default else v for k, v in value.items()}
    if ok:
        return value
    hint = " (quote it to pass text)" if kind == "str" and where == "-p" else ""
    raise ParameterError(
        f"{where}: parameter {key} of notebook {name} expects {expected} ({described}); "
        f"got {_short(value)} ({type(value).__name__}){hint}"
    )


def order(names: Iterable[str], depends: Mapping[str, Sequence[str]]) -> list[str]:
    """``names`` sorted so that each notebook comes after the notebooks ``depends`` says it depends on, and
    otherwise by name (their number); dependencies outside ``names`` are not added."""
    todo = sorted(dict.fromkeys(names))
    done: list[str] = []
    visiting: set[str] = set()

    def visit(n: str) -> None:
        if n in done:
            return
        if n in visiting:
            raise RunnerError(f"dependency cycle through notebook {n}")
        visiting.add(n)
        for d in sorted(depends.get(n, ())):
            if d in todo:
                visit(d)
        visiting.discard(n)
        done.append(n)

    for n in todo:
        visit(n)
    return done


# ----------------------------------------------------------------------------------------- parameters


class _ValueLoader(yaml.SafeLoader):
    """YAML read as plain values only (what JSON holds): no binary, dates, sets, ordered pairs or other tags, no
    aliases (``*name``, which can make a small text a huge value), at most 64 levels deep; each key of a mapping
    given once (a second ``seed:`` is refused, naming it, rather than the last winning); scalars resolved by the
    YAML 1.2 core schema (:data:`YAML_CORE_SCHEMA`), not PyYAML's YAML 1.1."""

    depth = 0

    def compose_node(self, parent, index):
        from scp.io import MAX_JSON_DEPTH

        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "an alias (*name) is no value here; write it out", mark)
        self.depth += 1
        try:
            if self.depth > MAX_JSON_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_JSON_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark)
                except TypeError:  # an unhashable key: SafeConstructor refuses it below
                    continue
                if first is not key_node.start_mark:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"the key {_short(key)} is given twice (first on line {first.line + 1}); give each key once",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep)


YAML_CORE_SCHEMA = """Scalars of parameter files and ``-p`` values are read by the YAML 1.2 core schema, so a text
means one thing: ``true``/``false`` (any case) are the booleans and ``yes``, ``no``, ``on``, ``off`` are text;
integers are decimal (``10``), ``0x1F`` (hexadecimal, 31) or ``0o17`` (octal, 15), and ``1_000``, ``0b101`` and
``1:30`` (YAML 1.1 digit groups, binary and base 60) are text, so an integer parameter refuses them; a decimal with
a leading zero (``010``) is refused, since YAML 1.1 read it as octal (8) and 1.2 reads 10: write ``10``, ``0o10``
or quote it; ``1e-3``, ``1.5e3`` and ``.5`` are numbers; an integer beyond 64 bits (−2⁶³ … 2⁶³ − 1) or a number
beyond a 64-bit float is refused; ``<<`` is a plain key (no YAML 1.1 merge)."""

_INT_RANGE = (-(2**63), 2**63 - 1)
_CORE_INT = re.compile(r"[-+]?(0o[0-7]+|0x[0-9a-fA-F]+|[0-9]+)")
_CORE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")
_CORE_BOOL = re.compile(r"true|True|TRUE|false|False|FALSE")
_YAML_1_1 = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:merge"}
_ValueLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _YAML_1_1]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_ValueLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(f"^(?:{_CORE_BOOL.pattern})$"), list("tTfF"))
_ValueLoader.add_implicit_resolver(  # before the float: "10" is an integer
    "tag:yaml.org,2002:int", re.compile(f"^(?:{_CORE_INT.pattern})$"), list("-+0123456789")
)
_ValueLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(f"^(?:{_CORE_FLOAT.pattern})$"), list("-+.0123456789")
)


def _scalar_error(node: yaml.Node, problem: str) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(None, None, problem, node.start_mark)


def _core_bool(loader: yaml.SafeLoader, node: yaml.Node) -> bool:
    text = loader.construct_scalar(node)
    if not _CORE_BOOL.fullmatch(text):
        raise _scalar_error(node, f"{_short(text)} is no boolean (YAML 1.2: true or false)")
    return text.lower() == "true"


def _core_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = loader.construct_scalar(node)
    if not _CORE_INT.fullmatch(text):
        raise _scalar_error(node, f"{_short(text)} is no integer (YAML 1.2: decimal, 0x hexadecimal or 0o octal)")
    sign, digits = (-1 if text[0] == "-" else 1), text.lstrip("+-")
    if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
        shown = _short(text)
        raise _scalar_error(
            node,
            f"{shown} has a leading zero, which YAML 1.1 reads as octal and YAML 1.2 as decimal: write it without "
            "the zero, with 0o for octal (0o17), or quote it for text",
        )
    base = {"0x": 16, "0o": 8}.get(digits[:2], 10)
    if len(digits) > 30:  # beyond 64 bits in any base, and int() of thousands of digits raises
        value = None
    else:
        value = sign * int(digits[2:] if base != 10 else digits, base)
    if value is None or not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
        raise _scalar_error(node, f"an integer of {len(digits)} digits is beyond 64 bits (-2**63 to 2**63 - 1)")
    return value


def _core_float(loader: yaml.SafeLoader, node: yaml.Node) -> float:
    text = loader.construct_scalar(node)
    if not _CORE_FLOAT.fullmatch(text):
        raise _scalar_error(node, f"{_short(text)} is no number (YAML 1.2 core schema)")
    special = text.lstrip("+-").lower()
    if special in (".inf", ".nan"):
        return float(text.replace(".", "", 1))
    value = float(text)
    if not math.isfinite(value):
        raise _scalar_error(node, "a number beyond a 64-bit float (about ±1.8e308; .inf is infinity)")
    return value


_ValueLoader.add_constructor("tag:yaml.org,2002:bool", _core_bool)
_ValueLoader.add_constructor("tag:yaml.org,2002:int", _core_int)
_ValueLoader.add_constructor("tag:yaml.org,2002:float", _core_float)


def _refuse_tag(loader: yaml.SafeLoader, node: yaml.Node) -> None:
    kind = node.tag.rpartition(":")[2]
    raise yaml.constructor.ConstructorError(
        None, None, f"a {kind} is no parameter value ({_PLAIN_WORDS}; quote it to pass text)", node.start_mark
    )


for _tag in ("binary", "timestamp", "set", "omap", "pairs", "merge"):
    _ValueLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse_tag)


def _yaml_values(text: str) -> Any:
    """``text`` read as YAML by :class:`_ValueLoader`: plain values only."""
    return yaml.load(text, Loader=_ValueLoader)  # noqa: S506 - a SafeLoader that refuses even more


def read_sections(path: Path, name: str) -> dict[str, dict]:
    """``{"full", "smoke", "suite"}`` of a parameter file: the full-run values, the smoke overrides and the
    declared inputs (:mod:`scp.suite.graph`); a missing, unreadable or malformed file (or one holding other than
    plain values, :class:`_ValueLoader`) raises an :class:`~scp.errors.SCPError` naming it."""
    if not path.is_file():
        raise MissingFileError(f"no parameter file {_show(path)} for notebook {name!r}")
    try:
        params = _yaml_values(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ParameterError(f"{_show(path)}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
        raise ParameterError(f"{_show(path)}{line}: not valid YAML ({problem})") from None
    params = {} if params is None else params
    if not isinstance(params, dict):
        raise ParameterError(
            f"{_show(path)} must hold a mapping of parameter names to values, not a {type(params).__name__}"
        )
    params = dict(params)
    sections = {"full": params}
    for key in ("smoke", "suite"):
        value = params.pop(key, None)
        sections[key] = {} if value is None else value
        if not isinstance(sections[key], dict):
            raise ParameterError(
                f"{_show(path)}: the {key} section must be a mapping, not a {type(sections[key]).__name__}"
            )
    return sections


def _read_params(path: Path, name: str) -> tuple[dict, dict]:
    """(full-run values, smoke overrides) of a parameter file (see :func:`read_sections`)."""
    sections = read_sections(path, name)
    return sections["full"], sections["smoke"]


def load_params(name: str, smoke: bool = False, params_dir: Path | None = None) -> dict:
    """The full-run parameters of a notebook from ``params/NAME.yaml``, or its ``smoke`` overrides applied on top."""
    params, smoke_values = _read_params(Path(params_dir or PARAMS) / f"{name}.yaml", name)
    return {**params, **smoke_values} if smoke else params


def parse_overrides(pairs: Iterable[str]) -> dict[str, Any]:
    """``["key=value", …]`` → ``{key: value}``, each value read as a plain YAML value (:class:`_ValueLoader`: a
    scalar, flow list or mapping: ``3``, ``0.5``, ``true``, ``null``, ``[0, 1]``, ``{epochs: 1}``, ``hotpotqa``;
    no tags, dates, sets or binary; numbers as YAML 1.2 reads them, :data:`YAML_CORE_SCHEMA`).  A name given twice
    (``-p seed=1 -p seed=2``) is refused, as is a key given twice in one mapping."""
    out = {}
    given: dict[str, str] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*", key):
            raise ParameterError(f"-p expects key=value with a parameter name as key; got {_short(pair)}")
        if key in given:
            raise ParameterError(
                f"-p {key} is given twice ({_short(given[key])} and {_short(pair)}); give each parameter once"
            )
        given[key] = pair
        try:
            out[key] = _yaml_values(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
            raise ParameterError(f"-p {key}: cannot read {_short(raw)} as a value ({problem})") from None
    return out


def resolve_params(
    name: str,
    smoke: bool = False,
    overrides: Mapping[str, Any] | None = None,
    params_dir: Path | None = None,
    notebooks_dir: Path | None = None,
) -> dict[str, Any]:
    """The parameters of one run: ``params/NAME.yaml`` (with ``smoke:`` applied for a smoke run), then ``overrides``.

    Every value (of the file, both sections, and ``overrides``) must be plain data and is checked against the type
    of its default in the notebook's ``parameters`` cell, or for a ``None`` default the type
    :data:`NULL_DEFAULT_TYPES` declares (see the module docstring); nothing is executed.

    Raises:
        ParameterError: a key in the file, its smoke section or ``overrides`` that the notebook's ``parameters``
            cell does not declare, one the runner sets itself (``out_dir``), a value of the wrong type, or an
            unreadable parameter file.
        MissingFileError: no such notebook, or no ``params/NAME.yaml``.
    """
    declared = notebook_parameters(name, notebooks_dir)
    if "out_dir" not in declared:
        raise ParameterError(f"notebook {name}: its parameters cell must declare out_dir = None")
    path = Path(params_dir or PARAMS) / f"{name}.yaml"
    full, smoke_values = _read_params(path, name)
    sections = [(_show(path), full), (f"{_show(path)} (smoke section)", smoke_values), ("-p", dict(overrides or {}))]
    for where, values in sections:
        keys = list(values)
        unknown = [k for k in keys if k not in declared]
        if unknown:
            raise ParameterError(
                f"{where}: unknown parameter {', '.join(map(repr, unknown))} for notebook {name} "
                f"(its parameters cell declares {', '.join(declared)})"
            )
        reserved = [k for k in keys if k in RUNNER_KEYS]
        if reserved:
            raise ParameterError(
                f"{where}: {', '.join(reserved)} is set by the runner (use --out for the output folder)"
            )
    defaults = _literal_defaults(name, notebooks_dir)
    full, smoke_values, given = (
        {k: _checked(name, where, k, v, defaults.get(k, _ANY), NULL_DEFAULT_TYPES.get(k)) for k, v in values.items()}
        for where, values in sections
    )
    return {**full, **(smoke_values if smoke else {}), **given}


def check_params_in_sync(name: str, params_dir: Path | None = None, notebooks_dir: Path | None = None) -> None:
    """Raise :class:`ParameterError` unless ``params/NAME.yaml``'s full-run values equal the defaults written in
    the notebook's ``parameters`` cell (the same keys, apart from ``out_dir``, with the same values)."""
    defaults = {k: v for k, v in notebook_defaults(name, notebooks_dir).items() if k not in RUNNER_KEYS}
    full = load_params(name, False, params_dir)
    if set(full) != set(defaults):
        raise ParameterError(
            f"{name}: params file keys {sorted(full)} differ from the parameters cell's {sorted(defaults)}"
        )
    differ = [f"{k}: yaml {full[k]!r} vs notebook {defaults[k]!r}" for k in defaults if full[k] != defaults[k]]
    if differ:
        raise ParameterError(
            f"{name}: its params file and parameters cell disagree ({'; '.join(differ)}); keep them equal"
        )


def _journal(name: str) -> Path:
    """The swap journal: present while ``figures/NAME`` and ``results/NAME`` are being replaced by the folders
    staged under ``runs/scratch/NAME`` (:func:`_swap_in`)."""
    return RUNS / "scratch" / f"{name}.swap.json"


def pending_swap(name: str) -> Path | None:
    """The journal of a replacement of ``figures/NAME`` and ``results/NAME`` that a killed run left unfinished
    (the next run into the checkout finishes it, unless :func:`swap_outlook` says otherwise), or ``None``."""
    journal = _journal(name)
    return journal if journal.exists() else None


def swap_outlook(name: str) -> str | None:
    """What the next run into the checkout will do with the swap journal a killed run left for ``name``
    (:func:`pending_swap`), in words for ``--status``, or ``None`` when there is none.  It reads the journal and
    the folders as :func:`scp.suite.runner._finish_swap` does, without changing anything: the run finishes the swap;
    or it refuses (an unreadable journal, or a folder and the old one set aside both present); or the journal names
    staged folders that no longer exist while their place is empty too, so finishing it would leave the notebook's
    folder missing and delete the old one set aside; the last two must be settled by hand, and the line says how."""
    from scp.errors import SCPError
    from scp.io import read_json

    journal = _journal(name)
    if not journal.exists():
        return None
    shown = _show(journal)
    try:
        staged = read_json(journal, f"the swap journal {shown}").get("staged")
    except (SCPError, OSError, AttributeError) as exc:
        problem = " ".join(str(exc).split())[:200] or type(exc).__name__
        return f"the swap journal {shown} cannot be read ({problem}): the next run refuses it; remove it by hand"
    if not isinstance(staged, dict) or any(not isinstance(staged.get(kind), bool) for kind in _OUTPUTS):
        return (
            f"the swap journal {shown} names no staged folders: the next run refuses it; move it and the folders "
            "aside by hand"
        )
    scratch, vanished = RUNS / "scratch" / name, []
    for kind in _OUTPUTS:
        new, place, aside = scratch / kind / name, ROOT / kind / name, ROOT / kind / f".{name}.replaced"
        if staged[kind] and not new.exists():
            if not place.exists():
                vanished.append((kind, new, aside))
            continue
        if place.exists() and aside.exists():
            return (
                f"the swap journal {shown} cannot be finished: {_show(place)} and {_show(aside)} both exist, so the "
                "next run refuses it; keep the one you want as the first and remove the journal by hand"
            )
    if vanished:
        kind, new, aside = vanished[0]
        back = f"move {_show(aside)} back or " if aside.exists() else ""
        return (
            f"the swap journal {shown} names {_show(new)}, which no longer exists, and {kind}/{name} is missing too: "
            f"the next run would leave it missing (and delete any old folder set aside); {back}git checkout -- "
            f"{kind}/{name}, then remove {shown} by hand"
        )
    return (
        f"a run was cut while replacing figures/{name} and results/{name} ({journal.name}; the next scp run {name} "
        "finishes it)"
    )
