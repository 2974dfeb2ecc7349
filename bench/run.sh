#!/usr/bin/env bash
# Builds and runs the benchmarks with 1 and 2 threads, then writes bench/results/: the raw
# Google Benchmark JSON per thread count, results.md (a table of GFLOP/s and ratios against
# cora) and results.png (the plot). Installs what it needs (Halide, matplotlib) on Debian.
# Each benchmark runs CORA_BENCH_REPETITIONS times (default 3; timings on a shared 2-core
# machine swing by 10-20% from run to run) and the tables use the median.
# Usage: bash bench/run.sh [extra Google Benchmark flags, e.g. --benchmark_filter=trmm]
set -euo pipefail
cd "$(dirname "$0")/.."
CORA_BENCH_DEPS=1 bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCORA_BUILD_BENCH=ON
cmake --build build -j "$(nproc)" --target cora_bench
source bench/common.sh
fair_openblas_core # the baselines' OpenBLAS kernel: the fastest correct one for this CPU
export CORA_OPENBLAS_CORE_NOTE="$core_note"
mkdir -p bench/results
for t in 1 2; do
  echo "== $t thread(s) =="
  CORA_NUM_THREADS=$t OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t HL_NUM_THREADS=$t \
    ./build/bench/cora_bench --benchmark_out="bench/results/threads$t.json" --benchmark_out_format=json \
    --benchmark_repetitions="${CORA_BENCH_REPETITIONS:-3}" --benchmark_display_aggregates_only=true "$@" \
    | tee "bench/results/threads$t.txt"
done
/usr/bin/python3 bench/report.py bench/results  # Debian's python, where python3-matplotlib lives
