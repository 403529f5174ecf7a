#!/usr/bin/env python3
"""Bounded soak of `detinfer serve` for issue 33: N clients on loopback for D seconds,
mixing chat and completions requests: streamed and not, greedy, seeded sampling, top-p,
and cancelled ones (the client leaves mid-request). The model is the tiny qwen2 with a
vocabulary of --vocab tokens (default 151,936, Qwen's size, so per-token sampling cost is
realistic). Reports: 5xx count, completed answers that differ from the same request run
alone before the soak (text and chain digest), RSS growth from the end of the warm-up
(first 10%) to the end, and the median latency of a 32-token top-p chat request against
the same greedy one. Prints a JSON summary; exit 1 when 5xx > 0, mismatches > 0, client
errors, RSS growth >= 10% or the latency ratio > 1.5. Standard library only; choices are
seeded (random.Random(client id)); bounded in time (--duration) and count (--max-requests).
"""
import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_hostile import start_server  # noqa: E402
from soak import answer as completion_answer  # noqa: E402
from soak import leave_early, run_clients  # noqa: E402

MESSAGES = [[{"role": "user", "content": "Name a fox."}],
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "h\u00e9llo"}],
            [{"role": "user", "content": "Weather?"},
             {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
              "function": {"name": "w", "arguments": {"zcity": "Bern", "aunit": "C"}}}]},
             {"role": "tool", "content": "21", "tool_call_id": "c1"}]]
PROMPTS = ["The quick brown fox", "Deterministic inference", "1 2 3 4 5"]
GREEDY32 = {"path": "/v1/chat/completions", "kind": "greedy32",
            "body": {"messages": MESSAGES[0], "max_tokens": 32, "temperature": 0,
                     "ignore_eos": True}}
TOPP32 = {"path": "/v1/chat/completions", "kind": "topp32",
          "body": {"messages": MESSAGES[0], "max_tokens": 32, "temperature": 0.8, "top_p": 0.9,
                   "seed": 7, "ignore_eos": True}}


def templates():
    out = [GREEDY32, TOPP32]
    for i, m in enumerate(MESSAGES):
        out.append({"path": "/v1/chat/completions", "kind": "chat",
                    "body": {"messages": m, "max_tokens": 8 + 4 * i, "temperature": 0}})
        out.append({"path": "/v1/chat/completions", "kind": "chat",
                    "body": {"messages": m, "max_tokens": 8 + 4 * i, "temperature": 0.8,
                             "top_p": 0.9, "seed": 100 + i, "n": 1 + i % 2}})
    for i, p in enumerate(PROMPTS):
        out.append({"path": "/v1/completions", "kind": "completion",
                    "body": {"prompt": p, "max_tokens": 8 + 4 * i, "temperature": 0,
                             "ignore_eos": True}})
        out.append({"path": "/v1/completions", "kind": "completion",
                    "body": {"prompt": p, "max_tokens": 8 + 4 * i, "temperature": 0.8,
                             "top_p": 0.95, "seed": 200 + i, "ignore_eos": True}})
    return out


def post(port, t, stream=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    b = dict(t["body"])
    if stream:
        b["stream"] = True
    c.request("POST", t["path"], body=json.dumps(b), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, data


def answer(t, data, stream):
    """(texts per choice, digests per choice) of a 200 answer, chat or completion."""
    if t["path"] == "/v1/completions":
        return completion_answer(200, data, stream)
    if not stream:
        j = json.loads(data)
        return ([c["message"]["content"] for c in j["choices"]], j["detinfer"]["digests"])
    texts, digests = {}, {}
    for line in data.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        for ch in ev.get("choices", []):
            texts[ch["index"]] = texts.get(ch["index"], "") + ch["delta"].get("content", "")
            if ch.get("finish_reason"):
                digests[ch["index"]] = ev["detinfer"]["digest"]
    n = len(texts)
    return ([texts[i] for i in range(n)], [digests.get(i) for i in range(n)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/release/bin/detinfer")
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--max-requests", type=int, default=1000000)
    a = ap.parse_args()
    model = os.path.join(tempfile.mkdtemp(prefix="soak-chat-model-"), "tiny")
    subprocess.run([a.binary, "make-tiny-model", "--arch", "qwen2", "--seed", "1", "--vocab",
                    str(a.vocab), "--out", model],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc, port = start_server(a.binary, model, ["--host", "127.0.0.1"])
    tmpl = templates()
    stats = {"requests": 0, "cancelled_by_client": 0, "status": {}, "mismatches": 0,
             "errors": []}
    latency = {"greedy32": [], "topp32": []}
    lock = threading.Lock()
    try:
        refs = []  # each request alone, non-streamed
        for t in tmpl:
            status, data = post(port, t)
            assert status == 200, data
            refs.append(answer(t, data, False))
        deadline = time.time() + a.duration
        warm = {}

        def client(cid):
            rng = random.Random(cid)
            while time.time() < deadline:
                with lock:
                    if stats["requests"] + stats["cancelled_by_client"] >= a.max_requests:
                        return
                k = rng.randrange(len(tmpl))
                t = tmpl[k]
                kind = rng.choice(["plain", "plain", "stream", "stream", "leave"])
                try:
                    if kind == "leave":
                        if t["path"] == "/v1/completions":
                            leave_early(port, t["body"], rng.random() < 0.5)
                            with lock:
                                stats["cancelled_by_client"] += 1
                            continue
                        kind = "plain"
                    stream = kind == "stream"
                    t0 = time.monotonic()
                    status, data = post(port, t, stream)
                    elapsed = time.monotonic() - t0
                    with lock:
                        stats["requests"] += 1
                        stats["status"][status] = stats["status"].get(status, 0) + 1
                        if t["kind"] in latency and not stream and status == 200:
                            latency[t["kind"]].append(elapsed)
                    if status == 200 and answer(t, data, stream) != refs[k]:
                        with lock:
                            stats["mismatches"] += 1
                except Exception as e:  # noqa: BLE001 - counted, reported
                    with lock:
                        stats["errors"].append(repr(e)[:200])

        warm["rss_kib"], end_rss = run_clients(client, a.clients, a.duration, proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    five_xx = sum(v for k, v in stats["status"].items() if k >= 500)
    growth = (end_rss - warm["rss_kib"]) / warm["rss_kib"]
    med = {k: (statistics.median(v) if v else None) for k, v in latency.items()}
    ratio = (med["topp32"] / med["greedy32"]) if med["topp32"] and med["greedy32"] else None
    out = {"duration_s": a.duration, "clients": a.clients, "vocab": a.vocab, **stats,
           "status": {str(k): v for k, v in stats["status"].items()}, "five_xx": five_xx,
           "errors": stats["errors"][:5], "error_count": len(stats["errors"]),
           "rss_warm_kib": warm["rss_kib"], "rss_end_kib": end_rss,
           "rss_growth_pct": round(100 * growth, 2),
           "median_latency_s": {k: (round(v, 3) if v else None) for k, v in med.items()},
           "latency_samples": {k: len(v) for k, v in latency.items()},
           "topp_over_greedy": round(ratio, 2) if ratio else None, "exit_code": proc.returncode}
    ok = (five_xx == 0 and stats["mismatches"] == 0 and not stats["errors"] and growth < 0.10
          and ratio is not None and ratio <= 1.5 and proc.returncode == 0)
    out["result"] = "pass" if ok else "FAIL"
    print(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
