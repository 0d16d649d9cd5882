#!/usr/bin/env bash
# GPU check in one command (under 5 minutes): the fast path on CUDA equal to the CPU on fixed seeds, then, CPU and
# CUDA in the same run, its contexts/s at n ∈ {41, 100, 500, 2000} × M ∈ {50, 1000}, peak device memory, the
# device's measured GEMM rate on the fast path's shapes, one training epoch and SmolLM2 prefill tokens/s; writes
# results/bench/gpu.json and regenerates BENCHMARKS.md's GPU block from it.
# Needs nothing beyond `make setup`, which reuses the invoking Python's torch: run it with a CUDA build of torch
# (PYTHON=/path/to/python scripts/gpu_check.sh).  Exits 1 with a message on a machine without a CUDA device,
# 2 if the CUDA values differ from the CPU's beyond the stated tolerance, 3 if a section could not run.
# SCP_SKIP_SETUP=1 skips `make setup` (an environment with the project importable already).
# `scripts/gpu_check.sh --dry-run` runs the same script with the CPU standing in (tiny sizes, a temporary folder).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
if [ "${SCP_SKIP_SETUP:-0}" = 1 ]; then PY="${PYTHON:-python3}"; else make setup PYTHON="${PYTHON:-python3}"; fi
export PYTHONUNBUFFERED=1
status=0
"$PY" -m scp.bench gpu "$@" || status=$?
case " $* " in *" --dry-run "*) ;; *) if [ "$status" != 1 ]; then "$PY" -m scp.bench report; fi ;; esac
exit $status
