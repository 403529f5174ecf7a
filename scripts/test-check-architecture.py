#!/usr/bin/env python3
"""Tests scripts/check-architecture.py on copies of this tree: it passes on the copy as it
is, and fails, naming the offending file, on each deliberately broken copy:
  - src/model/model.h includes the session's facade (detinfer/session.h): an upward
    include of a public header by a module;
  - include/detinfer/hash.h (core) includes detinfer/session.h: an upward include between
    public headers;
  - src/engine/engine.h includes "session/session_impl.h": an upward module include;
  - a new public header without a row in docs/architecture.md's table.
Run by ctest as `architecture_check_selftest`. Exits 0 when every case behaves, 1 otherwise.
"""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "check-architecture.py")


def copy_tree(dst):
    shutil.copytree(os.path.join(ROOT, "src"), os.path.join(dst, "src"))
    shutil.copytree(os.path.join(ROOT, "include"), os.path.join(dst, "include"))
    os.makedirs(os.path.join(dst, "docs"))
    shutil.copy(os.path.join(ROOT, "docs", "architecture.md"), os.path.join(dst, "docs"))


def run(root):
    r = subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def add_include(path, include):
    """Adds `#include <include>` after the first #include line of `path`."""
    lines = open(path, encoding="utf-8").read().split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("#include"))
    lines.insert(at + 1, f"#include {include}")
    open(path, "w", encoding="utf-8").write("\n".join(lines))


CASES = [
    ("model includes the session facade",
     lambda d: add_include(os.path.join(d, "src/model/model.h"), '"detinfer/session.h"'),
     ["model/model.h", "detinfer/session.h", "upward include"]),
    ("a core public header includes the session facade",
     lambda d: add_include(os.path.join(d, "include/detinfer/hash.h"), '"detinfer/session.h"'),
     ["include/detinfer/hash.h", "detinfer/session.h", "upward include"]),
    ("engine includes a session header",
     lambda d: add_include(os.path.join(d, "src/engine/engine.h"), '"session/session_impl.h"'),
     ["engine/engine.h", "session/"]),
    ("a public header without a table row",
     lambda d: open(os.path.join(d, "include/detinfer/extra.h"), "w").write("#pragma once\n"),
     ["include/detinfer/extra.h", "no row"]),
]


def main():
    failures = []
    with tempfile.TemporaryDirectory(prefix="detinfer-archcheck-") as tmp:
        clean = os.path.join(tmp, "clean")
        copy_tree(clean)
        rc, out = run(clean)
        if rc != 0:
            failures.append(f"the unmodified copy fails (rc {rc}):\n{out}")
        for i, (name, inject, expected) in enumerate(CASES):
            d = os.path.join(tmp, f"case{i}")
            copy_tree(d)
            inject(d)
            rc, out = run(d)
            missing = [e for e in expected if e not in out]
            if rc != 1 or missing:
                failures.append(f"{name}: rc {rc} (want 1), output lacks {missing}:\n{out}")
            else:
                print(f"ok: {name}: {out.strip().splitlines()[0]}")
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
