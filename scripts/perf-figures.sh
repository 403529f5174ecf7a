#!/usr/bin/env bash
# Prints the end-to-end decode figures of docs/performance.md ("Decode at the limit",
# issue 18) in the tables' format: batch-1 decode vs the read-bandwidth bound at 1 and 2
# threads (Qwen2.5-0.5B and SmolLM-135M shapes, bf16 and f32), per-step work, decode at
# context 512/2048/8192 with the attention share, prefill of 512 tokens.
# Usage: scripts/perf-figures.sh [--quick] [--reps N] [--only SUBSTR] [--probe]
# (default 3 reps; --quick: the 135M rows only; --only: the first table's matching rows;
# --probe: every read-probe shape). Builds bench_decode in the release tree first. Models
# (random weights) are generated once into $DETINFER_BENCH_DIR (default
# /tmp/detinfer-bench-decode, ~4.5 GB). About 4 minutes on the 2-core dev machine when it
# is quiet. On a machine shared with other work, `chrt -f 10 scripts/perf-figures.sh`
# (root) gives it both cores (docs/performance.md, "End-to-end decode").
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET="${PRESET:-release}"
DIR="${DETINFER_BENCH_DIR:-/tmp/detinfer-bench-decode}"
if [[ ! -f "build/$PRESET/build.ninja" ]]; then cmake --preset "$PRESET" >/dev/null; fi
cmake --build "build/$PRESET" --target bench_decode -j "${DETINFER_JOBS:-2}" >/dev/null
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
"build/$PRESET/bench/bench_decode" --dir "$DIR" "$@"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
