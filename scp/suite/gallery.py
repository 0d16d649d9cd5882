"""The notebook suite at a glance: which paper figure or table each notebook regenerates, its figures with a
caption, its measured wall time, and the README's numbers on the shipped pruner.

``python -m scp.suite.gallery`` rewrites ``figures/README.md`` (the gallery) and the table between the ``suite-table``
markers of ``README.md`` from what is on disk: the figures under ``figures/NAME/`` and the ``wall_time_s`` that
each notebook's results carry in their provenance (written by the notebook itself, so no number here is typed by
hand), and below it the ``make figures`` in a fresh clone (empty caches) that made them, which
``python -m scp.suite.gallery --cold-run CLONE`` reads from the clone's executed notebooks into :data:`COLD_RUN`.
The section between the ``shipped-model`` markers of ``README.md`` is written from the model cards and notebook
13's committed results (:func:`shipped_model_section`), and the one between the ``claims-tally`` markers from each
notebook's table of the paper's claims (:func:`claims_tally`).
Folders of ``figures/`` that no notebook draws (:data:`OTHER_FIGURES`, e.g. the benchmarks' ``figures/bench/``) get a
section of their own.  A figure without a caption is an error: every figure says what it shows.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from scp.errors import InputError
from scp.io import read_json, replace_section
from scp.paths import ROOT

__all__ = [
    "NOTEBOOKS",
    "OTHER_FIGURES",
    "CAPTIONS",
    "COLD_RUN",
    "wall_time",
    "run_durations",
    "busy_seconds",
    "FILLED_RUN",
    "record_cold_run",
    "cold_run",
    "gallery",
    "readme_table",
    "shipped_model_section",
    "claims_tally",
    "main",
]

NOTEBOOKS: dict[str, tuple[str, str]] = {  # name -> (what it shows, the paper figure / table it regenerates)
    "00_cooperative_games_tutorial": (
        "Shapley values by hand, the axioms, Monte Carlo vs Theorem 3.1, core",
        "Theorem 3.1; teaching",
    ),
    "01_train_value_network": (
        "training curves; the paper's 3.03M network beside the `best` preset (shipped before notebook 13)",
        "§4 setup",
    ),
    "02_reranking_auc": ("pairwise AUC and R@keep of SCP and baselines on five datasets", "Table 3, Fig. 3a"),
    "03_niah": ("needle-in-a-haystack recall vs length, depth and keep ratio", "Fig. 3d, Tables 13–16"),
    "04_mc_budget_and_bounds": (
        "AUC and time vs M; estimator error vs the bound; Top-K stability",
        "Table 20, Fig. 4b, Fig. 6 (its sampling error only)",
    ),
    "05_shapley_vs_loo": ("Shapley vs leave-one-out; the dose-protocol case", "Fig. 4c/4d, Tables 18–19"),
    "06_embedder_ablation": ("SCP with five embedders", "Table 17, Fig. 4a"),
    "07_convex_deepsets": ("ConvexDeepSets vs Deep Sets; supermodularity violations", "Table 22"),
    "08_landscape_of_context": ("exact Shapley, core, tight sets, context tree, Harsanyi dividends", "Fig. 5"),
    "09_compression_and_transfer": (
        "keep-ratio sweep (recall of the evidence), cross-domain training, and a keep count chosen per query",
        "no paper table (Table 12's keep ratios, as evidence recall; its QA is notebook 10's)",
    ),
    "10_downstream_qa": (
        "a real reader (SmolLM2-135M offline) answers from pruned contexts: EM, F1, log P(a*)",
        "Table 4, Table 12, Fig. 3b (not 3c's cross-model judge)",
    ),
    "11_maxshapley": (
        "MaxShapley vs FullShapley, LOO, Monte Carlo, KernelSHAP: Jaccard@K and τ_b against LM cost",
        "MaxShapley paper (companion), MuSiQue",
    ),
    "12_entropic_context_shaping": (
        "Entropic Context Shaping: greedy LM-utility evidence selection vs TF-IDF, BM25, SCP",
        "ECS paper (companion)",
    ),
    "13_interaction_aware": (
        "set models vs matched pointwise controls: structure, context encoder, coalition "
        "games, greedy selection, redundancy, Table 19, learning curve",
        "§3 claim; Table 19",
    ),
    "14_attribution_against_contextcite": (
        "SCP (no reader call) against ContextCite (32 and 64 reader calls) and leave-one-out on the reader, judged "
        "by the reader: top-k drop of log P(a*), LDS, AUC",
        "no paper table (peer: ContextCite, NeurIPS 2024)",
    ),
}

OTHER_FIGURES: dict[str, tuple[str, str]] = {  # folder of figures/ that no notebook draws -> (what, made by)
    "bench": (
        "benchmarks of the Shapley estimators (`BENCHMARKS.md`)",
        "`python -m scp.bench accuracy`",
    ),
}

CAPTIONS: dict[str, str] = {  # "NAME/stem" (or "FOLDER/stem" of OTHER_FIGURES) -> one line
    "00_cooperative_games_tutorial/mc_error_vs_permutations": (
        "Monte-Carlo error max_i |φ̂_i − φ_i| against M on a random game, with the Theorem 3.1 bound."
    ),
    "00_cooperative_games_tutorial/loo_vs_shapley_duplicates": (
        "Leave-one-out gives both copies of a needed sentence 0; Shapley splits the credit."
    ),
    "00_cooperative_games_tutorial/core_and_least_core": (
        "The core and least core of small games, with the Shapley value placed inside or outside."
    ),
    "01_train_value_network/learning_curves": (
        "Training loss and validation AUC (95% CI band) by epoch of the best preset on HotpotQA; the epoch kept marked."
    ),
    "01_train_value_network/paper_vs_best": (
        "The paper's 3.03M network beside the `best` preset and the pointwise control: validation AUC by epoch "
        "and HotpotQA test AUC (95% CI), BM25 for reference."
    ),
    "02_reranking_auc/auc_by_dataset": (
        "Pairwise AUC (95% bootstrap CI) of every method on the eight test variants of the five datasets."
    ),
    "02_reranking_auc/paired_differences": (
        "Paired AUC differences of SCP against BM25, MiniLM cosine, the pointwise control and SCP-LOO on each "
        "test variant (95% CI over contexts)."
    ),
    "02_reranking_auc/recall_at_keep": (
        "Recall of supporting units against the keep ratio, per dataset variant (95% bands)."
    ),
    "03_niah/single_needle_heatmaps": "Single-needle recall by context length and insertion depth, per method.",
    "03_niah/single_needle_curves": (
        "Single-needle recall against context length (all depths pooled) and against insertion depth at the longest "
        "length (95% bootstrap bands over haystacks)."
    ),
    "03_niah/two_needles_recall_vs_length": "Two-needle recall against context length.",
    "03_niah/five_needles_all_recall_vs_keep_ratio": "Five needles: probability that all are kept, by keep ratio.",
    "04_mc_budget_and_bounds/auc_and_time_vs_permutations": (
        "AUC on HotpotQA test and time per context against M, in-domain and trained on MS MARCO."
    ),
    "04_mc_budget_and_bounds/error_vs_bound": (
        "Measured estimator error on real value-network games against the Theorem 3.1 bound, by evaluations of v."
    ),
    "04_mc_budget_and_bounds/topk_stability_vs_theorem": (
        "Top-K stability against M, with the Theorem A.3 sample sizes."
    ),
    "05_shapley_vs_loo/recall_vs_permutations": (
        "Recall of Monte-Carlo Shapley against M, with leave-one-out as the reference, plain and with paraphrases."
    ),
    "05_shapley_vs_loo/recall_gain_over_loo": "Paired recall gain of Shapley over leave-one-out against M (95% CI).",
    "05_shapley_vs_loo/table19_scores": (
        "The paper's Table 19 dose-protocol case: the paper's printed LOO/SCP scores above ours."
    ),
    "06_embedder_ablation/auc_by_embedder": (
        "SCP trained with each embedder beside that embedder's cosine baseline: HotpotQA test AUC (95% CI)."
    ),
    "06_embedder_ablation/auc_vs_embedding_time": "Test AUC against each embedder's encoding time per 1000 sentences.",
    "07_convex_deepsets/auc_by_dataset": "ConvexDeepSets against Deep Sets: test AUC (95% CI) per dataset.",
    "07_convex_deepsets/violation_rates": (
        "Share of sampled supermodularity inequalities violated on real test contexts, logit game and bounded game "
        "(95% CI over contexts)."
    ),
    "08_landscape_of_context/shapley_values": (
        "Exact Shapley values of the units of one real HotpotQA context (12 units), supporting units coloured."
    ),
    "08_landscape_of_context/core_membership": "Whether the Shapley value lies in the core, and the least-core ε.",
    "08_landscape_of_context/context_tree": "The laminar family of tight sets drawn as a tree.",
    "08_landscape_of_context/pair_interactions": (
        "Pair dividends d({i, j}) and Shapley interaction indices I_ij of one context."
    ),
    "08_landscape_of_context/pair_types": (
        "Mean pair dividend and interaction index by pair type (distractor–distractor, gold–distractor, gold–gold; "
        "95% CI over contexts)."
    ),
    "09_compression_and_transfer/keep_ratio_sweep": (
        "R@r and token compression against the keep ratio r, and R@r against token compression (95% CI)."
    ),
    "09_compression_and_transfer/cross_domain_auc": (
        "Cross-domain training (MS MARCO, FEVER → HotpotQA) for SCP and the pointwise control: test AUC (95% CI)."
    ),
    "09_compression_and_transfer/per_query_tradeoff": (
        "Recall against token compression on every dataset: fixed ratios (lines), thresholds calibrated on "
        "validation to R = 0.8, 0.9, 0.95 (▼) and SCP's value fractions (▲)."
    ),
    "09_compression_and_transfer/per_query_kept_counts": (
        "Units kept per query by each method's calibrated threshold (R = 0.9) and SCP's value fraction (α = 0.95)."
    ),
    "10_downstream_qa/qa_by_method": (
        "The reader's answer F1 and log P(gold answer) from the context each pruner keeps at r = 0.5, beside the "
        "full context and closed book (95% CI over questions)."
    ),
    "10_downstream_qa/keep_ratio_sweep": "Answer F1 and log P(gold answer) against the keep ratio (95% bands).",
    "11_maxshapley/attribution_vs_cost": (
        "MaxShapley (LM and MiniLM relevance) against FullShapley (exact), leave-one-out, Monte Carlo, antithetic "
        "Monte Carlo and KernelSHAP on MuSiQue with n = 6 sources: Jaccard@K with the gold sources and Kendall τ_b "
        "with FullShapley against LM tokens and calls per question (95% CI)."
    ),
    "12_entropic_context_shaping/f1_matched": (
        "Evidence-selection F1 when each baseline keeps as many sentences as ECS selected, per ECS variant "
        "(gold answer a* / the reader's own answer y), HotpotQA and 2Wiki (95% CI)."
    ),
    "12_entropic_context_shaping/prf_vs_k": (
        "Precision, recall and F1 of the first k greedy ECS picks and each baseline's top k, all from the same BM25 "
        "candidate pool (95% CI)."
    ),
    "13_interaction_aware/auc_set_vs_control": (
        "Test AUC of every set-model variant beside its matched pointwise control, all and bridge questions "
        "(mean over seeds, 95% CI over examples)."
    ),
    "13_interaction_aware/coverage_by_selection": (
        "Distinct supporting facts kept on the redundancy-augmented test split at keep 0.1, 0.3 and 0.5: Shapley "
        "top-K, greedy selection by marginal value, pointwise top-K (95% CI over examples)."
    ),
    "13_interaction_aware/table19": (
        "The paper's Table 19 case scored by the chosen set model: exact Shapley and leave-one-out per sentence."
    ),
    "13_interaction_aware/learning_curve": (
        "HotpotQA test AUC against the number of HotpotQA training contexts for the set model, its control and the "
        "paper's 3.03M network (±1 sd where there are several seeds; single-seed points have no bar), and as an "
        "open marker apart from the lines the models trained on all five datasets mixed."
    ),
    "14_attribution_against_contextcite/metrics_by_method": (
        "Every method on HotpotQA test contexts (supporting paragraphs plus one distractor), judged by SmolLM2: drop "
        "of log P(a*) when its top-k units are removed, LDS on shared held-out ablations, AUC against the gold "
        "evidence (mean, 95% CI over examples); each method's own reader calls per example in its label."
    ),
    "bench/accuracy_per_second": (
        "Shapley accuracy per second: RMSE with respect to the reference values (exact for n = 10, a long Monte-Carlo "
        "run for 41 and 100 units) against the median wall time per context, for our Monte-Carlo estimators and "
        "shapiq's approximators on the shipped model's HotpotQA games; the dotted line (n = 10) is exact enumeration."
    ),
}


def figures_of(name: str, root: Path = ROOT) -> list[Path]:
    """The PNG figures a notebook saved, by name."""
    return sorted((root / "figures" / name).glob("*.png"))


def phase_text(name: str, root: Path = ROOT) -> str:
    """A notebook's seconds per phase (its provenance's ``phases``, :mod:`scp.suite.phases`) as
    ``embed · train · score · reader · other``, or why there are none."""
    path = root / "results" / name / "provenance.json"
    phases = read_json(path, f"results/{name}/provenance.json").get("phases") if path.is_file() else None
    if not isinstance(phases, dict):
        return "not recorded (run before phases were)" if path.is_file() else "not run yet"
    return " · ".join(_minutes(phases.get(k), "?") for k in ("embedding", "training", "scoring", "reader", "other"))


def wall_time(name: str, root: Path = ROOT) -> float | None:
    """Seconds of the notebook's last full run: the ``wall_time_s`` of its ``results/NAME/provenance.json``
    (written by ``run.finish()`` at the end of the run), else the largest ``wall_time_s`` among its result tables."""
    finished = root / "results" / name / "provenance.json"
    if finished.is_file():
        seconds = read_json(finished, f"results/{name}/provenance.json").get("wall_time_s")
        if isinstance(seconds, (int, float)):
            return seconds
    times = []
    for path in (root / "results" / name).glob("*.json"):
        provenance = read_json(path, f"results/{name}/{path.name}").get("provenance") or {}
        if isinstance(provenance, dict) and isinstance(provenance.get("wall_time_s"), (int, float)):
            times.append(provenance["wall_time_s"])
    return max(times) if times else None


COLD_RUN = Path("results") / "suite" / "cold_run.json"
"""Where :func:`record_cold_run` keeps the per-notebook times of one ``make figures`` in a fresh clone."""
FILLED_RUN = Path("results") / "suite" / "filled_store_run.json"
"""The same record of a ``make figures`` in a fresh clone whose embedding cache and model store were filled (by an
earlier run): what a regeneration costs after a change to code no training imports."""


def _papermill(path: Path) -> dict:
    papermill = (read_json(path, f"executed notebook {path.name}").get("metadata") or {}).get("papermill")
    return papermill if isinstance(papermill, dict) else {}


def run_durations(runs_dir: Path) -> dict[str, float]:
    """Seconds papermill spent on each executed notebook in ``runs_dir`` (``metadata.papermill.duration``)."""
    out = {}
    for path in sorted(Path(runs_dir).glob("*.ipynb")):
        duration = _papermill(path).get("duration")
        if isinstance(duration, (int, float)):
            out[path.stem] = float(duration)
    return out


def busy_seconds(runs_dir: Path, names: Iterable[str]) -> float | None:
    """Wall-clock seconds during which at least one of ``names`` was running: the length of the union of their
    papermill ``[start_time, end_time]`` intervals (notebooks run side by side count once; a pause between two
    invocations does not count).  None when any of them lacks the times."""
    from datetime import datetime

    spans = []
    for name in names:
        meta = _papermill(Path(runs_dir) / f"{name}.ipynb")
        if not (meta.get("start_time") and meta.get("end_time")):
            return None
        spans.append(tuple(datetime.fromisoformat(meta[k]).timestamp() for k in ("start_time", "end_time")))
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        total += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return total


def record_cold_run(
    clone: Path, root: Path = ROOT, note: str = "", wall_s: float | None = None, target: Path = COLD_RUN
) -> Path:
    """Write ``target`` (:data:`COLD_RUN`, or :data:`FILLED_RUN` for a run with the store filled) from
    ``make figures`` in ``clone`` (a fresh clone, started with no ``runs/``): each notebook's time from its
    executed copy, their sum, the wall clock the suite kept the machine busy (:func:`busy_seconds`), the commits
    its results' provenance names, the last run into the clone (``runs/suite_run.json``: a second ``make
    figures`` with nothing changed runs nothing), its stages (the embedding and training before the notebooks,
    ``runs/stages.json``), each notebook's phases and ``note``."""
    from scp.io import write_json
    from scp.suite.runner import STAGE_RUN, SUITE_RUN

    clone = Path(clone)
    durations = {name: seconds for name, seconds in run_durations(clone / "runs").items() if name in NOTEBOOKS}
    if not durations:
        raise InputError(f"{clone / 'runs'} holds no executed notebook of the suite: run `make figures` there first")
    commits = set()
    for path in (clone / "results").glob("*/provenance.json"):
        git = read_json(path, f"{path.parent.name}/provenance.json").get("git") or {}
        git = git if isinstance(git, dict) else {}
        commits.add(f"{git.get('commit')}{' (dirty)' if git.get('dirty') else ''}")
    last = clone / "runs" / SUITE_RUN
    record = {
        "notebooks": durations,
        "total_s": sum(durations.values()),
        "busy_s": busy_seconds(clone / "runs", durations),
        "results_commits": sorted(commits),
        "last_run": read_json(last, f"runs/{SUITE_RUN}") if last.is_file() else None,
        "stages": read_json(clone / "runs" / STAGE_RUN, f"runs/{STAGE_RUN}")
        if (clone / "runs" / STAGE_RUN).is_file()
        else None,
        "phases": {
            name: (read_json(path, f"{name}/provenance.json").get("phases"))
            for name in durations
            if (path := clone / "results" / name / "provenance.json").is_file()
        },
        "cpu_count": os.cpu_count(),
        "note": note,
        "wall_s": wall_s,
    }
    path = root / target
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(record, path)
    return path


