#!/usr/bin/env bash
# Cross-checks detinfer's GGUF files against llama.cpp (the node-llama-cpp npm package's
# prebuilt CPU build): each file detinfer writes (bf16, and q8_0/q4_0/q5_0 from
# `detinfer quantize`; llama, qwen2, qwen3 tiny models) must load in llama.cpp, tokenize
# texts to the same ids, and give greedy tokens that agree with detinfer's on the same file
# (same prefix length reported; accumulation orders differ, so a late divergence after a
# near-tie is possible). Outside CI: it needs `npm install node-llama-cpp` (docs/gguf.md).
# Usage: scripts/gguf-crosscheck.sh BUILD_DIR NODE_DIR   (NODE_DIR holds node_modules/)
set -euo pipefail
BUILD=${1:?build dir}; NODE_DIR=${2:?dir with node_modules/node-llama-cpp}
HERE=$(cd "$(dirname "$0")" && pwd)
B="$BUILD/bin/detinfer"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cp "$HERE"/gguf_crosscheck/*.mjs "$NODE_DIR"/
P=5,17,300,42,9,77,1,260
for arch in llama qwen2 qwen3; do
  "$B" make-tiny-model --arch "$arch" --dtype bf16 --seed 11 --tie-word-embeddings \
    --out "$W/$arch/hf" --gguf "$W/$arch/bf16.gguf" >/dev/null 2>&1
  for q in q8_0 q4_0 q5_0; do
    "$B" quantize --model "$W/$arch/hf" --type "$q" --out "$W/$arch/$q.gguf" >/dev/null 2>&1
  done
  for f in bf16 q8_0 q4_0 q5_0; do
    a=$(cd "$NODE_DIR" && node greedy.mjs "$W/$arch/$f.gguf" "$P" 32 2>&1 | tail -1)
    b=$("$B" generate --model "$W/$arch/$f.gguf" --prompt-ids "$P" --max-new-tokens 32 \
      --ignore-eos --json 2>/dev/null |
      python3 -c "import json,sys; print(','.join(map(str,json.load(sys.stdin)['tokens'])))")
    python3 - "$arch $f" "$a" "$b" <<'PY'
import sys
what, a, b = sys.argv[1:]
try:
    A = [int(x) for x in a.split(",")]; B = [int(x) for x in b.split(",")]
except ValueError:
    print(f"{what}: llama.cpp failed: {a[:300]}"); sys.exit(0)
n = next((i for i, (x, y) in enumerate(zip(A, B)) if x != y), min(len(A), len(B)))
print(f"{what}: greedy tokens identical for {n}/{min(len(A), len(B))}")
PY
  done
done
for t in "Hello world" "The quick brown fox, 12345 times!" $'  spaces   and\ttabs\nnewline' \
  "naïve café — ünïcödé 日本語" $'<|im_start|>user\nHi<|im_end|>'; do
  a=$(cd "$NODE_DIR" && node tok.mjs "$W/qwen2/bf16.gguf" "$t" 2>&1 | tail -1)
  b=$("$B" generate --model "$W/qwen2/bf16.gguf" --prompt "$t" --max-new-tokens 1 --json \
    2>/dev/null |
    python3 -c "import json,sys; print(','.join(map(str,json.load(sys.stdin)['prompt_tokens'])))")
  if [ "$a" = "$b" ]; then echo "tokenize same: $(printf %q "$t")"; else
    echo "tokenize DIFFERS: $(printf %q "$t"): llama.cpp $a, detinfer $b"; fi
done
