#!/usr/bin/env bash
# Builds here the folder a bare GPU machine runs (Ubuntu 24.04, g++ 13, CUDA 13, no libz3, no
# package registry): the GPU test binaries, their non-system shared libraries (libz3; RPATH
# $ORIGIN) and scripts/gpu-check.sh. Then runs its CPU part here: the emulated and NVRTC GPU tests,
# and the device tests, which skip without a GPU.
#   bash scripts/gpu-bundle.sh [OUT_DIR]     (default: gpu-bundle/; must fit in 64 MiB)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-bundle}"
build=build-gpu-bundle
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCORA_BUILD_TESTS=ON -DCMAKE_BUILD_RPATH='$ORIGIN' >/dev/null
cmake --build "$build" -j "$(nproc)" --target gpu_tests correctness_tests
rm -rf "$out"
mkdir -p "$out"
cp "$build/tests/gpu_tests" "$build/tests/correctness_tests" scripts/gpu-check.sh "$out/"
# Libraries the GPU machine lacks: everything ldd resolves outside the C/C++ runtime and OpenMP.
for bin in "$out/gpu_tests" "$out/correctness_tests"; do
  ldd "$bin" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so* | libm.so* | libstdc++.so* | libgcc_s.so* | libgomp.so* | libpthread.so* | libdl.so* | ld-linux*) ;;
      *) [[ -e "$out/$(basename "$lib")" ]] || cp -L "$lib" "$out/" ;;
    esac
  done
done
git rev-parse HEAD >"$out/COMMIT" 2>/dev/null || echo unknown >"$out/COMMIT"
size_kib=$(du -sk "$out" | cut -f1)
echo "gpu-bundle: $out is ${size_kib} KiB ($(ls "$out" | tr '\n' ' '))"
if ((size_kib > 64 * 1024)); then
  echo "gpu-bundle: $out is larger than the 64 MiB a GPU machine takes" >&2
  exit 1
fi
echo "== gpu-bundle: its CPU part, here"
(cd "$out" && bash gpu-check.sh --cpu-only)