def cold_run(root: Path = ROOT, which: Path = COLD_RUN) -> dict | None:
    """The recorded fresh-clone run (:data:`COLD_RUN`, or ``which``: :data:`FILLED_RUN`), if there is one."""
    path = root / which
    return read_json(path, str(which)) if path.is_file() else None


def _latest(root: Path) -> dict | None:
    """Of the recorded runs, the one that made the committed results: the later to start."""
    runs = [r for r in (cold_run(root), cold_run(root, FILLED_RUN)) if r is not None]
    return max(runs, key=lambda r: str((r.get("last_run") or {}).get("started_at", "")), default=None)


def _minutes(seconds: float | None, missing: str) -> str:
    if seconds is None:
        return missing
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def gallery(root: Path = ROOT) -> str:
    """``figures/README.md``: every figure embedded with its caption, paper reference and a link to its notebook
    (``../notebooks/NAME.ipynb``: the notebook on GitHub, its page in the book)."""
    lines = [
        "# Figures",
        "",
        "Regenerated by `make figures` (`scp run all`); one folder per notebook, and `bench/` for the benchmarks "
        "(`make bench`). Generated by "
        "`python -m scp.suite.gallery` — do not edit by hand.",
        "",
    ]
    sections = [
        (name, f"{what} — regenerates {paper}; notebook [`{name}`](../notebooks/{name}.ipynb).")
        for name, (what, paper) in NOTEBOOKS.items()
    ]
    sections += [
        (folder, f"{what}; drawn by {made_by}, not by a notebook.") for folder, (what, made_by) in OTHER_FIGURES.items()
    ]
    for name, intro in sections:
        pngs = figures_of(name, root)
        if not pngs:
            continue
        lines += [f"## {name}", "", intro, ""]
        for png in pngs:
            key = f"{name}/{png.stem}"
            if key not in CAPTIONS:
                raise KeyError(f"figure {key} has no caption: add one to scp.suite.gallery.CAPTIONS")
            vector = png.with_suffix(".pdf")
            shown = f"{name}/{vector.name if vector.is_file() else png.name}"
            lines += [f"![{png.stem}]({name}/{png.name})", "", f"*{CAPTIONS[key]}* (`{shown}`)", ""]
    return "\n".join(lines)


