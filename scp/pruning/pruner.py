"""The pruner a user meets first: a trained checkpoint ranks sentences by Shapley value and keeps the best.

>>> pruner = ShapleyPruner.from_checkpoint("models/scp-hotpotqa-best.safetensors")
>>> pruner.rank("Who founded X?", sentences, titles=titles).values    # one Shapley value per sentence
>>> pruner.prune("Who founded X?", text, keep_ratio=0.5).kept_text
>>> pruner.prune("Who founded X?", text, value_fraction=0.9).kept_indices  # as many as the query needs

Sentences are read as the checkpoint was trained: with ``unit_repr="title"`` pass ``titles=`` (one per
sentence) so units read "Title: sentence"; without titles the bare sentences are used (and a warning says so).
Monte-Carlo permutations are seeded by ``seed`` and the context's text (:func:`scp.data.features.context_key`), so
the same context gets the same values here, in ``scp eval`` and in a notebook, whatever it is batched with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from tqdm.auto import tqdm

from scp.core.enumeration import DEFAULT_EXACT_LIMIT, check_exact_players
from scp.core.estimators import get_estimator
from scp.core.fast_path import CONTROL_VARIATES
from scp.core.permutations import check_flag, check_permutation_count, resolve_seed
from scp.core.result import ShapleyResult
from scp.core.selection import check_criterion, is_integer, keep_count
from scp.data.features import Context, build_contexts
from scp.data.text import as_text_list, is_blank, split_sentences
from scp.devices import resolve_device
from scp.errors import InputError, InputTypeError, warn_user
from scp.models.config import TrainConfig
from scp.models.factory import load_checkpoint
from scp.models.pointwise import PointwiseScorer
from scp.models.scoring import prefix_values, require_game, score_contexts
from scp.pruning.result import PruneResult, prune

__all__ = ["ShapleyPruner", "MAX_UNITS", "MAX_UNIT_CHARS"]

MAX_UNITS = 4096
MAX_UNIT_CHARS = 1_000_000
"""The longest sentence (with its title) or query a pruner reads, in characters: far above any real sentence
(a 100 MB one would take minutes and many GB to embed), refused before any work; raise ``max_unit_chars``."""


class ShapleyPruner:
    """Rank and prune sentences with a trained value network (or the pointwise control).

    ``estimator`` is any name of the registry :data:`scp.core.estimators.ESTIMATORS` (``monte_carlo``, ``adaptive``,
    ``exact``, ``leave_one_out`` / ``loo``, or one added by :func:`scp.core.estimators.register_estimator`), checked
    here; ``estimator_options`` go to it (e.g. ``max_players=20`` for exact Shapley on longer contexts).  The
    pruner's own knobs configure the two Monte-Carlo estimators: ``n_permutations``, ``antithetic`` and
    ``control_variate`` for ``monte_carlo``; ``n_permutations="adaptive"`` (or ``estimator="adaptive"``) draws
    ``min_permutations`` permutations, then doubles the total in rounds until the Top-K set is certified with
    probability ≥ 1 − ``delta`` or ``max_permutations`` is reached (:mod:`scp.core.adaptive`); K comes from
    ``prune``'s ``top_k`` / ``keep_ratio``, else from ``certify_keep``; the result's ``certificate`` says what was
    certified.  ``bound`` is the interval behind it ("bernstein" and "hoeffding" are rigorous, "student" is the
    asymptotic CLT interval) and ``tolerance`` the ε of an ε-certified Top-K set.  ``control_variate="position"``
    (fixed or adaptive M) subtracts the unbiased position control variate
    (:func:`scp.core.fast_path.first_layer_shapley`).  Scores come from the one batched scorer
    (:func:`scp.models.scoring.score_contexts`), seeded by ``seed`` and each context's text.
    A pointwise checkpoint scores each unit exactly in one pass: ``estimator``, ``estimator_options``,
    ``control_variate`` and an adaptive budget do not apply to it and are refused (:class:`~scp.errors.InputError`).
    Sentences and titles are lists or tuples of str (a dict, a set or a str of titles is an
    :class:`~scp.errors.InputTypeError`); a sentence or query that is blank (:func:`scp.data.text.is_blank`: only
    whitespace or invisible characters such as U+200B) is refused like an empty one.  A context may hold at most
    ``max_units`` sentences (default :data:`MAX_UNITS`), each (with its title) and the query at most
    ``max_unit_chars`` characters (default :data:`MAX_UNIT_CHARS`); exact Shapley's player limit
    (``max_players``) is checked before anything is embedded.  ``progress=True`` shows on stderr which step a
    call is in (embedding and features, then scoring) with the embedder's own bar: a context of thousands of
    sentences takes minutes on a CPU, most of it embedding them.
    """

    def __init__(
        self,
        model,
        config: TrainConfig,
        embedder,
        estimator: str = "monte_carlo",
        n_permutations: int | str = 50,
        antithetic: bool = False,
        seed: int | None = 0,
        device: str | None = None,
        max_units: int = MAX_UNITS,
        estimator_options: dict | None = None,
        delta: float = 0.05,
        min_permutations: int = 16,
        max_permutations: int = 1000,
        certify_keep: float = 0.5,
        tolerance: float = 0.0,
        bound: str = "bernstein",
        control_variate: str | None = None,
        progress: bool = False,
        max_unit_chars: int = MAX_UNIT_CHARS,
    ):
        name = get_estimator(estimator).name  # an unknown name is an error listing the registered ones
        check_flag(antithetic, "antithetic")
        check_flag(progress, "progress")
        if not is_integer(max_units) or max_units < 1:
            raise InputError(f"max_units must be an integer ≥ 1; got {max_units!r}")
        if not is_integer(max_unit_chars) or max_unit_chars < 1:
            raise InputError(f"max_unit_chars must be an integer ≥ 1; got {max_unit_chars!r}")
        if estimator_options is not None and not isinstance(estimator_options, Mapping):
            raise InputTypeError(
                f"estimator_options must be a dict of the estimator's options; got {type(estimator_options).__name__}"
            )
        if seed is not None:
            resolve_seed(seed)  # a bad seed fails here, not at the first rank
        if not isinstance(n_permutations, str):
            check_permutation_count(n_permutations, antithetic)
        monte_carlo_family = name in ("monte_carlo", "adaptive")
        if control_variate is not None and (control_variate not in CONTROL_VARIATES or not monte_carlo_family):
            raise InputError(
                f"control_variate must be one of {CONTROL_VARIATES} with the monte_carlo or adaptive "
                f"estimator; got {control_variate!r} with {estimator!r}"
            )
        if isinstance(n_permutations, str) and (n_permutations != "adaptive" or not monte_carlo_family):
            raise InputError(
                f"n_permutations must be an integer ≥ 1, or 'adaptive' with the monte_carlo "
                f"estimator; got {n_permutations!r} with {estimator!r}"
            )
        if n_permutations == "adaptive":
            name = "adaptive"
        if name == "adaptive":
            from scp.core.adaptive import check_options, round_schedule

            round_schedule(min_permutations, max_permutations, antithetic)  # bad options fail here, not later
            keep_count(1, certify_keep)
            check_options(delta, tolerance, bound, control_variate)
        self.delta, self.certify_keep, self.tolerance = delta, certify_keep, tolerance
        self.bound, self.control_variate = bound, control_variate
        self.min_permutations, self.max_permutations = min_permutations, max_permutations
        self.model, self.config, self.embedder = model.eval(), config, embedder
        self.estimator, self.n_permutations, self.antithetic, self.seed = name, n_permutations, antithetic, seed
        self.device, self.max_units = None if device is None else resolve_device(device), max_units
        self.estimator_options, self.progress = dict(estimator_options or {}), progress
        self.max_unit_chars = max_unit_chars
        if isinstance(model, PointwiseScorer):
            given = dict(
                estimator=estimator if estimator != "monte_carlo" else None,
                n_permutations=n_permutations if n_permutations == "adaptive" else None,
                control_variate=control_variate,
                estimator_options=estimator_options or None,
            )
            ignored = [f"{k}={v!r}" for k, v in given.items() if v is not None]
            if ignored:
                raise InputError(
                    f"{', '.join(ignored)} does not apply to this checkpoint: its model is "
                    f"{config.model!r}, which scores each unit exactly in one pass (no permutations "
                    "are sampled, so there is no Shapley estimator, control variate or adaptive budget to "
                    "apply); drop the option or use a Shapley checkpoint (a set model such as 'deepsets')"
                )

    @classmethod
    def from_checkpoint(cls, path, embedder=None, cache_dir=None, **kwargs) -> ShapleyPruner:
        """Load a checkpoint and the embedder it was trained with (a mismatched embedder is an error)."""
        from scp.data.embedders import CachedEmbedder, get_embedder

        if embedder is None:
            _, config, _ = load_checkpoint(path)
            embedder = CachedEmbedder(get_embedder(config.embedder), cache_dir)
        model, config, _ = load_checkpoint(path, embedder_id=embedder.id, embed_dim=embedder.dim)
        return cls(model, config, embedder, **kwargs)

    def units(self, sentences: Sequence[str], titles: Sequence[str] | None) -> list[str]:
        """The unit texts the network reads: "Title: sentence" when trained so and titles are given."""
        if titles is not None:
            titles = as_text_list(titles, "titles", item="title")
        if titles is None:
            if self.config.with_title:
                warn_user(
                    "this checkpoint was trained on 'Title: sentence' units; no titles given, so bare "
                    "sentences are scored (expect lower quality)"
                )
            return list(sentences)
        if len(titles) != len(sentences):
            raise InputError(f"got {len(titles)} titles for {len(sentences)} sentences")
        return [s if is_blank(t) else f"{t}: {s}" for t, s in zip(titles, sentences)]

    def _check(self, query: str, sentences: list[str]) -> None:
        if not isinstance(query, str) or is_blank(query):
            raise InputError(
                f"query must be a non-empty string (not only whitespace or invisible characters); got {query!r}"
            )
        if len(query) > self.max_unit_chars:
            raise InputError(
                f"the query is {len(query):,} characters, above max_unit_chars={self.max_unit_chars:,}; "
                "shorten it (or raise max_unit_chars)"
            )
        if not sentences:
            raise InputError("empty context: give at least one sentence")
        bad = [i for i, s in enumerate(sentences) if not (isinstance(s, str) and not is_blank(s))]
        if bad:
            raise InputError(
                f"every sentence must be a non-empty string (not only whitespace or invisible "
                f"characters); sentence {bad[0]} is {sentences[bad[0]]!r}"
            )
        if len(sentences) > self.max_units:
            raise InputError(
                f"context of {len(sentences)} sentences exceeds max_units={self.max_units}; split it into "
                "passages or raise max_units (cost grows as M·n²)"
            )
        if self.estimator == "exact":  # before the sentences are embedded
            check_exact_players(len(sentences), self.estimator_options.get("max_players", DEFAULT_EXACT_LIMIT))

    @property
    def adaptive(self) -> bool:
        return self.estimator == "adaptive"

    def estimator_kwargs(self, estimator: str | None = None) -> dict:
        """The options the pruner gives ``estimator`` (default: its own): its knobs for ``monte_carlo`` and
        ``adaptive``, then ``estimator_options`` when it is the pruner's own estimator."""
        name = self.estimator if estimator is None else get_estimator(estimator).name
        if name == "monte_carlo":
            options = dict(
                n_permutations=self.n_permutations, antithetic=self.antithetic, control_variate=self.control_variate
            )
        elif name == "adaptive":
            options = dict(
                delta=self.delta,
                min_permutations=self.min_permutations,
                max_permutations=self.max_permutations,
                antithetic=self.antithetic,
                tolerance=self.tolerance,
                bound=self.bound,
                control_variate=self.control_variate,
            )
        else:
            options = {}
        return options | (self.estimator_options if name == self.estimator else {})

    def score_contexts(
        self, contexts: Sequence[Context], top_k: int | None = None, estimator: str | None = None, batch_size: int = 32
    ) -> list[ShapleyResult]:
        """One result per context through :func:`scp.models.scoring.score_contexts` with the pruner's estimator
        (or ``estimator``) and options; an adaptive budget certifies each context's Top-K set for K = ``top_k``
        (at most n), else ⌈certify_keep·n⌉."""
        name = self.estimator if estimator is None else get_estimator(estimator).name
        per_context = None
        if name == "adaptive":
            per_context = [
                {"k": min(top_k, c.n_units) if top_k is not None else keep_count(c.n_units, self.certify_keep)}
                for c in contexts
            ]
        return score_contexts(
            self.model,
            contexts,
            name,
            seed=self.seed,
            batch_size=batch_size,
            device=self.device,
            per_context=per_context,
            **self.estimator_kwargs(name),
        )

    def rank(
        self, query: str, sentences: Sequence[str], titles: Sequence[str] | None = None, top_k: int | None = None
    ) -> ShapleyResult:
        """Per-sentence attributions by the pruner's estimator (Shapley values, LOO, …), or pointwise scores.

        ``top_k`` is the K whose Top-K set an adaptive budget certifies (default ⌈certify_keep·n⌉)."""
        return self._rank(query, sentences, titles, top_k)[1]

    def _rank(
        self, query: str, sentences: Sequence[str], titles: Sequence[str] | None, top_k: int | None
    ) -> tuple[Context, ShapleyResult]:
        """The context built for ``query`` and its units, and :meth:`rank`'s result on it."""
        sentences = as_text_list(sentences, "sentences")
        self._check(query, sentences)
        units = self.units(sentences, titles)
        long = next((i for i, u in enumerate(units) if len(u) > self.max_unit_chars), None)
        if long is not None:  # before anything is embedded: a 100 MB sentence would take minutes and many GB
            raise InputError(
                f"sentence {long} is {len(units[long]):,} characters{' with its title' if titles is not None else ''}, "
                f"above max_unit_chars={self.max_unit_chars:,}; split it into sentences (or raise max_unit_chars)"
            )
        first: dict[str, int] = {}
        duplicates = [(first[u.strip()], i) for i, u in enumerate(units) if first.setdefault(u.strip(), i) != i]
        if duplicates:
            warn_user(
                f"duplicate sentences (first, repeat) at {duplicates[:5]}: Shapley values split their credit "
                "between copies (leave-one-out would give each ≈ 0)"
            )
        with tqdm(total=2, desc="scp rank", unit="step", disable=not self.progress) as bar:
            bar.set_postfix_str(f"embedding {len(units):,} sentences and their features")
            ctx = build_contexts([query], [units], self.embedder, self.config.features, show_progress=self.progress)[0]
            bar.update()
            bar.set_postfix_str(f"scoring by {self.estimator}")
            result = self.score_contexts([ctx], top_k=top_k)[0]
            bar.update()
        return ctx, result

    def prefix_values(self, contexts: Sequence[Context], scores: Sequence) -> list[np.ndarray]:
        """v(S_0), …, v(S_n) of each context's game along its ranking (:func:`scp.models.scoring.prefix_values`)."""
        return prefix_values(self.model, contexts, scores, device=self.device)

    def prune(
        self,
        query: str,
        sentences_or_text: str | Sequence[str],
        *,
        keep_ratio: float | None = None,
        top_k: int | None = None,
        token_budget: int | None = None,
        threshold: float | None = None,
        value_fraction: float | None = None,
        titles: Sequence[str] | None = None,
        **kwargs,
    ) -> PruneResult:
        """Rank, then keep by exactly one criterion (text is sentence-split):

        - a fixed count: ``keep_ratio`` r (⌈r·n⌉ units) or ``top_k``; a ``token_budget``;
        - a count chosen per query: ``threshold`` τ keeps every unit with φ_i ≥ τ (at least the best one; calibrate
          τ to a target recall with :func:`scp.core.selection.calibrate_threshold` or ``scp eval --target-recall``),
          ``value_fraction`` α keeps the shortest prefix of the ranking whose value v(S) reaches
          v(∅) + α·(v* − v(∅)), v* the best prefix value (v(N) for a monotone game), on the network's own game
          (a set model only: one more batch of n + 1 coalitions).

        The criterion is validated before any ranking; a text with no sentence boundary is one unit, kept or
        dropped whole (with a warning).
        """
        check_criterion(
            keep_ratio=keep_ratio,
            top_k=top_k,
            token_budget=token_budget,
            threshold=threshold,
            value_fraction=value_fraction,
        )
        if value_fraction is not None:
            require_game(self.model)  # before any work
        if isinstance(sentences_or_text, str):
            sentences = split_sentences(sentences_or_text)
            if len(sentences) == 1:
                warn_user(
                    "the text has no sentence boundary the splitter recognises: it is one unit, kept or "
                    "dropped whole; pass a list of sentences to prune inside it"
                )
        else:
            try:
                sentences = as_text_list(sentences_or_text, "sentences_or_text")
            except InputTypeError as error:
                raise InputTypeError(f"{error} (or one str of text to split into sentences)") from None
        k = keep_count(len(sentences), keep_ratio) if keep_ratio is not None else top_k
        ctx, result = self._rank(query, sentences, titles, top_k=k)
        scores = np.asarray(result.values)
        values = self.prefix_values([ctx], [scores])[0] if value_fraction is not None else None
        return prune(
            sentences,
            scores,
            keep_ratio=keep_ratio,
            top_k=top_k,
            token_budget=token_budget,
            threshold=threshold,
            value_fraction=value_fraction,
            prefix_values=values,
            **kwargs,
        )
