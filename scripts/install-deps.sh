#!/usr/bin/env bash
# Installs everything cora needs to build, test and benchmark, from Debian packages only.
# Idempotent: packages already present are skipped, and apt is not touched when nothing is missing.
set -euo pipefail

packages=(
  cmake make g++ clang libomp-14-dev     # build + JIT compiler for generated C++ (OpenMP)
  libclang-rt-14-dev llvm-14             # sanitizer and libFuzzer runtimes, llvm-symbolizer
  libz3-dev                              # prover backend
  catch2                                 # tests (v2)
  libopenblas-dev                        # BLAS baselines and tiles
  libbenchmark-dev                       # benchmarks
  python3                                # small scripts
  python3-torch                          # the encoder checked against PyTorch (nn.TransformerEncoder)
  pybind11-dev python3-dev python3-numpy # the Python package (python/)
  python3-pytest                         # its tests
)
if [[ "${CORA_BENCH_DEPS:-0}" == "1" ]]; then
  # oneDNN's CMake config looks for OpenCL (its GPU runtime) and fails without the headers.
  packages+=(libhalide14-0-dev libdnnl-dev ocl-icd-opencl-dev opencl-headers python3-matplotlib)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
