"""Command line: ``scp eval`` and ``scp train`` (also ``python -m scp``)."""

from __future__ import annotations

import argparse
import sys


def _eval(args) -> int:
    from .evaluate import format_result, run_eval

    result = run_eval(args.dataset, args.method, data=args.data, split=args.split, units=args.units,
                      checkpoint=args.checkpoint, keep_ratios=args.keep, limit=args.limit,
                      out=args.out or f"results/eval_{args.dataset}_{args.method}_{args.split}.json",
                      n_permutations=args.permutations, seed=args.seed)
    print(format_result(result))
    return 0 if result["status"] == "ok" else 3


def _train(args) -> int:
    from .train import config_from_preset, run

    overrides = dict(datasets=tuple(args.datasets) if args.datasets else None, val_dataset=args.val_dataset,
                     unit_repr=args.units, embedder=args.embedder, model=args.model, query_mode=args.query_mode,
                     features=tuple(args.features) if args.features is not None else None, hidden=args.hidden,
                     latent=args.latent, n_permutations=args.permutations, antithetic=args.antithetic or None,
                     margin=args.margin, lr=args.lr, epochs=args.epochs, batch_size=args.batch_size, seed=args.seed,
                     max_train_examples=args.max_train_examples)
    config = config_from_preset(args.preset, **overrides)
    print(config)
    result = run(config, args.out, data_path=args.data, resume=args.resume, progress=not args.quiet)
    print(f"best validation AUC {result.best_val_auc:.4f}; checkpoint {result.best_path}; "
          f"training time {result.seconds:.0f}s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scp", description="Shapley Context Pruning")
    sub = parser.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("eval", help="rank a dataset's units with a method; print AUC, R@keep, compression")
    ev.add_argument("--dataset", required=True, help="hotpotqa, 2wiki, musique, msmarco or fever")
    ev.add_argument("--method", required=True,
                    help="random, bm25, cosine, cross-encoder, llmlingua2, provence, scp, scp-loo")
    ev.add_argument("--data", help="a file in the dataset's original layout, or a data directory (else SCP_DATA_DIR)")
    ev.add_argument("--split", default="test", help="train, validation, test or all (default test)")
    ev.add_argument("--units", choices=["sentence", "title"], help="unit text (default: the checkpoint's, else sentence)")
    ev.add_argument("--checkpoint", help="an `scp train` checkpoint (for scp / scp-loo)")
    ev.add_argument("--keep", type=float, nargs="+", default=[0.5], help="keep ratios for R@keep (default 0.5)")
    ev.add_argument("--limit", type=int, help="only the first N examples")
    ev.add_argument("--permutations", type=int, default=50, help="Monte-Carlo permutations M for scp (default 50)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--out", help="JSON record path (default results/eval_<dataset>_<method>_<split>.json)")
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
    tr.add_argument("--hidden", type=int)
    tr.add_argument("--latent", type=int)
    tr.add_argument("--permutations", type=int, help="Monte-Carlo permutations per training step")
    tr.add_argument("--antithetic", action="store_true")
    tr.add_argument("--margin", type=float)
    tr.add_argument("--lr", type=float)
    tr.add_argument("--epochs", type=int)
    tr.add_argument("--batch-size", type=int)
    tr.add_argument("--seed", type=int)
    tr.add_argument("--max-train-examples", type=int)
    tr.add_argument("--resume", action="store_true", help="continue from OUT/last.pt")
    tr.add_argument("--quiet", action="store_true")
    tr.set_defaults(func=_train)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .errors import SCPError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SCPError, ValueError, FileNotFoundError) as error:  # bad input: one clear line, no traceback
        print(f"scp {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
