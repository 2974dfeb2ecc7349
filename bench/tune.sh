#!/usr/bin/env bash
# Pipeline.tune against the default schedule on held-out sizes (bench/tune.py), beside OpenBLAS
# (NumPy's matmul) on its fastest correct kernel for this CPU (bench/common.sh).
# Writes bench/results/tune.md. Usage: bash bench/tune.sh [--runs N] [--datasets DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
run_python_bench tune.py "$@"
