#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds cora with its tests and runs them with ctest, then runs the
# kernel tests again with g++ as the JIT's compiler (libgomp instead of LLVM's libomp).
#   bash scripts/test.sh             the README's test command (about 15 minutes on 2 cores)
#   bash scripts/test.sh --quick     the development loop: build, then every test but the long
#                                    differential ones and the g++ stage (a few minutes)
#   bash scripts/test.sh --sanitize  also scripts/sanitize.sh (ASan/UBSan/LSan + fuzzers; CI)
# Each stage's wall time goes to CORA_STAGE_LOG when it is set (.ci/run prints the table).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/stages.sh
mode=${1:-}
case "$mode" in
  "" | --quick | --sanitize) ;;
  *)
    echo "test.sh: unknown option '$mode' (expected --quick or --sanitize)" >&2
    exit 2
    ;;
esac
if (($# > 1)); then
  echo "test.sh: one option at most, got $*" >&2
  exit 2
fi

stage "install packages" bash scripts/install-deps.sh
# A compiler cache speeds up rebuilds where one is installed; the budget holds without it.
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# The benchmark programs are built too (never run here: they time things), so that none of them
# stops compiling unnoticed between the sessions that run them.
build_release() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCORA_BUILD_TESTS=ON -DCORA_BUILD_BENCH=ON "${launcher[@]}" &&
    cmake --build build -j "$(nproc)"
}
stage "build (release)" build_release
cd build

if [[ "$mode" == "--quick" ]]; then
  # The long tests stay for the full run: random schedules (CPU and emulated GPU), the GPU cases
  # on CPU threads, the installed package in a consumer project, and the PyTorch comparisons.
  stage "release ctest (quick)" ctest --output-on-failure -j "$(nproc)" --timeout 1200 \
    -E 'random (GPU )?schedules|^gpu_tests_on_cpu_threads:|^consumer_project$|vs_pytorch'
  exit 0
fi

stage "release ctest" ctest --output-on-failure -j "$(nproc)" --timeout 1200

# The g++ stage: the kernels of the correctness and error tests compiled by g++ (its own cache
# key, its own OpenMP runtime), the CUDA source on CPU threads included; 20% of the random
# schedules (the first of the same seeds: tests/common/trial_count.h), 116 of the 580 (and 8 of the
# 40 of the device test on CPU threads). This stage re-checks the kernels with another compiler and
# OpenMP runtime, which the first schedules of each test exercise as well as the rest; it ran 50%
# until a CI run passed 35 minutes, then 35% until one passed 50 minutes on a 2-core Zen 5
# (2026-11-28).
echo "== test.sh: correctness and error tests with CORA_CXX=g++"
stage "g++ stage (kernels by g++)" env CORA_CXX=g++ CORA_TEST_RANDOM_SCHEDULES=20 \
  ctest --output-on-failure -j "$(nproc)" --timeout 1200 -R '^(correctness_tests|error_tests|gpu_tests_on_cpu_threads):'
cd ..
if [[ "$mode" == "--sanitize" ]]; then
  bash scripts/sanitize.sh
fi
