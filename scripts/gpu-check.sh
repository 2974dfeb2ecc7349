#!/usr/bin/env bash
# Runs inside a folder made by scripts/gpu-bundle.sh, on a GPU machine (or, with --cpu-only, on any):
#   - the GPU schedule tests: lowering, the device code run emulated on the CPU, NVRTC for sm_80/sm_90
#     (correctness_tests "[gpu]"), which need no GPU;
#   - the device tests (gpu_tests): random GPU schedules, a shared-memory GEMM, a float16 GEMM and
#     tensor-core (mma.sync) GEMM and vgemm, convolutions over active tiles (fp32, float16) run on
#     the GPU against the reference (exit 77 = no device: skipped);
#   - the same device tests on CPU threads (the CUDA source run with a fiber per CUDA thread);
#   - the apps with --device cuda: trmm 4096, vgemm on the dataset's shapes, ragged attention
#     (ragged against padded) on MNLI lengths, the transformer encoder (GPU schedules, fp32 and
#     fp16) on MNLI and RACE batches of 32, each checked against its double-precision reference, the
#     pruned feed-forward block (block-sparse layers) on MNLI;
#   - the GPU benchmark (cora_gpu_bench: trmm and vgemm against cuBLAS, vgemm and a square GEMM on
#     tensor cores against cublasGemmEx, block-sparse layers against dense cublasSgemm), its schedules emulated
#     first; its table is appended to the report; then again with the k-panel copies not pipelined
#     (CORA_GPU_COPY_STAGES=1: the kernels before cp.async) and with 3 stages, and the SASS
#     instruction mix of all (sass-mix.py, cuobjdump).
# Writes results/gpu-check.md with what ran and how it ended. Exit status: non-zero if a test failed.
#   bash gpu-check.sh [--cpu-only | --gpu-only]
# --gpu-only leaves out the CPU part (emulated schedules, CPU threads), which gpu-bundle.sh already
# ran where the bundle was built, so that a lease's minutes go to the device. Each step is stopped
# after CORA_GPU_STEP_TIMEOUT seconds (default 600), and a step that would start after
# CORA_GPU_DEADLINE seconds (default: none) is listed as not run: a short lease then still returns
# the table of what did run.
set -uo pipefail
mode="${1:-}"
case "$mode" in
  "" | --cpu-only | --gpu-only) ;;
  *)
    echo "gpu-check: unknown option '$mode' (expected --cpu-only or --gpu-only)" >&2
    exit 2
    ;;
