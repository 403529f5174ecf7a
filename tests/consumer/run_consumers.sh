#!/usr/bin/env bash
# Installs the current build tree into a temporary prefix, checks what was installed and
# builds + runs the consumer projects against it (CMake package and pkg-config).
# Usage: run_consumers.sh <detinfer build dir> <scratch dir> <detinfer_tiny_model program>
#                         [cmake generator]
set -euo pipefail
BUILD="$1"
WORK="$2"
TINY="$3"
GEN="${4:-Ninja}"
HERE="$(cd "$(dirname "$0")" && pwd)"
FLAGS="${CONSUMER_CXXFLAGS:-}"  # the detinfer build's CXX flags (sanitizers)
PREFIX="$WORK/prefix"

rm -rf "$WORK"
mkdir -p "$WORK"
cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log"
LIBDIR="$(dirname "$(find "$PREFIX" -name 'libdetinfer.so' | head -1)")"
echo "installed into $PREFIX (libdir $LIBDIR)"

fail() { echo "FAIL: $*" >&2; exit 1; }

# 0. Everything under the prefix (an absolute destination would escape --prefix; an old
#    build tree may cache DETINFER_PYTHON_INSTALL_DIR as one: configure it empty).
outside="$(sed -n 's/^-- \(Installing\|Up-to-date\): //p' "$WORK/install.log" | grep -v "^$PREFIX/" || true)"
[ -z "$outside" ] || fail "installed outside $PREFIX:
$outside"

# 1. Only detinfer's own public headers.
extra="$(find "$PREFIX/include" -mindepth 1 -maxdepth 1 ! -name detinfer)"
[ -z "$extra" ] || fail "unexpected entries in include/: $extra"
non_h="$(find "$PREFIX/include/detinfer" -type f ! -name '*.h')"
[ -z "$non_h" ] || fail "non-header files installed: $non_h"
[ -f "$PREFIX/include/detinfer/version.h" ] || fail "generated version.h not installed"
for f in "$LIBDIR/libdetinfer.a" "$LIBDIR/cmake/detinfer/detinferConfig.cmake" \
         "$LIBDIR/cmake/detinfer/detinferConfigVersion.cmake" "$LIBDIR/pkgconfig/detinfer.pc"; do
  [ -f "$f" ] || fail "missing $f"
done

# The developer tools (tiny models, logits dump, BPE trainer) are not part of the library.
[ ! -e "$PREFIX/include/detinfer/model_tools.h" ] || fail "devtools header model_tools.h installed"
devtools_re='make_tiny_model|compute_logits|train_byte_level_bpe|make_tiny_tokenizer_json|write_safetensors'
leaked="$( (nm -D --defined-only -C "$LIBDIR/libdetinfer.so"; nm --defined-only -C "$LIBDIR/libdetinfer.a" 2>/dev/null) \
          | grep -E "$devtools_re" || true)"
[ -z "$leaked" ] || fail "libdetinfer carries developer tools:
$leaked"

# 2. The shared library exports detinfer's API only (hidden visibility + version script).
bad="$(nm -D --defined-only -C "$LIBDIR/libdetinfer.so" | awk '{ $1=""; $2=""; sub(/^  /, ""); print }' \
       | grep -v -E '^(detinfer::|typeinfo for detinfer::|typeinfo name for detinfer::|vtable for detinfer::|dti_)' || true)"
[ -z "$bad" ] || fail "libdetinfer.so exports non-API symbols:
$bad"
echo "exported symbols: $(nm -D --defined-only "$LIBDIR/libdetinfer.so" | wc -l), all detinfer::/dti_"

# 3. CMake consumer (shared + static targets).
cmake -S "$HERE/cmake_project" -B "$WORK/cmake-build" -G "$GEN" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_CXX_FLAGS="$FLAGS" >"$WORK/cmake-configure.log" 2>&1 \
  || { cat "$WORK/cmake-configure.log"; fail "consumer configure"; }
cmake --build "$WORK/cmake-build" >"$WORK/cmake-build.log" 2>&1 \
  || { cat "$WORK/cmake-build.log"; fail "consumer build"; }
