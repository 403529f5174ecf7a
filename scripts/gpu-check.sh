#!/usr/bin/env bash
# GPU check for the CUDA kernels and device=cuda sessions (issues 11, 19), for a machine
# with an NVIDIA GPU (written for one H200 and 16 cores; nothing is downloaded). In under 8
# minutes it:
#   0. fails at once (exit 2, with the reason) when there is no usable NVIDIA GPU, unless
#      DETINFER_GPU_DRY_RUN=1 (to check the build path on a machine without one),
#   1. records the machine (date, GPU, driver, nvcc, git revision),
#   2. configures a separate build dir with ninja against a CUDA libtorch when pip's torch
#      is importable (torch.utils.cmake_prefix_path), else the system (Debian, CPU)
#      libtorch, with the CUDA architecture narrowed to the GPU at hand,
#   3. builds only the CUDA tests and benchmarks and the detinfer program,
#   4. runs the ctest labels cuda and gpu (kernels, emulated and real end-to-end sessions)
#      and generate_cli_tests (detinfer generate --device cuda = --device cpu), then
#      compute-sanitizer (memcheck, racecheck) on a few tests when it is installed,
#   5. runs the GPU kernel benchmarks and `detinfer bench --device cuda` (tokens/s at batch
#      1 and 16 in the three numerics modes) and prints a short table last.
# Logs and JSON go to $BUILD/gpu-check/ and are copied to $OUT/gpu-check/ when $OUT is set.
# With no nvcc but an already built $BUILD (carried from another machine), steps 2-3 are
# skipped. Exit status: non-zero when a build step or a test failed.
#
# Usage: scripts/gpu-check.sh    env: DETINFER_GPU_BUILD (default build/gpu-check),
#                                     DETINFER_JOBS (default nproc), DETINFER_GPU_ARCH
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

BUILD="${DETINFER_GPU_BUILD:-build/gpu-check}"
JOBS="${DETINFER_JOBS:-$(nproc)}"
LOGS="$BUILD/gpu-check"
BUDGET_S=460 # stays under 8 minutes including the copy to $OUT
START_S=$(date +%s)
STATUS=0
mkdir -p "$LOGS"

say() { printf '[gpu-check %3ds] %s\n' "$(($(date +%s) - START_S))" "$*" | tee -a "$LOGS/summary.log"; }

# Seconds left for a step: its own cap, or what the overall budget still allows.
left() {
  local cap=$1 rem=$((BUDGET_S - ($(date +%s) - START_S)))
  ((rem < 5)) && rem=5
  ((cap < rem)) && echo "$cap" || echo "$rem"
}

# run NAME CAP CMD...: runs CMD with a timeout, output to $LOGS/NAME.log; records failure.
run() {
  local name=$1 cap=$2
  shift 2
  local t
  t=$(left "$cap")
  say "$name (timeout ${t}s): $*"
  timeout --kill-after=10 "$t" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  if ((rc == 124 || rc == 137)); then
    say "$name FAILED: timed out after ${t}s; last lines:"
    tail -n 25 "$LOGS/$name.log" | tee -a "$LOGS/summary.log"
    STATUS=1
  elif ((rc != 0)); then
    say "$name FAILED (exit $rc); last lines:"
    tail -n 25 "$LOGS/$name.log" | tee -a "$LOGS/summary.log"
    STATUS=1
  else
    say "$name ok"
  fi
  return $rc
}

copy_out() {
  if [[ -n "${OUT:-}" ]]; then
    mkdir -p "$OUT/gpu-check" && cp -r "$LOGS/." "$OUT/gpu-check/" 2>/dev/null
  fi
}
trap copy_out EXIT

# --- 0. is there a GPU? ------------------------------------------------------------------
if [[ "${DETINFER_GPU_DRY_RUN:-0}" != 1 ]]; then
  reason=""
  if ! command -v nvidia-smi >/dev/null; then
    reason="nvidia-smi not found (no NVIDIA driver on this machine)"
  elif ! GPUS="$(timeout 30 nvidia-smi -L 2>&1)"; then
    reason="nvidia-smi failed: $GPUS"
  elif ! grep -q '^GPU ' <<<"$GPUS"; then
    reason="nvidia-smi lists no GPU: $GPUS"
  fi
  if [[ -n "$reason" ]]; then
    say "FAILED: no usable NVIDIA GPU: $reason"
    say "(set DETINFER_GPU_DRY_RUN=1 to run the configure/build/skip path anyway)"
    exit 2
  fi
