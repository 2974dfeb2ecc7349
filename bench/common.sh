# Shared by the benchmark scripts (source it from the repository root).

# Debian's OpenBLAS 0.3.21 does not know newer Intel CPUs and falls back to its generic Prescott
# kernel (5x slower), which would make every OpenBLAS-based baseline look slow: when it reports
# Prescott on an AVX-512 (AVX2) CPU, export OPENBLAS_CORETYPE=SkylakeX (Haswell) for the whole run.
# Sets `core` to the kernel OpenBLAS reported.
fair_openblas_core() {
  core=$(/usr/bin/python3 -c 'import ctypes; l = ctypes.CDLL("libopenblas.so.0"); l.openblas_get_corename.restype = ctypes.c_char_p; print(l.openblas_get_corename().decode())' 2>/dev/null || echo unknown)
  if [ "$core" = "Prescott" ] || [ "$core" = "prescott" ]; then
    if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX; elif grep -q avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
    echo "OpenBLAS reported Prescott; running with OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
  fi
}

# Sets `cpu` (the model name), `isa` (avx512f / avx2, space-separated) and `commit` (short hash)
# for a results file's header.
describe_machine() {
  cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
  isa=$(grep -o -w -E 'avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
}
