#!/usr/bin/env bash
# The encoder benchmark: cora's transformer encoder against PyTorch CPU (padded, nested, sorted
# micro-batches) on the first batch of every dataset in ../shared/datasets, batch 32 and 128,
# 6 layers, 2 threads. Writes bench/results/encoder.md and encoder.png.
# Usage: bash bench/encoder.sh [encoder.py flags, e.g. --batch 32 --runs 1]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
CORA_BENCH_DEPS=1 bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)" --target transformer_encoder
fair_openblas_core # PyTorch's CPU GEMMs run on the same OpenBLAS: its fastest correct kernel
export CORA_OPENBLAS_CORE_NOTE="$core_note"
# glibc maps every block above 32 MB afresh and unmaps it on free, so each call of a program
# that allocates large temporaries (cora's attention scores, PyTorch's padded ones) clears their
# pages again; keep freed memory for reuse in both (apps/common/heap.h, which the encoder calls).
export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2147483647
/usr/bin/python3 bench/encoder.py build/apps/transformer/transformer_encoder "$@"
