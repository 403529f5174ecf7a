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
"$BIN" env
