#!/usr/bin/env bash
# The sanitizer stage: cora, its tests and apps built by clang with AddressSanitizer,
# UndefinedBehaviorSanitizer and LeakSanitizer (every JIT and AOT kernel compiled with them too, at
# -O1: src/CMakeLists.txt says why), the whole ctest suite run under them, then each libFuzzer
# target for CORA_FUZZ_SECONDS (15). Runs after scripts/test.sh has installed the packages
# (CI: .ci/run). Each stage's wall time goes to CORA_STAGE_LOG when set (scripts/lib/stages.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/stages.sh
bash scripts/install-deps.sh
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# Line tables are all the sanitizers' reports need (file:line in each frame); full debug info made
# this build the slowest of CI's.
build_sanitized() {
  CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" -DCORA_BUILD_TESTS=ON \
    -DCORA_SANITIZE=ON -DCORA_BUILD_FUZZERS=ON -DCORA_FUZZ_SECONDS="${CORA_FUZZ_SECONDS:-15}" "${launcher[@]}" &&
    cmake --build build-asan -j "$(nproc)"
}
stage "sanitizer build" build_sanitized
cd build-asan
# allocator_may_return_null=1: a request for more memory than exists must throw std::bad_alloc
#   (which cora turns into a RuntimeError), as it does without ASan, instead of aborting.
# intercept_tls_get_addr=0: compiler-rt 14 misreads glibc >= 2.34's dynamic TLS, so LeakSanitizer
#   crashes ("Tracer caught signal 11", DTLS at a bogus address) when scanning the threads of the
#   OpenMP runtime that kernels load with dlopen. Without it, dynamic TLS blocks are not scanned
#   as roots: leak reports can only grow (a pointer kept only there looks leaked), never shrink.
export ASAN_OPTIONS="allocator_may_return_null=1:intercept_tls_get_addr=0:detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# NVRTC (a closed-source library loaded with dlopen) is not run under the sanitizers: LeakSanitizer
#   would report its process-lifetime allocations, and its code is not ours to check. The GPU tests
#   then report their NVRTC parts as skipped; the release and g++ stages run them.
export CORA_NVRTC=off
# 15% of the random schedules (the first of the same seeds; tests/common/trial_count.h): 87 of 580,
# and 15% of the spatial and block-sparse cases. The release stage runs all of them; this stage is
# the longest of CI (842 s of a 36.9-min run at 35%; 1002 s of a 51.4-min run on a 2-core Zen 5 at
# 25%).
export CORA_TEST_RANDOM_SCHEDULES=15
echo "== sanitize.sh: the test suite under ASan, UBSan and LSan"
# Four of the spatial app's runs are left to the release stage. Each one here was 25-60 s, nearly all
# of it compiling its three kernels with the sanitizers. Two cases stay, and spatial_tests covers
# the rest of those kernels' masks under the sanitizers:
#   kept: app_spatial_edges (edge masks, partial tiles) and app_spatial_generated (both modes);
#   left out: the tile table (host code reading a file), the empty and full masks (spatial_tests
#   runs zero and all-one masks), and the rule-chosen direct route.
# kernel_sources_same_in_every_process checks that lowering does not depend on heap addresses (the
# release stage runs it; the sanitizers' allocator is one more heap layout, not a memory check).
stage "sanitizer ctest" ctest --output-on-failure -j "$(nproc)" --timeout 3000 -LE fuzz \
  -E '^(app_spatial_(tile_table|empty_mask|full_mask|auto_tile_direct)|kernel_sources_same_in_every_process)$'
echo "== sanitize.sh: fuzz targets, ${CORA_FUZZ_SECONDS:-15} s each"
stage "fuzzing (4 targets)" ctest --output-on-failure --timeout 900 -L fuzz