#: The beginnings of :func:`scp.suite.graph.status` reasons that say a notebook's code changed after its run: its
#: code cells, or an ``scp`` module it imports (not its parameters, inputs or outputs).
def _why(reasons: Sequence[str], width: int = 140) -> str:
    """A stale notebook's reasons, one entry per kind (the text before its first colon), a kind given several times
    counted, a long one cut."""
    kinds: dict[str, list[str]] = {}
    for r in reasons:
        kinds.setdefault(r.split(":")[0], []).append(r)
    parts = [rs[0] if len(rs) == 1 else f"{kind}: {len(rs)} of them" for kind, rs in kinds.items()]
    return "; ".join(p if len(p) <= width else p[: width - 1] + "…" for p in parts)


def staleness_line(stale: Mapping[str, Sequence[str]]) -> str:
    """One sentence saying how many notebooks ``scp run all --status`` finds up to date, and naming each stale one
    with its reasons (``stale``: :func:`scp.suite.graph.status`'s ``{name: reasons}``)."""
    n = len(stale)
    fresh = [name for name, why in stale.items() if not why]
    if len(fresh) == n:
        return f"`scp run all --status`: all {n} notebooks are up to date with their code, parameters and inputs."
    named = "; ".join(f"`{name}` ({_why(why)})" for name, why in stale.items() if why)
    return (
        f"`scp run all --status`: {len(fresh)} of {n} notebooks up to date; stale: {named}. A stale notebook's "
        "figures and tables are what the commit its provenance names computed; `make figures` reruns it."
    )


