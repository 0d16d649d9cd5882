"""The method registry: every method by name, with the label every figure and table shows it with, and for a
ranker its constructor (its colour, line style and marker in figures: :data:`scp.suite.plot.STYLES`).

A :class:`Method` is what results, tables and notebook parameters call a method (``name``), how figures and
tables show it (``label``) and, for a method that ranks the units of a context, ``build``: the constructor of its
:class:`scp.pruning.rankers.Ranker` (call it through :func:`scp.pruning.evaluation.make_ranker`, the one entry
point, which checks the arguments).  Methods the figures draw that rank nothing here (Shapley estimators, trained
variants, ECS's selections) have ``build = None``.

This module registers the rankers of :mod:`scp.pruning` (in the order tables list them), the Shapley estimators
and allocations of :mod:`scp.core`, and the trained variants the figures compare.  A higher layer registers the
methods it defines when it is imported (:mod:`scp.experiments.ecs`: ECS; :mod:`scp.experiments.maxshapley`:
FullShapley, KernelSHAP, MaxShapley): one registry, each entry written once, where its method is defined.

- :func:`register` adds a method (a name already taken is an error), :func:`get` returns one (an unknown name is
  an :class:`~scp.errors.InputError` listing the known ones), :func:`names` lists them (``rankers=True``: those
  with a constructor), :func:`labels` maps names to labels, and :func:`find` looks a method up by name, label or
  alias, case-insensitively (what :func:`scp.suite.plot.color` does for figure keys).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from scp.errors import InputError

__all__ = ["Method", "find", "get", "labels", "names", "register"]


@dataclasses.dataclass(frozen=True)
class Method:
    """One method of the suite.

    Attributes:
        name: what results, tables and parameters call it (``"scp"``, ``"bm25"``, …); unique.
        label: how figures and tables show it (``"SCP"``, ``"BM25"``, …).
        build: for a ranker, the constructor of its :class:`scp.pruning.rankers.Ranker`, called with the keyword
            arguments of :func:`scp.pruning.evaluation.make_ranker` (``checkpoint``, ``embedder``, ``cache_dir``,
            ``n_permutations``, ``seed`` and the adaptive-budget options; each takes those it uses); ``None`` for
            a method that ranks nothing here.
        preset: the trained network a ranker scores with, as a preset of :data:`scp.models.config.PRESETS`
            (``"best"`` or ``"pointwise"``); ``None`` when it needs no checkpoint.
        hub: its model comes from the Hugging Face hub (``n/a`` offline unless it is in the local cache).
        needs_reader: it asks a reader LM (:mod:`scp.llm.readers`).
        aliases: further spellings figure code may use (matched case-insensitively, like the name and label).
    """

    name: str
    label: str
    build: Callable[..., Any] | None = None
    preset: str | None = None
    hub: bool = False
    needs_reader: bool = False
    aliases: tuple[str, ...] = ()

    @property
    def is_ranker(self) -> bool:
        """It has a constructor: :func:`scp.pruning.evaluation.make_ranker` builds its ranker."""
        return self.build is not None

    @property
    def needs_checkpoint(self) -> bool:
        """It scores with a trained network (:attr:`preset`)."""
        return self.preset is not None

    def keys(self) -> tuple[str, ...]:
        """Its name, label and aliases, case-folded: what :func:`find` matches."""
        return tuple(dict.fromkeys(k.strip().casefold() for k in (self.name, self.label, *self.aliases)))


_REGISTRY: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Add ``method`` to the registry and return it.  Registering the same entry again (a module imported twice)
    is a no-op; another method under a name, label or alias already taken is an :class:`~scp.errors.InputError`."""
    if not isinstance(method, Method):
        raise InputError(f"register takes a scp.pruning.methods.Method; got {type(method).__name__}")
    old = _REGISTRY.get(method.name)
    if old is not None and _same(old, method):
        return old
    if old is not None:
        raise InputError(f"a method named {method.name!r} is registered already ({old.label!r})")
    taken = {k: m for m in _REGISTRY.values() for k in m.keys()}
    clash = next((k for k in method.keys() if k in taken), None)
    if clash is not None:
        raise InputError(f"method {method.name!r}: {clash!r} already names method {taken[clash].name!r}")
    _REGISTRY[method.name] = method
    return method


def _same(a: Method, b: Method) -> bool:
    """Equal entries, constructors compared by where they are defined (a reimported module makes new functions)."""

    def where(f):
        return None if f is None else (getattr(f, "__module__", None), getattr(f, "__qualname__", repr(f)))

    return dataclasses.replace(a, build=None) == dataclasses.replace(b, build=None) and where(a.build) == where(b.build)


