#!/usr/bin/env python3
"""Deterministic test lines for the tokenizer cross-check (scripts/tokenizer-crosscheck.sh).

Usage: gen_lines.py CORPUS_DIR COUNT SEED > lines.txt
Mixes lines of the repository's Markdown (prose, code, tables) with generated text: CJK
runs, Latin with combining marks, Cyrillic, kana, emoji (also ZWJ sequences), characters
from every plane, whitespace runs (spaces, tabs, no-break spaces), digits, and the special
token strings of the models checked, placed inside words. No newline inside a line.
"""
import pathlib
import random
import sys

SPECIALS = ["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<s>", "</s>", "<unk>",
            "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<pad>",
            "<mask>", "[INST]", "[/INST]", "<0x0A>", "▁", "▁▁"]


def rand_char(r: random.Random) -> str:
    kind = r.randrange(9)
    if kind == 0:
        return chr(r.randrange(0x4E00, 0x9FFF))  # CJK
    if kind == 1:
        return chr(r.randrange(0x61, 0x7B)) + chr(r.randrange(0x300, 0x36F))  # combining
    if kind == 2:
        return chr(r.randrange(0x410, 0x44F))  # Cyrillic
    if kind == 3:
        return chr(r.randrange(0x3041, 0x30FF))  # kana
    if kind == 4:
        e = chr(r.randrange(0x1F300, 0x1F64F))
        return e + "\u200d" + chr(r.randrange(0x1F300, 0x1F64F)) if r.random() < 0.3 else e
    if kind == 5:
        while True:  # any plane, no surrogates, no controls, no line breaks
            c = r.randrange(0x20, 0x10FFFF)
            if not (0xD800 <= c <= 0xDFFF) and c not in (0x85, 0x2028, 0x2029, 0x7F):
                return chr(c)
    if kind == 6:
        return r.choice([" ", "  ", "\t", " \t ", "\u00a0", "   "])
    if kind == 7:
        return str(r.randrange(0, 10 ** r.randrange(1, 8)))
    return chr(r.randrange(0x20, 0x7F))


def main() -> None:
    corpus_dir, count, seed = pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    r = random.Random(seed)
    corpus = []
    for p in sorted(corpus_dir.glob("*.md")):
        corpus += [l for l in p.read_text(encoding="utf-8").split("\n") if l.strip()]
    for _ in range(count):
        kind = r.randrange(4)
        if kind == 0:
            line = r.choice(corpus)
        elif kind == 1:
            line = "".join(rand_char(r) for _ in range(r.randrange(1, 120)))
        elif kind == 2:  # corpus text with special strings and odd characters spliced in
            words = r.choice(corpus).split(" ")
            for _ in range(r.randrange(1, 4)):
                i = r.randrange(len(words) + 1)
                words.insert(i, r.choice(SPECIALS) if r.random() < 0.6 else rand_char(r))
            line = (" " if r.random() < 0.2 else "").join(words) if r.random() < 0.5 else \
                " ".join(words)
        else:
            line = " " * r.randrange(0, 3) + r.choice(corpus)[: r.randrange(1, 60)] + \
                " " * r.randrange(0, 3)
        sys.stdout.write(line.replace("\r", "").replace("\n", " ") + "\n")


if __name__ == "__main__":
    main()
