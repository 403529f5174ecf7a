#!/usr/bin/env bash
# Checks that every tracked C++ file is formatted (clang-format, .clang-format: Google,
# 100 columns). Run by ctest as `format_check`. Exits 77 (ctest: skipped) when clang-format
# or a git checkout is unavailable, 1 naming the files to reformat, 0 when all pass.
# Fix with: git ls-files '*.cpp' '*.h' ... | xargs clang-format -i
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null 2>&1; then
  echo "check-format: clang-format not installed (scripts/install-deps.sh installs it)" >&2
  exit 77
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check-format: not a git checkout, no list of tracked files" >&2
  exit 77
fi
# One clang-format process for all files (hundreds of processes take minutes on a busy
# machine); its diagnostics name each file that would change ("FILE:LINE:COL: error: ...").
log="$(git ls-files -z -- '*.cpp' '*.cc' '*.h' '*.hpp' '*.cu' '*.cuh' |
  xargs -0 -r clang-format --dry-run -Werror 2>&1 >/dev/null)"
rc=$?
mapfile -t bad < <(printf '%s\n' "$log" | sed -nE 's/^([^:]+):[0-9]+:[0-9]+: error: .*/\1/p' | sort -u)
if [[ $rc -ne 0 && ${#bad[@]} -eq 0 ]]; then
  printf 'check-format: clang-format failed:\n%s\n' "$log" >&2
  exit 1
fi
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "check-format: ${#bad[@]} file(s) not clang-formatted; run clang-format -i on:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: all tracked C++ files are formatted"