def figures_time(root: Path = ROOT) -> str:
    """The README's line under its two commands: how long ``make figures`` takes, from :data:`COLD_RUN`."""
    cold = cold_run(root)
    if cold is None or cold.get("wall_s") is None:
        return "How long `make figures` takes: not measured yet (no whole cold run is recorded)."
    text = (
        f"How long they take: a cold `make figures FIGURES_ARGS=--force` (a fresh clone, empty caches and model "
        f"store) took {_minutes(cold['wall_s'], '')} on {cold.get('cpu_count')} CPU cores "
        f"(`{COLD_RUN}`; the suite table's last lines say where the time went). Afterwards `make figures` "
        f"reruns only the stale notebooks."
    )
    filled = cold_run(root, FILLED_RUN)
    if filled is not None and filled.get("wall_s") is not None:
        text += (
            f" With the model store and embedding cache filled, a fresh clone's `make figures` after a change to "
            f"code no training imports reran {len((filled.get('last_run') or {}).get('ran') or [])} notebooks in "
            f"{_minutes(filled['wall_s'], '')} (`{FILLED_RUN}`)."
        )
    return text


def cold_run_line(cold: Mapping, what: str = "That `make figures`") -> str:
    """One sentence on the whole recorded ``make figures`` (:data:`COLD_RUN` with ``wall_s``): its wall clock
    from the command to its end, and where it went: set-up, the embedding and training stages
    (``stages.training``: models trained, and found in the store when any were), and the notebooks (the rest)."""
    wall, stage = float(cold["wall_s"]), ((cold.get("stages") or {}).get("training") or {})
    embed, staged = float(stage.get("embedding_s") or 0.0), float(stage.get("stage_s") or 0.0)
    notebooks = float(cold.get("busy_s") or 0.0)
    setup = max(0.0, wall - staged - notebooks)
    trained, hits = stage.get("trained"), stage.get("hits")
    models = f" ({trained} models trained" if trained is not None else ""
    models += f", {hits} found in the store)" if models and hits else ")" if models else ""
    return (
        f"{what} took {_minutes(wall, '')} of wall clock on {cold.get('cpu_count')} cores, from the "
        f"command to its end: set-up and planning {_minutes(setup, '')}, the embedding stage "
        f"{_minutes(embed, '')}, the training stage {_minutes(staged - embed, '')}{models}, the notebooks "
        f"{_minutes(notebooks, '')}."
    )


