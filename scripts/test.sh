#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds cora with its tests and runs them with ctest, then runs the
# kernel tests again with g++ as the JIT's compiler (libgomp instead of LLVM's libomp).
# `bash scripts/test.sh --sanitize` also runs scripts/sanitize.sh (ASan/UBSan/LSan + fuzzers).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCORA_BUILD_TESTS=ON
cmake --build build -j "$(nproc)"
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 1200

# The g++ stage: every kernel of the correctness and error tests compiled by g++ (its own cache key).
echo "== test.sh: correctness and error tests with CORA_CXX=g++"
CORA_CXX=g++ ctest --output-on-failure -j "$(nproc)" --timeout 1200 -R '^(correctness_tests|error_tests):'
cd ..
if [[ "${1:-}" == "--sanitize" ]]; then
  bash scripts/sanitize.sh
fi
