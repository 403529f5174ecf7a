#!/usr/bin/env python3
"""Independent validation of constrained decoding (docs/structured.md).

Runs structured_corpus (random schemas x seeds on the tiny random-weight model) and
checks every output with Python's jsonschema (Debian's python3-jsonschema), which shares
no code with detinfer's grammar: each output that finished with "stop" must parse as JSON
and validate against its schema (formats checked too); outputs that hit max_tokens
finish with "length". Exit 77 (skipped) when jsonschema is missing.
"""
import argparse
import json
import subprocess
import sys

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is not installed (scripts/install-deps.sh)")
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--schemas", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=2)
    a = ap.parse_args()
    out = subprocess.run([a.corpus, a.work, str(a.schemas), str(a.seeds)],
                         check=True, capture_output=True, text=True).stdout
    lines = [json.loads(x) for x in out.splitlines() if x.strip()]
    assert len(lines) == a.schemas * a.seeds, len(lines)
    cls = jsonschema.Draft202012Validator
    stop = length = 0
    schemas_seen = set()
    for rec in lines:
        schema = rec["schema"]
        schemas_seen.add(json.dumps(schema, sort_keys=True))
        cls.check_schema(schema)
        if rec["finish_reason"] == "length":
            length += 1
            continue
        assert rec["finish_reason"] == "stop", rec
        value = json.loads(rec["text"])
        cls(schema, format_checker=cls.FORMAT_CHECKER).validate(value)
        stop += 1
    print(f"{len(lines)} outputs of {len(schemas_seen)} distinct schemas: "
          f"{stop} complete and valid, {length} hit max_tokens")
    # A random-weight model completes bounded structures; most outputs must be complete.
    assert stop >= 0.8 * len(lines), (stop, len(lines))
    assert len(schemas_seen) >= 500, len(schemas_seen)  # the acceptance: >= 500 schemas


if __name__ == "__main__":
    main()
