#!/usr/bin/env python3
"""Tests scripts/check-docs.py on a copy of the docs with one false claim of each kind
added: a command in the README's table that the program lacks, a route the server lacks,
a flag written after `detinfer serve` that serve lacks, one after `detinfer generate`, and
a flag on its own that no program has. Each must be reported (and the copy rejected).

Usage: test-check-docs.py DETINFER_BINARY CLI_SOURCE_DIR
Run by ctest as `docs_check_selftest`. Exits 0 when every false claim is reported.
"""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def edit(path, old, new):
    text = open(path, encoding="utf-8").read()
    if old not in text:
        raise SystemExit(f"test-check-docs: {path} no longer contains {old!r}; update the test")
    open(path, "w", encoding="utf-8").write(text.replace(old, new, 1))


def main():
    binary, cli_dir = sys.argv[1:3]
    with tempfile.TemporaryDirectory(prefix="detinfer-docscheck-") as tmp:
        shutil.copy(os.path.join(ROOT, "README.md"), tmp)
        shutil.copytree(os.path.join(ROOT, "docs"), os.path.join(tmp, "docs"))
        readme = os.path.join(tmp, "README.md")
        edit(readme, "| `detinfer env`, `detinfer version` |",
             "| `detinfer env`, `detinfer version`, `detinfer frobnicate` |")
        edit(readme, "`/v1/models`, `/health`", "`/v1/models`, `/v1/embeddings`, `/health`")
        edit(readme, "$ detinfer serve --model /tmp/x --port 8080",
             "$ detinfer serve --model /tmp/x --port 8080 --max-new-tokens 3")
        with open(os.path.join(tmp, "docs", "cli.md"), "a", encoding="utf-8") as f:
            f.write("\nUse `--no-such-flag` and `detinfer generate --temperature 0 --bogus`.\n")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "check-docs.py"),
                            "--root", tmp, binary, cli_dir], capture_output=True, text=True)
    out = r.stdout + r.stderr
    expected = ["`detinfer frobnicate`", "/v1/embeddings", "`detinfer serve` has no option "
                "--max-new-tokens", "`detinfer generate` has no option --bogus",
                "--no-such-flag is not an option"]
    missing = [e for e in expected if e not in out]
    if r.returncode != 1 or missing:
        print(f"FAIL: rc {r.returncode} (want 1); not reported: {missing}\n{out}", file=sys.stderr)
        return 1
    print(f"ok: all {len(expected)} false claims reported:\n{out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
