#!/usr/bin/env bash
# `pip install ./python` into a fresh virtual environment, offline (--no-index
# --no-build-isolation), through the package's own pyproject.toml and setup.py; then the
# venv's Python imports detinfer from its site-packages and generates. To fit a test's time,
# setup.py builds the extension in this build folder (DETINFER_BUILD_DIR, already built:
# nothing recompiles) instead of configuring a new one, and the package folder is copied out
# of the source tree (DETINFER_SOURCE_DIR) so that pip's in-tree build writes nothing there.
# Exit 77 (skipped) when /usr/bin/python3 cannot make a venv with pip (python3-venv).
# Usage: pip_install_test.sh <source dir> <build dir> <scratch dir> <detinfer program>
set -euo pipefail
SRC="$1"
BUILD="$2"
WORK="$3"
CLI="$4"
PY=/usr/bin/python3

rm -rf "$WORK"
mkdir -p "$WORK"
if ! "$PY" -m venv --system-site-packages "$WORK/venv" >"$WORK/venv.log" 2>&1; then
  cat "$WORK/venv.log"
  echo "python3 -m venv failed (install python3-venv): skipped"
  exit 77
fi
cp -r "$SRC/python" "$WORK/python"
rm -rf "$WORK/python/build" "$WORK/python/"*.egg-info
DETINFER_SOURCE_DIR="$SRC" DETINFER_BUILD_DIR="$BUILD" DETINFER_BUILD_JOBS=1 \
  "$WORK/venv/bin/pip" install --no-index --no-build-isolation "$WORK/python" \
  >"$WORK/pip.log" 2>&1 || { cat "$WORK/pip.log"; echo "FAIL: pip install"; exit 1; }
"$CLI" make-tiny-model --arch qwen2 --seed 1 --out "$WORK/model" >/dev/null
cd "$WORK"
"$WORK/venv/bin/python" - "$WORK/venv" "$WORK/model" <<'PYEOF'
import importlib.metadata
import os
import sys

import detinfer

venv, model = sys.argv[1], sys.argv[2]
assert detinfer.__file__.startswith(os.path.join(venv, "lib")), detinfer.__file__
here = os.path.dirname(detinfer.__file__)
for name in ("_detinfer.pyi", "py.typed", "__main__.py"):
    assert os.path.exists(os.path.join(here, name)), name
assert importlib.metadata.version("detinfer") == "0.1.0"
with detinfer.Session(model, threads=1) as s:
    a = s.generate("Hello", max_new_tokens=6, seed=3, temperature=0.8, ignore_eos=True)
    b = s.generate("Hello", max_new_tokens=6, seed=3, temperature=0.8, ignore_eos=True)
    assert len(a.tokens) == 6 and a.tokens == b.tokens and a.digest == b.digest
    assert s.verify(a.transcript_json).verified
print("pip-installed detinfer", detinfer.__version__, "from", here, "ok")
PYEOF
"$WORK/venv/bin/pip" uninstall -y detinfer >/dev/null
echo "pip install test passed"
