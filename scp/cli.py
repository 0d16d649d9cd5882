"""Command line: ``scp eval``, ``scp train`` and ``scp run`` (notebooks; also ``python -m scp``).

Bad input is one line on stderr and exit code 2, never a traceback; Ctrl-C is one line saying what was saved
(exit code 130).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``scp eval: error: …`` and exit code 2 (no usage block)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer ≥ 1, got {value}")
    return value


def _eval(args) -> int:
    from .evaluate import format_result, run_eval

    split = args.split or ("all" if args.data else "test")
    out = Path(args.out or f"runs/eval_{args.dataset}_{args.method}_{split}.json")
    if out.is_dir():
        raise ValueError(f"--out {out} is a directory; give the path of the JSON record to write")
    result = run_eval(args.dataset, args.method, data=args.data, split=split, units=args.units,
                      checkpoint=args.checkpoint, keep_ratios=args.keep, limit=args.limit, out=str(out),
                      n_permutations=args.permutations, seed=args.seed)
    print(format_result(result))
    print(f"record written to {out}")
    return 0 if result["status"] == "ok" else 3


def _train(args) -> int:
    from .train import config_from_preset, run

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; give a folder for best.pt, last.pt and config.json")
    if args.resume:
        if not (out / "last.pt").is_file():
            raise ValueError(f"--resume: no checkpoint {out / 'last.pt'} to continue from (drop --resume to start there)")
        from .checkpoint import load

        load(out / "last.pt")  # unreadable or altered: one sentence now, before any data are loaded
    overrides = dict(datasets=tuple(args.datasets) if args.datasets else None, val_dataset=args.val_dataset,
                     unit_repr=args.units, embedder=args.embedder, model=args.model, query_mode=args.query_mode,
                     features=tuple(args.features) if args.features is not None else None, hidden=args.hidden,
                     latent=args.latent, n_permutations=args.permutations, antithetic=args.antithetic or None,
                     margin=args.margin, lr=args.lr, epochs=args.epochs, batch_size=args.batch_size, seed=args.seed,
                     max_train_examples=args.max_train_examples)
    config = config_from_preset(args.preset, **overrides)
    print(config)
    result = run(config, out, data_path=args.data, resume=args.resume, progress=not args.quiet)
    print(f"best validation AUC {result.best_val_auc:.4f}; checkpoint {result.best_path}; "
          f"training time {result.seconds:.0f}s")
    return 0


def _saved_on_interrupt(args) -> str:
    """What an interrupted command leaves behind, in words."""
    if args.command == "train":
        last = Path(args.out) / "last.pt"
        if last.is_file():
            from .checkpoint import CheckpointError, load

            try:
                epoch = load(last)["epoch"]
            except CheckpointError:
                return f"{last} cannot be read; start again without --resume"
            return f"epochs 1–{epoch} are saved in {last}; continue with --resume"
        return "no epoch had finished, nothing was saved (embeddings computed so far are cached)"
    if args.command == "eval":
        return "no record was written (embeddings computed so far are cached)"
    return "executed notebooks so far are under runs/"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="scp", description="Shapley Context Pruning")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    ev = sub.add_parser("eval", help="rank a dataset's units with a method; print AUC, R@keep, compression")
    ev.add_argument("--dataset", required=True, help="hotpotqa, 2wiki, musique, msmarco or fever")
    ev.add_argument("--method", required=True,
                    help="random, bm25, cosine, cross-encoder, llmlingua2, provence, scp, scp-loo")
    ev.add_argument("--data", help="a file in the dataset's original layout, or a data directory (else SCP_DATA_DIR)")
    ev.add_argument("--split", choices=["train", "validation", "test", "all"],
                    help="default: all with --data (your whole file), else test")
    ev.add_argument("--units", choices=["sentence", "title"], help="unit text (default: the checkpoint's, else sentence)")
    ev.add_argument("--checkpoint", help="an `scp train` checkpoint (for scp / scp-loo)")
    ev.add_argument("--keep", type=float, nargs="+", default=[0.5], help="keep ratios for R@keep (default 0.5)")
    ev.add_argument("--limit", type=positive_int, help="only the first N examples (N ≥ 1)")
    ev.add_argument("--permutations", type=positive_int, default=50, help="Monte-Carlo permutations M for scp")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--out", help="JSON record path (default runs/eval_<dataset>_<method>_<split>.json)")
    ev.set_defaults(func=_eval)

    tr = sub.add_parser("train", help="train a value network (or the pointwise control)")
    tr.add_argument("--preset", default="best", help="paper, best or pointwise (default best)")
    tr.add_argument("--out", required=True, help="output folder (best.pt, last.pt, config.json)")
    tr.add_argument("--data", help="data file or directory for a single dataset (else SCP_DATA_DIR)")
    tr.add_argument("--datasets", nargs="+", help="training datasets (their train splits are mixed)")
    tr.add_argument("--val-dataset", help="validation dataset (default: the first training dataset)")
    tr.add_argument("--units", choices=["sentence", "title"])
    tr.add_argument("--embedder")
    tr.add_argument("--model", choices=["deepsets", "convex", "pointwise"])
    tr.add_argument("--query-mode", choices=["member", "product", "concat", "product_concat"])
    tr.add_argument("--features", nargs="*", help="extra per-unit features: cos, bm25z, cos_z (none: empty)")
    tr.add_argument("--hidden", type=positive_int)
    tr.add_argument("--latent", type=positive_int)
    tr.add_argument("--permutations", type=positive_int, help="Monte-Carlo permutations per training step")
    tr.add_argument("--antithetic", action="store_true")
    tr.add_argument("--margin", type=float)
    tr.add_argument("--lr", type=float)
    tr.add_argument("--epochs", type=positive_int)
    tr.add_argument("--batch-size", type=positive_int)
    tr.add_argument("--seed", type=int)
    tr.add_argument("--max-train-examples", type=positive_int)
    tr.add_argument("--resume", action="store_true", help="continue from OUT/last.pt (an error if there is none)")
    tr.add_argument("--quiet", action="store_true")
    tr.set_defaults(func=_train)

    from . import runner

    runner.add_subparser(sub)  # scp run NAME… | all [--smoke] [-p key=value …]
    return parser


def main(argv: list[str] | None = None) -> int:
    from .errors import SCPError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SCPError, ValueError, OSError) as error:  # bad input: one clear line, no traceback
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"scp {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"scp {args.command}: interrupted; {_saved_on_interrupt(args)}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
