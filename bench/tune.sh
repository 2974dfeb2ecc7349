#!/usr/bin/env bash
# Pipeline.tune against the default schedule on held-out sizes (bench/tune.py), beside OpenBLAS
# (NumPy's matmul) on its fastest correct kernel for this CPU (bench/common.sh).
# Writes bench/results/tune.md. Usage: bash bench/tune.sh [--runs N] [--datasets DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)" --target cora_python
fair_openblas_core
PYTHONPATH=build/python /usr/bin/python3 bench/tune.py "$@"
