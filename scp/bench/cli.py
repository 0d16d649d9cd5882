"""Benchmarks of the Shapley estimators: ``python -m scp.bench WHICH [--quick] [--threads N]``.

WHICH is one of ``estimator``, ``accuracy``, ``prefix``, ``long``, ``adaptive``, ``convexity``, ``structural``,
``certify``, ``training``, ``reader``, ``gpu``, ``report`` (each the module of that name, ``long``
:mod:`scp.bench.long_contexts`), ``endtoend`` (:mod:`scp.bench.e2e`: what a user waits for) and ``all``:
estimator, accuracy, prefix, long, adaptive and endtoend, then report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

from scp.bench.accuracy import accuracy
from scp.bench.adaptive import adaptive
from scp.bench.certify import certify
from scp.bench.common import RESULTS
from scp.bench.convexity import convexity
from scp.bench.estimator import estimator
from scp.bench.gpu import gpu
from scp.bench.long_contexts import long_contexts, long_worker
from scp.bench.prefix import prefix
from scp.bench.reader import reader
from scp.bench.report import report
from scp.bench.structural import structural
from scp.bench.training import training


def endtoend(argv: list[str]) -> int:
    try:
        from scp.bench import e2e as bench_e2e
    except ImportError as error:
        print(f"scp.bench endtoend: scp.bench.e2e is not available ({error})", file=sys.stderr)
        return 2
    return bench_e2e.main(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["endtoend"]:
        return endtoend(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m scp.bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "which",
        choices=[
            "estimator",
            "accuracy",
            "prefix",
            "long",
            "adaptive",
            "convexity",
            "structural",
            "certify",
            "training",
            "reader",
            "endtoend",
            "gpu",
            "all",
            "report",
            "long-worker",
        ],
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats, contexts and sizes (a smoke run)")
    parser.add_argument(
        "--threads", type=int, help="torch's threads and the BLAS libraries' numpy and scipy use (default: theirs)"
    )
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--m", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="gpu: the CPU stands in for CUDA at tiny sizes (tests the plumbing; never gpu.json)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="gpu: the folder the JSON is written to (default results/bench; a dry run: a new temporary folder)",
    )
    args = parser.parse_args(argv)
    if args.which != "gpu" and (args.dry_run or args.out):
        parser.error("--dry-run and --out belong to gpu")
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be ≥ 1, got {args.threads}")
        torch.set_num_threads(args.threads)
        threadpool_limits(args.threads)  # numpy's and scipy's BLAS (the peers' linear algebra) as many as torch
    if args.which == "long-worker":
        print(json.dumps(long_worker(args.n, args.m, args.repeats)))
        return 0
    if args.which == "gpu":
        if args.dry_run:
            import tempfile

            out = args.out or Path(tempfile.mkdtemp(prefix="scp-gpu-dry-"))
        else:
            out = args.out or RESULTS
        return gpu(out_dir=out, dry_run=args.dry_run)
    if args.which == "all":
        estimator(quick=args.quick)
        accuracy(quick=args.quick)
        prefix(quick=args.quick)
        long_contexts(quick=args.quick, threads=args.threads)
        adaptive(quick=args.quick)
        threads = ["--threads", str(args.threads)] if args.threads else []
        code = endtoend((["--quick"] if args.quick else []) + threads)
        report()
        return code
    {
        "estimator": lambda: estimator(quick=args.quick),
        "accuracy": lambda: accuracy(quick=args.quick),
        "prefix": lambda: prefix(quick=args.quick),
        "adaptive": lambda: adaptive(quick=args.quick),
        "long": lambda: long_contexts(quick=args.quick, threads=args.threads),
        "convexity": lambda: convexity(quick=args.quick),
        "structural": lambda: structural(quick=args.quick),
        "certify": lambda: certify(quick=args.quick),
        "training": lambda: training(quick=args.quick),
        "reader": lambda: reader(quick=args.quick),
        "report": report,
    }[args.which]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
