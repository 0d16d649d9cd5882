"""Ablations from the command line: ``python -m scp.experiments.ablations GRID [GRID ...] [--out results/ablations]``.

Each row trains one configuration (``scp.training.loop``) and evaluates its best checkpoint on the HotpotQA test split
(M = 50 at evaluation), overall and by question type; rows already in the output table are not rerun, so an
interrupted sweep resumes.  ``baselines`` evaluates random / BM25 / MiniLM cosine on the same test examples,
on both unit representations; ``dataset_baselines`` does so on every shared dataset.  Grids: main, seeds, query_mode,
rho, units, features, permutations, convex,
cross_domain, mixture, baselines (``all`` runs every grid).
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from scp.errors import InputError
from scp.io import write_json
from scp.models.config import config_from_preset
from scp.models.factory import read_checkpoint
from scp.pruning.evaluation import run_eval
from scp.training.runs import run

TEST_DATASET = "hotpotqa"
ALL_DATASETS = ("hotpotqa", "2wiki", "musique", "msmarco", "fever")

# name -> (preset, overrides); 3M-parameter rows use 5 epochs and M = 20 in training (about 1 min per epoch here)
GRIDS: dict[str, dict[str, tuple[str, dict]]] = {
    "main": {"best": ("best", {}), "pointwise": ("pointwise", {})},
    "seeds": {f"{preset}-seed{seed}": (preset, dict(seed=seed)) for preset in ("best", "pointwise") for seed in (1, 2)},
    "query_mode": {
        f"paper-{mode}": ("paper", dict(query_mode=mode, epochs=5, n_permutations=20))
        for mode in ("member", "product", "concat", "product_concat")
    },
    "rho": {
        "best-no-skip": ("best", dict(skip=False)),
        "best-clip-output": ("best", dict(output="clip")),
        "best-margin0.15": ("best", dict(margin=0.15)),
        "best-no-skip-margin0.15": ("best", dict(skip=False, margin=0.15)),
    },
    "units": {
        "best-sentence-units": ("best", dict(unit_repr="sentence")),
        "pointwise-sentence-units": ("pointwise", dict(unit_repr="sentence")),
    },
    "features": {
        "best-no-extra-features": ("best", dict(features=())),
        "pointwise-no-extra-features": ("pointwise", dict(features=())),
    }
    | {
        f"{p}-no-extra-features-seed{seed}": (p, dict(features=(), seed=seed))
        for p in ("best", "pointwise")
        for seed in (1, 2)
    },
    "permutations": {f"best-M{m}": ("best", dict(n_permutations=m)) for m in (4, 50)}
    | {"best-M20-antithetic": ("best", dict(antithetic=True))},
    "convex": {"best-convex": ("best", dict(model="convex", skip=False))},
    "cross_domain": {
        f"{p}-train-{d}": (p, dict(datasets=(d,), val_dataset=d))
        for d in ("msmarco", "fever")
        for p in ("best", "pointwise")
    },
    "mixture": {
        f"{p}-mixture": (p, dict(datasets=ALL_DATASETS, val_dataset="hotpotqa")) for p in ("best", "pointwise")
    },
}

COLUMNS = [
    "name",
    "preset",
    "overrides",
    "n_params",
    "train_seconds",
    "best_val_auc",
    "test_auc",
    "test_auc_ci_low",
    "test_auc_ci_high",
    "test_recall@0.5",
    "test_compression@0.5",
    "bridge_auc",
    "comparison_auc",
    "n_test",
    "status",
    "reason",
]


def result_row(name: str, result: dict, **extra) -> dict:
    row = {"name": name, **extra, "status": result["status"], "reason": result.get("reason", "")}
    if result["status"] == "ok":
        by_type = result.get("by_type", {})
        row.update(
            test_auc=result["auc"]["mean"],
            test_auc_ci_low=result["auc"]["ci"][0],
            test_auc_ci_high=result["auc"]["ci"][1],
            n_test=result["auc"]["n_used"],
            **{
                "test_recall@0.5": result["recall@0.5"]["mean"],
                "test_compression@0.5": result["compression@0.5"]["mean"],
            },
            bridge_auc=by_type.get("bridge", {}).get("auc", {}).get("mean"),
            comparison_auc=by_type.get("comparison", {}).get("auc", {}).get("mean"),
        )
    return row


def run_row(name: str, preset: str, overrides: dict, out: Path) -> dict:
    config = config_from_preset(preset, **overrides)
    trained = run(config, out / "runs" / name, progress=False)
    result = run_eval(
        TEST_DATASET, "scp", split="test", checkpoint=str(trained.best_path), out=str(out / "evals" / f"{name}.json")
    )
    n_params = read_checkpoint(trained.best_path, ("n_params",))["n_params"]
    return result_row(
        name,
        result,
        preset=preset,
        overrides=json.dumps(overrides, default=list),
        n_params=n_params,
        train_seconds=round(trained.seconds, 1),
        best_val_auc=trained.best_val_auc,
    )


def baseline_rows(out: Path) -> dict[str, dict]:
    rows = {}
    for units in ("sentence", "title"):
        for method in ("random", "bm25", "cosine"):
            name = f"{method}-{units}-units"
            result = run_eval(TEST_DATASET, method, split="test", units=units, out=str(out / "evals" / f"{name}.json"))
            rows[name] = result_row(name, result, preset="baseline", overrides=json.dumps({"units": units}))
    return rows


def dataset_baselines(out: Path) -> None:
    """random / BM25 / MiniLM cosine on every shared dataset (all examples), both unit representations."""
    rows = []
    for dataset in ALL_DATASETS:
        for units in ("sentence", "title"):
            for method in ("random", "bm25", "cosine"):
                result = run_eval(dataset, method, split="all", units=units)
                row = result_row(f"{method}-{units}-units", result)
                rows.append(
                    {
                        "dataset": dataset,
                        "units": units,
                        "method": method,
                        **{
                            k: row.get(k)
                            for k in (
                                "test_auc",
                                "test_auc_ci_low",
                                "test_auc_ci_high",
                                "test_recall@0.5",
                                "test_compression@0.5",
                                "n_test",
                            )
                        },
                        "n_excluded": result["auc"]["n_excluded"] if result["status"] == "ok" else None,
                    }
                )
    write_json(rows, out / "dataset_baselines.json")
    with open(out / "dataset_baselines.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def compare_groups(out: Path, group_a: list[str], group_b: list[str], n_boot: int = 2000) -> dict:
    """Paired comparison on the same test examples: per example, the mean AUC over the runs of each group
    (e.g. seeds), then the bootstrap CI of the mean difference A − B, overall and by question type."""
    from scp.core.metrics import aggregate

    def per_example(names):
        runs = [json.loads((out / "evals" / f"{n}.json").read_text())["per_example"] for n in names]
        return {row["id"]: (sum(r[i]["auc"] for r in runs) / len(runs), row["type"]) for i, row in enumerate(runs[0])}

    a, b = per_example(group_a), per_example(group_b)
    if set(a) != set(b):
        raise InputError("the two groups were evaluated on different examples")
    result = {}
    for label in ["all", *sorted({t for _, t in a.values() if t})]:
        ids = [i for i in a if label == "all" or a[i][1] == label]
        agg = aggregate([a[i][0] - b[i][0] for i in ids], n_boot=n_boot, seed=0)
        result[label] = {"mean_difference": agg.mean, "ci": [agg.ci_low, agg.ci_high], "n": agg.n_used}
        print(
            f"{'+'.join(group_a)} − {'+'.join(group_b)} [{label}]: {agg.mean:+.4f} "
            f"(95% CI {agg.ci_low:+.4f}, {agg.ci_high:+.4f}; n = {agg.n_used})"
        )
    return result


def load_table(path: Path) -> dict[str, dict]:
    return {r["name"]: r for r in json.loads(path.read_text())} if path.is_file() else {}


def write_table(rows: dict[str, dict], out: Path) -> None:
    write_json(list(rows.values()), out / "ablations.json")
    tmp = out / ".ablations.csv.tmp"
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows.values())
    tmp.replace(out / "ablations.csv")
    (out / "ablations.md").write_text(markdown_table(rows.values()))


def markdown_table(rows) -> str:
    """The ablation table for reading: 4-decimal AUCs, CI, R@0.5, AUC by question type, training time."""

    def f(x, fmt="{:.4f}"):
        return fmt.format(x) if isinstance(x, (int, float)) else "-"

    lines = [
        "| run | params | train s | val AUC | test AUC [95% CI] | R@0.5 | bridge | comparison | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ci = f"[{f(r.get('test_auc_ci_low'), '{:.3f}')}, {f(r.get('test_auc_ci_high'), '{:.3f}')}]"
        lines.append(
            f"| {r['name']} | {f(r.get('n_params'), '{:,}')} | {f(r.get('train_seconds'), '{:.0f}')} | "
            f"{f(r.get('best_val_auc'))} | {f(r.get('test_auc'))} {ci} | {f(r.get('test_recall@0.5'))} | "
            f"{f(r.get('bridge_auc'))} | {f(r.get('comparison_auc'))} | "
            f"{r.get('overrides', '')}{' ' + r['status'] + ': ' + r['reason'] if r.get('status') != 'ok' else ''} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scp.experiments.ablations", description=__doc__.splitlines()[0])
    known = sorted(GRIDS) + ["baselines", "dataset_baselines", "all"]
    parser.add_argument("grids", nargs="*", help=f"one or more of {known}")
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("A,A2", "B,B2"),
        help="paired test-AUC difference of two groups of evaluated rows (comma-separated names)",
    )
    parser.add_argument("--out", default="results/ablations", type=Path)
    parser.add_argument("--rerun", action="store_true", help="rerun rows already in the table")
    args = parser.parse_args(argv)
    if args.compare:
        group_a, group_b = (c.split(",") for c in args.compare)
        name = f"compare_{group_a[0]}_vs_{group_b[0]}.json"
        write_json(compare_groups(args.out, group_a, group_b), args.out / name)
        return 0
    if not args.grids or set(args.grids) - set(known):
        parser.error(f"name grids from {known} (unknown: {sorted(set(args.grids) - set(known))}) or use --compare")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = load_table(args.out / "ablations.json")
    grids = ["baselines", *GRIDS] if "all" in args.grids else args.grids
    skipped = []
    for grid in grids:
        if grid == "dataset_baselines":
            print("[dataset_baselines] evaluating random / BM25 / cosine on every dataset ...", flush=True)
            dataset_baselines(args.out)
            continue
        if grid == "baselines":
            print("[baselines] evaluating random / BM25 / cosine on the HotpotQA test split ...", flush=True)
            rows.update(baseline_rows(args.out))
            write_table(rows, args.out)
            continue
        for name, (preset, overrides) in GRIDS[grid].items():
            if name in rows and not args.rerun:
                skipped.append(name)
                print(f"[{grid}] {name}: already in {args.out / 'ablations.json'}, not retrained", flush=True)
                continue
            print(f"[{grid}] {name}: training ...", flush=True)
            rows[name] = run_row(name, preset, overrides, args.out)
            write_table(rows, args.out)
            r = rows[name]
            print(
                f"[{grid}] {name}: val AUC {r['best_val_auc']:.4f}, test AUC {r.get('test_auc', float('nan')):.4f} "
                f"({r['train_seconds']:.0f}s)",
                flush=True,
            )
    if skipped:
        print(
            f"{len(skipped)} trained row(s) were already in the table and were kept as they are; "
            "pass --rerun to retrain them",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
