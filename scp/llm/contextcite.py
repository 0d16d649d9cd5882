"""ContextCite (Cohen-Wang, Shah, Georgiev & Madry, NeurIPS 2024) as a peer: the ``context-cite`` package itself, run
on the suite's reader and the suite's units.

ContextCite ablates the context: mask j (its seed j, j = 0..N−1) keeps each source with probability 1/2; the reader
scores the fixed response under every ablated context (the response's logit-probability
y_j = log p_j − log(1 − p_j), p_j = P(response | ablated context j)); a Lasso (α = 0.01 on standardised masks) fitted
to the N pairs (mask_j, y_j) gives one weight per source, its attribution.  N masks cost N reader calls.

Three adaptations, none of which changes the method:

* **import**: ``context_cite.utils`` runs ``nltk.download("punkt_tab")`` at import, which needs the network; the
  download is a no-op while it imports (:func:`import_context_cite`).  Its sentence splitter is never used.
* **sources**: :class:`UnitPartitioner` takes the suite's units ("Title: sentence") as the sources and joins a mask's
  units with the reader's :data:`~scp.llm.readers.CONTEXT_SEPARATOR` (:data:`~scp.llm.readers.EMPTY_CONTEXT` when
  none is kept), and the prompt template is the reader's :data:`~scp.llm.readers.PROMPT`, so every ablated prompt is,
  token for token, :meth:`LocalReader.prompt_ids` of that subset of units.
* **response**: the gold answer a*, set through ContextCite's response cache, so it attributes log P(a* | q, C) as
  every other method of the comparison does, not the reader's own greedy answer.

Masks j < N' are exactly the masks a run with N' ablations draws, so :meth:`ContextCiteRun.attributions` refits
on the first N' of them: one run of 64 ablations gives both the 32- and the 64-ablation ContextCite.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scp.data.embedders import require_package
from scp.errors import InputError
from scp.llm.readers import CONTEXT_SEPARATOR, EMPTY_CONTEXT, PROMPT, LocalReader

__all__ = ["ContextCiteRun", "UnitPartitioner", "context_cite", "import_context_cite"]

#: ContextCite's defaults (its README and paper): sources kept with probability 1/2, Lasso α = 0.01.
KEEP_PROBABILITY = 0.5
LASSO_ALPHA = 0.01


@contextlib.contextmanager
def _no_nltk_download() -> Iterator[None]:
    import nltk

    download = nltk.download
    nltk.download = lambda *args, **kwargs: True  # context_cite.utils asks for punkt_tab at import
    try:
        yield
    finally:
        nltk.download = download


def import_context_cite() -> Any:
    """The ``context_cite`` package, imported without its network download (see the module docstring)."""
    require_package("context_cite", "context-cite", "ContextCite (scp.llm.contextcite)")
    with _no_nltk_download():
        import context_cite
        import context_cite.utils  # noqa: F401  (the module that downloads)
    return context_cite


def UnitPartitioner(units: Sequence[str]) -> Any:  # noqa: N802  (builds an instance of a class made on first use)
    """A ``context_cite`` partitioner whose sources are ``units`` as given (no re-splitting)."""
    base = import_context_cite().context_partitioner.BaseContextPartitioner
    units = [str(u).strip() for u in units]

    class _Units(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__(CONTEXT_SEPARATOR.join(units))
            self.units = units

        @property
        def num_sources(self) -> int:
            return len(self.units)

        def split_context(self) -> None:
            return None

        def get_source(self, index: int) -> str:
            return self.units[index]

        def get_context(self, mask: Any = None) -> str:
            kept = self.units if mask is None else [u for u, m in zip(self.units, mask) if m]
            return CONTEXT_SEPARATOR.join(kept) or EMPTY_CONTEXT

    return _Units()


@dataclass
class ContextCiteRun:
    """One ContextCite run: its masks, the response's logit-probability under each, and how it was had."""

    masks: np.ndarray  # (N, n) bool, mask j drawn by ContextCite with seed j
    outputs: np.ndarray  # (N,) y_j, the response's logit-probability under mask j
    response_tokens: int
    reader_calls: int
    seconds: float
    citer: Any

    def attributions(self, n_ablations: int | None = None) -> np.ndarray:
        """ContextCite's Lasso weights (one per unit) from the first ``n_ablations`` masks (all by default)."""
        n = len(self.masks) if n_ablations is None else int(n_ablations)
        if not 2 <= n <= len(self.masks):
            raise InputError(f"n_ablations must lie in [2, {len(self.masks)}] (the masks run), not {n_ablations}")
        weight, _ = self.citer.solver.fit(self.masks[:n], self.outputs[:n], self.response_tokens)
        return np.asarray(weight, dtype=np.float64)


def context_cite(
    reader: LocalReader,
    question: str,
    units: Sequence[str],
    answer: str,
    *,
    n_ablations: int = 64,
    batch_size: int = 1,
) -> ContextCiteRun:
    """Run ContextCite's ablations for ``answer`` to ``question`` over ``units`` with ``reader``'s model.

    ``batch_size`` goes to ContextCite (its default 1: a batch is left-padded to its longest prompt, which shifts the
    padded prompts' positions and so their scores).  Returns the masks, outputs, cost and the ``ContextCiter``."""
    if not isinstance(reader, LocalReader):
        raise InputError(f"ContextCite needs a LocalReader (its model and tokenizer), got {type(reader).__name__}")
    if len(units) < 2:
        raise InputError(f"ContextCite needs at least 2 units to attribute among, got {len(units)}")
    if n_ablations < 2:
        raise InputError(f"n_ablations must be ≥ 2, not {n_ablations}")
    if not answer or not answer.strip():
        raise InputError("the answer to attribute is empty")
    cc = import_context_cite()
    partitioner = UnitPartitioner(units)
    citer = cc.ContextCiter(
        reader.model,
        reader.tokenizer,
        partitioner.context,
        question.strip(),
        num_ablations=int(n_ablations),
        ablation_keep_prob=KEEP_PROBABILITY,
        batch_size=int(batch_size),
        solver=cc.solver.LassoRegression(LASSO_ALPHA),
        prompt_template=PROMPT.replace("{question}", "{query}"),
        partitioner=partitioner,
    )
    _, chat_prompt = citer._get_prompt_ids(return_prompt=True)
    citer._cache["output"] = chat_prompt + answer.strip()  # the response to attribute: a*, not a generation
    response = list(citer._response_ids)
    if response != reader.answer_ids(answer):
        raise InputError(
            f"ContextCite tokenises the answer {answer!r} as {response}, the reader as {reader.answer_ids(answer)}"
        )
    padding = reader.tokenizer.padding_side
    reader.tokenizer.padding_side = "left"  # ContextCite's batched loader requires it
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.cuda.amp.autocast is deprecated (and a no-op on the CPU)
            masks, logit_probs = citer._masks, citer._logit_probs
    finally:
        reader.tokenizer.padding_side = padding
    seconds = time.perf_counter() - start
    outputs = cc.utils.aggregate_logit_probs(logit_probs)
    return ContextCiteRun(
        masks=np.asarray(masks, dtype=bool),
        outputs=np.asarray(outputs, dtype=np.float64),
        response_tokens=len(response),
        reader_calls=int(n_ablations),
        seconds=seconds,
        citer=citer,
    )
