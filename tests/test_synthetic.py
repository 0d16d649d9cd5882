"""Needle-in-a-haystack and redundancy examples."""

from __future__ import annotations

import os
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from scp.data.datasets import Example, load_hotpotqa
from scp.data.synthetic import (
    dose_protocol_example,
    make_niah,
    make_redundancy,
    needle_indices,
    niah_grid,
    noise_sentences,
    paraphrases,
)

REPO_ROOT = Path(__file__).resolve().parent.parent


def _assert_answerable_only_from_needles(ex: Example) -> None:
    needles = [i for i, y in enumerate(ex.labels) if y]
    assert needles == list(ex.meta["needle_indices"])
    for key, value, i in zip(ex.meta["keys"], ex.meta["values"], needles):
        assert re.fullmatch(r"[1-9]\d{6}", value)
        assert ex.units[i] == f"The special magic number for {key} is {value}."
        assert key in ex.query
        holders_value = [j for j, u in enumerate(ex.units) if value in u]
        holders_key = [j for j, u in enumerate(ex.units) if key.lower() in u.lower()]
        assert holders_value == holders_key == [i]
    assert ex.answers == ex.meta["values"]
    assert len(set(ex.meta["keys"])) == len(set(ex.meta["values"])) == len(needles)


@pytest.mark.parametrize("n_needles", [1, 2, 5])
@pytest.mark.parametrize("depth", [0.0, 0.25, 0.5, 1.0])
def test_niah_noise(depth: float, n_needles: int) -> None:
    ex = make_niah(40, depth, n_needles, seed=3)
    assert ex.n_units == 40 and ex.n_positive == n_needles
    assert ex.dataset == "niah" and ex.granularity == "sentence" and ex.meta["depth"] == depth
    _assert_answerable_only_from_needles(ex)
    centre = round(depth * 39)
    needles = ex.meta["needle_indices"]
    if n_needles == 1:
        assert needles == (centre,)
    else:
        assert min(needles) <= centre <= max(needles) and max(needles) - min(needles) <= 39 // 4 + n_needles
    assert not any(ch.isdigit() for i, u in enumerate(ex.units) if i not in needles for ch in u)
    assert make_niah(40, depth, n_needles, seed=3) == ex
    assert make_niah(40, depth, n_needles, seed=4) != ex


def test_needle_indices_placement() -> None:
    assert needle_indices(11, 0.5, 1) == [5]
    assert needle_indices(11, 0.0, 1) == [0] and needle_indices(11, 1.0, 1) == [10]
    assert needle_indices(101, 0.5, 5) == [38, 44, 50, 56, 62]  # gap 100 // 16 = 6, centred on 50
    assert needle_indices(101, 0.0, 5) == [0, 6, 12, 18, 24]  # shifted to fit
    assert needle_indices(101, 1.0, 2) == [75, 100]
    assert needle_indices(5, 0.5, 5) == [0, 1, 2, 3, 4]
    for n in (5, 17, 100):
        for m in (1, 2, 5):
            for d in (0.0, 0.1, 0.5, 0.9, 1.0):
                idx = needle_indices(n, d, m)
                assert len(set(idx)) == m and 0 <= min(idx) and max(idx) < n
    with pytest.raises(ValueError):
        needle_indices(10, 1.5, 1)
    with pytest.raises(ValueError):
        needle_indices(3, 0.5, 5)


def test_noise_sentences_have_no_digits() -> None:
    sentences = noise_sentences(500, random.Random(0))
    assert len(sentences) == 500 and len(set(sentences)) > 300
    assert not any(ch.isdigit() or ch == "-" for s in sentences for ch in s)


def test_niah_file_and_list_haystack(tmp_path: Path) -> None:
    text = " ".join(f"Sentence number {i} talks about item {1000000 + i}." for i in range(60))
    path = tmp_path / "essay.txt"
    path.write_text(text + " The special magic number for nobody is 1234567.", encoding="utf-8")
    ex = make_niah(30, 0.5, 2, haystack=path, seed=1)
    assert ex.n_units == 30 and ex.meta["haystack"] == "file:essay.txt"
    _assert_answerable_only_from_needles(ex)
    filler = [u for u, y in zip(ex.units, ex.labels) if not y]
    assert all(u.startswith("Sentence number") for u in filler)
    numbers = [int(u.split()[2]) for u in filler]
    assert all((b - a) % 60 == 1 for a, b in zip(numbers, numbers[1:]))  # contiguous window, wrapping
    as_list = make_niah(
        30, 0.5, 2, haystack=[f"Sentence number {i} talks about item {1000000 + i}." for i in range(60)], seed=1
    )
    assert as_list.units == ex.units and as_list.meta["haystack"] == "list"
    with pytest.raises(ValueError, match="usable sentences"):
        make_niah(100, 0.5, 1, haystack=path)
    with pytest.raises(FileNotFoundError):
        make_niah(10, 0.5, 1, haystack=tmp_path / "missing.txt")


def test_niah_distractor_haystack() -> None:
    data_dir = Path(os.environ.get("SCP_DATA_DIR") or REPO_ROOT.parent / "shared" / "data")
    if not (data_dir / "hotpotqa").is_dir():
        pytest.skip(f"real data samples not found at {data_dir}")
    examples = load_hotpotqa(data_dir, limit=30)
    distractors = {u for ex in examples for u, y in zip(ex.units, ex.labels) if not y}
    ex = make_niah(120, 0.75, 5, haystack="distractors", examples=examples, seed=2)
    assert ex.n_units == 120
    _assert_answerable_only_from_needles(ex)
    assert all(u in distractors for u, y in zip(ex.units, ex.labels) if not y)
    with pytest.raises(ValueError, match="examples"):
        make_niah(10, 0.5, haystack="distractors")


