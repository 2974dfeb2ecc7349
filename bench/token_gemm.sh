#!/usr/bin/env bash
# The encoder's token GEMMs against cblas_sgemm on the same tokens (bench/token_gemm.cpp): builds the
# target cora_token_gemm, runs it with 2 threads at batch 32 and 128, for the default model and
# BERT-base, and writes bench/results/token_gemm.md. When OpenBLAS reports its generic Prescott
# kernel on an AVX-512 (AVX2) CPU, the whole run uses OPENBLAS_CORETYPE=SkylakeX (Haswell), so the
# baseline is fair, and the results say so.
# Environment: CORA_BENCH_BUILD_DIR (default build-bench), CORA_BUILD_JOBS (default 1), CORA_BENCH_RUNS
# (default 5: the best of that many calls, three rounds per library).
# Usage: bash bench/token_gemm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
build=${CORA_BENCH_BUILD_DIR:-build-bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCORA_BUILD_BENCH=ON -DCORA_BUILD_TESTS=OFF >/dev/null
nice -n 19 cmake --build "$build" --target cora_token_gemm -j "${CORA_BUILD_JOBS:-1}"

fair_openblas_core

mkdir -p bench/results
out=bench/results/token_gemm.md
parts=$(mktemp -d)
trap 'rm -rf "$parts"' EXIT
for model in default bert; do
  for b in 32 128; do
    flags=(--batch="$b" --runs="${CORA_BENCH_RUNS:-5}" --markdown="$parts/$model-$b.md")
    [ "$model" = bert ] && flags+=(--bert)
    OMP_NUM_THREADS=2 CORA_NUM_THREADS=2 "./$build/bench/cora_token_gemm" "${flags[@]}"
  done
done

describe_machine
{
  echo "# The encoder's token GEMMs vs cblas_sgemm"
  echo
  echo "Written by \`bash bench/token_gemm.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'); CPU: $cpu ($(nproc) cores;" \
    "${isa% }); cora $commit; 2 threads; $core_note."
  echo
  echo "Each kernel of apps/transformer (the AOT library the encoder links: its AVX-512 or AVX2 variant, whichever" \
    "this CPU runs) on the first batch of each dataset, against \`cblas_sgemm\` on exactly the useful tokens" \
    "followed by the same epilogue in one OpenMP pass (bias; ReLU for ff1; bias + residual + LayerNorm for" \
    "out_norm and ff2_norm). ratio = (sgemm + epilogue) / cora: above 1, cora is faster. cora computes the" \
    "padded token rows too (the total padded to 48). Times: the best of ${CORA_BENCH_RUNS:-5} calls, three" \
    "rounds per library."
  for model in default bert; do
    for b in 32 128; do
      echo
      if [ "$model" = bert ]; then echo "## BERT-base (768, 12 heads, 3072), batch $b"; else echo "## hidden 512, 8 heads, ff 2048, batch $b"; fi
      echo
      cat "$parts/$model-$b.md"
    done
  done
} > "$out"
echo "wrote $out"
