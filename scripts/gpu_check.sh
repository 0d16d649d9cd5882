#!/usr/bin/env bash
# GPU check in one command: the estimator benchmark and one training epoch on CUDA, the same tables as on CPU.
# Needs nothing beyond `make setup` (which reuses the invoking Python's torch, so run it with a CUDA build of torch:
# PYTHON=/path/to/python scripts/gpu_check.sh).  Exits non-zero with a message on a machine without a CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
make setup PYTHON="${PYTHON:-python3}"
exec .venv/bin/python -m scp.bench gpu "$@"
