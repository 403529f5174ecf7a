#!/usr/bin/env bash
# Bounded soak of `detinfer serve` for issue 33 (docs/performance.md): 10 minutes, 16
# clients mixing chat and completions (streamed, seeded, greedy, top-p, cancelled) on
# loopback, vocabulary 151,936; reports 5xx, answers differing from solo runs, RSS growth
# and the median latency of 32-token top-p chat vs greedy.
# Usage: scripts/soak_chat.sh [--duration SECONDS] [--clients N] [--vocab V] [--binary PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/soak_chat.py "$@"
