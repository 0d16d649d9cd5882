"""Evaluating rankers on labelled contexts: pairwise AUC, recall at a keep ratio, token compression.

``evaluate(examples, ranker, with_title)`` scores every example, then reports per-example pairwise AUC averaged
over examples with a bootstrap CI (examples without both a positive and a negative are excluded and counted),
R@keep (expected recall of supporting units among the top ⌈keep·n⌉, ties split at random in expectation),
and at the same keep ratio the unit keep rate and the token compression (regex-words tokens removed / total),
overall and by question type where the dataset has one.  Per-query criteria (a threshold τ, a value fraction α:
:func:`scp.core.selection.select`) are reported the same way, with the number of units each query kept; a threshold
is calibrated to a target recall on the validation split (:func:`calibrated_thresholds`).
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

from scp.core.metrics import aggregate, over_seeds, pairwise_auc, recall_at_keep
from scp.core.selection import calibrate_threshold, check_criterion, is_integer, is_real, select
from scp.data.datasets import DATASET_KWARGS
from scp.errors import InputError, ModelUnavailableError
from scp.io import write_json
from scp.models.config import POINTWISE
from scp.models.factory import load_checkpoint
from scp.pruning import methods
from scp.pruning.rankers import Ranker
from scp.pruning.result import regex_tokens
from scp.pruning.shapley_ranker import SCPRanker as SCPRanker  # where notebooks and tests import it from


def _ranking_method(method: str) -> methods.Method:
    """The registry entry of ``method``, which must be a ranker (:func:`scp.pruning.methods.names`)."""
    rankers = methods.names(rankers=True)
    if method not in rankers:
        raise InputError(f"unknown method {method!r}; choose one of {', '.join(rankers)}")
    return methods.get(method)


def _check_checkpoint_use(method: str, checkpoint) -> None:
    """A checkpoint is needed by, and only applies to, the methods that score with a trained network."""
    entry = _ranking_method(method)
    users = [m for m in methods.names(rankers=True) if methods.get(m).needs_checkpoint]
    if entry.needs_checkpoint and not checkpoint:
        raise InputError(
            f"method {method!r} needs --checkpoint PATH (a file written by `scp train`; in Python "
            f"checkpoint=PATH, or the trained networks by preset, checkpoints[{entry.preset!r}])"
        )
    if not entry.needs_checkpoint and checkpoint:
        raise InputError(
            f"--checkpoint only applies to the methods that use one ({', '.join(users)}); "
            f"method {method!r} does not read {checkpoint}: drop --checkpoint, or choose "
            f"{', '.join(users[:-1])} or {users[-1]}"
        )


def _check_exact_sizes(examples, dataset: str) -> None:
    """``--estimator exact`` on every context of ``examples``, checked by counting units before any is embedded."""
    from scp.core.enumeration import DEFAULT_EXACT_LIMIT

    longest = max(examples, key=lambda ex: ex.n_units)
    if longest.n_units > DEFAULT_EXACT_LIMIT:
        too_long = sum(ex.n_units > DEFAULT_EXACT_LIMIT for ex in examples)
        raise InputError(
            f"--estimator exact enumerates 2^n coalitions and takes contexts of at most {DEFAULT_EXACT_LIMIT} units; "
            f"{too_long} of the {len(examples)} {dataset} contexts have more (example {longest.id!r}: "
            f"{longest.n_units} units, 2^{longest.n_units} = {2**longest.n_units:,} coalitions): use --estimator "
            "monte_carlo or adaptive, or --data with shorter contexts"
        )


def _check_pointwise_options(checkpoint, model: str, control_variate, adaptive) -> None:
    """A pointwise checkpoint scores each unit exactly: Monte-Carlo options do not apply to it."""
    given = [
        name for name, value in (("--control-variate", control_variate), ("--adaptive", adaptive)) if value is not None
    ]
    if model in POINTWISE and given:
        raise InputError(
            f"{' and '.join(given)} do{'es' if len(given) == 1 else ''} not apply to {checkpoint}: its "
            f"model is {model!r}, whose scores are exact per unit (one pass, no permutations sampled, so "
            "no Monte-Carlo variance to reduce or budget to certify); drop the option or use a Shapley "
            "checkpoint"
        )


def make_ranker(
    method: str,
    checkpoint=None,
    embedder="minilm",
    cache_dir=None,
    n_permutations: int | str = 50,
    seed: int = 0,
    **adaptive,
) -> Ranker:
    """The ranker of a registered method (:func:`scp.pruning.methods.names` with ``rankers=True``), built by its
    registry constructor: the one way from a method's name to its ranker.

    Args:
        method: a ranker's name (``scp``, ``scp-loo``, ``pointwise``, ``random``, ``bm25``, ``cosine``, …).
        checkpoint: for the methods that score with a trained network (``scp``, ``scp-loo``, ``pointwise``), a
            checkpoint path, or the trained networks by preset (``{"best": path, "pointwise": path}``, as
            :func:`scp.experiments.reranking.train_checkpoints` gives them per dataset), of which the method's own
            :attr:`~scp.pruning.methods.Method.preset` is used; a path given to any other method is an error.
        embedder: ``cosine``'s embedder: a name (:func:`scp.data.embedders.get_embedder`; its vectors are cached
            under ``cache_dir``) or an :class:`~scp.data.embedders.Embedder`, used as given.
        cache_dir: embedding cache (``None``: ``$SCP_CACHE_DIR``).
        n_permutations: M of ``scp``'s Monte-Carlo estimate; ``"adaptive"`` with ``adaptive`` options (delta,
            max_permutations, certify_keep, tolerance, bound, control_variate) gives ``scp`` an adaptive budget.
        seed: seeds ``random`` and ``scp``'s permutations.

    Raises:
        InputError: an unknown method, or a checkpoint missing or given where none applies.
        ModelUnavailableError: the method's model cannot be loaded here (offline); hub models raise it on first use.
    """
    entry = _ranking_method(method)
    if isinstance(checkpoint, Mapping):
        if entry.needs_checkpoint and entry.preset not in checkpoint:
            raise InputError(f"method {method!r} needs checkpoints[{entry.preset!r}]; got {sorted(checkpoint)}")
        checkpoint = str(checkpoint[entry.preset]) if entry.needs_checkpoint else None
    _check_checkpoint_use(method, checkpoint)
    return entry.build(
        checkpoint=checkpoint,
        embedder=embedder,
        cache_dir=cache_dir,
        n_permutations=n_permutations,
        seed=seed,
        **adaptive,
    )


PER_QUERY = ("threshold", "value_fraction")  # the criteria whose keep count each query's scores choose


def criterion_name(criterion: Mapping) -> str:
    """How a per-query criterion names its metrics: ``{"threshold": 0.01}`` → ``"threshold=0.01"``."""
    if len(criterion) != 1 or next(iter(criterion)) not in PER_QUERY:
        raise InputError(f"a per-query criterion is one of {PER_QUERY} with its value; got {dict(criterion)!r}")
    return check_criterion(**criterion)


def evaluate(
    examples,
    ranker: Ranker,
    with_title: bool,
    keep_ratios: Sequence[float] = (0.5,),
    n_boot: int = 1000,
    seed: int = 0,
    criteria: Sequence[Mapping] = (),
) -> dict:
    """Metrics of ``ranker`` on ``examples`` (see the module docstring) as a JSON-ready dict.

    ``criteria`` are per-query criteria (``{"threshold": τ}``, ``{"value_fraction": α}``); each adds
    ``recall@NAME`` (share of the gold units kept), ``keep_rate@NAME``, ``compression@NAME`` and ``kept@NAME``
    (units kept) with NAME = :func:`criterion_name`.  ``value_fraction`` asks the ranker for its game's values
    (:meth:`scp.pruning.rankers.Ranker.prefix_values`, a set model only), and each example's row then holds
    ``v_empty`` = v(∅), ``v_peak`` = max_k v(S_k) (reached at ``peak_at`` = k), ``v_grand`` = v(N)."""
    if not examples:
        raise InputError("no examples to evaluate")
    names = [criterion_name(c) for c in criteria]
    t0 = time.perf_counter()
    queries = [ex.query for ex in examples]
    units_list = [ex.unit_texts(with_title=with_title) for ex in examples]
    scores = ranker.score_many(queries, units_list)
    seconds = time.perf_counter() - t0
    values = (
        ranker.prefix_values(queries, units_list, scores)
        if any("value_fraction" in c for c in criteria)
        else [None] * len(examples)
    )
    rows = []
    for ex, s, v in zip(examples, scores, values):
        counts = [len(regex_tokens(u)) for u in ex.units]
        row = {
            "id": ex.id,
            "type": ex.meta.get("type"),
            "n_units": ex.n_units,
            "n_positive": ex.n_positive,
            "auc": pairwise_auc(s, ex.labels),
        }
        for r in keep_ratios:
            kept = select(s, keep_ratio=r)[0]
            row[f"recall@{r}"] = recall_at_keep(s, ex.labels, r) if ex.n_positive else float("nan")
            row[f"keep_rate@{r}"] = len(kept) / ex.n_units
            row[f"compression@{r}"] = 1 - sum(counts[i] for i in kept) / max(1, sum(counts))
        if v is not None:  # the game along the ranking: v(∅), its best prefix (size k*), v(N)
            row.update(v_empty=float(v[0]), v_peak=float(v[1:].max()), peak_at=int(np.argmax(v[1:])) + 1)
            row["v_grand"] = float(v[-1])
        for name, criterion in zip(names, criteria):
            kept = select(s, prefix_values=v, **criterion)[0]
            gold = np.asarray(ex.labels) > 0
            row[f"recall@{name}"] = gold[kept].sum() / ex.n_positive if ex.n_positive else float("nan")
            row[f"keep_rate@{name}"] = len(kept) / ex.n_units
            row[f"compression@{name}"] = 1 - sum(counts[i] for i in kept) / max(1, sum(counts))
            row[f"kept@{name}"] = len(kept)
        rows.append(row)

    metrics = [f"{m}@{r}" for r in keep_ratios for m in ("recall", "keep_rate", "compression")]
    metrics += [f"{m}@{n}" for n in names for m in ("recall", "keep_rate", "compression", "kept")]

    def summary(subset: list[dict]) -> dict:
        out = {"n_examples": len(subset)}
        for key in ["auc"] + metrics:
            agg = aggregate([row[key] for row in subset], n_boot=n_boot, seed=seed)
            out[key] = {
                "mean": agg.mean,
                "ci": [agg.ci_low, agg.ci_high],
                "n_used": agg.n_used,
                "n_excluded": agg.n_excluded,
            }
        return out

    result = {
        "method": ranker.name,
        "status": "ok",
        "units": "title" if with_title else "sentence",
        "dataset": examples[0].dataset,
        "seconds": seconds,
        **summary(rows),
    }
    if getattr(ranker, "budget_summary", None) and ranker.budget_summary():
        result["adaptive"] = ranker.budget_summary()
    types = sorted({row["type"] for row in rows if row["type"]})
    if types:
        result["by_type"] = {t: summary([row for row in rows if row["type"] == t]) for t in types}
    result["per_example"] = rows
    return result


def calibrated_thresholds(examples, ranker: Ranker, with_title: bool, target_recalls: Sequence[float]) -> list[dict]:
    """For each target recall R, the largest threshold τ whose mean recall over ``examples`` (validation
    contexts) reaches R (:func:`scp.core.selection.calibrate_threshold`), scored once by ``ranker``.

    Returns one ``{"target_recall", "threshold", "n_validation", "criterion"}`` per target, in order."""
    if not examples:
        raise InputError("no validation examples to calibrate a threshold on")
    for r in target_recalls:
        if not (is_real(r) and 0 < r <= 1):
            raise InputError(f"target recalls must be numbers in (0, 1]; got {r!r}")
    scores = ranker.score_many([ex.query for ex in examples], [ex.unit_texts(with_title=with_title) for ex in examples])
    labels = [ex.labels for ex in examples]
    out = []
    for r in target_recalls:
        tau = calibrate_threshold(scores, labels, r)
        out.append(
            {
                "target_recall": float(r),
                "threshold": tau,
                "n_validation": len(examples),
                "criterion": criterion_name({"threshold": tau}),
            }
        )
    return out


def evaluate_per_query(
    examples,
    validation,
    make: Callable[[], Ranker],
    with_title: bool,
    keep_ratios: Sequence[float] = (0.5,),
    *,
    thresholds: Sequence[float] = (),
    target_recalls: Sequence[float] = (),
    value_fractions: Sequence[float] = (),
    n_boot: int = 1000,
    seed: int = 0,
) -> dict:
    """:func:`evaluate` at fixed ``keep_ratios`` and per-query criteria: each threshold, each target recall's
    threshold calibrated on ``validation`` (by a ranker of its own from ``make``, so an adaptive budget's record
    counts the evaluated contexts only; the record's ``calibration`` lists them), each value fraction."""
    calibration = calibrated_thresholds(validation, make(), with_title, target_recalls) if target_recalls else []
    criteria = [{"threshold": float(t)} for t in thresholds] + [{"threshold": c["threshold"]} for c in calibration]
    criteria += [{"value_fraction": float(a)} for a in value_fractions]
    result = evaluate(examples, make(), with_title, keep_ratios, n_boot=n_boot, seed=seed, criteria=criteria)
    if calibration:
        result["calibration"] = calibration
    return result


def unavailable(method: str, error: Exception, with_title: bool, dataset: str) -> dict:
    """The record of a method whose model cannot be loaded here: n/a with the reason, never a silent skip."""
    return {
        "method": method,
        "status": "n/a",
        "reason": str(error),
        "units": "title" if with_title else "sentence",
        "dataset": dataset,
    }


def run_eval(
    dataset: str,
    method: str,
    data=None,
    split: str | None = "test",
    units: str | None = None,
    checkpoint: str | None = None,
    keep_ratios: Sequence[float] = (0.5,),
    limit: int | None = None,
    out: str | None = None,
    n_permutations: int = 50,
    seed: int = 0,
    cache_dir=None,
    adaptive: dict | None = None,
    control_variate: str | None = None,
    estimator: str | None = None,
    thresholds: Sequence[float] = (),
    target_recalls: Sequence[float] = (),
    value_fractions: Sequence[float] = (),
) -> dict:
    """Load ``dataset`` (``data`` = a file in its original layout or a data directory), evaluate ``method``.

    Beside the fixed ``keep_ratios``, per-query keep counts: each of ``thresholds`` τ keeps the units with score
    ≥ τ; each of ``target_recalls`` R first calibrates τ on the dataset's validation split (the record's
    ``calibration`` says which τ each R gave), then applies it; each of ``value_fractions`` α keeps the shortest
    prefix of the ranking whose network value reaches v(∅) + α·(v* − v(∅)), v* the best prefix value (``scp`` and
    ``scp-loo`` with a set model only).

    ``adaptive`` (delta, max_permutations, tolerance, bound; K = ⌈keep_ratios[0]·n⌉) replaces the fixed M of
    ``scp`` by an adaptive budget whose first round has ``n_permutations`` permutations; ``control_variate``
    ("position") goes to ``scp``'s Monte-Carlo estimator, fixed or adaptive M.  ``estimator`` is any name of
    :data:`scp.core.estimators.ESTIMATORS` for ``scp`` (default monte_carlo), checked here."""
    from scp.data.datasets import load_dataset, split_examples

    # every argument is checked before the data are loaded and embedded
    _check_checkpoint_use(method, checkpoint)
    if limit is not None and (not is_integer(limit) or limit < 1):
        raise InputError(f"limit must be an integer ≥ 1 (or None for every example); got {limit!r}")
    if not keep_ratios or not all(is_real(r) and 0 < r <= 1 for r in keep_ratios):  # not a bool, not NaN
        raise InputError(f"keep ratios must be numbers in (0, 1]; got {list(keep_ratios)}")
    if not is_integer(n_permutations) or n_permutations < 1:
        raise InputError(f"the number of permutations M must be an integer ≥ 1; got {n_permutations!r}")
    if not is_integer(seed) or seed < 0:  # NumPy's generators take seeds ≥ 0 only
        raise InputError(f"seed must be an integer ≥ 0; got {seed!r}")
    for name, given in (("thresholds", thresholds), ("target recalls", target_recalls)):
        bad = [x for x in given if not (is_real(x) and np.isfinite(x))]
        if bad or (name == "target recalls" and any(not 0 < x <= 1 for x in given)):
            raise InputError(
                f"{name} must be {'numbers in (0, 1]' if name != 'thresholds' else 'finite numbers'}; got {list(given)}"
            )
    for a in value_fractions:
        check_criterion(value_fraction=a)
    if value_fractions and method not in ("scp", "scp-loo"):
        raise InputError(
            f"a value fraction reads the network's game v(S), which method {method!r} does not have; it applies to "
            "scp and scp-loo (use a threshold or a target recall with the others)"
        )
    if target_recalls and split in (None, "all", "validation"):
        raise InputError(
            f"a target recall calibrates τ on the validation split and applies it to another; got split {split!r} "
            "(use --split test, or give the threshold itself with --threshold)"
        )
    options: dict = {}
    if control_variate is not None:
        from scp.core.fast_path import CONTROL_VARIATES

        if method != "scp" or control_variate not in CONTROL_VARIATES:
            raise InputError(
                f"control_variate must be one of {CONTROL_VARIATES[1:]} with method 'scp'; got "
                f"{control_variate!r} with {method!r}"
            )
        options["control_variate"] = control_variate
    if adaptive is not None:
        from scp.core.adaptive import check_options, round_schedule

        if method != "scp":
            raise InputError(f"an adaptive budget applies to method 'scp' only; got {method!r}")
        unknown = set(adaptive) - {"delta", "max_permutations", "tolerance", "bound"}
        if unknown:
            raise InputError(f"unknown adaptive options {sorted(unknown)}")
        round_schedule(n_permutations, adaptive.get("max_permutations", 1000))
        check_options(
            adaptive.get("delta", 0.05),
            adaptive.get("tolerance", 0.0),
            adaptive.get("bound", "bernstein"),
            control_variate,
        )
        options.update(adaptive, certify_keep=keep_ratios[0], min_permutations=n_permutations)
    if estimator is not None:
        from scp.core.estimators import get_estimator

        name = get_estimator(estimator).name  # an unknown name is an error listing the registered ones
        if method != "scp":
            raise InputError(f"--estimator applies to method 'scp' only (scp-loo is leave-one-out); got {method!r}")
        if adaptive is not None and name not in ("monte_carlo", "adaptive"):
            raise InputError(
                f"--adaptive is the adaptive Monte-Carlo estimator; it does not go with --estimator {estimator}"
            )
        options["estimator"] = estimator
        if name == "adaptive":
            options.setdefault("certify_keep", keep_ratios[0])
    config = load_checkpoint(checkpoint)[1] if methods.get(method).needs_checkpoint else None
    if config is not None:
        _check_pointwise_options(checkpoint, config.model, control_variate, adaptive)
        if value_fractions and config.model in POINTWISE:
            raise InputError(
                f"a value fraction reads the game v(S) of a set value network; {checkpoint} is a {config.model!r} "
                "model, which scores each unit alone: use a threshold or a target recall"
            )
    everything = load_dataset(dataset, data, **DATASET_KWARGS.get(dataset, {}))
    examples = everything if split in (None, "all") else split_examples(everything, split)
    examples = examples if limit is None else examples[:limit]
    if examples and estimator is not None and name == "exact":
        _check_exact_sizes(examples, dataset)
    if units is None:
        units = config.unit_repr if config is not None else "sentence"
    with_title = units == "title"

    def ranker() -> Ranker:
        return make_ranker(
            method,
            checkpoint,
            cache_dir=cache_dir,
            seed=seed,
            n_permutations="adaptive" if adaptive is not None else n_permutations,
            **options,
        )

    try:
        result = evaluate_per_query(
            examples,
            split_examples(everything, "validation") if target_recalls else [],
            ranker,
            with_title,
            keep_ratios,
            thresholds=thresholds,
            target_recalls=target_recalls,
            value_fractions=value_fractions,
            seed=seed,
        )
    except ModelUnavailableError as error:
        result = unavailable(method, error, with_title, dataset)
    if estimator is not None:
        result["estimator"] = estimator
    result.update(
        split=split or "all",
        data=str(data) if data else os.environ.get("SCP_DATA_DIR"),
        checkpoint=checkpoint,
        control_variate=control_variate,
        python=platform.python_version(),
        torch=torch.__version__,
    )
    if out:
        write_json(result, out)
    return result


def format_result(result: dict) -> str:
    if result["status"] != "ok":
        return f"{result['method']} on {result['dataset']}: n/a ({result['reason']})"
    keys = [k for k in result if k.startswith(("recall@", "compression@", "keep_rate@", "kept@"))]
    parts = [
        f"AUC {result['auc']['mean']:.4f} [{result['auc']['ci'][0]:.4f}, {result['auc']['ci'][1]:.4f}] "
        f"(n={result['auc']['n_used']}, excluded {result['auc']['n_excluded']})"
    ]
    parts += [f"{k} {result[k]['mean']:.4f}" for k in keys]
    line = f"{result['method']} on {result['dataset']}/{result['split']} ({result['units']} units): " + ", ".join(parts)
    for t, sub in result.get("by_type", {}).items():
        line += f"\n  {t}: AUC {sub['auc']['mean']:.4f} (n={sub['auc']['n_used']})"
    for c in result.get("calibration", []):
        line += (
            f"\n  target recall {c['target_recall']:g} on {c['n_validation']} validation contexts: "
            f"{c['criterion']}, test recall {result['recall@' + c['criterion']]['mean']:.4f}, "
            f"{result['kept@' + c['criterion']]['mean']:.1f} units kept per query"
        )
    if "adaptive" in result:
        from scp.core.adaptive import RIGOROUS

        a = result["adaptive"]
        kind = "rigorous" if a["bound"] in RIGOROUS else "asymptotic"
        cv = f", {a['control_variate']} control variate" if a.get("control_variate") else ""
        line += (
            f"\n  adaptive budget ({a['bound']} intervals, {kind}{cv}; δ = {a['delta']}, "
            f"tolerance {a['tolerance']}): median M {a['median_permutations']:g}, mean M {a['mean_permutations']:.0f}, "
            f"certified {100 * a['certified']:.0f}% of contexts; {result['seconds']:.1f} s"
        )
    return line


def _per_seed(records: Sequence[dict], metric: str) -> list[list[float]]:
    ids = [[row["id"] for row in r["per_example"]] for r in records]
    if any(i != ids[0] for i in ids):
        raise InputError("the records of the training seeds are not on the same examples in the same order")
    return [[row[metric] for row in r["per_example"]] for r in records]


def _seed_row(agg, prefix: str) -> dict:
    return {
        prefix: agg.mean,
        f"{prefix}_ci_low": agg.ci_examples[0],
        f"{prefix}_ci_high": agg.ci_examples[1],
        f"{prefix}_sd_seeds": agg.sd_seeds,
        f"{prefix}_ci_seeds_low": agg.ci_seeds[0],
        f"{prefix}_ci_seeds_high": agg.ci_seeds[1],
        "n_seeds": agg.n_seeds,
        "n_test": agg.n_used,
    }


def over_seed_records(
    records: Sequence[dict], metric: str = "auc", prefix: str = "test_auc", n_boot: int = 1000, seed: int = 0
) -> dict:
    """One metric of :func:`evaluate` records of one model trained with several seeds, on the same examples:
    :func:`scp.core.metrics.over_seeds` as a table row (``prefix``: the mean over seeds and examples;
    ``_ci_low``/``_ci_high`` the bootstrap CI over examples; ``_sd_seeds``, ``_ci_seeds_low``/``_high`` (Student t
    over the per-seed means); ``n_seeds``, ``n_test``)."""
    agg = over_seeds(_per_seed(records, metric), n_boot=n_boot, seed=seed)
    return _seed_row(agg, prefix)


def paired_over_seed_records(
    a: Sequence[dict],
    b: Sequence[dict],
    metric: str = "auc",
    prefix: str = "difference",
    n_boot: int = 1000,
    seed: int = 0,
) -> dict:
    """:func:`over_seed_records` of the per-example differences a − b (seed s of ``a`` paired with seed s of
    ``b``, example k with example k), so the CIs are those of the paired difference."""
    x, y = np.asarray(_per_seed(a, metric)), np.asarray(_per_seed(b, metric))
    if x.shape != y.shape:
        raise InputError(f"paired records differ in shape: {x.shape} vs {y.shape}")
    return _seed_row(over_seeds(x - y, n_boot=n_boot, seed=seed), prefix)