def test_niah_grid() -> None:
    grid = list(niah_grid([10, 50], [0.0, 0.5, 1.0], [1, 2, 5], seeds=[0, 1]))
    assert len(grid) == 2 * 3 * 3 * 2
    assert [ex.n_units for ex in grid] == [10] * 18 + [50] * 18
    assert len({ex.id for ex in grid}) == len(grid)
    same_cell = [ex for ex in grid if ex.n_units == 50 and len(ex.meta["keys"]) == 2 and ex.id.endswith("s0")]
    assert len(same_cell) == 3
    assert len({tuple(u for u, y in zip(ex.units, ex.labels) if not y) for ex in same_cell}) == 1  # shared haystack
    assert len({ex.meta["needle_indices"] for ex in same_cell}) == 3


def test_paraphrases_are_distinct_and_rule_based() -> None:
    out = paraphrases("In 1990, the company moved to Paris.", 3)
    assert out[0] == "The firm moved to Paris in 1990."
    assert len(set(out)) == 3 and "In 1990, the company moved to Paris." not in out
    assert paraphrases("In 1990, the company moved to Paris.", 3) == out
    assert paraphrases("He won the award after the war.", 1) == ["After the war, he earned the prize."]
    with pytest.raises(ValueError, match="paraphrases"):
        paraphrases("Paris is the capital of France.", 50)


def test_dose_protocol_example() -> None:
    ex = dose_protocol_example()
    assert ex.n_units == 12 and ex.n_positive == 2
    key, copy = (i for i, y in enumerate(ex.labels) if y)
    assert ex.meta["copy_of"][copy] == key and ex.meta["copy_of"].count(-1) == 11
    assert all("500 mg" in ex.units[i] for i in (key, copy)) and ex.units[key] != ex.units[copy]
    assert "500 mg" in ex.answers[0] and "dose" in ex.query
    assert sum("mg" in u for u, y in zip(ex.units, ex.labels) if not y) >= 2  # distracting doses


@pytest.mark.parametrize("n_copies", [1, 3])
def test_make_redundancy_on_real_example(n_copies: int) -> None:
    base = Example(
        id="toy",
        query="Where did the company move in 1990?",
        units=("In 1990, the company moved to Paris.", "The weather was mild.", "He won the award after the war."),
        labels=(1, 0, 1),
        titles=("Firm", "Weather", "Man"),
        paragraph_ids=(0, 1, 2),
        answers=("Paris",),
        dataset="toy",
        granularity="sentence",
        meta={"type": "bridge"},
    )
    ex = make_redundancy(base, n_copies=n_copies, seed=5)
    assert ex.n_units == 3 + 2 * n_copies and ex.n_positive == 2 + 2 * n_copies
    assert ex == make_redundancy(base, n_copies=n_copies, seed=5)
    copy_of, source = ex.meta["copy_of"], ex.meta["source_index"]
    for i, original in enumerate(copy_of):
        if original >= 0:
            assert copy_of[original] == -1 and ex.labels[i] == 1 and ex.units[i] != ex.units[original]
            assert source[i] == source[original] and ex.titles[i] == ex.titles[original]
        else:
            assert ex.units[i] == base.units[source[i]] and ex.labels[i] == base.labels[source[i]]
    assert sorted(Counter(c for c in copy_of if c >= 0).values()) == [n_copies, n_copies]
    assert ex.meta["type"] == "bridge" and ex.meta["source_id"] == "toy" and ex.dataset == "redundancy"


def test_make_redundancy_default_is_dose_protocol() -> None:
    ex = make_redundancy(None, n_copies=2, seed=0)
    assert ex.n_units == 13 and ex.n_positive == 3
    originals = [i for i, c in enumerate(ex.meta["copy_of"]) if c == -1 and ex.labels[i]]
    assert len(originals) == 1 and "500 mg" in ex.units[originals[0]]
    assert all("500 mg" in u for u, y in zip(ex.units, ex.labels) if y)


def test_niah_keys_and_values_avoid_the_haystack() -> None:
    from scp.data.synthetic import _KEY_ADJECTIVES, _KEY_NOUNS

    all_but_one = [
        f"The {a}-{n} was seen." for a in _KEY_ADJECTIVES for n in _KEY_NOUNS if (a, n) != ("amber", "anchor")
    ]
    ex = make_niah(len(all_but_one) + 1, 0.5, 1, haystack=all_but_one)
    assert ex.meta["keys"] == ("amber-anchor",)
    _assert_answerable_only_from_needles(ex)

    filler = [f"Plain sentence {chr(65 + i)}." for i in range(19)]
    value = make_niah(20, 0.5, 1, haystack=filler, seed=7).meta["values"][0]
    ex = make_niah(20, 0.5, 1, haystack=filler[:-1] + [f"Its code is {value}."], seed=7)
    assert ex.meta["values"][0] != value and f"Its code is {value}." in ex.units
    _assert_answerable_only_from_needles(ex)


def test_niah_drops_magic_number_sentences_from_real_haystacks() -> None:
    haystack = ["Alpha is here.", "Beta is here.", "The magic number of x is 1.", "Gamma is here.", "Delta is here."]
    ex = make_niah(5, 0.5, 1, haystack=haystack)
    assert sorted(u for u, y in zip(ex.units, ex.labels) if not y) == sorted(s for s in haystack if "magic" not in s)
    with pytest.raises(ValueError, match="usable sentences"):
        make_niah(6, 0.5, 1, haystack=haystack)


def test_redundancy_copies_land_at_seeded_positions() -> None:
    layouts = {
        tuple(i for i, c in enumerate(make_redundancy(None, 1, seed=s).meta["copy_of"]) if c >= 0) for s in range(8)
    }
    assert len(layouts) > 3