esac
step_timeout="${CORA_GPU_STEP_TIMEOUT:-600}"
deadline="${CORA_GPU_DEADLINE:-0}"
cd "$(dirname "$0")"
export LD_LIBRARY_PATH="$PWD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CORA_CACHE_DIR="$PWD/kernel-cache"
# The JIT compiles host code with the C++ compiler found here (g++ on the GPU machine).
export CORA_CXX="${CORA_CXX:-$(command -v clang++ || command -v g++ || echo c++)}"
mkdir -p results
report=results/gpu-check.md
{
  echo "# gpu-check ($(date -u +%Y-%m-%dT%H:%MZ), commit $(cat COMMIT 2>/dev/null || echo unknown))"
  echo
  echo "- host: $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), CORA_CXX=$CORA_CXX"
  if command -v nvidia-smi >/dev/null; then
    echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
  else
    echo "- GPU: none (nvidia-smi not found)"
  fi
  echo
  echo "| step | result | seconds |"
  echo "|---|---|---|"
} >"$report"
status=0
run() {
  local name="$1"
  shift
  local t0=$SECONDS rc
  if ((deadline > 0 && SECONDS > deadline)); then
    echo "| $name | not run (past the ${deadline} s deadline) | 0 |" >>"$report"
    echo "gpu-check: $name: not run (deadline)"
    return
  fi
  timeout -k 10 "$step_timeout" "$@" >"results/$name.log" 2>&1
  rc=$?
  local result="passed"
  if ((rc == 124 || rc == 137)); then
    result="TIMED OUT after ${step_timeout} s (see results/$name.log)"
    status=1
  elif ((rc == 77)); then
    result="skipped: $(grep -m1 SKIPPED "results/$name.log")"
  elif ((rc != 0)); then
    result="FAILED (exit $rc; see results/$name.log)"
    status=1
  fi
  echo "| $name | $result | $((SECONDS - t0)) |" >>"$report"
  echo "gpu-check: $name: $result"
}
# `run` with environment variables: run_env NAME VAR=VALUE... COMMAND...
run_env() {
  local name="$1"
  shift
  local vars=()
  while [[ $# -gt 0 && "$1" == *=* ]]; do
    vars+=("$1")
    shift
  done
  run "$name" env "${vars[@]}" "$@"
}
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib64" # cuBLAS for the benchmark
# A library the bundle lacks here shows up as one line, not as every step failing the same way.
missing=$(for b in ./correctness_tests ./gpu_tests ./cora_gpu_bench ./trmm ./vgemm ./ragged_attention ./transformer_encoder \
  ./pruned_ff; do
  [[ -x $b ]] && ldd "$b" | grep "not found" | sed "s|^|$b: |"
done)
[[ -n "$missing" ]] && { echo "- missing libraries: $(echo "$missing" | tr '\n' ';')" >>"$report"; echo "$missing"; }
if [[ "$mode" != "--gpu-only" ]]; then
  run gpu_schedules ./correctness_tests "[gpu]"
  CORA_TEST_CUDA_BACKEND=cpu-threads run device_tests_on_cpu_threads ./gpu_tests "~a GEMM with shared-memory panels*"
  [[ -x ./cora_gpu_bench ]] && run bench_schedules_emulated ./cora_gpu_bench --emulate
fi
if [[ "$mode" != "--cpu-only" ]]; then
  # One process per test case: a kernel fault poisons its CUDA context, and the cases after it
  # in the same process would fail for that reason alone.
  run device_apps_schedules ./gpu_tests -d yes "the apps' GPU schedules*"
  run device_random_schedules ./gpu_tests -d yes "random GPU schedules*"
  run device_smem_gemm ./gpu_tests -d yes "a GEMM with shared-memory panels*"
  run device_f16_gemm ./gpu_tests -d yes "a float16 GEMM*"
  run device_mma_gemm ./gpu_tests -d yes "a tensor-core GEMM*"
  run device_mma_vgemm ./gpu_tests -d yes "vgemm on tensor cores*"
  run device_shared_kernels ./gpu_tests -d yes "kernels sharing a device*"
  run device_spatial_conv ./gpu_tests -d yes "convolutions over active tiles*"
  # The encoder first (the newest GPU work; a short lease still measures it): ragged against
  # padded, per kernel (--profile synchronises after each), on the datasets' first 32 items; the
  # 6-layer model of the CoRA paper, fp32 and float16 (--fp16: token GEMMs on tensor cores).
  enc_apps=()
  lengths_mnli=()
  [[ -f mnli_train_lengths.txt ]] && lengths_mnli=(--lengths mnli_train_lengths.txt)
  for data in mnli race; do
    enc_lengths=()
    [[ -f ${data}_train_lengths.txt ]] && enc_lengths=(--lengths ${data}_train_lengths.txt)
    for precision in fp32 fp16; do
      flag=()
      [[ $precision == fp16 ]] && flag=(--fp16)
      run app_encoder_cuda_${data}_$precision ./transformer_encoder --device cuda --batch 32 --batches 1 --runs 5 \
        --profile "${flag[@]}" "${enc_lengths[@]}"
      enc_apps+=(app_encoder_cuda_${data}_$precision)
    done
  done
  # The pruned feed-forward block (BERT-base sizes, 32x32 blocks at 25%) on MNLI's first 32 items.
  run app_pruned_ff_cuda ./pruned_ff --device cuda --batch 32 --runs 10 "${lengths_mnli[@]}"
  enc_apps+=(app_pruned_ff_cuda)
  if [[ -x ./cora_gpu_bench ]]; then
    shapes=()
    [[ -f vbatch_gemm_data.txt ]] && shapes=(--shapes vbatch_gemm_data.txt)
    run gpu_bench ./cora_gpu_bench "${shapes[@]}" --out results/gpu-bench.md
    [[ -f results/gpu-bench.md ]] && cat results/gpu-bench.md >>"$report"
    # The default kernels' SASS (only they are in the cache so far): pipelined 16-byte copies
    # (LDGSTS: cp.async), little 64-bit integer work in the 32-bit GEMM kernels, and tensor-core
    # fragments by ldmatrix (LDSM) beside the HMMAs.
    if [[ -f sass-mix.py ]]; then
      run sass_mix_default python3 sass-mix.py "$CORA_CACHE_DIR" cora_trmm cora_vgemm \
        --require cora_vgemm_gpu_k0_i32:LDGSTS\>0 --require cora_vgemm_gpu_k0_i32:int64\<100 \
        --require cora_trmm_gpu_k0:LDGSTS\>0 --require cora_trmm_gpu_k0:int64\<50 \
        --require cora_vgemm_tensor_cores_k0:LDSM\>0 --require cora_vgemm_tensor_cores_k0:HMMA\>0
      [[ -f results/sass_mix_default.log ]] && {
        echo; echo "SASS of the default kernels (scripts/sass-mix.py, with its --require checks):"; echo;
        grep -E '^\||FAILED' results/sass_mix_default.log; } >>"$report"
    fi
    # The same kernels without this round's code generation, timed in the same lease: the k-panel
    # copies in their own phase between two barriers (gpu_copy_stages = 1: the kernels before
    # cp.async), then with 3 stages instead of the default 2.
    bench_variant() {
      local name="$1" title="$2"
      shift 2
      run_env "$name" "$@" ./cora_gpu_bench "${shapes[@]}" --out "results/$name.md"
      [[ -f "results/$name.md" ]] && { echo; echo "$title:"; echo; sed 1,2d "results/$name.md"; } >>"$report"
    }
    bench_variant gpu_bench_not_pipelined "Copies into shared memory not pipelined (the kernels before cp.async)" \
      CORA_GPU_COPY_STAGES=1
    bench_variant gpu_bench_3_stages "Copies into shared memory in 3 stages" \
      CORA_GPU_COPY_STAGES=3
    # The instruction mix of every variant's kernels, from their SASS.
    if [[ -f sass-mix.py ]]; then
      run sass_mix python3 sass-mix.py "$CORA_CACHE_DIR" cora_trmm cora_vgemm
      [[ -f results/sass_mix.log ]] && { echo; echo "SASS instruction mix of all variants (scripts/sass-mix.py):"; echo;
        grep '^|' results/sass_mix.log; } >>"$report"
    fi
  fi
  run app_trmm_cuda ./trmm --m 4096 --runs 10 --device cuda
  gemm_data=large
  [[ -f vbatch_gemm_data.txt ]] && gemm_data=vbatch_gemm_data.txt
  run app_vgemm_cuda ./vgemm --batch 64 --data "$gemm_data" --runs 10 --device cuda
  lengths=()
  [[ -f mnli_train_lengths.txt ]] && lengths=(--lengths mnli_train_lengths.txt)
  run app_attention_cuda ./ragged_attention --batch 128 --heads 8 --runs 10 --device cuda "${lengths[@]}"
  for app in app_trmm_cuda app_vgemm_cuda app_attention_cuda "${enc_apps[@]}"; do
    [[ -f "results/$app.log" ]] || continue
    { echo; echo "\`$app\`:"; echo '```'; tail -n 40 "results/$app.log"; echo '```'; } >>"$report"
  done
else
  run device_tests_without_gpu ./gpu_tests
fi
cat "$report"
exit $status