# Each consumer prints one "result:" line; all four must be identical (same bits whatever
# the link mode or build system). They all read one tiny model.
"$TINY" "$WORK/tiny-model"
run_consumer() {
  local name="$1" exe="$2"
  mkdir -p "$WORK/run-$name"
  "$exe" "$WORK/tiny-model" | tee "$WORK/run-$name/out.txt"
  grep '^result:' "$WORK/run-$name/out.txt" >>"$WORK/results.txt"
}
: >"$WORK/results.txt"
run_consumer cmake_shared "$WORK/cmake-build/consumer_shared"
run_consumer cmake_static "$WORK/cmake-build/consumer_static"
# Capture first: with pipefail, `ldd | grep -q` fails when grep exits before ldd is done.
ldd_out="$(ldd "$WORK/cmake-build/consumer_shared")"
grep -qF "$PREFIX" <<<"$ldd_out" || fail "shared consumer not linked to $PREFIX"

# 4. pkg-config consumer (shared + static).
mkdir -p "$WORK/pc-build"
PKG_CONFIG_PATH="$LIBDIR/pkgconfig" make -s -C "$HERE/pkgconfig_project" OUT="$WORK/pc-build" \
  CXXFLAGS="-O2 $FLAGS" CFLAGS="-O2 $FLAGS" \
  >"$WORK/pc-build.log" 2>&1 || { cat "$WORK/pc-build.log"; fail "pkg-config build"; }
run_consumer pc_shared "$WORK/pc-build/consumer_pc_shared"
run_consumer pc_static "$WORK/pc-build/consumer_pc_static"
# The C API example, built with the installed c_api.h, generates on the same tiny model.
"$WORK/pc-build/consumer_pc_c" "$WORK/tiny-model" | tail -1
# The installed Python package (when this build has it), from the prefix alone, prints the
# same result line: the same bits through pybind11.
PY_INIT="$(find "$PREFIX" -path '*/detinfer/__init__.py' | head -1)"
EXPECTED=4
if [[ "$FLAGS" == *-fsanitize=* ]]; then
  echo "sanitizer build: the installed Python package is not imported"
elif [ -n "$PY_INIT" ]; then
  (cd "$WORK" && PYTHONPATH="$(dirname "$(dirname "$PY_INIT")")" /usr/bin/python3 - \
     "$WORK/tiny-model" "$PREFIX" <<'PYEOF'
import sys
import detinfer
assert detinfer.__file__.startswith(sys.argv[2]), detinfer.__file__
s = detinfer.Session(sys.argv[1], threads=2)
g = s.generate("The quick", max_new_tokens=8, ignore_eos=True)
r = s.generate("Hello, world", max_new_tokens=12, temperature=0.8, seed=1234, ignore_eos=True)
tokens = "".join(f"{t} " for t in r.tokens)
print(f"result: model {s.model_fingerprint} greedy {g.digest_hex} tokens {tokens}"
      f"digest {r.digest_hex}")
PYEOF
  ) | tee "$WORK/run-python.txt"
  grep '^result:' "$WORK/run-python.txt" >>"$WORK/results.txt" || fail "python printed no result"
  EXPECTED=5
fi
[ "$(wc -l <"$WORK/results.txt")" -eq "$EXPECTED" ] || fail "a consumer printed no result line"
[ "$(sort -u "$WORK/results.txt" | wc -l)" -eq 1 ] || fail "consumers disagree:
$(cat "$WORK/results.txt")"
# 5. The installed PyTorch operators load from the prefix (when this Python has torch).
TORCH_LIB="$LIBDIR/libdetinfer_torch.so"
PY=/usr/bin/python3
if [[ "$FLAGS" == *-fsanitize=* ]]; then
  echo "sanitizer build: the Python check of libdetinfer_torch.so is skipped"
elif [ -f "$TORCH_LIB" ] && "$PY" -c "import torch" 2>/dev/null; then
  PYTHONPATH="$PREFIX/share/detinfer/python" DETINFER_TORCH_LIB="$TORCH_LIB" "$PY" - <<'PYEOF'
import torch, detinfer_torch
detinfer_torch.load()
x, w = torch.randn(5, 70), torch.randn(70, 9)
assert torch.equal(torch.ops.detinfer.mm(x[:2], w), torch.ops.detinfer.mm(x, w)[:2])
with detinfer_torch.batch_invariant():
    assert torch.equal(torch.mm(x, w), torch.ops.detinfer.mm(x, w))
print("installed libdetinfer_torch.so ok")
PYEOF
elif grep -q "libdetinfer_torch" "$WORK/install.log"; then
  fail "libdetinfer_torch.so was installed but $PY cannot import torch to check it"
fi
echo "all consumers passed"
