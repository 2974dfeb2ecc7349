# Stage timing for the CI scripts (source it). `stage NAME COMMAND...` runs the command and, when
# CORA_STAGE_LOG names a file, appends "NAME<TAB>seconds<TAB>exit status" to it; its status is the
# command's. `print_stage_table` prints that file as a table with the total (.ci/run calls it on
# exit, so the budget is in every CI log, failed runs included).

stage() {
  local name=$1 t0 t1 rc
  shift
  echo "== stage: $name"
  t0=$(date +%s.%N)
  if "$@"; then rc=0; else rc=$?; fi
  t1=$(date +%s.%N)
  if [ -n "${CORA_STAGE_LOG:-}" ]; then
    printf '%s\t%s\t%s\n' "$name" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }')" "$rc" \
      >>"$CORA_STAGE_LOG"
  fi
  return "$rc"
}

print_stage_table() {
  [ -n "${CORA_STAGE_LOG:-}" ] && [ -s "$CORA_STAGE_LOG" ] || return 0
  echo
  echo "== CI stages (wall time; budget 35 min on 2 cores)"
  awk -F '\t' '
    { printf "  %-34s %6d s  %5.1f min%s\n", $1, $2, $2 / 60, ($3 == 0 ? "" : "  (FAILED, status " $3 ")"); total += $2 }
    END { printf "  %-34s %6d s  %5.1f min\n", "total", total, total / 60 }' "$CORA_STAGE_LOG"
}