fi

# --- 1. machine -------------------------------------------------------------------------
NVCC="$(command -v nvcc || true)"
[[ -z "$NVCC" && -x /usr/local/cuda/bin/nvcc ]] && NVCC=/usr/local/cuda/bin/nvcc
{
  echo "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git_revision: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (modified)')"
  echo "host: $(uname -srm), $(nproc) cores"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.max.sm \
      --format=csv 2>&1
  else
    echo "nvidia-smi: not found"
  fi
  if [[ -n "$NVCC" ]]; then "$NVCC" --version | tail -n 2; else echo "nvcc: not found"; fi
} >"$LOGS/machine.log" 2>&1
cat "$LOGS/machine.log"

# Architecture of GPU 0 for this build only (the default build targets sm_80, sm_90a, PTX);
# DETINFER_GPU_ARCH overrides it (e.g. to dry-run the build on a machine without a GPU).
ARCH="${DETINFER_GPU_ARCH:-native}"
if [[ -z "${DETINFER_GPU_ARCH:-}" ]] && command -v nvidia-smi >/dev/null; then
  CAP="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')"
  case "$CAP" in
    90) ARCH="90a-real" ;;
    [0-9][0-9] | [0-9][0-9][0-9]) ARCH="${CAP}-real" ;;
  esac
fi

# --- 2-3. configure and build -----------------------------------------------------------
TARGETS=(cuda_host_tests cuda_emulation_tests cuda_model_emulation_tests
  cuda_speculative_emulation_tests cuda_gpu_tests bench_cuda detinfer_cli generate_cli_tests)
if [[ -n "$NVCC" ]]; then
  TORCH_PREFIX="$(timeout 60 python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)"
  TORCH_CUDA="$(timeout 60 python3 -c 'import torch; print(torch.version.cuda)' 2>/dev/null || true)"
  say "nvcc: $NVCC; CUDA arch for this build: $ARCH; pip torch: ${TORCH_PREFIX:-none} (CUDA ${TORCH_CUDA:-none})"
  CONFIG=(-S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDETINFER_WITH_CUDA=ON
    -DCMAKE_CUDA_COMPILER="$NVCC" -DDETINFER_CUDA_ARCHITECTURES="$ARCH"
    -DDETINFER_BUILD_TORCH_OPS=OFF -DDETINFER_BUILD_TESTS=ON -DDETINFER_BUILD_BENCH=ON)
  configured=0
  if [[ -n "$TORCH_PREFIX" ]]; then
    run configure-pip-torch 150 cmake "${CONFIG[@]}" -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" && configured=1
    if ((configured == 0)); then
      STATUS=0 # the fallback below decides
      rm -f "$BUILD/CMakeCache.txt"
      rm -rf "$BUILD/CMakeFiles"
    fi
  fi
  if ((configured == 0)); then
    run configure-system-torch 150 cmake "${CONFIG[@]}" && configured=1
  fi
  if ((configured == 1)); then
    if ninja -C "$BUILD" -t targets all 2>/dev/null | grep '^bench_cuda_cublas:' >/dev/null; then
      TARGETS+=(bench_cuda_cublas)
    fi
    run build 330 ninja -C "$BUILD" -j "$JOBS" "${TARGETS[@]}"
  fi
elif [[ -x "$BUILD/tests/cuda/cuda_gpu_tests" ]]; then
  say "no nvcc: using the prebuilt binaries in $BUILD"
else
  say "no nvcc and no prebuilt $BUILD/tests/cuda/cuda_gpu_tests: nothing to run"
  exit 1
fi

