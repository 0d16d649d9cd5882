"""Datasets as :class:`Example` objects: a query, its context units (the players) and 0/1 support labels.

Where data comes from (:func:`load_dataset` and every ``load_*`` loader), first match wins:

1. an explicit ``path``: a file in the dataset's original layout, or a directory holding the
   default file (``<dir>/<file>`` or ``<dir>/<folder>/<file>``);
2. ``$SCP_DATA_DIR/<folder>/<file>`` (see :data:`DATASETS` for folders and file names);
3. the Hugging Face hub through ``datasets.load_dataset``, when that package is importable and
   the hub reachable (HotpotQA, MS MARCO and MuSiQue only): with ``HF_HUB_OFFLINE`` /
   ``HF_DATASETS_OFFLINE`` set, or no TCP connection to the hub within 3 s, it is not asked at all (no
   half-minute of retries), and the client's retry warnings are hidden while it downloads;
4. otherwise :class:`~scp.errors.DataUnavailableError`.

Files may be ``.jsonl``, ``.jsonl.gz``, ``.json`` (one array) or ``.json.gz``.  The same file always
gives the same examples in the same order.  A file that cannot be read (not gzip, truncated, not
JSON) or a record not in the dataset's layout raises :class:`~scp.errors.DataFormatError` naming the
file and the line (``.jsonl``) or record number (``.json``); so does an example id that appears twice (naming
both lines: a repeated example would count twice in every mean; FEVER, whose ids hash the claim, merges records
repeating a claim instead, see :func:`load_fever`).  Splits are not the datasets' own: :func:`split_of`
assigns every id to train/validation/test (80/10/10) by hashing it.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import os
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from scp.data.text import is_blank, split_sentences
from scp.errors import DataFormatError, DataUnavailableError, InputError
from scp.io import unique_keys
from scp.lineage import note_read

Granularity = Literal["sentence", "paragraph"]
SPLITS = ("train", "validation", "test")
DATA_DIR_ENV = "SCP_DATA_DIR"
DATASET_KWARGS = {"musique": {"granularity": "sentence"}}
"""Loader options each dataset is read with everywhere (training, evaluation, notebooks)."""


@dataclass(frozen=True)
class Example:
    """One query with its context units; ``labels[i] == 1`` marks unit ``i`` as supporting evidence.

    ``titles[i]`` is the title of the paragraph unit ``i`` comes from ("" where there is none) and
    ``paragraph_ids[i]`` that paragraph's index.  Sequences are stored as tuples.  Invalid fields raise
    :class:`~scp.errors.DataFormatError` (a ``ValueError``).
    """

    id: str
    query: str
    units: tuple[str, ...]
    labels: tuple[int, ...]
    titles: tuple[str, ...]
    paragraph_ids: tuple[int, ...]
    answers: tuple[str, ...]
    dataset: str
    granularity: Granularity
    meta: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        for name in ("units", "labels", "titles", "paragraph_ids", "answers"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "labels", tuple(int(x) for x in self.labels))
        object.__setattr__(self, "paragraph_ids", tuple(int(x) for x in self.paragraph_ids))
        where = f"Example {self.id!r} ({self.dataset})"
        if not self.units:
            raise DataFormatError(f"{where}: needs at least one unit")
        lengths = {name: len(getattr(self, name)) for name in ("units", "labels", "titles", "paragraph_ids")}
        if len(set(lengths.values())) != 1:
            raise DataFormatError(f"{where}: units, labels, titles and paragraph_ids differ in length: {lengths}")
        bad = [i for i, label in enumerate(self.labels) if label not in (0, 1)]
        if bad:
            raise DataFormatError(f"{where}: labels must be 0 or 1; unit {bad[0]} has {self.labels[bad[0]]}")
        bad = [
            i
            for i, unit in enumerate(self.units)
            if not isinstance(unit, str) or is_blank(unit) or unit != unit.strip()
        ]
        if bad:
            raise DataFormatError(
                f"{where}: unit {bad[0]} is empty or not stripped (only whitespace or invisible "
                f"characters count as empty): {self.units[bad[0]]!r}"
            )
        if not isinstance(self.query, str) or is_blank(self.query):
            raise DataFormatError(
                f"{where}: the question (query) is empty (only whitespace or invisible characters "
                f"count as empty): {self.query!r}"
            )
        if self.granularity not in ("sentence", "paragraph"):
            raise DataFormatError(f"{where}: granularity must be 'sentence' or 'paragraph', not {self.granularity!r}")

    @property
    def n_units(self) -> int:
        return len(self.units)

    @property
    def n_positive(self) -> int:
        return sum(self.labels)

    @property
    def position_in_paragraph(self) -> tuple[int, ...]:
        """Index of each unit among the units of its paragraph, in context order."""
        seen: dict[int, int] = {}
        positions = []
        for pid in self.paragraph_ids:
            positions.append(seen.get(pid, 0))
            seen[pid] = positions[-1] + 1
        return tuple(positions)

    def unit_texts(self, with_title: bool = False) -> list[str]:
        """The unit texts, as ``"Title: text"`` when ``with_title`` (units without a title stay bare)."""
        if not with_title:
            return list(self.units)
        return [f"{title}: {unit}" if title else unit for title, unit in zip(self.titles, self.units)]


# --------------------------------------------------------------------------- splits


def split_of(example_id: str) -> str:
    """``"train"`` / ``"validation"`` / ``"test"`` (80/10/10) from the sha256 of the id alone."""
    u = int.from_bytes(hashlib.sha256(example_id.encode("utf-8")).digest()[:8], "big") / 2**64
    return "train" if u < 0.8 else "validation" if u < 0.9 else "test"


def _check_split(split: str | None) -> None:
    if split is not None and split not in SPLITS:
        raise InputError(f"split must be one of {SPLITS} or None, not {split!r}")


def split_examples(examples: Iterable[Example], split: str) -> list[Example]:
    """The examples of ``split`` (see :func:`split_of`), in their given order."""
    _check_split(split)
    return [ex for ex in examples if split_of(ex.id) == split]


# --------------------------------------------------------------------------- locating and reading files


@dataclass(frozen=True)
class DatasetSource:
    """Where a dataset lives: ``<data dir>/<folder>/<filename>``, and optionally on the hub.

    ``hub`` holds the positional and keyword arguments of ``datasets.load_dataset``; ``title`` and
    ``layout`` (the fields a record must have) go into the message of a record that lacks them.
    """

    folder: str
    filename: str
    hub: tuple[tuple[str, ...], dict[str, str]] | None
    title: str
    layout: str


_HOTPOT_LAYOUT = "_id or id, question, answer, context, supporting_facts"
DATASETS: dict[str, DatasetSource] = {
    "hotpotqa": DatasetSource(
        "hotpotqa",
        "hotpotqa_dev_distractor.jsonl.gz",
        (("hotpot_qa", "distractor"), {"split": "validation"}),
        "HotpotQA",
        _HOTPOT_LAYOUT,
    ),
    "2wiki": DatasetSource(
        "2wikimultihopqa", "2wikimultihopqa_dev_merged.jsonl.gz", None, "2WikiMultiHopQA", _HOTPOT_LAYOUT
    ),
    "musique": DatasetSource(
        "musique",
        "musique_ans_dev_merged.jsonl.gz",
        (("bdsaglam/musique",), {"data_files": "data/musique_ans_v1.0_dev.jsonl", "split": "train"}),
        "MuSiQue",
        "id, question, answer, paragraphs of {title, paragraph_text, is_supporting}",
    ),
    "msmarco": DatasetSource(
        "msmarco",
        "ms_marco_v11_train_sample.json",
        (("ms_marco", "v1.1"), {"split": "validation"}),
        "MS MARCO v1.1",
        "query_id, query, passages {passage_text, is_selected, url}",
    ),
    "fever": DatasetSource(
        "fever", "fever_claims_gold_evidence.jsonl", None, "FEVER", "claim, label, gold_evidence of [title, sentence]"
    ),
}
_ALIASES = {"2wikimultihopqa": "2wiki", "hotpot_qa": "hotpotqa", "ms_marco": "msmarco"}

Located = tuple[str, dict[str, Any]]  # (where: "<file> line N" or "<file> record N", record)


def _record(where: str, value: Any) -> Located:
    if not isinstance(value, dict):
        raise DataFormatError(f"{where}: expected a JSON object (one record), got {type(value).__name__}")
    return where, value


def _located_records(path: Path) -> Iterator[Located]:
    """Each record of ``path`` with where it is; any unreadable content raises ``DataFormatError``."""
    note_read(path, "data")
    gz = path.suffix == ".gz"
    is_array = (path.with_suffix("") if gz else path).suffix == ".json"
    lineno = 0
    after = ""
    try:
        with (gzip.open if gz else open)(path, "rt", encoding="utf-8") as fh:
            if is_array:
                data = json.load(fh, object_pairs_hook=unique_keys(str(path)))
                if not isinstance(data, list):
                    kind = type(data).__name__
                    raise DataFormatError(f"{path}: a .json file must hold one JSON array of records, not a {kind}")
                for i, value in enumerate(data, 1):
                    yield _record(f"{path} record {i}", value)
            else:
                for lineno, line in enumerate(fh, 1):
                    after = f" after line {lineno}"
                    if line.strip():
                        where = f"{path} line {lineno}"
                        yield _record(where, json.loads(line, object_pairs_hook=unique_keys(where)))
    except json.JSONDecodeError as error:
        line = error.lineno if is_array else lineno
        raise DataFormatError(f"{path} line {line}: not valid JSON ({error.msg} at column {error.colno})") from error
    except RecursionError:  # json's decoder recurses once per nested [ or {
        where = f"{path} line {lineno}" if not is_array else str(path)
        raise DataFormatError(f"{where}: JSON nested too deeply to be a record") from None
    except UnicodeDecodeError as error:
        raise DataFormatError(f"{path}: not UTF-8 text{after} ({error.reason})") from error
    except EOFError as error:
        raise DataFormatError(f"{path}: truncated gzip stream{after} (re-download or re-create it)") from error
    except (gzip.BadGzipFile, zlib.error) as error:
        raise DataFormatError(f"{path}: not a valid gzip file{after} ({error})") from error


def read_json_records(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """JSON records of a ``.jsonl``/``.json`` file, gzipped or not (a ``.json`` file holds one array).

    A file that cannot be read as such, or a line or item that is not a JSON object, raises
    :class:`~scp.errors.DataFormatError` naming the file and line (during iteration).
    """
    return (record for _, record in _located_records(Path(path)))


def _find_in_dir(directory: Path, source: DatasetSource) -> Path | None:
    for candidate in (directory / source.filename, directory / source.folder / source.filename):
        if candidate.is_file():
            return candidate
    return None


_OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
_HUB_LOGGERS = ("huggingface_hub", "datasets", "fsspec", "urllib3", "httpx", "filelock")
NOT_INSTALLED = "the `datasets` package is not installed"


def _hub_unavailable() -> str | None:
    """Why the hub is not worth asking (offline mode set, or no TCP connection to it within 3 s), else ``None``.

    Checked before ``datasets.load_dataset``, whose retries take half a minute and a dozen log lines offline."""
    from scp.data.embedders import hub_reachable

    for var in _OFFLINE_VARS:
        if os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"}:
            return f"{var} is set (offline mode)"
    if not hub_reachable():
        endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
        return f"the hub ({endpoint}) is unreachable (no connection within 3 s: offline?)"
    return None


def _datasets_missing() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("datasets") is None
    except ValueError:  # imported already, without a spec
        return "datasets" not in sys.modules


@contextlib.contextmanager
def _quiet_hub_logs() -> Iterator[None]:
    """Hide the hub client's warnings (one per retry) while ``datasets.load_dataset`` runs; errors still show."""
    loggers = [logging.getLogger(name) for name in _HUB_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _from_hub(source: DatasetSource) -> tuple[Iterable[dict[str, Any]] | None, str]:
    """Rows from the hub, or ``None`` and the reason they could not be had (no source, no ``datasets``,
    offline, or the download failed)."""
    if source.hub is None:
        return None, "no Hugging Face hub source is configured for this dataset"
    if _datasets_missing():
        return None, NOT_INSTALLED
    blocked = _hub_unavailable()
    if blocked:
        return None, blocked
    try:
        import datasets
    except ImportError:
        return None, NOT_INSTALLED
    args, kwargs = source.hub
    try:
        with _quiet_hub_logs():
            return datasets.load_dataset(*args, **kwargs), ""
    except Exception as exc:  # renamed repo, interrupted download, ...: the caller raises DataUnavailableError
        return None, f"datasets.load_dataset{args} failed: {type(exc).__name__}: {exc}"


def _records(name: str, path: str | os.PathLike[str] | None) -> Iterable[Located]:
    """Raw records of dataset ``name`` with where each is, resolved as described in the module docstring."""
    source = DATASETS[name]
    if path is not None:
        p = Path(path)
        found = p if p.is_file() else _find_in_dir(p, source) if p.is_dir() else None
        if found is None:
            raise DataUnavailableError(
                f"{name}: path={str(path)!r} is neither a data file nor a directory holding "
                f"{source.filename} or {source.folder}/{source.filename}"
            )
        return _located_records(found)
    data_dir = os.environ.get(DATA_DIR_ENV)
    if data_dir:
        found = _find_in_dir(Path(data_dir), source)
        if found is not None:
            return _located_records(found)
    rows, reason = _from_hub(source)
    if rows is not None:
        return ((f"{name} (Hugging Face hub) row {i}", row) for i, row in enumerate(rows, 1))
    if not data_dir:
        looked = f"{DATA_DIR_ENV} is not set"
    elif Path(data_dir).is_dir():
        tried = (Path(data_dir) / source.filename, Path(data_dir) / source.folder / source.filename)
        looked = f"neither {tried[0]} nor {tried[1]} exists ({DATA_DIR_ENV}={data_dir!r})"
    else:
        looked = f"{DATA_DIR_ENV}={data_dir!r} is not a directory"
    online = (
        ""
        if source.hub is None
        else ", or install `datasets` (pip install 'scp[online]') and go online"
        if reason == NOT_INSTALLED
        else ", or go online (it is then downloaded from the hub)"
    )
    raise DataUnavailableError(
        f"{name} is not available: {looked}, and from the Hugging Face hub: {reason}. "
        f"Set {DATA_DIR_ENV} to a directory holding {source.folder}/{source.filename} "
        f"(export {DATA_DIR_ENV}=/path/to/data), or pass --data FILE (path=... in Python){online}."
    )


R = TypeVar("R")
T = TypeVar("T")


def _parsed(name: str, where: str, parse: Callable[[R], T], record: R) -> T:
    """``parse(record)``; its errors become a :class:`DataFormatError` naming ``where`` (and, for a record
    missing a key or holding a value of the wrong type, the layout dataset ``name`` expects)."""
    try:
        return parse(record)
    except DataFormatError as error:  # bad content, already explained
        raise DataFormatError(f"{where}: {error}") from error
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
        source = DATASETS[name]
        detail = (
            f"missing key {error}"
            if isinstance(error, KeyError)
            else str(error)
            if isinstance(error, _LayoutError)
            else f"{type(error).__name__}: {error}"
        )
        expected = f"expected {source.layout}"
        raise DataFormatError(f"{where}: not in the {source.title} layout: {detail} ({expected})") from error


def _take(
    name: str,
    records: Iterable[tuple[str, R]],
    record_id: Callable[[R], str],
    build: Callable[[R], Example],
    split: str | None,
    limit: int | None,
) -> list[Example]:
    """Build the examples of ``split`` from (where, record) pairs in record order, stopping after ``limit``.

    An id seen twice (among the records read) is a :class:`DataFormatError` naming the file, the id and both
    places: a repeated example would be evaluated twice and count twice in every mean and its n."""
    _check_split(split)
    out: list[Example] = []
    seen: dict[str, str] = {}
    for where, record in records:
        if limit is not None and len(out) >= limit:
            break
        ex_id = _parsed(name, where, record_id, record)
        if ex_id in seen:
            raise DataFormatError(_duplicate_message(ex_id, seen[ex_id], where))
        seen[ex_id] = where
        if split is None or split_of(ex_id) == split:
            out.append(_parsed(name, where, build, record))
    return out


def _duplicate_message(ex_id: str, first: str, again: str) -> str:
    """``<file> lines 3 and 7: example id 'x' appears twice …`` (``first``/``again``: "<file> line N")."""
    head, _, n1 = first.rpartition(" ")
    head2, _, n2 = again.rpartition(" ")
    if head == head2 and head.endswith((" line", " record", " row")):
        place, unit = head.rsplit(" ", 1)
        where = f"{place} {unit}s {n1} and {n2}"
    else:
        where = f"{first} and {again}"
    return (
        f"{where}: example id {ex_id!r} appears twice (the same example would be evaluated twice and count "
        "twice); remove the repeated record"
    )


# --------------------------------------------------------------------------- field checks shared by the loaders


class _LayoutError(ValueError):
    """A field of a record has the wrong type or shape; :func:`_parsed` reports it with the layout expected."""


def _kind(value: Any) -> str:
    """``value``'s JSON-ish type, with the value itself when it is a short scalar: ``str 'abc'``, ``int 2``."""
    if value is None:
        return "null"
    if isinstance(value, (str, bytes, bool, int, float, np.generic)):
        return f"{type(value).__name__} {value!r:.40}"
    return type(value).__name__


def _str_list(value: Any, what: str) -> list[str]:
    """``value`` as a list of strings; a string (which would split into letters) or anything else raises."""
    if not isinstance(value, (list, tuple)):
        raise _LayoutError(f"{what} must be a list of strings, not {_kind(value)}")
    bad = [i for i, item in enumerate(value) if not isinstance(item, str)]
    if bad:
        raise _LayoutError(f"{what} must be a list of strings; item {bad[0]} is {_kind(value[bad[0]])}")
    return list(value)


def _columns(table: Any, keys: tuple[str, ...], what: str) -> list[list[Any]]:
    """The lists ``table[key]`` of a column layout (the Hugging Face one), which must all be of one length."""
    if not isinstance(table, dict):
        raise _LayoutError(f"{what} must be an object of lists {', '.join(keys)}, not {_kind(table)}")
    columns = [table[key] for key in keys]
    for key, column in zip(keys, columns):
        if not isinstance(column, (list, tuple)):
            raise _LayoutError(f"{what}.{key} must be a list, not {_kind(column)}")
    lengths = {key: len(column) for key, column in zip(keys, columns)}
    if len(set(lengths.values())) != 1:
        listed = ", ".join(f"{len(c)} {k}" for k, c in zip(keys, columns))
        raise _LayoutError(f"{what} has lists of different lengths ({listed}): they must be one entry per item")
    return [list(column) for column in columns]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _flag(value: Any, what: str) -> int:
    """A 0/1 label given as a bool or as the integer 0 or 1 (never a string such as "false")."""
    if isinstance(value, (bool, np.bool_)) or (_is_int(value) and value in (0, 1)):
        return int(value)
    raise _LayoutError(f"{what} must be true/false or 0/1, not {_kind(value)}")


# --------------------------------------------------------------------------- HotpotQA and 2WikiMultiHopQA


def _hotpot_id(record: dict[str, Any]) -> str:
    return str(record["_id"] if "_id" in record else record["id"])


def _hotpot_layout(record: dict[str, Any]) -> tuple[list[tuple[str, list[str]]], list[tuple[str, int]]]:
    """``context`` as (title, sentences) pairs and ``supporting_facts`` as (title, sent_id), either layout."""
    ctx, facts = record["context"], record["supporting_facts"]
    if isinstance(ctx, dict):  # Hugging Face layout
        ctx = zip(*_columns(ctx, ("title", "sentences"), "context"))
    elif not isinstance(ctx, list):
        raise _LayoutError(f"context must be a list of [title, sentences] pairs, not {_kind(ctx)}")
    if isinstance(facts, dict):
        facts = zip(*_columns(facts, ("title", "sent_id"), "supporting_facts"))
    elif not isinstance(facts, list):
        raise _LayoutError(f"supporting_facts must be a list of [title, sentence index] pairs, not {_kind(facts)}")
    paragraphs, resolved_facts = [], []
    for k, (title, sentences) in enumerate(ctx):
        if not isinstance(title, str):
            raise _LayoutError(f"context paragraph {k}: its title must be a string, not {_kind(title)}")
        paragraphs.append((title, _str_list(sentences, f"context paragraph {k} ({title!r}): its sentences")))
    for k, (title, sent_id) in enumerate(facts):
        if not isinstance(title, str) or not _is_int(sent_id):
            raise _LayoutError(
                f"supporting_facts entry {k} must be [title, sentence index] with a string title "
                f"and an integer index, not [{_kind(title)}, {_kind(sent_id)}]"
            )
        resolved_facts.append((title, int(sent_id)))
    return paragraphs, resolved_facts


def _answer(value: Any) -> str:
    if not isinstance(value, str):
        raise _LayoutError(f"answer must be a string, not {_kind(value)}")
    return value.strip()


def _hotpot_example(record: dict[str, Any], dataset: str) -> Example:
    """One HotpotQA-style record (original or HF layout) at sentence granularity.

    Exact duplicate paragraphs (same title and sentences, as in a few 2Wiki contexts) are kept once
    and empty sentences (:func:`scp.data.text.is_blank`: whitespace or invisible characters only) are dropped.
    A supporting fact ``[title, sent_id]`` marks sentence ``sent_id`` of the paragraph(s) with that title;
    one that resolves to no non-empty sentence
    raises ``DataFormatError`` naming the example id.
    """
    ex_id = _hotpot_id(record)
    context, facts = _hotpot_layout(record)
    paragraphs: list[tuple[str, list[str]]] = []
    for title, sentences in context:
        if (title, sentences) not in paragraphs:
            paragraphs.append((title, sentences))
    fact_set = set(facts)
    units, labels, titles, pids = [], [], [], []
    resolved: set[tuple[str, int]] = set()
    for pid, (title, sentences) in enumerate(paragraphs):
        for sent_id, sentence in enumerate(sentences):
            if is_blank(sentence):
                continue
            units.append(sentence.strip())
            labels.append(int((title, sent_id) in fact_set))
            titles.append(title)
            pids.append(pid)
            if labels[-1]:
                resolved.add((title, sent_id))
    missing = [fact for fact in facts if fact not in resolved]
    if missing:
        raise DataFormatError(f"{dataset} example {ex_id!r}: supporting facts {missing} resolve to no context sentence")
    meta = {"type": record.get("type")}
    if "level" in record:
        meta["level"] = record["level"]
    return Example(
        id=ex_id,
        query=record["question"].strip(),
        units=tuple(units),
        labels=tuple(labels),
        titles=tuple(titles),
        paragraph_ids=tuple(pids),
        answers=(_answer(record["answer"]),),
        dataset=dataset,
        granularity="sentence",
        meta=meta,
    )


def load_hotpotqa(
    path: str | os.PathLike[str] | None = None, *, split: str | None = None, limit: int | None = None
) -> list[Example]:
    """HotpotQA (distractor setting), one unit per context sentence, labels from ``supporting_facts``.

    Accepts the original layout (``_id``, ``context: [[title, [sents]]]``, ``supporting_facts:
    [[title, sent_id]]``) and the Hugging Face layout (``id``, ``context: {title, sentences}``,
    ``supporting_facts: {title, sent_id}``); the same record gives an equal :class:`Example` in
    both.  ``meta`` holds ``type`` (bridge/comparison) and ``level``.
    """
    records = _records("hotpotqa", path)
    return _take("hotpotqa", records, _hotpot_id, lambda r: _hotpot_example(r, "hotpotqa"), split, limit)


def load_2wiki(
    path: str | os.PathLike[str] | None = None, *, split: str | None = None, limit: int | None = None
) -> list[Example]:
    """2WikiMultiHopQA, read exactly like :func:`load_hotpotqa`; ``meta["type"]`` is the question type
    (comparison, compositional, bridge_comparison, inference)."""
    return _take("2wiki", _records("2wiki", path), _hotpot_id, lambda r: _hotpot_example(r, "2wiki"), split, limit)


# --------------------------------------------------------------------------- MuSiQue


def _musique_example(record: dict[str, Any], granularity: Granularity) -> Example:
    units, labels, titles, pids = [], [], [], []
    if not isinstance(record["paragraphs"], list):
        raise _LayoutError(
            f"paragraphs must be a list of {{title, paragraph_text, is_supporting}} objects, not "
            f"{_kind(record['paragraphs'])}"
        )
    for pid, para in enumerate(record["paragraphs"]):
        pieces = (
            [para["paragraph_text"].strip()] if granularity == "paragraph" else split_sentences(para["paragraph_text"])
        )
        label = _flag(para["is_supporting"], f"paragraph {pid}: is_supporting")
        for piece in pieces:
            if not is_blank(piece):
                units.append(piece)
                labels.append(label)
                titles.append(para["title"].strip())
                pids.append(pid)
    ex_id = str(record["id"])
    return Example(
        id=ex_id,
        query=record["question"].strip(),
        units=tuple(units),
        labels=tuple(labels),
        titles=tuple(titles),
        paragraph_ids=tuple(pids),
        answers=tuple(
            a.strip()
            for a in [_answer(record["answer"]), *_str_list(record.get("answer_aliases", []), "answer_aliases")]
        ),
        dataset="musique",
        granularity=granularity,
        meta={
            "hop_type": ex_id.split("__")[0],
            "answerable": bool(record.get("answerable", True)),
            "supporting_paragraphs": tuple(i for i, p in enumerate(record["paragraphs"]) if p["is_supporting"]),
            # the single-hop sub-questions ("#k" refers to hop k's answer) with their answers and paragraphs
            "decomposition": tuple(
                {
                    "question": str(d["question"]).strip(),
                    "answer": str(d["answer"]).strip(),
                    "paragraph": int(d["paragraph_support_idx"]),
                }
                for d in record.get("question_decomposition") or ()
                if d.get("paragraph_support_idx") is not None
            ),
        },
    )


def load_musique(
    path: str | os.PathLike[str] | None = None,
    *,
    granularity: Granularity = "paragraph",
    split: str | None = None,
    limit: int | None = None,
) -> list[Example]:
    """MuSiQue-Ans, 20 paragraphs per question with paragraph-level ``is_supporting`` labels.

    ``granularity="paragraph"``: one unit per paragraph.  ``granularity="sentence"``: each paragraph
    is split with :func:`scp.data.text.split_sentences` and every sentence inherits its paragraph's label.
    That brings label noise: non-evidence sentences inside a supporting paragraph get label 1
    (MuSiQue has no sentence-level annotation).  ``meta`` holds ``hop_type`` (e.g. ``2hop``,
    ``3hop1``), ``answerable`` and ``supporting_paragraphs``.
    """
    if granularity not in ("sentence", "paragraph"):
        raise InputError(f"granularity must be 'sentence' or 'paragraph', not {granularity!r}")
    records = _records("musique", path)
    return _take("musique", records, lambda r: str(r["id"]), lambda r: _musique_example(r, granularity), split, limit)


# --------------------------------------------------------------------------- MS MARCO

_MSMARCO_NO_ANSWER = "No Answer Present."


def _msmarco_example(record: dict[str, Any]) -> Example:
    texts, selected, urls = _columns(record["passages"], ("passage_text", "is_selected", "url"), "passages")
    texts = _str_list(texts, "passages.passage_text")
    labels = [_flag(x, f"passages.is_selected[{i}]") for i, x in enumerate(selected)]
    answers = _str_list(record.get("answers", []), "answers")
    kept = [i for i, text in enumerate(texts) if not is_blank(text)]
    return Example(
        id=str(record["query_id"]),
        query=record["query"].strip(),
        units=tuple(texts[i].strip() for i in kept),
        labels=tuple(labels[i] for i in kept),
        titles=("",) * len(kept),
        paragraph_ids=tuple(range(len(kept))),
        answers=tuple(a.strip() for a in answers if a.strip() and a.strip() != _MSMARCO_NO_ANSWER),
        dataset="msmarco",
        granularity="paragraph",
        meta={"query_type": record.get("query_type"), "urls": tuple(urls[i] for i in kept)},
    )


def load_msmarco(
    path: str | os.PathLike[str] | None = None, *, split: str | None = None, limit: int | None = None
) -> list[Example]:
    """MS MARCO QA (v1.1 layout): candidate passages as units, labels from ``is_selected``.

    Passages have no titles (``titles`` are ""; URLs go to ``meta["urls"]``).  Queries with no
    selected passage are kept (metrics exclude them); the sentinel answer "No Answer Present." is
    dropped from ``answers``.  The id is ``str(query_id)``.
    """
    return _take("msmarco", _records("msmarco", path), lambda r: str(r["query_id"]), _msmarco_example, split, limit)


# --------------------------------------------------------------------------- FEVER


def _fever_id(claim: str) -> str:
    return "fever-" + hashlib.sha256(claim.strip().encode("utf-8")).hexdigest()[:16]


def _fever_claim(record: dict[str, Any]) -> dict[str, Any]:
    """The fields of one FEVER record that :func:`load_fever` uses."""
    claim, label, evidence = record["claim"], record["label"], record["gold_evidence"]
    if not isinstance(claim, str) or is_blank(claim):
        raise DataFormatError(
            f"the claim is empty or not a string (only whitespace or invisible characters count "
            f"as empty): {claim!r:.40}"
        )
    if not isinstance(label, str) or is_blank(label):
        raise _LayoutError(f"label must be a string such as SUPPORTS or REFUTES, not {_kind(label)}")
    if not isinstance(evidence, list):
        raise _LayoutError(f"gold_evidence must be a list of [title, sentence] pairs, not {_kind(evidence)}")
    return {
        "claim": claim.strip(),
        "label": label,
        "evidence": [(t.strip(), s.strip()) for t, s in evidence if not is_blank(s)],
        "rows": [record.get("row")],
    }


def _fever_negatives(
    ex_id: str, positives: list[tuple[str, str]], pool: list[tuple[str, str]], k: int, rng: np.random.Generator
) -> list[tuple[str, str]]:
    """``k`` (title, sentence) negatives for one claim; see :func:`load_fever`."""
    seen = {s for _, s in positives}
    pos_titles = {t for t, _ in positives}
    preferred, fallback = [], []
    for j in rng.permutation(len(pool)):
        title, sentence = pool[j]
        if sentence in seen:
            continue
        seen.add(sentence)
        (fallback if title in pos_titles else preferred).append(pool[j])
        if len(preferred) >= k:
            break
    chosen = (preferred + fallback)[:k]
    if len(chosen) < k:
        raise DataFormatError(f"fever example {ex_id!r}: only {len(chosen)} negatives available, {k} requested")
    return chosen


def load_fever(
    path: str | os.PathLike[str] | None = None,
    *,
    n_negatives: int = 9,
    seed: int = 0,
    split: str | None = None,
    limit: int | None = None,
) -> list[Example]:
    """FEVER claims (SUPPORTS/REFUTES) with their gold evidence sentences as positives.

    The file has no distractors, so negatives are built deterministically:

    * ids are ``"fever-" + sha256(claim)[:16]``; records repeating an earlier claim are merged into
      it (their rows go to ``meta["rows"]``, the evidence is the first record's);
    * the pool of an example is the de-duplicated (title, sentence) evidence of all claims in the
      same :func:`split_of` split (so negatives never cross splits), in file order;
    * a generator seeded with ``sha256(f"{seed}:{id}")`` permutes the pool; walking it, sentences
      identical to a positive (or to a negative already taken) are skipped, and sentences whose
      Wikipedia title is not among the positives' titles are taken first (``n_negatives`` of them);
      only if there are too few, same-title sentences fill up (``DataFormatError`` if still too few);
    * the positives and negatives are then shuffled by the same generator (so positives do not sit
      first).  Each unit is its own paragraph; ``titles`` are the Wikipedia titles.

    ``answers`` is ``(label,)``; ``meta`` holds ``label`` and ``rows``.  Sentences keep FEVER's
    tokenisation (spaces before punctuation).
    """
    _check_split(split)
    if n_negatives < 0:
        raise InputError("n_negatives must be >= 0")
    claims: dict[str, dict[str, Any]] = {}
    for where, record in _records("fever", path):
        claim = _parsed("fever", where, _fever_claim, record)
        ex_id = _fever_id(claim["claim"])
        if ex_id in claims:
            claims[ex_id]["rows"].extend(claim["rows"])
        else:
            claims[ex_id] = {**claim, "where": where}
    pools: dict[str, list[tuple[str, str]]] = {s: [] for s in SPLITS}
    for ex_id, c in claims.items():
        pools[split_of(ex_id)].extend(c["evidence"])
    pools = {s: list(dict.fromkeys(pool)) for s, pool in pools.items()}

    def build(ex_id: str) -> Example:
        c = claims[ex_id]
        positives = list(dict.fromkeys(c["evidence"]))
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(f"{seed}:{ex_id}".encode()).digest()[:8], "big"))
        units = [(t, s, 1) for t, s in positives]
        units += [(t, s, 0) for t, s in _fever_negatives(ex_id, positives, pools[split_of(ex_id)], n_negatives, rng)]
        order = rng.permutation(len(units))
        return Example(
            id=ex_id,
            query=c["claim"],
            units=tuple(units[i][1] for i in order),
            labels=tuple(units[i][2] for i in order),
            titles=tuple(units[i][0] for i in order),
            paragraph_ids=tuple(range(len(units))),
            answers=(c["label"],),
            dataset="fever",
            granularity="sentence",
            meta={"label": c["label"], "rows": tuple(c["rows"])},
        )

    located = ((c["where"], ex_id) for ex_id, c in claims.items())  # a claim's first record
    return _take("fever", located, lambda ex_id: ex_id, build, split, limit)


