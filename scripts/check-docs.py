#!/usr/bin/env python3
"""Checks the claims about the `detinfer` program that a script can check in README.md and
docs/*.md against the program itself.

  1. every `detinfer <command>` in the README's command table is a subcommand of
     `detinfer --help`, and every subcommand has a row;
  2. every HTTP route the README names (`/v1/...`, `/health`, `/metrics`) is in the
     server's route table (the `router.add("METHOD", "/path", ...)` calls of the program's
     sources), and every route of that table is named in the README;
  3. every `--flag` written after `detinfer <command>` (in a code block line with its
     `\\` continuations, or in an inline code span) is an option in `detinfer <command>
     --help`; an inline code span that starts with a `--flag` (the flag written on its
     own in the text) names an option of some command, or a flag spelled by one of the
     repository's other programs (bench/, tools/, scripts/,
     tests/deploy/) or by the build and test
     tools listed in OTHER_TOOLS.
  A route with a parameter ("/v1/models/{}") is named when its parent ("/v1/models") is.

Usage: check-docs.py DETINFER_BINARY CLI_SOURCE_DIR [--root DIR]
Run by ctest as `docs_check` (only when the program is built). Exits 0 when every claim
holds, 1 listing each one that does not.
"""
import os
import re
import subprocess
import sys

# Flags of build and test tools that the docs mention on their own (cmake, ctest,
# compute-sanitizer, Google Test/Benchmark, pip), not options of `detinfer`.
OTHER_TOOLS = {
    "--preset", "--build", "--target", "--test-dir", "--output-on-failure", "--parallel",
    "--install", "--prefix", "--config", "--tool", "--leak-check", "--gtest_filter",
    "--gtest_repeat", "--benchmark_filter", "--benchmark_repetitions", "--help",
    "--benchmark_min_time", "--benchmark_format", "--benchmark_out", "--user",
    "--break-system-packages", "--no-deps", "--fix", "--version",
    "--fmad",                        # nvcc (docs/building.md, docs/cuda.md)
    "--memory", "--build-arg",       # docker (docs/deploy.md)
    "--generation-config",           # vLLM's flag that detinfer's defaults follow (docs/chat.md)
}
# Options of `detinfer` that --help hides on purpose (documented as hidden where named).
HIDDEN = {"--inject-consistency-mismatches"}  # serve: tests and drills (docs/server.md)
# Programs whose command lines the check skips (their flags are not detinfer's).
PROGRAM = re.compile(r"(?:^|[\s$|&;(`])((?:[\w./-]*/)?detinfer)\s+([a-z][a-z-]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9*{},-]*[a-z0-9*}])")
ROUTE = re.compile(r"(?<![\w/.-])(/v1/[a-z/{}]+[a-z}]|/health|/metrics)(?![\w/.-])")


def matches(flag, options):
    """Whether `flag` names an option; `--redis-*-timeout-ms` and `--a-{b,c}` are patterns."""
    if "*" not in flag and "{" not in flag:
        return flag in options
    pattern = re.escape(flag).replace(r"\*", "[a-z0-9-]+")
    pattern = re.sub(r"\\\{([^}]*)\\\}", lambda m: "(" + m.group(1).replace(",", "|") + ")",
                     pattern)
    return any(re.fullmatch(pattern, o) for o in options)


