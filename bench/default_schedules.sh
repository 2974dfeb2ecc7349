#!/usr/bin/env bash
# The default schedule and the user guide's schedule recipes against naive C++ loops
# (bench/default_schedules.cpp): builds the target cora_default_schedules, runs it with 2 threads
# and with 1 (OMP_NUM_THREADS and CORA_NUM_THREADS), and writes bench/results/default_schedules.md:
# per op and thread count, the median time of each variant over the repetitions and its ratio to
# the naive loop (above 1: faster than naive). Any cora variant whose output differs from the
# naive loop's by more than 1e-3 (relative) is reported as an error and the run fails.
# Environment: CORA_BENCH_BUILD_DIR (default build-bench; configured with benchmarks on and tests
# off when it is not a benchmark build yet), CORA_BUILD_JOBS (default 1: the build runs under
# nice beside other work), CORA_BENCH_REPETITIONS (default 5), CORA_BENCH_QUIET_WAIT (seconds,
# default 0: before each run, wait up to that long for the machine to be at most 10% busy; the
# busy share seen just before each run is written into the results).
# Usage: bash bench/default_schedules.sh [extra flags, e.g. --ops=gemm,vgemm or --benchmark_filter=...]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
build=${CORA_BENCH_BUILD_DIR:-build-bench}
reps=${CORA_BENCH_REPETITIONS:-5}
if ! grep -qs "CORA_BUILD_BENCH:BOOL=ON" "$build/CMakeCache.txt"; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCORA_BUILD_BENCH=ON -DCORA_BUILD_TESTS=OFF
fi
nice -n 19 cmake --build "$build" --target cora_default_schedules -j "${CORA_BUILD_JOBS:-1}"

# Percent of all cores' time not idle over the next 2 seconds (other work on the machine).
busy() {
  local a b tot=0 i
  read -ra a < /proc/stat
  sleep 2
  read -ra b < /proc/stat
  for i in 1 2 3 4 5 6 7 8; do tot=$((tot + b[i] - a[i])); done
  echo $((100 - 100 * (b[4] - a[4]) / (tot > 0 ? tot : 1)))
}
wait_quiet() {
  local deadline=$((SECONDS + ${CORA_BENCH_QUIET_WAIT:-0})) b
  b=$(busy)
  while [ "$b" -gt 10 ] && [ "$SECONDS" -lt "$deadline" ]; do
    sleep 10
    b=$(busy)
  done
  echo "$b"
}

mkdir -p bench/results
out=bench/results/default_schedules.md
tables=$(mktemp)
trap 'rm -f "$tables"' EXIT
for t in 2 1; do
  b=$(wait_quiet)
  echo "== $t thread(s): machine ${b}% busy before the run, load average $(cut -d' ' -f1-3 /proc/loadavg) =="
  echo "### $t thread$([ "$t" = 1 ] || echo s)" >> "$tables"
  echo >> "$tables"
  echo "Before the $t-thread run the machine was ${b}% busy with other work (load average" \
    "$(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%H:%M UTC'))." >> "$tables"
  echo >> "$tables"
  CORA_NUM_THREADS=$t OMP_NUM_THREADS=$t "./$build/bench/cora_default_schedules" --markdown="$tables" \
    --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true "$@"
done

describe_machine
if [ -n "$(git status --porcelain --untracked-files=no -- src include prelude 2>/dev/null)" ]; then
  commit="$commit (with uncommitted changes in src/include/prelude)"
fi
{
  echo "# Default schedule and recipes vs naive loops"
  echo
  echo "Written by \`bash bench/default_schedules.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'); CPU: $cpu" \
    "($(nproc) cores; ${isa% }); cora $commit; kernels compiled by $(clang++ --version 2>/dev/null | head -1 ||
      echo 'c++')" "with cora's flags, naive loops by $(c++ --version | head -1) with -O3 -march=native -fopenmp."
  echo
  echo "Each variant ran $reps repetitions (Google Benchmark, real time, at least 0.5 s each); the" \
    "time is their median, and each ratio (naive time / variant time; above 1: faster than naive) comes" \
    "from one run of the program. The machine is shared: separate runs differ by 10-20% or more with 2" \
    "threads, so treat a ratio within about 0.15 of 1 as a tie. Variants (bench/default_schedules.cpp):" \
    "\`naive\` is the C++ loop a user writes over packed data (\`naive_ikj\`: the same GEMM with the" \
    "reduction outside the column loop), \`old_nest\` is cora with \`.parallel(b)\` on every Func (the" \
    "nest before the default schedule), \`default\` is cora with no schedule call (\`default_stored\`:" \
    "the intermediate kept by \`compute_root\`, \`default_untiled\`: no register-tiled contraction," \
    "\`CompileOptions::vector_bits = -1\`; both as the default was before them), \`r1_...\` etc. are the" \
    "steps of the recipes in docs/user-guide.md. The error column: max over elements of" \
    "|cora - naive| / max(|naive|, 1% of max |naive|)."
  echo
  cat "$tables"
} > "$out"
echo "wrote $out"
