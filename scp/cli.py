"""Command line: ``scp eval``, ``scp train``, ``scp prune``, ``scp convert-checkpoint``, ``scp ship`` (a trained run
into ``models/``, with its card) and ``scp run`` (notebooks; also ``python -m scp``).

Bad input (an :class:`~scp.errors.SCPError` or an argparse error) is one line on stderr and exit code 2, never a
traceback; anything else is a bug: its traceback and exit code 1.  Ctrl-C is one line saying what was saved
(exit code 130).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from pathlib import Path

from scp.errors import InputError, SCPError, format_warning
from scp.pruning import methods
from scp.suite.cli_args import add_subparser, check_names

# The names the options offer, written out so that building the parser (``--help``, a usage error) imports no torch;
# tests/test_cli_speed.py keeps each equal to the library's own: scp.core.adaptive.BOUNDS, scp.data.features.STRUCTURAL
# and FEATURES, scp.models.config.MODELS and the names of its PRESETS, scp.models.value_net.QUERY_MODES.
BOUNDS = ("bernstein", "hoeffding", "student")
STRUCTURAL = ("pos_inv", "first", "para_bm25z", "para_cos_z", "title_q", "names_title", "title_named")
FEATURES = ("cos", "bm25z", "cos_z", *STRUCTURAL)
MODELS = ("deepsets", "convex", "pointwise", "context", "context-pointwise")
PRESETS = ("paper", "best", "pointwise", "structure", "structure-pointwise")
QUERY_MODES = ("member", "product", "concat", "product_concat")


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``scp eval: error: …`` and exit code 2 (no usage block)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer ≥ 1, got {value}")
    return value


def _check_folders_of(out: Path, option: str = "--out") -> None:
    """``option``'s path can be created: none of the folders above it is a regular file."""
    from scp.io import file_above

    blocker = file_above(out)
    if blocker is not None:
        raise InputError(f"{option} {out}: its folder {blocker} is a file, so nothing can be written under it")


def _data_files(names, data) -> list[tuple[str, Path]]:
    """The local files the datasets ``names`` may be read from (``--data``: a file, or a folder holding each
    dataset's file; then ``$SCP_DATA_DIR``'s), named as a message names them."""
    from scp.data.datasets import _ALIASES, DATA_DIR_ENV, DATASETS, _find_in_dir

    if data and Path(data).is_file():
        return [("--data", Path(data))]
    found = []
    for option, folder in (("--data", data), (f"${DATA_DIR_ENV}'s", os.environ.get(DATA_DIR_ENV))):
        for name in names if folder and Path(folder).is_dir() else ():
            key = _ALIASES.get(str(name).lower(), str(name).lower())
            path = _find_in_dir(Path(folder), DATASETS[key]) if key in DATASETS else None
            if path is not None:
                found.append((f"{option} {key} data file", path))
    return found


def _checkpoint_files(checkpoint) -> list[tuple[str, Path]]:
    """A checkpoint and the model card beside it (``NAME.json``, read when it is there)."""
    if not checkpoint:
        return []
    return [
        ("--checkpoint", Path(checkpoint)),
        ("the model card of --checkpoint", Path(checkpoint).with_suffix(".json")),
    ]


def _eval(args) -> int:
    from scp.io import check_output_path
    from scp.overwrite import refuse_inputs_as_outputs
    from scp.pruning.evaluation import format_result, run_eval

    split = args.split or ("all" if args.data else "test")
    out = Path(args.out or f"runs/eval_{args.dataset}_{args.method}_{split}.json")
    check_output_path(out, "--out")  # a folder, a link, /dev/null, a pipe: refused before any work
    # nor a file it reads: the data, the checkpoint or its card
    refuse_inputs_as_outputs(
        [("--out", out)], _data_files([args.dataset], args.data) + _checkpoint_files(args.checkpoint)
    )
    adaptive = None
    if args.adaptive:
        adaptive = dict(
            delta=args.delta, max_permutations=args.max_permutations, tolerance=args.tolerance, bound=args.bound
        )
    elif (args.delta, args.max_permutations, args.tolerance, args.bound) != (None, None, None, None):
        raise InputError("--delta, --max-permutations, --tolerance and --bound go with --adaptive")
    if adaptive is not None:
        adaptive = {k: v for k, v in adaptive.items() if v is not None}
    result = run_eval(
        args.dataset,
        args.method,
        data=args.data,
        split=split,
        units=args.units,
        checkpoint=args.checkpoint,
        keep_ratios=args.keep,
        limit=args.limit,
        out=str(out),
        n_permutations=args.permutations or (16 if args.adaptive else 50),
        seed=args.seed,
        adaptive=adaptive,
        control_variate=args.control_variate,
        estimator=args.estimator,
        thresholds=args.threshold or (),
        target_recalls=args.target_recall or (),
        value_fractions=args.value_fraction or (),
    )
    print(format_result(result))
    print(f"record written to {out}")
    return 0 if result["status"] == "ok" else 3