def get(name: str) -> Method:
    """The method called ``name``; an unknown name is an :class:`~scp.errors.InputError` listing the known ones."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise InputError(f"unknown method {name!r}; choose one of {', '.join(names())}") from None


def names(*, rankers: bool = False) -> tuple[str, ...]:
    """The registered names in registration order; ``rankers=True``: only the methods with a constructor."""
    return tuple(m.name for m in _REGISTRY.values() if m.is_ranker or not rankers)


def labels(methods: Iterable[str] | None = None) -> dict[str, str]:
    """``{name: label}`` of ``methods`` (default: every registered method), e.g. for ``DataFrame.method.map``."""
    return {m: get(m).label for m in (names() if methods is None else methods)}


def find(key: str) -> Method | None:
    """The method whose name, label or one of whose aliases is ``key`` (case-insensitive, surrounding spaces
    ignored), else ``None``."""
    if key in _REGISTRY:
        return _REGISTRY[key]
    folded = str(key).strip().casefold()
    return next((m for m in _REGISTRY.values() if folded in m.keys()), None)


# ------------------------------------------------------------------------------------------ constructors
# Each takes the keyword arguments of scp.pruning.evaluation.make_ranker and ignores those it does not use.


def _shapley_ranker(
    checkpoint: str,
    *,
    embedder: Any = None,
    cache_dir=None,
    n_permutations: int | str = 50,
    seed: int = 0,
    loo: bool = False,
    **adaptive: Any,
):
    """An :class:`scp.pruning.shapley_ranker.SCPRanker` of ``checkpoint`` (whose config names its own embedder, so
    ``embedder`` is not used); ``n_permutations="adaptive"`` with ``adaptive`` options gives an adaptive budget."""
    from scp.pruning.pruner import ShapleyPruner
    from scp.pruning.shapley_ranker import SCPRanker

    pruner = ShapleyPruner.from_checkpoint(
        checkpoint, cache_dir=cache_dir, n_permutations=n_permutations, seed=seed, **adaptive
    )
    return SCPRanker(pruner, loo=loo)


def _scp(checkpoint: str, **options: Any):
    """Monte-Carlo Shapley values of a trained set network (``scp``)."""
    return _shapley_ranker(checkpoint, **options)


def _scp_loo(checkpoint: str, **options: Any):
    """Leave-one-out values of a trained set network (``scp-loo``)."""
    return _shapley_ranker(checkpoint, loo=True, **options)


def _pointwise(checkpoint: str, **options: Any):
    """The pointwise control's per-unit scores (``pointwise``); refuses a checkpoint that is not a pointwise model."""
    from scp.models.pointwise import PointwiseScorer

    ranker = _shapley_ranker(checkpoint, **options)
    if not isinstance(ranker.pruner.model, PointwiseScorer):
        raise InputError(
            f"method 'pointwise' scores with the pointwise control; {checkpoint} holds a "
            f"{type(ranker.pruner.model).__name__}: use method 'scp' (or 'scp-loo') for it"
        )
    ranker.name = "pointwise"
    return ranker


def _random(seed: int = 0, **_: Any):
    from scp.pruning.rankers import RandomRanker

    return RandomRanker(seed=seed)


def _bm25(**_: Any):
    from scp.pruning.rankers import BM25Ranker

    return BM25Ranker()


def _cosine(embedder: Any = "minilm", cache_dir=None, **_: Any):
    """Cosine with an embedder: a name is loaded (:func:`scp.data.embedders.get_embedder`) and its vectors cached
    under ``cache_dir``; an :class:`scp.data.embedders.Embedder` is used as given."""
    from scp.data.embedders import CachedEmbedder, get_embedder
    from scp.pruning.rankers import CosineRanker

    if isinstance(embedder, str):
        embedder = CachedEmbedder(get_embedder(embedder), cache_dir)
    return CosineRanker(embedder)


def _cross_encoder(**_: Any):
    from scp.pruning.rankers import CrossEncoderRanker

    return CrossEncoderRanker()


def _llmlingua2(**_: Any):
    from scp.pruning.rankers import LLMLingua2Ranker

    return LLMLingua2Ranker()


def _provence(**_: Any):
    from scp.pruning.rankers import ProvenceRanker

    return ProvenceRanker()


def _tfidf(**_: Any):
    from scp.pruning.rankers import TfidfRanker

    return TfidfRanker()


for _method in (
    # the rankers of scp.pruning, in the order tables list them
    Method("scp", "SCP", _scp, preset="best", aliases=("deepsets",)),
    Method("scp-loo", "SCP-LOO", _scp_loo, preset="best"),
    Method("pointwise", "pointwise control", _pointwise, preset="pointwise"),
    Method("random", "random", _random),
    Method("bm25", "BM25", _bm25),
    Method("cosine", "MiniLM cosine", _cosine, aliases=("minilm",)),
    Method("cross-encoder", "cross-encoder", _cross_encoder, hub=True),
    Method("llmlingua2", "LLMLingua-2", _llmlingua2, hub=True),
    Method("provence", "Provence", _provence, hub=True),
    Method("tfidf", "TF-IDF", _tfidf),
    # Shapley estimators and allocations of scp.core (drawn; they value games, not contexts)
    Method("exact", "exact", aliases=("shapley",)),
    Method("loo", "leave-one-out", aliases=("leave_one_out",)),
    Method("mc", "Monte Carlo", aliases=("monte_carlo",)),
    Method("mc_antithetic", "Monte Carlo (antithetic)", aliases=("antithetic",)),
    Method("shapiq", "shapiq"),
    Method("least-core", "least core", aliases=("least_core",)),
    # trained variants the figures compare with SCP
    Method("paper-network", "paper network (3.03M)", aliases=("paper", "paper network")),
    Method("scp-transferred", "SCP, transferred"),
    Method("convex-deepsets", "ConvexDeepSets", aliases=("convex",)),
    Method("greedy", "greedy v(S)"),
):
    register(_method)
del _method
