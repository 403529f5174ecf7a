#!/usr/bin/env bash
# Cross-checks detinfer's GGUF files against llama.cpp (the node-llama-cpp npm package's
# prebuilt CPU build): each file detinfer writes (bf16, and q8_0/q4_0/q5_0, the K formats
# and K-quant mixes from `detinfer quantize`; llama, qwen2, qwen3, olmo2, phi3 tiny models)
# must load in llama.cpp, tokenize
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
# Block decoding of every type against llama.cpp's dequantize_row_* (its libggml-base.so).
LIB=$(find "$NODE_DIR/node_modules" -name libggml-base.so | head -1)
g++ -std=c++17 -O1 -I "$HERE/../src" -I "$HERE/../include" -I "$HERE/../tests/kernels" \
  -I "$BUILD/generated/include" \
  "$HERE/gguf_crosscheck/dequant_check.cpp" "$BUILD/src/libdetinfer.a" -ldl -lpthread \
  -o "$W/dequant_check"
"$W/dequant_check" "$LIB"
P=5,17,300,42,9,77,1,260
# Greedy tokens of llama.cpp and detinfer on one file, compared (prefix length).
# At a divergence, the gap between detinfer's logprobs of its token and of llama.cpp's
# (from detinfer's top 20 at that step): a small gap is a near-tie that the two engines'
# different accumulation orders (and, for the K types, llama.cpp's 256-value Q8_K activation
# blocks against detinfer's 32-value ones) resolve differently.
compare() {
  local what=$1 file=$2 a b
  a=$(cd "$NODE_DIR" && node greedy.mjs "$file" "$P" 32 2>&1 | tail -1)
  b=$("$B" generate --model "$file" --prompt-ids "$P" --max-new-tokens 32 \
    --ignore-eos --logprobs 20 --json 2>/dev/null)
  python3 - "$what" "$a" "$b" <<'PY'
import json, sys
what, a, b = sys.argv[1:]
try:
    A = [int(x) for x in a.split(",")]
except ValueError:
    print(f"{what}: llama.cpp failed: {a[:300]}"); sys.exit(0)
j = json.loads(b)
B = j["tokens"]
n = next((i for i, (x, y) in enumerate(zip(A, B)) if x != y), min(len(A), len(B)))
tail = ""
if n < min(len(A), len(B)):
    top = {t["token"]: t["logprob"] for t in j["logprobs"][n]["top"]}
    gap = top[B[n]] - top[A[n]] if A[n] in top else None
    tail = f" (at step {n}: logprob gap {gap:.4f})" if gap is not None else \
        f" (at step {n}: llama.cpp's token outside detinfer's top 20)"
print(f"{what}: greedy tokens identical for {n}/{min(len(A), len(B))}{tail}")
PY
}
for arch in llama qwen2 qwen3; do
  "$B" make-tiny-model --arch "$arch" --dtype bf16 --seed 11 --tie-word-embeddings \
    --out "$W/$arch/hf" --gguf "$W/$arch/bf16.gguf" >/dev/null 2>&1
  for q in q8_0 q4_0 q5_0; do
    "$B" quantize --model "$W/$arch/hf" --type "$q" --out "$W/$arch/$q.gguf" >/dev/null 2>&1
  done
  for f in bf16 q8_0 q4_0 q5_0; do compare "$arch $f" "$W/$arch/$f.gguf"; done
done
# olmo2 and phi3, untied (llama.cpp's olmo2 requires output.weight), in folders whose names
# lack "phi3" (llama.cpp gives the token attributes of Phi-3's vocabulary to any model whose
# general.name holds "phi3", and the tiny vocabulary lacks those tokens); the last one is
# phi3 with partial rotary and longrope (original length 512, the context llama.cpp uses).
for spec in "o2:--arch olmo2" "p3:--arch phi3 --partial-rotary-factor 0.75" \
  "p3w:--arch phi3 --sliding-window 300" "p3lr:--arch phi3 --partial-rotary-factor 0.75"; do
  name=${spec%%:*}
  # shellcheck disable=SC2086
  "$B" make-tiny-model ${spec#*:} --dtype bf16 --seed 11 --out "$W/$name/hf" \
    --gguf "$W/$name/bf16.gguf" >/dev/null 2>&1
  if [ "$name" = p3lr ]; then
    python3 - "$W/$name/hf/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_scaling"] = {"type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0, 4.5, 6.0],
                     "long_factor": [8.0, 9.0, 10.0, 12.0, 14.0, 16.0]}
c["original_max_position_embeddings"] = 512
json.dump(c, open(sys.argv[1], "w"))
PY
    rm "$W/$name/bf16.gguf"  # written before the edit
  else
    compare "$name ${spec#*:} bf16" "$W/$name/bf16.gguf"
  fi
  "$B" quantize --model "$W/$name/hf" --type q8_0 --out "$W/$name/q8_0.gguf" >/dev/null 2>&1
  compare "$name ${spec#*:} q8_0" "$W/$name/q8_0.gguf"
done
# Q4_1, Q5_1, the K formats and llama.cpp's mixes: models whose rows are whole super-blocks
# of 256 (hidden 256, intermediate 512), 8 layers so that the mixes' per-layer rules apply.
for arch in llama qwen2; do
  "$B" make-tiny-model --arch "$arch" --dtype bf16 --seed 11 --hidden 256 --intermediate 512 \
    --layers 8 --out "$W/k$arch/hf" >/dev/null 2>&1
  for q in q4_1 q5_1 q2_k q3_k q4_k q5_k q6_k q3_k_m q4_k_s q4_k_m q5_k_s q5_k_m; do
    "$B" quantize --model "$W/k$arch/hf" --type "$q" --out "$W/k$arch/$q.gguf" >/dev/null 2>&1
    compare "$arch h256 $q" "$W/k$arch/$q.gguf"
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
