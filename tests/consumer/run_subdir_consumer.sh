#!/usr/bin/env bash
# The add_subdirectory consumer in the minimal configuration: libtorch, hiredis and the
# CLI off (DETINFER_WITH_TORCH=OFF DETINFER_WITH_REDIS=OFF DETINFER_BUILD_CLI=OFF).
#  1. Configures tests/consumer/subdir_project (which add_subdirectory()s this tree) with
#     those packages made unfindable (CMAKE_DISABLE_FIND_PACKAGE_*, a pkg-config that
#     refuses hiredis and cpp-httplib), detinfer's tests on and -Werror.
#  2. Builds the consumer programs and a few of detinfer's test programs, checks that no
#     compiled file included a libtorch, hiredis, CLI11 or cpp-httplib header and that
#     libdetinfer.so needs none of their libraries.
#  3. Runs the consumers on the tiny model and those tests (fast mode and Redis tiers are
#     Error(kUnsupported) there: session_optional_parts_tests).
# The build folder is kept between runs (incremental); a cold run compiles the library once
# more (docs/building.md gives the cost).
# Usage: run_subdir_consumer.sh <detinfer source> <scratch dir> <detinfer_tiny_model> [generator]
set -euo pipefail
SRC="$1"
WORK="$2"
TINY="$3"
GEN="${4:-Ninja}"
HERE="$(cd "$(dirname "$0")" && pwd)"
BUILD="$WORK/build"
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$WORK"

# session_tests is left out while SessionTest.BadInputIsAClearErrorAndTheSessionKeepsServing
# is timing-dependent (issue 14, item 9).
TESTS=(core_tests cache_tests session_fingerprint_tests session_optional_parts_tests capi_test)
cmake -S "$HERE/subdir_project" -B "$BUILD" -G "$GEN" -DDETINFER_SOURCE="$SRC" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DDETINFER_WITH_TORCH=OFF -DDETINFER_WITH_REDIS=OFF -DDETINFER_BUILD_CLI=OFF \
  -DDETINFER_WITH_CUDA=OFF -DDETINFER_BUILD_TESTS=ON -DDETINFER_BUILD_BENCH=OFF \
  -DDETINFER_WERROR=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_hiredis=ON \
  -DPKG_CONFIG_EXECUTABLE="$HERE/pkg-config-without-optional" \
  >"$WORK/configure.log" 2>&1 || { cat "$WORK/configure.log"; fail "configure"; }
grep -E "detinfer: DETINFER_(WITH_TORCH|WITH_REDIS|BUILD_CLI)=OFF -> OFF" "$WORK/configure.log"
[ "$(grep -cE 'detinfer: DETINFER_(WITH_TORCH|WITH_REDIS|BUILD_CLI)=OFF -> OFF' \
     "$WORK/configure.log")" -eq 3 ] || fail "an optional part was not OFF"

cmake --build "$BUILD" --target consumer_subdir consumer_subdir_c detinfer_tiny_model \
  "${TESTS[@]}" >"$WORK/build.log" 2>&1 || { tail -50 "$WORK/build.log"; fail "build"; }

# No translation unit included an optional package's header ...
if [ "$GEN" = "Ninja" ]; then
  deps="$(ninja -C "$BUILD" -t deps | grep -E '/(torch|ATen|c10|hiredis|CLI|httplib\.h)' || true)"
  [ -z "$deps" ] || fail "the minimal build included optional headers:
$(sort -u <<<"$deps" | head)"
fi
# ... and the library links none of their libraries.
lib="$(find "$BUILD" -name 'libdetinfer.so' | head -1)"
needed="$(readelf -d "$lib" | grep NEEDED)"
if grep -qE 'torch|c10|hiredis' <<<"$needed"; then fail "libdetinfer.so needs: $needed"; fi
echo "minimal libdetinfer.so: no libtorch, hiredis, CLI11 or cpp-httplib"

"$TINY" "$WORK/tiny-model"
"$BUILD/consumer_subdir" "$WORK/tiny-model" | tee "$WORK/consumer.txt"
grep -q '^result: ' "$WORK/consumer.txt" || fail "no result line"
"$BUILD/consumer_subdir_c" "$WORK/tiny-model" | tail -1

regex="^($(IFS='|'; echo "${TESTS[*]}")|capi_make_model)\$"
ctest --test-dir "$BUILD/detinfer" -R "$regex" --output-on-failure -j 2 \
  || fail "detinfer's tests in the minimal build"
echo "add_subdirectory consumer (minimal build) passed"
