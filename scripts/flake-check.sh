#!/usr/bin/env bash
# Runs the whole ctest suite N times (default 5) on an already built tree and reports every
# test that failed at least once. Exit status 0 only when all N runs passed.
# Usage: scripts/flake-check.sh [N] [preset]   (preset default: release; build it first,
# e.g. with scripts/test.sh). Extra ctest arguments can be passed in CTEST_ARGS
# (e.g. CTEST_ARGS="-R session" scripts/flake-check.sh 20).
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-5}"
PRESET="${2:-release}"
JOBS="${DETINFER_JOBS:-$(nproc)}"
if ! [[ "$RUNS" =~ ^[1-9][0-9]*$ ]]; then
  echo "flake-check: N must be a positive integer, got '$RUNS'" >&2
  exit 2
fi
LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/flake-check.XXXXXX")"
declare -A FAILS=()
for ((i = 1; i <= RUNS; i++)); do
  log="$LOG_DIR/run-$i.log"
  # shellcheck disable=SC2086
  ctest --preset "$PRESET" -j "$JOBS" --output-on-failure ${CTEST_ARGS:-} >"$log" 2>&1
  rc=$?
  # ctest lists failures as "  <n> - <name> (Failed|Timeout|...)" after "The following tests FAILED:".
  failed="$(sed -n '/The following tests FAILED:/,$p' "$log" | sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+) .*/\1/p')"
  if [[ $rc -ne 0 && -z "$failed" ]]; then
    failed="(ctest exited $rc without naming a test; see $log)"
  fi
  count=0
  while IFS= read -r name; do
    [[ -z "$name" ]] && continue
    FAILS["$name"]=$((${FAILS["$name"]:-0} + 1))
    count=$((count + 1))
  done <<<"$failed"
  echo "run $i/$RUNS: exit $rc, $count failed test(s) (log: $log)"
done
if [[ ${#FAILS[@]} -eq 0 ]]; then
  echo "flake-check: all $RUNS runs passed"
  exit 0
fi
echo "flake-check: tests that failed at least once in $RUNS runs:"
for name in "${!FAILS[@]}"; do
  echo "  $name: ${FAILS[$name]}/$RUNS"
done | sort
exit 1