def readme_table(root: Path = ROOT, stale: Mapping[str, Sequence[str]] | None = None) -> str:
    """The README's notebook → paper → wall time table (each notebook's ``wall_time_s`` in the provenance of the
    committed results), below it what :data:`COLD_RUN` recorded of the ``make figures`` that made them, and
    :func:`staleness_line` of ``stale`` (default: the checkout's ``scp run all --status`` when ``root`` is the
    checkout; no such line for another tree unless ``stale`` is given)."""
    lines = [
        "| notebook | what it shows | paper | committed run on 2 CPU cores | embed · train · score · reader · other |",
        "|---|---|---|---|---|",
    ]
    for name, (what, paper) in NOTEBOOKS.items():
        if not (root / "notebooks" / f"{name}.ipynb").is_file():
            continue
        seconds = _minutes(wall_time(name, root), "not run yet")
        lines.append(
            f"| [`{name}`](notebooks/{name}.ipynb) | {what} | {paper} | {seconds} | {phase_text(name, root)} |"
        )
    cold = _latest(root)
    if cold is not None:
        commits = ", ".join(f"`{c[:7]}`{c[40:]}" for c in cold.get("results_commits") or []) or "unknown"
        busy = cold.get("busy_s")
        busy_text = f"; the machine was busy {_minutes(busy, '')} of wall clock" if busy is not None else ""
        lines += [
            "",
            f"Results made at commit {commits}: {len(cold['notebooks'])} notebooks, "
            f"{_minutes(cold['total_s'], '')} of notebook time in all as papermill timed them (kernel start-up "
            f"included; the column above starts at `start()`){busy_text}.",
        ]
        last = cold.get("last_run")
        if last and not last.get("ran"):
            lines[-1] += (
                f" A second `make figures` with nothing changed ran no notebook "
                f"({len(last['up_to_date'])} up to date; `scp run all` took {_minutes(last['wall_s'], '')})."
            )
        if cold.get("note"):
            lines[-1] += f" {cold['note']}"
    for record, what in (
        (cold_run(root), "The cold `make figures`"),
        (cold_run(root, FILLED_RUN), "The run with the store filled"),
    ):
        if record is not None and record.get("wall_s") is not None:
            lines += ["", cold_run_line(record, what)]
    if stale is None and Path(root).resolve() == Path(ROOT).resolve():
        from scp.suite.graph import status

        stale = status()
    if stale is not None:
        lines += ["", staleness_line(stale)]
    return "\n".join(lines)