# --- 4. tests -----------------------------------------------------------------------------
GPU_TESTS="$BUILD/tests/cuda/cuda_gpu_tests"
ABS_LOGS="$(cd "$LOGS" && pwd)"
if [[ -x "$GPU_TESTS" ]]; then
  if [[ -n "$NVCC" ]]; then # configured here: the ctest labels (XML per program in $LOGS)
    run ctest-cuda-gpu 150 env GTEST_OUTPUT="xml:$ABS_LOGS/" \
      ctest --test-dir "$BUILD" -L 'cuda|gpu' -V --output-on-failure -j 4
    run ctest-generate-cli 60 ctest --test-dir "$BUILD" -R '^generate_cli_tests$' -V \
      --output-on-failure
  else # carried binaries: ctest files hold the other machine's paths, run them directly
    run cuda-host-tests 60 "$BUILD/tests/cuda/cuda_host_tests" --gtest_output="xml:$ABS_LOGS/"
    run cuda-gpu-tests 150 "$GPU_TESTS" --gtest_output="xml:$ABS_LOGS/"
  fi
  grep -h '\[ DEVICE' "$LOGS"/*.log 2>/dev/null | head -n 1 | tee -a "$LOGS/summary.log"
  if grep -q 'skipped: no CUDA device' "$LOGS"/*.log 2>/dev/null; then
    say "GPU tests FAILED to find a device: $(grep -hom1 'skipped: no CUDA device (.*)' "$LOGS"/*.log | head -n 1)"
    STATUS=1
  fi
  SANITIZER="$(command -v compute-sanitizer || true)"
  [[ -z "$SANITIZER" && -x /usr/local/cuda/bin/compute-sanitizer ]] && SANITIZER=/usr/local/cuda/bin/compute-sanitizer
  if [[ -n "$SANITIZER" ]]; then
    # A few tests that cover every kernel family without long runs under instrumentation.
    MEM='CudaGpu.CanonicalLinearUnalignedWeightsEqualReference:CudaGpu.CanonicalRopeEqualsReference:CudaGpu.AddAndKvWriteAreExact:CudaGpu.SampleDrawEqualsCpuDraw:CudaGpu.EmbeddingWidensExactlyAndFlagsBadIds:CudaGpu.CanonicalAttentionEqualsReference:CudaGpu.SplitAttentionIsInvariantToBatchChunkingAndLayout:CudaSessionGpu.DeviceInvariantOutputIgnoresBatchingChunkingAndCacheHits'
    RACE='CudaGpu.CanonicalSoftmaxAndLogSoftmaxEqualReference:CudaGpu.ArgmaxTiesToLowestIndexAndNanIsAnError:CudaGpu.CanonicalAttentionEqualsReference:CudaGpu.FastRmsNormIsBatchInvariantAndAccurate'
    run sanitizer-memcheck 100 "$SANITIZER" --tool memcheck --error-exitcode 1 "$GPU_TESTS" --gtest_filter="$MEM"
    run sanitizer-racecheck 100 "$SANITIZER" --tool racecheck --error-exitcode 1 "$GPU_TESTS" --gtest_filter="$RACE"
  else
    say "compute-sanitizer not found: sanitizer runs skipped"
  fi
else
  say "missing $GPU_TESTS: tests skipped"
  STATUS=1
fi

# --- 5. benchmarks --------------------------------------------------------------------------
for b in bench_cuda bench_cuda_cublas; do
  if [[ -x "$BUILD/bench/$b" ]]; then
    run "$b" 100 "$BUILD/bench/$b" --benchmark_min_time=0.05 \
      --benchmark_out="$LOGS/$b.json" --benchmark_out_format=json
  fi
done

# End to end: a Qwen2.5-0.5B-wide random model (8 layers, bf16, byte vocabulary: no
# tokenizer needed, the bench feeds token ids), tokens/s in the three numerics modes.
CLI="$BUILD/bin/detinfer"
[[ -x "$CLI" ]] || CLI="$(find "$BUILD" -name detinfer -type f -perm -u+x 2>/dev/null | head -n 1)"
if [[ -n "$CLI" && -x "$CLI" ]]; then
  E2E_MODEL="$BUILD/gpu-check-model"
  run make-e2e-model 60 "$CLI" make-tiny-model --arch qwen2 --dtype bf16 --hidden 896 \
    --intermediate 4864 --layers 8 --heads 14 --kv-heads 2 --vocab 258 --max-positions 4096 \
    --tie-word-embeddings --seed 1 --out "$E2E_MODEL" &&
    run bench-e2e 150 bash -c 'out=$1; shift; exec "$@" >"$out"' _ "$LOGS/bench_e2e.json" \
      "$CLI" bench --model "$E2E_MODEL" --device cuda --modes canonical,device_invariant,fast \
      --batch 1,16 --prompt-tokens 128 --decode-tokens 32 --repeats 3 --json
else
  say "missing the detinfer program: end-to-end benchmark skipped"
  STATUS=1
fi

# --- table (last) -------------------------------------------------------------------------
say "done in $(($(date +%s) - START_S))s, status $STATUS (logs and JSON in $LOGS)"
grep -E 'FAILED|ok$' "$LOGS/summary.log" | sed 's/^\[gpu-check *[0-9]*s\] /  /'
if command -v python3 >/dev/null; then
  python3 - "$LOGS" <<'PY' | tee "$LOGS/table.txt"
import json, os, sys
logs = sys.argv[1]
runs = {}
for name in ("bench_cuda", "bench_cuda_cublas"):
    path = os.path.join(logs, name + ".json")
    if os.path.exists(path):
        for b in json.load(open(path)).get("benchmarks", []):
            if not b.get("error_occurred"):
                runs[b["name"].replace("/manual_time", "")] = b
shapes = ["K896xN4864", "K4864xN896", "K3584xN18944", "K18944xN3584"]
def t(name):
    b = runs.get(name)
    return None if b is None else b["real_time"]
def bw(name):
    b = runs.get(name)
    return None if b is None else b.get("bytes_per_second", 0) / 1e9
def section(title, cols, rows):
    if rows:
        print("%-34s %12s %12s %8s" % ((title,) + cols))
        for r in rows:
            print("%-34s %12.1f %12.1f %8.2f" % r)
        print()
rows = []
for s in range(4):
    for m in (1, 8, 64, 4096):
        a, c = t("BM_TensorCoreVsCublas/%d/%d" % (s, m)), t("BM_Cublas/%d/%d" % (s, m))
        if a and c:
            rows.append(("%s M=%d" % (shapes[s], m), a, c, c / a))
section("device-invariant linear vs cuBLAS", ("tc us", "cublas us", "ratio"), rows)
rows = []
for s in range(4):
    copy = bw("BM_CopyD2D/%d" % s)
    for m in (1, 8, 64):
        g = bw("BM_CanonicalLinearBf16/%d/%d" % (s, m))
        if g and copy:
            rows.append(("%s M=%d" % (shapes[s], m), g, copy, g / copy))
section("canonical bf16 linear vs D2D copy", ("GB/s", "copy GB/s", "ratio"), rows)
rows = []
for s in range(4):
    for m in (1, 8, 64, 4096):
        a, c = t("BM_TensorCoreLinear/%d/%d" % (s, m)), t("BM_CanonicalLinearBf16/%d/%d" % (s, m))
        if a and c:
            rows.append(("%s M=%d" % (shapes[s], m), a, c, c / a))
section("tensor-core vs canonical linear", ("tc us", "canon us", "speedup"), rows)
rows = []
for big in (0, 1):
    for keys in (2048, 8192):
        a, c = t("BM_AttentionDecode/1/%d/%d" % (big, keys)), t("BM_AttentionDecode/0/%d/%d" % (big, keys))
        if a and c:
            rows.append(("%s keys=%d" % ("7B" if big else "0.5B", keys), a, c, c / a))
section("split vs canonical attention", ("split us", "canon us", "speedup"), rows)
rows = []
for n in (1, 16, 4096):
    a, c = t("BM_RmsNorm/1/%d" % n), t("BM_RmsNorm/0/%d" % n)
    if a and c:
        rows.append(("rows=%d n=3584" % n, a, c, c / a))
section("fast vs canonical RMSNorm", ("fast us", "canon us", "speedup"), rows)
e2e = os.path.join(logs, "bench_e2e.json")
if os.path.exists(e2e):
    try:
        text = open(e2e).read()
        res = json.loads(text[text.index("{"):]).get("results", [])
        print("%-34s %12s %12s" % ("end to end (cuda)", "prefill t/s", "decode t/s"))
        for r in res:
            print("%-34s %12.1f %12.1f" % ("%s batch=%d" % (r["mode"], r["batch"]),
                                           r["prefill_tokens_per_s"], r["decode_tokens_per_s"]))
        print()
    except (ValueError, KeyError) as e:
        print("(end-to-end results unreadable: %s)" % e)
if not runs:
    print("(no benchmark results)")
PY
fi
exit $STATUS
