#!/usr/bin/env python3
"""Checks that docs/architecture.md's module table matches the build and the sources.

Three views of the module graph must agree (up to transitivity: a table row may omit an
edge implied through another module, e.g. `engine` need not list `core`):
  1. docs/architecture.md, the "depends on" column of the module table;
  2. the DEPS of every detinfer_add_module(...) in src/*/CMakeLists.txt;
  3. the #include "module/..." lines of src/<module>/ (every included module must be
     reachable through the CMake DEPS, and so through the table).
Public headers belong to modules too: docs/architecture.md's "Public headers" table names
the module that implements each include/detinfer/ header, and
  4. every header of include/detinfer/ has exactly one row there (and every row a header);
  5. an #include "detinfer/<header>" in src/<module>/ or in another public header is an
     edge to the header's module like any other: one that the CMake DEPS do not reach
     (an upward include, e.g. the engine including the session's facade) is an error;
  6. the module a row names includes its header somewhere (a wrong row is caught).
Run by ctest as `architecture_check` (and `architecture_check_selftest` runs it on a copy
of the tree with an upward include added). Exits 0 when they agree, 1 listing each
difference. `--root DIR` checks another checkout (default: this script's).
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if len(sys.argv) == 3 and sys.argv[1] == "--root":
    ROOT = os.path.abspath(sys.argv[2])
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


def public_owners():
    """docs/architecture.md's "Public headers" table: header file name -> module."""
    text = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    owners, problems = {}, []
    for line in text.splitlines():
        m = re.match(r"^\|\s*`([a-z_]+\.h)`\s*\|\s*`([a-z_/]+)`\s*\|", line)
        if not m:
            continue
        if m.group(1) in owners:
            problems.append(f"public header {m.group(1)} has two rows in docs/architecture.md")
        owners[m.group(1)] = m.group(2)
    return owners, problems


def public_headers():
    """include/detinfer/'s headers (a generated header X.h.in counts as X.h)."""
    base = os.path.join(ROOT, "include", "detinfer")
    return sorted(f[: -len(".in")] if f.endswith(".h.in") else f for f in os.listdir(base)
                  if f.endswith((".h", ".h.in")))


PUBLIC_INCLUDE = re.compile(r'\s*#\s*include\s+[<"]detinfer/([a-z_]+\.h)[>"]')


def public_include_edges(modules, owners):
    """(includer module, header, where) for every #include "detinfer/X.h" of src/<module>/
    and of the public headers themselves (a header's includer is its own module)."""
    found = []
    src = os.path.join(ROOT, "src")
    for module in sorted(modules):
        for dirpath, _, files in os.walk(os.path.join(src, module)):
            rel = os.path.relpath(dirpath, src)
            owner = "kernels/cuda" if rel.startswith("kernels/cuda") else rel.split(os.sep)[0]
            if owner != module:
                continue
            for f in sorted(files):
                if not f.endswith((".h", ".cpp", ".cu", ".cuh", ".in")):
                    continue
                for line in open(os.path.join(dirpath, f), encoding="utf-8", errors="replace"):
                    m = PUBLIC_INCLUDE.match(line)
                    if m:
                        found.append((module, m.group(1), f"{rel}/{f}"))
    base = os.path.join(ROOT, "include", "detinfer")
    for f in sorted(os.listdir(base)):
        header = f[: -len(".in")] if f.endswith(".h.in") else f
        if header not in owners:
            continue
        for line in open(os.path.join(base, f), encoding="utf-8", errors="replace"):
            m = PUBLIC_INCLUDE.match(line)
            if m and m.group(1) != header:
                found.append((owners[header], m.group(1), f"include/detinfer/{f}"))
    return found


def public_header_problems(cmake):
    owners, problems = public_owners()
    headers = public_headers()
    for h in headers:
        if h not in owners:
            problems.append(f"include/detinfer/{h} has no row in docs/architecture.md's "
                            "\"Public headers\" table (which module implements it?)")
    for h, m in sorted(owners.items()):
        if h not in headers:
            problems.append(f"docs/architecture.md lists public header {h}, which does not exist")
        if m not in cmake:
            problems.append(f"public header {h}: its module {m} is not a module")
    includers = {}
    for includer, header, where in public_include_edges(set(cmake), owners):
        if header not in owners:
            if header not in headers:
                problems.append(f"{where} includes detinfer/{header}, which is not a public header")
            continue  # a header without a row is reported above
        target = owners[header]
        includers.setdefault(header, set()).add(includer)
        if target != includer and target not in closure(cmake, includer):
            problems.append(f"{includer}: {where} includes detinfer/{header} (module {target}), "
                            "which its CMake DEPS do not reach: an upward include")
    for h, m in sorted(owners.items()):
        if h in headers and h != "export.h" and m in cmake and m not in includers.get(h, ()):
            problems.append(f"public header {h}: no file of src/{m}/ includes it, so module "
                            f"{m} does not implement it (fix its row)")
    return problems


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
    problems += public_header_problems(cmake)
    for p in problems:
        print("check-architecture: " + p, file=sys.stderr)
    if problems:
        return 1
    print(f"check-architecture: {len(cmake)} modules, {len(public_headers())} public headers; "
          "the tables, CMake DEPS and includes agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
