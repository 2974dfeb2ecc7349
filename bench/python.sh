#!/usr/bin/env bash
# The Python door's costs: a cached kernel called from Python (NumPy arrays, PyTorch tensors, an AOT
# library through cora.load_library) against the same call made in C++ (Kernel::time_ms), and the
# encoder as a PyTorch module (cora.torch.TransformerEncoder) against transformer_encoder, the C++
# program running the same AOT kernels, on the same batches of 32. Writes bench/results/python.md.
# No BLAS baseline is involved (both sides run cora's kernels), so OpenBLAS's kernel choice does not
# enter these ratios.
# Usage: bash bench/python.sh [--runs N] [--layers N]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)" --target cora_python transformer_encoder
# As bench/encoder.sh: glibc keeps freed memory for reuse in both programs (apps/common/heap.h).
export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2147483647
PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py build/apps/transformer/transformer_encoder "$@"
