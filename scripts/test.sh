#!/usr/bin/env bash
# Installs missing dependencies, configures, builds and runs every test (ctest).
# Usage: scripts/test.sh [preset]   (default: release; also debug, asan, tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET="${1:-release}"
JOBS="${DETINFER_JOBS:-$(nproc)}"

scripts/install-deps.sh
cmake --preset "$PRESET" >/dev/null
cmake --build --preset "$PRESET" -j "$JOBS"
ctest --preset "$PRESET" -j "$JOBS"
