#!/usr/bin/env bash
# The mixture-of-experts grouped GEMM from Python (bench/moe.py) against a per-expert loop of OpenBLAS
# sgemm calls (NumPy's matmul), OpenBLAS on its fastest correct kernel for this CPU (bench/common.sh).
# Writes bench/results/moe.md. Usage: bash bench/moe.sh [--runs N]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
run_python_bench moe.py "$@"