def run_help(binary, *args):
    out = subprocess.run([binary, *args, "--help"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise SystemExit(f"check-docs: `{binary} {' '.join(args)} --help` failed: {out.stderr}")
    return out.stdout


def cli_commands(binary):
    text = run_help(binary)
    section = text.split("Subcommands:", 1)[1] if "Subcommands:" in text else ""
    return [m.group(1) for m in re.finditer(r"^  ([a-z][a-z-]*)\s", section, re.M)]


def cli_flags(binary, command):
    return set(re.findall(r"(?:^|[\s,])(--[a-z][a-z0-9-]*)", run_help(binary, command), re.M))


def server_routes(cli_dir):
    routes = set()
    for dirpath, _, files in os.walk(cli_dir):
        for f in files:
            if f.endswith((".cpp", ".h")):
                text = open(os.path.join(dirpath, f), encoding="utf-8").read()
                routes.update(re.findall(r'router\.add\(\s*"[A-Z]+"\s*,\s*"([^"]+)"', text))
    return routes


def program_strings(root):
    """Flags that the repository's other programs spell ("--name" or "name" in CLI11)."""
    found = set()
    for top in ("bench", "tools", "scripts", "tests/deploy"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".cpp", ".h", ".py", ".sh")):
                    text = open(os.path.join(dirpath, f), encoding="utf-8", errors="replace").read()
                    found.update(FLAG.findall(text))
    return found


def logical_lines(text):
    """The doc as (line number, text) units: code-block lines joined over trailing
    backslashes, and prose paragraphs joined into one line (code spans may wrap)."""
    text = text.replace("--[no-]", "--")  # `--[no-]prefix-cache`: the option --prefix-cache
    units, in_code, buf, start = [], False, [], 0
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            if buf:
                units.append((start, " ".join(buf)))
                buf = []
            in_code = not in_code
            continue
        if in_code:
            if not buf:
                start = i
            buf.append(line.rstrip("\\").strip())
            if not line.rstrip().endswith("\\"):
                units.append((start, " ".join(buf)))
                buf = []
        elif line.strip() == "" or line.startswith(("#", "|")):
            if buf:
                units.append((start, " ".join(buf)))
                buf = []
            if line.strip():
                units.append((i, line))
        else:
            if not buf:
                start = i
            buf.append(line.strip())
    if buf:
        units.append((start, " ".join(buf)))
    return units


def invocations(unit):
    """(command, the text of its arguments) for each `detinfer <command>` in a unit: a code
    span, or the rest of a code line up to a pipe or a shell separator."""
    pieces = re.findall(r"`([^`]+)`", unit) if "`" in unit else [unit]
    for piece in pieces:
        for m in PROGRAM.finditer(piece):
            rest = re.split(r"\s(?:\||&&|;|>)\s|`", piece[m.end():])[0]
            yield m.group(2), rest


def check_file(path, commands, flags_of, loose_ok, problems):
    text = open(path, encoding="utf-8").read()
    name = os.path.basename(path)
    lines = text.replace("--[no-]", "--").splitlines()

    def line_of(flag, start):  # the line that writes `flag`, from the unit's first line
        return next((i for i in range(start, len(lines) + 1) if flag in lines[i - 1]), start)

    for start, unit in logical_lines(text):
        attributed = set()
        for command, rest in invocations(unit):
            if command not in commands:
                continue  # `detinfer serve:` output lines, prose like "detinfer is"
            for flag in FLAG.findall(rest):
                attributed.add(flag)
                if not matches(flag, flags_of(command)) and flag not in HIDDEN:
                    problems.append(f"{name}:{line_of(flag, start)}: `detinfer {command}` has no "
                                    f"option {flag}")
        # A flag written on its own: an inline code span that starts with it.
        alone = {m.group(1) for m in re.finditer(r"`(--[a-z][a-z0-9*{},-]*[a-z0-9*}])[^`]*`", unit)}
        for flag in sorted(alone):
            if flag not in attributed and not loose_ok(flag):
                problems.append(f"{name}:{line_of(flag, start)}: {flag} is not an option of any detinfer "
                                "command (nor of another program of this repository)")


def main():
    args = sys.argv[1:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if "--root" in args:
        i = args.index("--root")
        root = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary, cli_dir = args
    problems = []
    commands = cli_commands(binary)
    if not commands:
        problems.append(f"`{binary} --help` lists no subcommands")
    cache = {}

    def flags_of(command):
        if command not in cache:
            cache[command] = cli_flags(binary, command)
        return cache[command]

    all_flags = set().union(*(flags_of(c) for c in commands)) if commands else set()
    others = program_strings(root) | OTHER_TOOLS

    def loose_ok(flag):
        return matches(flag, all_flags) or flag in others or flag in HIDDEN

    readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    table = set()
    for line in readme.splitlines():
        if line.startswith("| `detinfer "):
            table.update(re.findall(r"`detinfer ([a-z][a-z-]*)", line.split("|")[1]))
    for c in sorted(table - set(commands)):
        problems.append(f"README.md: the command table lists `detinfer {c}`, which "
                        "`detinfer --help` does not have")
    for c in sorted(set(commands) - table):
        problems.append(f"README.md: `detinfer {c}` has no row in the command table")

    routes = server_routes(cli_dir)
    named = set(ROUTE.findall(readme))
    for r in sorted(named - routes):
        problems.append(f"README.md names the route {r}, which the server's route table "
                        f"({cli_dir}) does not have")
    for r in sorted(routes - named):
        # "/v1/models/{}" (one model) is covered by its collection, "/v1/models".
        if not (r.endswith("/{}") and r[: -len("/{}")] in named):
            problems.append(f"README.md does not name the server's route {r}")

    docs = [os.path.join(root, "README.md")]
    docs += sorted(os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs"))
                   if f.endswith(".md"))
    for path in docs:
        check_file(path, set(commands), flags_of, loose_ok, problems)

    for p in problems:
        print("check-docs: " + p, file=sys.stderr)
    if problems:
        return 1
    print(f"check-docs: {len(commands)} commands, {len(routes)} routes and the flags of "
          f"{len(docs)} documents agree with the program")
    return 0


if __name__ == "__main__":
    sys.exit(main())
