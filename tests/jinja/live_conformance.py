#!/usr/bin/env python3
"""Live conformance: renders seeded random conversations with every fixture template in
Python Jinja2 (transformers' settings, from gen_expected.py) and with detinfer's engine
(the jinja_render program), and compares the results byte for byte (or the error texts).

Usage: live_conformance.py --render PATH/jinja_render [--seed N] [--count N]
Exit status: 0 all equal, 1 a difference (printed), 77 Python's jinja2 is not installed
(ctest reports the test as skipped).
"""
import argparse
import json
import os
import random
import subprocess
import sys

try:
    import gen_expected
except ImportError as e:  # jinja2 missing
    print(f"skipped: Python jinja2 is not importable ({e}); apt install python3-jinja2",
          file=sys.stderr)
    sys.exit(77)

TEXTS = [
    "Hello!", "", "  padded  ", "multi\nline\n\ntext", "crlf\r\nline", "tab\there",
    "unicode: Grüße, 你好, 🌍🚀, עברית, e\u0301, \u2028sep", "{{ not_a_var }} {% if %} {# c #}",
    "<|im_start|>user\n<|im_end|></s><s>[INST]<|eot_id|>", "quotes \"double\" 'single' \\back",
    "{\"json\": [1, 2.5, null, true]}", "<think>\nhidden\n</think>\n\nvisible", "100%", "a" * 300,
]
TOOLS = [
    {"type": "function", "function": {"name": "lookup", "description": "Look up a term.",
     "parameters": {"type": "object", "properties": {"term": {"type": "string"}},
                    "required": ["term"]}}},
    {"type": "function", "function": {"name": "add", "description": "Add numbers — fast.",
     "parameters": {"type": "object", "properties": {"a": {"type": "number"},
                                                      "b": {"type": "integer", "default": 2}},
                    "required": ["a"]}}},
]


def random_args(rng):
    pool = [{"term": rng.choice(TEXTS)}, {"a": rng.choice([1, 2.5, -0.125, 1e-9, 3e20]), "b": 7},
            {"nested": {"list": [1, "x", None, False], "empty": {}}}]
    args = rng.choice(pool)
    return json.dumps(args, ensure_ascii=False) if rng.random() < 0.3 else args


def random_message(rng, role):
    msg = {"role": role, "content": rng.choice(TEXTS)}
    if role == "assistant" and rng.random() < 0.25:
        calls = [{"id": f"call_{rng.randrange(1000)}", "type": "function",
                  "function": {"name": rng.choice(["lookup", "add"]), "arguments": random_args(rng)}}
                 for _ in range(rng.choice([1, 1, 2]))]
        msg["tool_calls"] = calls
        if rng.random() < 0.5:
            msg["content"] = rng.choice(["", None])
    if role == "assistant" and rng.random() < 0.2:
        msg["reasoning_content"] = rng.choice(TEXTS)
    if role == "tool" and rng.random() < 0.5:
        msg["tool_call_id"] = f"call_{rng.randrange(1000)}"
    return msg


def random_conversation(rng, index):
    messages = []
    if rng.random() < 0.5:
        messages.append(random_message(rng, "system"))
    for turn in range(rng.randrange(1, 6)):
        messages.append(random_message(rng, "user"))
        if rng.random() < 0.85:
            messages.append(random_message(rng, "assistant"))
            if "tool_calls" in messages[-1]:
                messages.append(random_message(rng, "tool"))
                messages.append(random_message(rng, "assistant"))
    if rng.random() < 0.1:  # an order some templates reject
        rng.shuffle(messages)
    conv = {"name": f"random_{index}", "messages": messages,
            "add_generation_prompt": rng.random() < 0.6}
    if rng.random() < 0.4:
        conv["tools"] = TOOLS[: rng.randrange(1, 3)]
    if rng.random() < 0.3:
        conv["extra"] = {"enable_thinking": rng.random() < 0.5}
    return conv


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--render", required=True)
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--count", type=int, default=40)
    opts = parser.parse_args()
    rng = random.Random(opts.seed)
    fixtures = gen_expected.FIXTURES
    with open(os.path.join(fixtures, "templates.json"), encoding="utf-8") as f:
        templates = json.load(f)
    env = gen_expected.environment()
    requests, expected, labels = [], [], []
    conversations = [random_conversation(rng, k) for k in range(opts.count)]
    for name, spec in templates.items():
        with open(os.path.join(fixtures, spec["file"]), encoding="utf-8") as f:
            source = f.read()
        for conv in conversations:
            ctx = gen_expected.context(spec, conv)
            requests.append(json.dumps({"template": source, "context": ctx}, ensure_ascii=False))
            expected.append(gen_expected.render(env, source, ctx))
            labels.append(f"{name} x {conv['name']}")
    proc = subprocess.run([opts.render], input="\n".join(requests) + "\n", capture_output=True,
                          text=True, encoding="utf-8", check=True)
    results = [json.loads(line) for line in proc.stdout.split("\n") if line]
    if len(results) != len(requests):
        print(f"renderer answered {len(results)} of {len(requests)} requests", file=sys.stderr)
        return 1
    failures = 0
    for label, want, got in zip(labels, expected, results):
        same = got.get("output") == want["output"] if "output" in want else (
            "error" in got and (got["error"] == want["error"]
                                or want["error_type"].startswith("Template")
                                and want["error_type"] != "TemplateError"))
        if not same:
            failures += 1
            if failures <= 10:
                print(f"DIFF {label}\n  jinja2: {want!r}\n  detinfer: {got!r}", file=sys.stderr)
    print(f"live conformance: {len(requests) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