SHIPPED_CARD = Path("models") / "scp-hotpotqa-best.json"
"""The card of the shipped set model; its ``chosen_by`` names notebook 13's variant as ``(VARIANT, variants.csv)``."""
INTERACTION = Path("results") / "13_interaction_aware"
EARLIER_VARIANT = "deepsets"  # notebook 13's variant with the recipe of the `best` preset, shipped before it
BASELINES = {"random": "random-title-units", "MiniLM cosine": "cosine-title-units", "BM25": "bm25-title-units"}
"""README label -> row of ``results/ablations/ablations.json`` (the baselines on the same title-prefixed units)."""


def _signed(x: float) -> str:
    return f"{x:+.3f}".replace("-", "\u2212")


def _paired(row: Mapping, key: str) -> str:
    low, high = row[f"{key} ci"]
    return f"{_signed(row[f'{key} mean'])} [{_signed(low)}, {_signed(high)}]"


def _beats(row: Mapping, key: str) -> str:
    low, high = row[f"{key} ci"]
    return "beats" if low > 0 else "falls below" if high < 0 else "does not beat"


def _separated(rows: Mapping, key: tuple[str, str]) -> bool:
    """Whether a model row's AUC is above its matched partner's (set model against its pointwise control) by a
    paired CI that excludes 0: the only rows the README's table sets in bold."""
    low, high = rows[(key[0], "set")]["diff_auc ci"]
    return low > 0 if key[1] == "set" else high < 0


