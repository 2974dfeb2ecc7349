#!/usr/bin/env bash
# The encoder benchmark: cora's transformer encoder against PyTorch CPU (padded, nested, sorted
# micro-batches) on the first batch of every dataset in ../shared/datasets, batch 32 and 128,
# 6 layers, 2 threads. Writes bench/results/encoder.md and encoder.png.
# Usage: bash bench/encoder.sh [encoder.py flags, e.g. --batch 32 --runs 1]
set -euo pipefail
cd "$(dirname "$0")/.."
CORA_BENCH_DEPS=1 bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)" --target transformer_encoder
# Debian's OpenBLAS 0.3.21 does not know newer Intel CPUs and falls back to its generic Prescott
# kernel (5x slower), which would make PyTorch's baseline look slow: pick the kernel by hand then.
core=$(/usr/bin/python3 -c 'import ctypes; l = ctypes.CDLL("libopenblas.so.0"); l.openblas_get_corename.restype = ctypes.c_char_p; print(l.openblas_get_corename().decode())' 2>/dev/null || echo unknown)
if [[ "$core" == "Prescott" ]]; then
  if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX; elif grep -q avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
  echo "OpenBLAS reported Prescott; running with OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
fi
# glibc maps every block above 32 MB afresh and unmaps it on free, so each call of a program
# that allocates large temporaries (cora's attention scores, PyTorch's padded ones) clears their
# pages again; keep freed memory for reuse in both (apps/common/heap.h, which the encoder calls).
export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2147483647
/usr/bin/python3 bench/encoder.py build/apps/transformer/transformer_encoder "$@"
