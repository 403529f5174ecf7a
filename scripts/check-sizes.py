#!/usr/bin/env python3
"""Checks the project's size rules on tracked C/C++/CUDA files of src/, include/ and
examples/ and tools/detinfer/ (tests are exempt): no file over 500 lines, no function body over 80 lines.

Functions are found with a brace-matching heuristic: strings, character literals and
comments are blanked out, then every `{` that follows a `)` (optionally followed by
qualifiers such as const, noexcept, override, a trailing return type or a constructor's
initializer list) and is not a control statement opens a function whose length is
counted from its signature line to the matching `}`. Lambdas inside a function count
toward it. Run by ctest as `size_check`. Exits 0 when every file passes, 1 listing the
offenders (path:line and size), 77 when git is unavailable. Files listed in
scripts/size-exceptions.txt are reported but do not fail the check.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
DIRS = ("src/", "include/", "examples/", "tools/detinfer/", "python/src/")
EXTENSIONS = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".c")
CONTROL = re.compile(r"\b(if|for|while|switch|catch|do)\s*\(")


def blank(text):
    """Replaces comments, strings and character literals by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


NOT_FUNCTION = re.compile(r"^(namespace|struct|class|union|enum|extern)\b|\b(namespace|struct|class)\s+\w*\s*$")


def blank_preprocessor(code):
    """Blanks preprocessor directives (with their continuation lines)."""
    lines, out, cont = code.split("\n"), [], False
    for line in lines:
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            out.append(" " * len(line))
        else:
            out.append(line)
    return "\n".join(out)


def functions(text):
    """Yields (first line, line count) of each outermost function body."""
    code = blank_preprocessor(blank(text))
    depth_stack = []  # for each open brace: True when it opens a counted function
    in_function = 0
    for m in re.finditer(r"[{}]", code):
        pos = m.start()
        if code[pos] == "{":
            is_fn = False
            if in_function == 0:
                head = code[max(0, pos - 600):pos]
                head = head[max(head.rfind(";"), head.rfind("}"), head.rfind("{")) + 1:]
                stripped = head.strip()
                if (")" in stripped and not CONTROL.search(stripped) and
                        not NOT_FUNCTION.search(stripped) and "=" not in stripped.split("(")[0]):
                    is_fn = True
            depth_stack.append((is_fn, pos, head if is_fn else ""))
            if is_fn:
                in_function += 1
        elif depth_stack:
            is_fn, start, head = depth_stack.pop()
            if is_fn:
                in_function -= 1
                sig = start - len(head) + (len(head) - len(head.lstrip()))
                first = code.count("\n", 0, sig) + 1
                last = code.count("\n", 0, pos) + 1
                yield first, last - first + 1


def exceptions():
    path = os.path.join(ROOT, "scripts", "size-exceptions.txt")
    if not os.path.exists(path):
        return set()
    lines = open(path, encoding="utf-8").read().splitlines()
    return {l.split("#")[0].strip() for l in lines if l.split("#")[0].strip()}


def tracked_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", *DIRS], cwd=ROOT, check=True,
                             capture_output=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return None
    return [f for f in out.split("\0") if f.endswith(EXTENSIONS)]


def main():
    files = tracked_files()
    if files is None:
        print("check-sizes: not a git checkout, no list of tracked files", file=sys.stderr)
        return 77
    problems, excused, allowed = [], [], exceptions()
    for rel in sorted(files):
        path = os.path.join(ROOT, rel)
        if not os.path.exists(path):
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        found = []
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > MAX_FILE_LINES:
            found.append(f"{rel}: {lines} lines (max {MAX_FILE_LINES})")
        for first, count in functions(text):
            if count > MAX_FUNCTION_LINES:
                found.append(f"{rel}:{first}: function of {count} lines (max {MAX_FUNCTION_LINES})")
        (excused if rel in allowed else problems).extend(found)
        if rel in allowed and not found:
            print(f"check-sizes: {rel} passes now: remove it from scripts/size-exceptions.txt")
    for p in excused:
        print("check-sizes: excepted (scripts/size-exceptions.txt): " + p)
    for p in problems:
        print("check-sizes: " + p, file=sys.stderr)
    if problems:
        return 1
    print(f"check-sizes: {len(files)} files; none over {MAX_FILE_LINES} lines, "
          f"no function over {MAX_FUNCTION_LINES} (exceptions listed above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
