#!/usr/bin/env bash
# Builds here the folder a bare GPU machine runs (Ubuntu 24.04, g++ 13, CUDA 13, no libz3, no
# package registry): the GPU test binaries, their non-system shared libraries (libz3; RPATH
# $ORIGIN), the apps with --device cuda (trmm, vgemm, ragged_attention, transformer_encoder and its
# CPU libraries, pruned_ff), scripts/gpu-check.sh and
# scripts/sass-mix.py.
# Then runs its CPU part here: the emulated, NVRTC and CPU-threads GPU tests, and the device tests,
# which skip without a GPU.
#   bash scripts/gpu-bundle.sh [OUT_DIR]     (default: gpu-bundle/; must fit in 64 MiB)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-bundle}"
build=build-gpu-bundle
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCORA_BUILD_TESTS=ON -DCMAKE_BUILD_RPATH='$ORIGIN' >/dev/null
targets=(gpu_tests correctness_tests trmm vgemm ragged_attention transformer_encoder pruned_ff)
# The GPU benchmark needs cuBLAS (a CUDA toolkit here; the GPU machine has CUDA's libraries).
if [[ -d "$build/bench/gpu" ]]; then targets+=(cora_gpu_bench); fi # configured where CMake found cuBLAS
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
rm -rf "$out"
mkdir -p "$out"
cp "$build/tests/gpu_tests" "$build/tests/correctness_tests" scripts/gpu-check.sh scripts/sass-mix.py "$out/"
cp "$build/apps/trmm/trmm" "$build/apps/vgemm/vgemm" "$build/apps/attention/ragged_attention" \
  "$build/apps/transformer/transformer_encoder" "$build/apps/sparse/pruned_ff" "$out/"
# The apps' data (copies in the bundle, a build artifact; the data stay in ../shared).
# The lengths files cut to their first 4096 lines (the device steps read the first batches only):
# the whole MNLI file is 1.2 MB of a bundle that must stay under 64 MiB.
for f in vbatch_gemm_data.txt mnli_train_lengths.txt race_train_lengths.txt; do
  [[ -f ../shared/datasets/$f ]] || continue
  case "$f" in
    *_lengths.txt) head -n 4096 "../shared/datasets/$f" >"$out/$f" ;;
    *) cp "../shared/datasets/$f" "$out/" ;;
  esac
done
if [[ -x "$build/bench/gpu/cora_gpu_bench" ]]; then
  cp "$build/bench/gpu/cora_gpu_bench" "$out/"
fi
# Libraries the GPU machine lacks: everything ldd resolves outside the C/C++ runtime, OpenMP and
# CUDA's own libraries (the GPU machine has CUDA 13).
for bin in "$out/gpu_tests" "$out/correctness_tests" "$out/cora_gpu_bench" "$out/trmm" "$out/vgemm" \
  "$out/ragged_attention" "$out/transformer_encoder" "$out/pruned_ff"; do
  [[ -x "$bin" ]] || continue
  ldd "$bin" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so* | libm.so* | libstdc++.so* | libgcc_s.so* | libgomp.so* | libpthread.so* | libdl.so* | ld-linux* | \
        libcuda.so* | libcudart.so* | libcublas*.so* | libnvrtc*.so* | librt.so* | libopenblas*.so* | \
        libblas.so* | liblapack.so* | libgfortran.so* | libquadmath.so*) ;; # OpenBLAS: the GPU machine has it
      *) [[ -e "$out/$(basename "$lib")" ]] || cp -L "$lib" "$out/" ;;
    esac
  done
done
# Symbol tables are not needed there (about 13% of each binary).
if command -v strip >/dev/null; then
  for f in "$out"/*; do
    if [[ -f "$f" && "$(head -c 4 "$f" | od -An -c | tr -d ' ')" == '177ELF' ]]; then
      chmod u+w "$f"
      strip --strip-unneeded "$f"
    fi
  done
fi
git rev-parse HEAD >"$out/COMMIT" 2>/dev/null || echo unknown >"$out/COMMIT"
size_kib=$(du -sk "$out" | cut -f1)
echo "gpu-bundle: $out is ${size_kib} KiB ($(ls "$out" | tr '\n' ' '))"
if ((size_kib > 64 * 1024)); then
  echo "gpu-bundle: $out is larger than the 64 MiB a GPU machine takes" >&2
  exit 1
fi
echo "== gpu-bundle: its CPU part, here"
(cd "$out" && bash gpu-check.sh --cpu-only)
