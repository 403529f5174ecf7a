#!/usr/bin/env python3
"""Renders every conversation of fixtures/conversations.json with every template of
fixtures/templates.json the way transformers' apply_chat_template does, and writes the
results to fixtures/expected/<template>.json, and the small feature templates of
fixtures/snippets.json to fixtures/expected/snippets.json (the C++ conformance test compares
against them). Needs Python's jinja2 (Debian: python3-jinja2). Also usable as a module: the live
conformance test imports render().

The environment follows transformers' chat template utilities: an
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols
extension, a `generation` block tag, raise_exception and strftime_now globals, and a tojson
filter that calls json.dumps (ensure_ascii=False, optional indent/separators/sort_keys).
strftime_now formats a fixed UTC time (NOW) so that outputs are reproducible.
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = 1767225600  # 2026-01-01T00:00:00Z; the C++ test passes the same time
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %}: renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.datetime.fromtimestamp(NOW, tz=datetime.timezone.utc).strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                       extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def context(template_spec, conversation):
    """The variables apply_chat_template passes: messages, tools (None when absent),
    documents (None), add_generation_prompt, the special tokens, extra kwargs."""
    ctx = {
        "messages": conversation["messages"],
        "tools": conversation.get("tools"),
        "documents": None,
        "add_generation_prompt": conversation["add_generation_prompt"],
    }
    for key, value in template_spec.items():
        if key != "file" and value is not None:
            ctx[key] = value
    ctx.update(conversation.get("extra", {}))
    return ctx


_COMPILED = {}


def render(env, source, ctx):
    """{"output": text} or {"error": message, "error_type": exception class name}."""
    try:
        key = (id(env), source)
        if key not in _COMPILED:
            _COMPILED[key] = env.from_string(source)
        return {"output": _COMPILED[key].render(**ctx)}
    except jinja2.exceptions.TemplateSyntaxError as e:
        return {"error": e.message, "error_type": type(e).__name__}
    except Exception as e:  # noqa: BLE001 - every failure is a result to compare
        return {"error": str(e), "error_type": type(e).__name__}


def main():
    with open(os.path.join(FIXTURES, "templates.json"), encoding="utf-8") as f:
        templates = json.load(f)
    with open(os.path.join(FIXTURES, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    env = environment()
    os.makedirs(os.path.join(FIXTURES, "expected"), exist_ok=True)
    for name, spec in templates.items():
        with open(os.path.join(FIXTURES, spec["file"]), encoding="utf-8") as f:
            source = f.read()
        results = []
        for conv in conversations:
            result = {"conversation": conv["name"]}
            result.update(render(env, source, context(spec, conv)))
            results.append(result)
        with open(os.path.join(FIXTURES, "expected", name + ".json"), "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1, ensure_ascii=False)
            f.write("\n")
        errors = sum(1 for r in results if "error" in r)
        print(f"{name}: {len(results)} conversations, {errors} rejected", file=sys.stderr)
    write_snippets(env)


def write_snippets(env):
    """fixtures/snippets.json: small templates covering the engine's features, one by one."""
    with open(os.path.join(FIXTURES, "snippets.json"), encoding="utf-8") as f:
        cases = json.load(f)
    results = [render(env, case["template"], case["context"]) for case in cases]
    with open(os.path.join(FIXTURES, "expected", "snippets.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"snippets: {len(results)} cases", file=sys.stderr)


if __name__ == "__main__":
    main()
