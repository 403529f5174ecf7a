#!/usr/bin/env bash
# Bounded soak of `detinfer serve` (docs/performance.md): 10 minutes, 32 clients mixing
# streamed / non-streamed / sampled / greedy / cancelled requests on loopback; fails on
# any 5xx, any answer differing from the same request alone, or RSS growth >= 5%.
# Usage: scripts/soak.sh [--duration SECONDS] [--clients N] [--binary PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/soak.py "$@"
