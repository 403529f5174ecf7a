#!/usr/bin/env python3
"""Checks that docs/architecture.md's module table matches the build and the sources.

Three views of the module graph must agree (up to transitivity: a table row may omit an
edge implied through another module, e.g. `engine` need not list `core`):
  1. docs/architecture.md, the "depends on" column of the module table;
  2. the DEPS of every detinfer_add_module(...) in src/*/CMakeLists.txt;
  3. the #include "module/..." lines of src/<module>/ (every included module must be
     reachable through the CMake DEPS, and so through the table).
Run by ctest as `architecture_check`. Exits 0 when they agree, 1 listing each difference.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Sub-libraries that belong to a module folder (model_fast: the libtorch forward pass).
ALIASES = {"model_fast": "model", "kernels_cuda": "kernels/cuda"}
# Variables in DEPS lists: what they can expand to.
VARIABLES = {"${_model_cuda_deps}": ["kernels/cuda"]}


def doc_edges():
    text = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    edges = {}
    for line in text.splitlines():
        m = re.match(r"^\|\s*`([a-z_/]+)`\s*\|.*\|\s*([^|]*)\|\s*$", line)
        if not m:
            continue
        deps = re.sub(r"\([^)]*\)", "", m.group(2))  # "(when built)"
        edges[m.group(1)] = {d.strip() for d in deps.split(",") if d.strip() not in ("", "—")}
    return edges


def cmake_edges():
    edges = {}
    src = os.path.join(ROOT, "src")
    for dirpath, _, files in os.walk(src):
        if "CMakeLists.txt" not in files:
            continue
        text = open(os.path.join(dirpath, "CMakeLists.txt"), encoding="utf-8").read()
        text = re.sub(r"#[^\n]*", "", text)
        for m in re.finditer(r"detinfer_add_module\(\s*([A-Za-z_]+)(.*?)\)", text, re.S):
            name = ALIASES.get(m.group(1), m.group(1))
            words = m.group(2).split()
            deps = set()
            if "DEPS" in words:
                for w in words[words.index("DEPS") + 1:]:
                    if w in ("SOURCES", "LIBS", "NOT_IN_LIBRARY"):
                        break
                    for d in VARIABLES.get(w, [w]):
                        deps.add(ALIASES.get(d, d))
            deps.discard(name)
            edges.setdefault(name, set()).update(deps)
    return edges


def include_edges(modules):
    edges = {}
    src = os.path.join(ROOT, "src")
    for module in modules:
        base = os.path.join(src, module)
        for dirpath, dirs, files in os.walk(base):
            # kernels/cuda is a module of its own inside kernels/.
            rel = os.path.relpath(dirpath, src)
            owner = "kernels/cuda" if rel.startswith("kernels/cuda") else rel.split(os.sep)[0]
            if owner != module:
                continue
            for f in files:
                if not f.endswith((".h", ".cpp", ".cu", ".cuh", ".in")):
                    continue
                for line in open(os.path.join(dirpath, f), encoding="utf-8", errors="replace"):
                    m = re.match(r'\s*#\s*include\s+"([a-z_]+)/(cuda/)?', line)
                    if not m:
                        continue
                    target = m.group(1) + ("/cuda" if m.group(1) == "kernels" and m.group(2) else "")
                    if target in modules and target != module:
                        edges.setdefault(module, {}).setdefault(target, f"{rel}/{f}")
    return edges


def closure(edges, start):
    seen, stack = set(), list(edges.get(start, ()))
    while stack:
        m = stack.pop()
        if m not in seen:
            seen.add(m)
            stack.extend(edges.get(m, ()))
    return seen


def main():
    doc, cmake = doc_edges(), cmake_edges()
    problems = []
    for m in sorted(set(doc) ^ set(cmake)):
        where = "docs/architecture.md" if m in doc else "src/*/CMakeLists.txt"
        problems.append(f"module {m} appears only in {where}")
    for m in sorted(set(doc) & set(cmake)):
        d, c = closure(doc, m), closure(cmake, m)
        if d - c:
            problems.append(f"{m}: the table lets it use {sorted(d - c)}, its CMake DEPS do not")
        if c - d:
            problems.append(f"{m}: its CMake DEPS reach {sorted(c - d)}, the table does not")
    for m, targets in sorted(include_edges(set(cmake)).items()):
        for t, where in sorted(targets.items()):
            if t not in closure(cmake, m):
                problems.append(f"{m}: {where} includes {t}/, which its CMake DEPS do not reach")
    for p in problems:
        print("check-architecture: " + p, file=sys.stderr)
    if problems:
        return 1
    print(f"check-architecture: {len(cmake)} modules; the table, CMake DEPS and includes agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
