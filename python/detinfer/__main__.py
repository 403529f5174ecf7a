"""python3 -m detinfer generate --model DIR --prompt TEXT [--max-new-tokens N ...]

A thin entry point over Session.generate: every GenerationConfig field is a flag
(--max-new-tokens 16, --seed 1, --stop-strings '["\\n"]'; values are JSON, else text),
every SessionOptions keyword too (--threads 2). Prints the text, or with --json the
tokens, text, finish reason, seed and digest.
"""

import argparse
import json
import sys

import detinfer


def _value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m detinfer")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="Generate from a prompt")
    g.add_argument("--model", required=True, help="Model folder")
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="Prompt text")
    src.add_argument("--tokens", help="Prompt token ids, comma-separated")
    g.add_argument("--json", action="store_true", help="Print a JSON object")
    for name in detinfer.SESSION_OPTIONS:
        g.add_argument("--" + name.replace("_", "-"), dest="opt_" + name, type=_value,
                       help="Session option " + name)
    for name in detinfer.GENERATION_FIELDS:
        g.add_argument("--" + name.replace("_", "-"), dest="cfg_" + name, type=_value,
                       help="Generation option " + name)
    sub.add_parser("version", help="Print the version")
    return p


def _generate(args: argparse.Namespace) -> None:
    picked = {k: v for k, v in vars(args).items() if v is not None}
    options = {k[4:]: v for k, v in picked.items() if k.startswith("opt_")}
    config = {k[4:]: v for k, v in picked.items() if k.startswith("cfg_")}
    prompt = args.prompt
    if prompt is None:
        prompt = [int(t) for t in args.tokens.split(",")]
    with detinfer.Session(args.model, **options) as s:
        r = s.generate(prompt, **config)
    if args.json:
        print(json.dumps({"tokens": r.tokens, "text": r.text, "finish_reason": r.finish_reason,
                          "seed": r.seed, "digest": r.digest_hex}))
    else:
        print(r.text)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "version":
            print(detinfer.__version__)
        else:
            _generate(args)
    except (detinfer.Error, ValueError) as e:
        print(f"detinfer: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
