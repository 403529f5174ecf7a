#!/usr/bin/env python3
"""Renders the Qwen3 chat template on bench/jinja_conversation.json with detinfer
(bench_jinja) and with Python Jinja2 as transformers configures it (tests/jinja/
gen_expected.py), in the same run, and prints both medians and their ratio. Both sides measure CPU time
(process time) per render, so that other load on the machine does not skew the ratio. When the jinja_render test
driver is built next to it (build/release/tests/jinja/jinja_render), it also checks that
both render the same prompt.

Usage: bench/bench_jinja_vs_python.py build/release/bench/bench_jinja [repetitions]
"""
import json
import os
import statistics
import subprocess
import sys
import time
import timeit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "jinja"))
import gen_expected  # noqa: E402


def python_median_us(repetitions):
    with open(os.path.join(ROOT, "tests/jinja/fixtures/templates/qwen3.jinja"), encoding="utf-8") as f:
        template = gen_expected.environment().from_string(f.read())
    with open(os.path.join(ROOT, "bench/jinja_conversation.json"), encoding="utf-8") as f:
        ctx = json.load(f)
    number = 200
    times = [t / number * 1e6 for t in timeit.repeat(lambda: template.render(**ctx),
                                                      number=number, repeat=repetitions,
                                                      timer=time.process_time)]
    return statistics.median(times), template.render(**ctx)


def detinfer_median_us(binary, repetitions):
    out = subprocess.run([binary, "--benchmark_filter=BM_RenderQwen3_20Messages",
                          f"--benchmark_repetitions={repetitions}", "--benchmark_format=json"],
                         capture_output=True, text=True, check=True).stdout
    runs = [b for b in json.loads(out)["benchmarks"]
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median"]
    return runs[0]["cpu_time"]  # microseconds (the benchmark's unit)


def main():
    binary = sys.argv[1]
    repetitions = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    cpp = detinfer_median_us(binary, repetitions)
    py, prompt = python_median_us(repetitions)
    render = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(binary))),
                          "tests", "jinja", "jinja_render")
    if os.path.exists(render):
        with open(os.path.join(ROOT, "tests/jinja/fixtures/templates/qwen3.jinja"), encoding="utf-8") as f:
            request = json.dumps({"template": f.read(), "context": json.load(
                open(os.path.join(ROOT, "bench/jinja_conversation.json"), encoding="utf-8"))})
        got = json.loads(subprocess.run([render], input=request + "\n", capture_output=True,
                                        text=True, check=True).stdout)
        print("same prompt:", got.get("output") == prompt, f"({len(prompt)} chars)")
    print(f"detinfer: {cpp:.1f} us CPU/render (median of {repetitions})")
    print(f"python jinja2 {gen_expected.jinja2.__version__}: {py:.1f} us CPU/render (median of {repetitions})")
    print(f"ratio python/detinfer: {py / cpp:.2f}x")


if __name__ == "__main__":
    main()