def shipped_model_section(root: Path = ROOT) -> str:
    """The README's numbers on the shipped pruner, between the ``shipped-model`` markers: the shipped card's
    size, recipe and why it shipped (``models/*.json``), which variant the committed run of notebook 13 chose and
    whether its seed 0 is the shipped file (its provenance), the HotpotQA test table of the baselines
    (``results/ablations/ablations.json``) and of the set models and their matched controls
    (``results/13_interaction_aware/variants.json``), and the paired differences that say which set models beat
    their controls."""
    import re

    from scp.models.config import SHIPPED_PRESET

    card = read_json(root / SHIPPED_CARD, str(SHIPPED_CARD))
    named = re.search(r"\(([^(),]+), variants\.csv\)", str(card.get("chosen_by", "")))
    if not named:
        raise InputError(f"{SHIPPED_CARD}: chosen_by names no notebook 13 variant as '(VARIANT, variants.csv)'")
    shipped = named.group(1)
    records = read_json(root / INTERACTION / "records.json", f"{INTERACTION}/records.json")
    provenance = read_json(root / INTERACTION / "provenance.json", f"{INTERACTION}/provenance.json")
    table = read_json(root / INTERACTION / "variants.json", f"{INTERACTION}/variants.json")
    rows = {(row["variant"], row["model"]): row for row in table["rows"]}
    ablations = {
        row["name"]: row
        for row in read_json(root / "results" / "ablations" / "ablations.json", "ablations.json", expect=list)
    }
    for variant in {shipped, EARLIER_VARIANT, records["chosen_variant"]}:
        if (variant, "set") not in rows or (variant, "control") not in rows:
            raise InputError(f"{INTERACTION}/variants.json has no set and control rows of variant {variant!r}")
    config, chosen, n_seeds = card["config"], records["chosen_variant"], len(records["seeds"])
    commit = str((provenance.get("git") or {}).get("commit", "unknown"))[:7]
    written = [*(provenance.get("models_written") or []), *(provenance.get("models") or [])]
    retrained = [m for m in written if m.get("path") == f"runs/models/{card['run']}/best.safetensors"]
    ship, earlier = rows[(shipped, "set")], rows[(EARLIER_VARIANT, "set")]
    lines = [
        f"The shipped file: {card['n_params']:,} parameters ({card['bytes'] / 1e6:.1f} MB), margin "
        f"{config['margin']}, M = {config['n_permutations']} permutations per training step, best epoch "
        f"{card['best_epoch']} of {config['epochs']}, validation AUC {card['val_auc']:.4f} (run `{card['run']}`). "
        f'Its card (`{SHIPPED_CARD}`) says it was chosen by "{card["chosen_by"]}".',
        "",
    ]
    if chosen == shipped:
        choice = (
            f"The committed run of notebook 13 (commit `{commit}`) chose it again: mean validation AUC "
            f"{ship['val_auc']:.4f} over {n_seeds} seeds, the highest of its {len(records['variants'])} variants."
        )
    else:
        choice = (
            f"The committed run of notebook 13 (commit `{commit}`) chose `{chosen}` instead: mean validation AUC "
            f"{rows[(chosen, 'set')]['val_auc']:.4f} over {n_seeds} seeds, against {ship['val_auc']:.4f} for the "
            f"shipped `{shipped}`; the shipped file comes from an earlier run of that notebook and was not replaced."
        )
    if retrained and all(m.get("sha256") == card["sha256"] for m in retrained):
        choice += f" Seed 0 of its `{shipped}` rows below is the shipped file."
    elif retrained:
        choice += (
            f" Seed 0 of its `{shipped}` rows below is the shipped recipe retrained in that run "
            f"(`runs/models/{card['run']}`), not the shipped file (its sha256 differs)."
        )
    params = provenance.get("parameters") or {}
    lines += [
        choice,
        "",
        f"HotpotQA test split ({records['n_test']} examples, pairwise AUC with 95% bootstrap CI over examples, "
        f"M = {params.get('n_permutations', config['eval_permutations'])} at evaluation, every method on the same "
        f"title-prefixed units). The model rows are means over {n_seeds} seeds from "
        f"`{INTERACTION}/variants.csv`; the baselines are from `results/ablations/ablations.csv`. An AUC is in "
        "bold only where the paired CI against its matched partner (set model against pointwise control) "
        "excludes 0:",
        "",
        "| method | AUC | `R@0.5` | bridge AUC | comparison AUC |",
        "|---|---|---|---|---|",
    ]
    for label, name in BASELINES.items():
        row = ablations[name]
        lines.append(
            f"| {label} | {row['test_auc']:.3f} [{row['test_auc_ci_low']:.3f}, {row['test_auc_ci_high']:.3f}] | "
            f"{row['test_recall@0.5']:.3f} | {row['bridge_auc']:.3f} | {row['comparison_auc']:.3f} |"
        )
    models = [
        ("SCP before notebook 13 (`best`)", (EARLIER_VARIANT, "set")),
        ("its pointwise control", (EARLIER_VARIANT, "control")),
        (f"SCP, shipped (`{SHIPPED_PRESET}`)", (shipped, "set")),
        (f"its pointwise control (`{SHIPPED_PRESET}-pointwise`)", (shipped, "control")),
    ]
    if chosen != shipped:
        models.append((f"`{chosen}`, chosen by the committed run", (chosen, "set")))
    for label, key in models:
        row = rows[key]
        low, high = row["auc ci"]
        auc = f"**{row['auc mean']:.3f}**" if _separated(rows, key) else f"{row['auc mean']:.3f}"
        lines.append(
            f"| {label} | {auc} [{low:.3f}, {high:.3f}] | {row['recall@0.5 mean']:.3f} | "
            f"{row['bridge_auc mean']:.3f} | {row['comparison_auc mean']:.3f} |"
        )
    lift = ship["auc mean"] - earlier["auc mean"]
    control_lift = rows[(shipped, "control")]["auc mean"] - rows[(EARLIER_VARIANT, "control")]["auc mean"]
    verdict = (
        f"`{shipped}` lifts the set model by {_signed(lift)} AUC over `{EARLIER_VARIANT}` and its control by "
        f"{_signed(control_lift)}. The shipped recipe {_beats(ship, 'diff_auc')} its matched pointwise control: the "
        f"paired difference over {n_seeds} seeds is {_paired(ship, 'diff_auc')}, {_paired(ship, 'diff_bridge_auc')} "
        "on bridge questions"
    )
    if chosen != shipped:
        chosen_row = rows[(chosen, "set")]
        verdict += f"; for `{chosen}` {_paired(chosen_row, 'diff_auc')} and {_paired(chosen_row, 'diff_bridge_auc')}"
    winners = [
        (variant, row)
        for (variant, model), row in rows.items()
        if model == "set" and row["diff_auc ci"][0] > 0 and row["diff_bridge_auc ci"][0] > 0
    ]
    if winners:
        verdict += (
            ". The set models that beat their matched controls with a paired CI above 0, on all and on bridge "
            "questions: "
            + "; ".join(
                f"`{variant}` ({_paired(row, 'diff_auc')} overall, {_paired(row, 'diff_bridge_auc')} on bridge "
                f"questions; its control {rows[(variant, 'control')]['auc mean']:.3f} AUC, against "
                f"{rows[(shipped, 'control')]['auc mean']:.3f} for the shipped control)"
                for variant, row in winners
            )
            + "."
        )
    else:
        verdict += ". No set model beats its matched control with a paired CI above 0 on all and on bridge questions."
    return "\n".join([*lines, "", verdict])