#: The files of a trained run's folder (``scp train --out``): a folder holding any of them holds a run.
RUN_FILES = ("best.safetensors", "last.safetensors", "config.json", "best.pt", "last.pt")


def _train(args) -> int:
    from scp.io import check_output_path
    from scp.models.config import config_from_preset
    from scp.overwrite import refuse_inputs_as_outputs
    from scp.training.runs import run

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; give a folder for best.safetensors, last.safetensors and config.json")
    _check_folders_of(out)
    for name in ("best.safetensors", "last.safetensors", "config.json"):
        check_output_path(out / name, "--out")  # each one a regular file of the user's, or new
    if args.resume and args.force:
        raise InputError("--resume continues the run in --out and --force replaces it: give one of them")
    existing = [name for name in RUN_FILES if (out / name).exists()]
    if existing and not (args.resume or args.force):
        raise InputError(
            f"--out {out} holds a trained run ({', '.join(existing)}): continue it with --resume, replace it with "
            "--force, or give another folder"
        )
    if args.resume:
        if not (out / "last.safetensors").is_file():
            raise InputError(
                f"--resume: no checkpoint {out / 'last.safetensors'} to continue from (drop --resume to start there)"
            )
        from scp.models.factory import RESUME_ENTRIES, read_checkpoint

        # unreadable, altered or malformed: one sentence now, before any data are loaded
        read_checkpoint(out / "last.safetensors", RESUME_ENTRIES)
    overrides = dict(
        datasets=tuple(args.datasets) if args.datasets else None,
        val_dataset=args.val_dataset,
        unit_repr=args.units,
        embedder=args.embedder,
        model=args.model,
        query_mode=args.query_mode,
        features=tuple(args.features) if args.features is not None else None,
        hidden=args.hidden,
        latent=args.latent,
        n_permutations=args.permutations,
        antithetic=args.antithetic or None,
        margin=args.margin,
        lr=args.lr,
        epochs=args.epochs,
        batch_size=args.batch_size,
        seed=args.seed,
        max_train_examples=args.max_train_examples,
        max_val_examples=args.max_val_examples,
    )
    config = config_from_preset(args.preset, **overrides)
    written = [("--out", out / name) for name in RUN_FILES]
    # the data are never among them (resuming reads last.safetensors, which it then replaces: that one is meant)
    refuse_inputs_as_outputs(written, _data_files((*config.datasets, config.val_dataset), args.data))
    if existing and args.force:
        for name in existing:
            (out / name).unlink()
        print(f"--force: removed the trained run in {out} ({', '.join(existing)}); training a new one there")
    print(config)
    result = run(config, out, data_path=args.data, resume=args.resume, progress=not args.quiet)
    print(
        f"best validation AUC {result.best_val_auc:.4f}; checkpoint {result.best_path}; "
        f"training time {result.seconds:.0f}s"
    )
    return 0


def _prune(args) -> int:
    from scp.pruning.corpus import prune_jsonl, prune_jsonl_ray

    common = dict(
        checkpoint=args.checkpoint,
        keep_ratio=args.keep_ratio,
        top_k=args.top_k,
        token_budget=args.token_budget,
        threshold=args.threshold,
        value_fraction=args.value_fraction,
        n_permutations=args.n_permutations,
        seed=args.seed,
        skip_bad=args.skip_bad,
        progress=not args.no_progress and sys.stderr.isatty(),
        heartbeat=not args.no_progress,  # a line every few seconds on a slow record, also into a log
    )
    ray_options = dict(
        num_workers=args.ray_workers,
        cpus_per_worker=args.ray_cpus,
        gpus_per_worker=args.ray_gpus,
        batch_size=args.batch_size,
    )
    if args.ray is None:
        given = [f"--{k}" for k, v in vars(args).items() if k.startswith(("ray_", "batch_")) and v is not None]
        if given:
            raise InputError(f"{', '.join(given).replace('_', '-')} only apply with --ray")
        summary = prune_jsonl(args.input, args.output, **common)
    else:
        defaults = dict(num_workers=1, cpus_per_worker=1, gpus_per_worker=0, batch_size=16)
        ray_options = {k: defaults[k] if v is None else v for k, v in ray_options.items()}
        summary = prune_jsonl_ray(args.input, args.output, address=args.ray or None, **ray_options, **common)
    print(summary.describe(), file=sys.stderr if summary.streamed else sys.stdout)  # stdout may be the records
    return 0


