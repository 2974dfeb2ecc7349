# Shared by the benchmark scripts (source it from the repository root).

# Every OpenBLAS-based baseline (cblas_sgemm, cblas_strmm, PyTorch's CPU GEMMs) runs on the kernel
# OpenBLAS picks when it loads, and that pick can be slow: Debian's 0.3.21 does not know newer Intel
# CPUs and falls back to Prescott (5x slower), and an environment may pin OPENBLAS_CORETYPE=Haswell
# where SkylakeX runs sgemm 1.9x faster (a 2-core Zen 5). A baseline on a slow kernel inflates every
# cora ratio. So: time each candidate kernel for this CPU's ISA (the one OpenBLAS detects by itself,
# the one the environment pinned, SkylakeX/Cooperlake with AVX-512, Haswell and Zen with AVX2) on a
# one-thread sgemm (bench/tools/openblas_core_probe.c), check each result against a double-precision
# product, and export OPENBLAS_CORETYPE for the fastest correct one for the whole run.
# Sets `core` to the kernel chosen (as OpenBLAS names it) and `core_note` to the line printed.
fair_openblas_core() {
  local dir probe pinned="${OPENBLAS_CORETYPE:-}" best="" best_rate=0 tried="" c out name rate err
  dir=$(mktemp -d)
  probe="$dir/openblas_core_probe"
  if ! cc -O2 bench/tools/openblas_core_probe.c -o "$probe" -lopenblas -lm 2>"$dir/cc.log"; then
    core=unknown
    core_note="OpenBLAS kernel: not probed (the probe did not build: $(head -1 "$dir/cc.log"))"
    echo "$core_note"
    rm -rf "$dir"
    return 0
  fi
  local candidates=(detected)
  [ -n "$pinned" ] && candidates+=("$pinned")
  if grep -q -w avx512f /proc/cpuinfo; then
    candidates+=(SkylakeX)
    grep -q -w avx512_bf16 /proc/cpuinfo && candidates+=(Cooperlake)
  fi
  grep -q -w avx2 /proc/cpuinfo && candidates+=(Haswell Zen)
  for c in "${candidates[@]}"; do
    if [ "$c" = detected ]; then
      out=$(env -u OPENBLAS_CORETYPE OPENBLAS_NUM_THREADS=1 "$probe" 2>/dev/null) || continue
    else
      out=$(OPENBLAS_CORETYPE="$c" OPENBLAS_NUM_THREADS=1 "$probe" 2>/dev/null) || continue
    fi
    read -r name rate err <<<"$out"
    if ! awk -v e="$err" 'BEGIN { exit !(e + 0 <= 1e-4) }'; then
      tried+=" $c($name) wrong (error $err);"
      continue
    fi
    tried+=" $c($name) $rate;"
    if awk -v r="$rate" -v b="$best_rate" 'BEGIN { exit !(r + 0 > b + 0) }'; then
      best="$c"
      best_rate="$rate"
      core="$name"
    fi
  done
  rm -rf "$dir"
  if [ -z "$best" ]; then
    core=unknown
    core_note="OpenBLAS kernel: no candidate gave a correct sgemm (${tried# }); baselines on OpenBLAS's own pick"
  else
    if [ "$best" = detected ]; then unset OPENBLAS_CORETYPE; else export OPENBLAS_CORETYPE="$best"; fi
    core_note="OpenBLAS kernel: $core, the fastest correct of${tried%;} (GFLOP/s, one-thread sgemm 768^3); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
  fi
  echo "$core_note"
}

# Sets `cpu` (the model name), `isa` (avx512f / avx2, space-separated) and `commit` (short hash)
# for a results file's header.
describe_machine() {
  cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
  isa=$(grep -o -w -E 'avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
}

# Configures the benchmark build (Release, benchmarks on, tests off) in $CORA_BENCH_BUILD_DIR
# (default build-bench), builds the targets given, and sets `build`. It configures on every run (a
# few seconds): a baseline library installed since the last run (oneDNN, Halide) is then found.
build_bench_targets() {
  build=${CORA_BENCH_BUILD_DIR:-build-bench}
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCORA_BUILD_BENCH=ON -DCORA_BUILD_TESTS=OFF >/dev/null
  local t
  for t in "$@"; do
    nice -n 19 cmake --build "$build" --target "$t" -j "${CORA_BUILD_JOBS:-1}"
  done
}

# The Python benchmark scripts' run (moe.sh, tune.sh): installs what they need, builds the Python
# package in build/, picks OpenBLAS's fastest correct kernel, then runs bench/SCRIPT with the rest
# of the arguments under /usr/bin/python3 (the interpreter Debian's NumPy and PyTorch belong to).
run_python_bench() {
  local script=$1
  shift
  bash scripts/install-deps.sh
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  cmake --build build -j "$(nproc)" --target cora_python
  fair_openblas_core
  PYTHONPATH=build/python /usr/bin/python3 "bench/$script" "$@"
}