def claims_tally(root: Path = ROOT) -> str:
    """The README's tally of the paper's claims: per notebook, how many claims its "The paper's claims" table
    quotes (:func:`scp.suite.quoted.paper_claims`) and how many of them each verdict got, with the total."""
    from scp.suite.quoted import VERDICTS, paper_claims, tally

    lines = [
        "| notebook | claims | " + " | ".join(VERDICTS) + " |",
        "|---|" + "---:|" * (len(VERDICTS) + 1),
    ]
    total = dict.fromkeys(VERDICTS, 0)
    for name in NOTEBOOKS:
        path = root / "notebooks" / f"{name}.ipynb"
        if not path.is_file():
            continue
        counts = tally(paper_claims(path))
        for verdict, count in counts.items():
            total[verdict] += count
        cells = " | ".join(str(count) for count in counts.values())
        lines.append(f"| [`{name}`](notebooks/{name}.ipynb) | {sum(counts.values())} | {cells} |")
    cells = " | ".join(f"**{count}**" for count in total.values())
    lines.append(f"| **all** | **{sum(total.values())}** | {cells} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m scp.suite.gallery",
        description="Write figures/README.md, the README's notebook table, its shipped-model numbers and its "
        "claims tally from figures/, results/, models/ and notebooks/.",
    )
    parser.add_argument(
        "--cold-run",
        metavar="CLONE",
        help="first record the times of a `make figures` run in "
        "the fresh clone CLONE (its runs/*.ipynb) into " + str(COLD_RUN),
    )
    parser.add_argument(
        "--filled-run",
        metavar="CLONE",
        help="the same for a run whose model store and embedding cache were filled, into " + str(FILLED_RUN),
    )
    parser.add_argument("--note", default="", help="the conditions of that run, kept with its times")
    parser.add_argument(
        "--wall-s", type=float, default=None, help="that run's wall clock in seconds, from `make figures` to its end"
    )
    args = parser.parse_args(argv)
    if args.cold_run:
        print(f"recorded {record_cold_run(Path(args.cold_run), root, args.note, args.wall_s)}")
    if args.filled_run:
        print(f"recorded {record_cold_run(Path(args.filled_run), root, args.note, args.wall_s, FILLED_RUN)}")
    (root / "figures" / "README.md").write_text(gallery(root) + "\n")
    try:
        replace_section(root / "README.md", "suite-table", readme_table(root))
        replace_section(root / "README.md", "figures-time", figures_time(root))
        replace_section(root / "README.md", "shipped-model", shipped_model_section(root))
        replace_section(root / "README.md", "claims-tally", claims_tally(root))
    except InputError as error:
        print(error, file=sys.stderr)
        return 1
    print("wrote figures/README.md and the suite table, shipped-model numbers and claims tally of README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