def _convert(args) -> int:
    from scp.io import check_output_path
    from scp.models.checkpoint import convert

    check_output_path(args.new, "the converted checkpoint")
    checksum = convert(args.old, args.new)
    print(f"wrote {args.new} (content checksum {checksum}, the same as {args.old}'s)")
    return 0


def _ship(args) -> int:
    from scp.training.ship import ship

    target = ship(args.run, args.name, args.chosen_by)
    print(f"shipped {args.run} as {target} with its card {target.with_suffix('.json')}; commit both")
    return 0


def non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number ≥ 0, got {text}")
    return value


def _run(args) -> int:
    """``scp run``: refuse unknown notebooks (the standard library alone), then load the runner and run the rest
    (:func:`scp.suite.runner._cli`)."""
    check_names(["all"] if args.all else args.names)
    from scp.experiments.plan import stage_priority, staged_configs
    from scp.suite.runner import _cli

    args.planner = staged_configs  # the models each notebook trains: the runner trains them first, into the store
    args.priority = stage_priority  # the paper's networks, then the longest trainings first
    return _cli(args)


def _saved_on_interrupt(args) -> str:
    """What an interrupted command leaves behind, in words."""
    if args.command == "train":
        last = Path(args.out) / "last.safetensors"
        if last.is_file():
            from scp.models.checkpoint import CheckpointError, load

            try:
                epoch = load(last).get("epoch", "?")
            except CheckpointError:
                return f"{last} cannot be read; start again without --resume"
            return f"epochs 1–{epoch} are saved in {last}; continue with --resume"
        return "no epoch had finished, nothing was saved (embeddings computed so far are cached)"
    if args.command == "eval":
        return "no record was written (embeddings computed so far are cached)"
    if args.command == "prune":
        from scp.pruning.corpus import is_stream

        if is_stream(args.output):
            return f"the records finished so far were written to {args.output} (a stream: no resume)"
        return f"the records finished so far are in {args.output}; rerun the same command to resume"
    return "executed notebooks so far are under runs/"


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand's options and handler (``func``); building it imports nothing heavy (no torch, numpy or
    YAML), so ``--help`` and a usage error answer at once."""
    rankers = methods.names(rankers=True)
    trained = [m for m in rankers if methods.get(m).needs_checkpoint]
    parser = Parser(prog="scp", description="Shapley Context Pruning")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    ev = sub.add_parser("eval", help="rank a dataset's units with a method; print AUC, R@keep, compression")
    ev.add_argument("--dataset", required=True, help="hotpotqa, 2wiki, musique, msmarco or fever")
    ev.add_argument("--method", required=True, help=", ".join(rankers))
    ev.add_argument("--data", help="a file in the dataset's original layout, or a data directory (else SCP_DATA_DIR)")
    ev.add_argument(
        "--split",
        choices=["train", "validation", "test", "all"],
        help="default: all with --data (your whole file), else test",
    )
    ev.add_argument(
        "--units", choices=["sentence", "title"], help="unit text (default: the checkpoint's, else sentence)"
    )
    ev.add_argument("--checkpoint", help=f"an `scp train` checkpoint (for {' / '.join(trained)})")
    ev.add_argument("--keep", type=float, nargs="+", default=[0.5], help="keep ratios for R@keep (default 0.5)")
    ev.add_argument(
        "--threshold",
        type=float,
        nargs="+",
        metavar="T",
        help="also keep, per query, the units scoring ≥ T (at least one): recall, compression and units kept",
    )
    ev.add_argument(
        "--target-recall",
        type=float,
        nargs="+",
        metavar="R",
        help="also calibrate a threshold on the validation split to mean recall R, then apply it to --split "
        "(the record's calibration says which threshold; give it to scp prune --threshold)",
    )
    ev.add_argument(
        "--value-fraction",
        type=float,
        nargs="+",
        metavar="A",
        help="scp / scp-loo with a set model: also keep, per query, the shortest prefix of the ranking whose "
        "network value v(S) reaches v(∅) + A·(v* − v(∅)), v* the best prefix value (v(N) for a monotone game)",
    )
    ev.add_argument("--limit", type=positive_int, help="only the first N examples (N ≥ 1)")
    ev.add_argument(
        "--permutations",
        type=positive_int,
        help="Monte-Carlo permutations M for scp (default 50; with --adaptive the first round's M, default 16)",
    )
    ev.add_argument(
        "--adaptive",
        action="store_true",
        help="scp: draw permutations in doubling rounds until the Top-K set (K = ⌈first --keep · n⌉) is "
        "certified with probability ≥ 1 − δ, or --max-permutations is reached",
    )
    ev.add_argument("--delta", type=float, help="with --adaptive: failure probability δ in (0, 1) (default 0.05)")
    ev.add_argument("--max-permutations", type=positive_int, help="with --adaptive: the largest M (default 1000)")
    ev.add_argument(
        "--tolerance",
        type=float,
        help="with --adaptive: stop once no kept/dropped swap can gain more than this (default 0: exact)",
    )
    ev.add_argument(
        "--bound",
        choices=BOUNDS,
        help="with --adaptive: the confidence interval; bernstein (default) and hoeffding are rigorous, "
        "student is the asymptotic (CLT) interval",
    )
    ev.add_argument(
        "--control-variate",
        choices=["position"],
        help="scp: subtract the unbiased position control variate from every Monte-Carlo marginal",
    )
    ev.add_argument(
        "--estimator",
        metavar="NAME",
        help="scp: the Shapley estimator, any registered name (scp.core.estimators.ESTIMATORS: "
        "monte_carlo (default), adaptive, exact, leave_one_out, …)",
    )
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--out", help="JSON record path (default runs/eval_<dataset>_<method>_<split>.json)")
    ev.set_defaults(func=_eval)

    tr = sub.add_parser("train", help="train a value network (or the pointwise control)")
    tr.add_argument("--preset", default="best", help=f"one of {', '.join(PRESETS)} (default best)")
    tr.add_argument("--out", required=True, help="output folder (best.safetensors, last.safetensors, config.json)")
    tr.add_argument("--data", help="data file or directory for a single dataset (else SCP_DATA_DIR)")
    tr.add_argument("--datasets", nargs="+", help="training datasets (their train splits are mixed)")
    tr.add_argument("--val-dataset", help="validation dataset (default: the first training dataset)")
    tr.add_argument("--units", choices=["sentence", "title"])
    tr.add_argument("--embedder")
    tr.add_argument("--model", choices=list(MODELS))
    tr.add_argument("--query-mode", choices=QUERY_MODES)
    tr.add_argument("--features", nargs="*", help=f"extra per-unit features: {', '.join(FEATURES)} (none: empty)")
    tr.add_argument("--hidden", type=positive_int)
    tr.add_argument("--latent", type=positive_int)
    tr.add_argument("--permutations", type=positive_int, help="Monte-Carlo permutations per training step")
    tr.add_argument("--antithetic", action="store_true")
    tr.add_argument("--margin", type=float)
    tr.add_argument("--lr", type=float)
    tr.add_argument("--epochs", type=positive_int)
    tr.add_argument("--batch-size", type=positive_int)
    tr.add_argument("--seed", type=int)
    tr.add_argument("--max-train-examples", type=positive_int, help="only the first N training examples")
    tr.add_argument("--max-val-examples", type=positive_int, help="only the first N validation examples")
    tr.add_argument(
        "--resume", action="store_true", help="continue from OUT/last.safetensors (an error if there is none)"
    )
    tr.add_argument(
        "--force",
        action="store_true",
        help="replace the trained run already in --out (without --resume or --force, such a folder is refused)",
    )
    tr.add_argument("--quiet", action="store_true")
    tr.set_defaults(func=_train)

    pr = sub.add_parser(
        "prune",
        help="prune every record of a JSONL corpus into a JSONL file (locally or on Ray)",
        description="Each input line: question (or query), sentences (+ titles) or text, optional id. "
        "Each output line: id, kept_indices, removed_indices, scores, kept_text, "
        "tokens_before, tokens_after, ratio. A bad record stops the job before anything "
        "is pruned (exit 2) unless --skip-bad; a rerun resumes after the records done "
        "and retries the error records.",
    )
    pr.add_argument(
        "--checkpoint", required=True, help="an `scp train` checkpoint, e.g. models/scp-hotpotqa-best.safetensors"
    )
    pr.add_argument("--input", required=True, help="JSONL file, one record per line")
    pr.add_argument(
        "--output",
        required=True,
        help="JSONL file to write; a rerun resumes it (same settings and input; error records are "
        "retried). An existing file scp prune did not write (no OUTPUT.settings.json beside it) is "
        "an error and left untouched. /dev/stdout, a pipe or a device: streamed, no resume, no "
        "settings file",
    )
    keep = pr.add_mutually_exclusive_group(required=True)
    keep.add_argument("--keep-ratio", type=float, metavar="R", help="keep the best ⌈r·n⌉ sentences, r in (0, 1]")
    keep.add_argument("--top-k", type=positive_int, metavar="K", help="keep the best K sentences")
    keep.add_argument(
        "--token-budget", type=int, metavar="T", help="keep the best sentences that fit in T regex-words tokens"
    )
    keep.add_argument(
        "--threshold",
        type=float,
        metavar="TAU",
        help="keep, per query, every sentence whose Shapley value is ≥ TAU (at least one); "
        "scp eval --target-recall calibrates TAU on validation",
    )
    keep.add_argument(
        "--value-fraction",
        type=float,
        metavar="A",
        help="keep, per query, the shortest prefix of the ranking whose network value reaches "
        "v(∅) + A·(v* − v(∅)), v* the best prefix value, A in (0, 1] (a set model only)",
    )
    pr.add_argument(
        "--n-permutations", type=positive_int, default=50, metavar="M", help="Monte-Carlo permutations M (default 50)"
    )
    pr.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the permutations (default 0)")
    pr.add_argument("--skip-bad", action="store_true", help="write {id, error} for a bad record and go on")
    pr.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (none either when not on a terminal) and no line every few seconds on a slow record",
    )
    pr.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run on Ray: connect to ADDRESS, or start a local instance when none is given",
    )
    pr.add_argument(
        "--ray-workers", type=positive_int, metavar="N", help="Ray actors, each loading the pruner once (default 1)"
    )
    pr.add_argument(
        "--ray-cpus", type=positive_int, metavar="C", help="CPUs (and torch threads) per Ray actor (default 1)"
    )
    pr.add_argument(
        "--ray-gpus", type=non_negative_float, metavar="G", help="GPUs per Ray actor (default 0; > 0: prune on GPU)"
    )
    pr.add_argument("--batch-size", type=positive_int, metavar="B", help="records per Ray batch (default 16)")
    pr.set_defaults(func=_prune)

    cv = sub.add_parser(
        "convert-checkpoint",
        help="rewrite a legacy .pt checkpoint as a .safetensors one (read safely: nothing in it is executed)",
    )
    cv.add_argument("old", help="the checkpoint to convert (legacy .pt or .safetensors)")
    cv.add_argument("new", help="the .safetensors file to write")
    cv.set_defaults(func=_convert)

    sh = sub.add_parser(
        "ship", help="copy a trained run's best.safetensors into models/ and write its card (the run, why, when)"
    )
    sh.add_argument("run", help="the trained run: runs/models/<run> or its best.safetensors")
    sh.add_argument("--as", dest="name", required=True, metavar="NAME", help="file stem under models/")
    sh.add_argument("--chosen-by", required=True, metavar="TEXT", help="the notebook and table that chose this run")
    sh.set_defaults(func=_ship)

    add_subparser(sub, _run)  # scp run NAME… | all [--smoke] [-p key=value …]
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand.  Exit codes: 0 done, 2 bad input (an :class:`SCPError`, an argparse error, or a file the
    system refused: one line), 3 evaluated with errors recorded, 130 interrupted, 1 a bug in scp (the traceback,
    then a line asking to report it).  A warning is one line: ``scp: warning: …``."""
    previous, warnings.formatwarning = warnings.formatwarning, format_warning
    try:
        return _command(argv)
    finally:
        warnings.formatwarning = previous


def _command(argv: list[str] | None) -> int:
    """Parse ``argv`` and run its subcommand (:func:`main`)."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SCPError, OSError) as error:  # bad input, or a file the system refused: one clear line, no traceback
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"scp {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"scp {args.command}: interrupted; {_saved_on_interrupt(args)}", file=sys.stderr)
        return 130
    except Exception:  # not the input's fault: keep the traceback, say it is ours
        traceback.print_exc()
        print(
            f"scp {args.command}: internal error: this is a bug in scp, not a problem with your input; please "
            "report it with the traceback above and the command you ran",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
