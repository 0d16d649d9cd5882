"""The rule-based sentence splitter and the word tokenizer."""

from __future__ import annotations

import pytest

from scp.data.text import WORD_TOKENIZER, split_sentences, word_tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mr. Smith met Dr. Jones. They talked.", ["Mr. Smith met Dr. Jones.", "They talked."]),
        ("J. R. R. Tolkien wrote it. He was British.", ["J. R. R. Tolkien wrote it.", "He was British."]),
        ("The U.S. Army grew. It was big.", ["The U.S. Army grew.", "It was big."]),
        ("Use a tool, e.g. A hammer, i.e. This one. Done.", ["Use a tool, e.g. A hammer, i.e. This one.", "Done."]),
        (
            "Apple Inc. Is big? Yes! Apples, pears, etc. The end.",
            ["Apple Inc.", "Is big?", "Yes!", "Apples, pears, etc.", "The end."],
        ),
        (
            "Born Jan. 5, 1990 in St. Louis. Smith et al. (2019) agree.",
            ["Born Jan. 5, 1990 in St. Louis.", "Smith et al. (2019) agree."],
        ),
        ("It costs $1.5 million. Pi is 3.14. Done.", ["It costs $1.5 million.", "Pi is 3.14.", "Done."]),
        ("See No. 5 on p. 12 of it. No. Never.", ["See No. 5 on p. 12 of it.", "No.", "Never."]),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ("(He left.) She stayed. 'Why?' Nobody knew.", ["(He left.)", "She stayed.", "'Why?'", "Nobody knew."]),
        ("He paused... Then left. wait... what?!", ["He paused...", "Then left. wait... what?!"]),
        ("It was late… The end.", ["It was late…", "The end."]),
        ("One  two\nthree.   Four\tfive.", ["One two three.", "Four five."]),
        ("A first line\n\nsecond block without stop", ["A first line", "second block without stop"]),
        ("It ended in 1990. 2001 was next.", ["It ended in 1990.", "2001 was next."]),
        ("no final stop", ["no final stop"]),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "\n\n \n", ". . ."])
def test_split_sentences_never_returns_empty_strings(text: str) -> None:
    assert all(s.strip() for s in split_sentences(text))


def test_split_sentences_keeps_all_words_and_is_deterministic() -> None:
    text = "Dr. A. Smith arrived at 3 p.m. on Jan. 3.  He left!  \n\n Was it 2.5 km? Yes."
    first = split_sentences(text)
    assert first == split_sentences(text)
    assert " ".join(first).split() == text.split()


def test_word_tokens() -> None:
    assert WORD_TOKENIZER == "regex-words"
    assert word_tokens("The U.S. costs $1.5 — naïve_case, DON'T!") == [
        "the",
        "u",
        "s",
        "costs",
        "1",
        "5",
        "naïve_case",
        "don",
        "t",
    ]
    assert word_tokens("  ...  ") == []
