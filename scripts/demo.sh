#!/usr/bin/env bash
# Installs missing dependencies, builds detinfer, creates the default tiny model and
# runs a generation with it.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${DETINFER_JOBS:-$(nproc)}"

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$JOBS" --target detinfer_cli >/dev/null
BIN=build/release/bin/detinfer
MODEL=build/release/tiny-model
"$BIN" env
# A deterministic random model (weights are Philox draws from the seed): nothing is
# downloaded, and every machine gets the same bytes.
"$BIN" make-tiny-model --out "$MODEL" --seed 0
echo "== greedy (canonical): the same tokens and digest on every run, under any load"
"$BIN" generate --model "$MODEL" --prompt "Hello, detinfer" --max-new-tokens 24 --json
echo "== seeded sampling: reproducible from the seed"
"$BIN" generate --model "$MODEL" --prompt "Hello, detinfer" --max-new-tokens 24 \
  --temperature 0.8 --top-p 0.95 --seed 42 --json