# --------------------------------------------------------------------------- dispatcher

_LOADERS: dict[str, Callable[..., list[Example]]] = {
    "hotpotqa": load_hotpotqa,
    "2wiki": load_2wiki,
    "musique": load_musique,
    "msmarco": load_msmarco,
    "fever": load_fever,
}


def load_dataset(
    name: str,
    path: str | os.PathLike[str] | None = None,
    *,
    split: str | None = None,
    limit: int | None = None,
    **kw: Any,
) -> list[Example]:
    """Load dataset ``name`` (hotpotqa, 2wiki/2wikimultihopqa, musique, msmarco, fever).

    ``split`` keeps one of :data:`SPLITS` (by :func:`split_of`); ``limit`` keeps the first ``limit``
    examples of it in file order; ``kw`` goes to the loader (``granularity`` for MuSiQue,
    ``n_negatives``/``seed`` for FEVER).
    """
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in _LOADERS:
        raise InputError(f"unknown dataset {name!r}; known: {sorted(_LOADERS)} (and aliases {sorted(_ALIASES)})")
    return _LOADERS[key](path, split=split, limit=limit, **kw)


def dataset_file(name: str) -> Path | None:
    """The local file :func:`load_dataset` reads for ``name`` (from ``$SCP_DATA_DIR``), for provenance records.

    Returns:
        The path, or ``None`` when no such file is there (the loader would then go to the hub).

    Raises:
        ValueError: for an unknown dataset name.
    """
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in DATASETS:
        raise InputError(f"unknown dataset {name!r}; known: {sorted(DATASETS)} (and aliases {sorted(_ALIASES)})")
    data_dir = os.environ.get(DATA_DIR_ENV)
    return _find_in_dir(Path(data_dir), DATASETS[key]) if data_dir else None
