#!/usr/bin/env bash
# Block-sparse linear layers against dense sgemm (OpenBLAS) and oneDNN, and sparsity propagation on
# a pruned FF block (bench/block_sparse.cpp): builds the target cora_block_sparse, runs it with 2
# threads and writes bench/results/block_sparse.md. When OpenBLAS reports its generic Prescott
# kernel on an AVX-512 (AVX2) CPU, the whole run uses OPENBLAS_CORETYPE=SkylakeX (Haswell), so the
# dense baseline is fair, and the results say so.
# Environment: CORA_BENCH_BUILD_DIR (default build-bench), CORA_BUILD_JOBS (default 1), CORA_BENCH_RUNS
# (default 3: the best of that many timed runs per variant).
# Usage: bash bench/block_sparse.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
CORA_BENCH_DEPS=1 bash scripts/install-deps.sh # oneDNN, the second dense baseline
build_bench_targets cora_block_sparse

fair_openblas_core

# PyTorch's CPU BSR matmul, when this PyTorch has one (Debian's 1.13 is built without MKL: none).
torch_bsr=$(/usr/bin/python3 - <<'PY' 2>/dev/null || echo "PyTorch not importable"
import warnings
warnings.filterwarnings("ignore")
import torch
w = torch.randn(64, 64)
x = torch.randn(8, 64)
try:
    torch.nn.functional.linear(x, w.to_sparse_bsr((32, 32)))
    print(f"available (PyTorch {torch.__version__})")
except Exception as e:
    print(f"not available in PyTorch {torch.__version__}: {str(e).splitlines()[0]}")
PY
)
echo "PyTorch CPU BSR matmul: $torch_bsr"

mkdir -p bench/results
out=bench/results/block_sparse.md
table=$(mktemp)
trap 'rm -f "$table"' EXIT
OMP_NUM_THREADS=2 CORA_NUM_THREADS=2 "./$build/bench/cora_block_sparse" --markdown="$table" \
  --runs="${CORA_BENCH_RUNS:-3}" "$@"

describe_machine
{
  echo "# Block-sparse linear layers vs dense GEMM"
  echo
  echo "Written by \`bash bench/block_sparse.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'); CPU: $cpu ($(nproc) cores;" \
    "${isa% }); cora $commit; 2 threads; $core_note."
  echo
  echo "Y = X W^T over packed ragged tokens with W [out, in] pruned to blocks (a random block mask; the" \
    "density of the weight in parentheses). Baselines on the same tokens and the same weight with its zero" \
    "blocks materialised: \`cblas_sgemm\` and oneDNN's matmul. Times are the best of ${CORA_BENCH_RUNS:-3}" \
    "runs; ratios (dense time / cora time, above 1: cora faster) come from one run of the program." \
    "A shape's dense baselines do the same work at every block size and density, so its sgemm and oneDNN" \
    "times are the best over all of that shape's timings (8 per baseline); the table after the first lists" \
    "the best and the worst of them (the machine's run-to-run noise on the same work). That favours the" \
    "baselines: cora's times are one best of ${CORA_BENCH_RUNS:-3} each." \
    "The target column compares with the faster dense baseline. PyTorch CPU BSR matmul: $torch_bsr."
  echo
  cat "$table"
} > "$out"
echo "wrote $out"
