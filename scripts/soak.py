#!/usr/bin/env python3
"""Bounded soak test of `detinfer serve` (issue 15): N clients on loopback for D seconds,
mixing streamed / non-streamed, greedy / seeded-sampled and cancelled requests (the
client leaves mid-request). Checks: zero 5xx, every completed answer bit-identical (text
and chain digest) to the same request run alone before the soak, and RSS growth under 5%
between the end of the warm-up (first 10%) and the end. Prints a JSON summary; exit 1 on
any failure. Standard library only; choices are seeded (random.Random(client id)).
"""
import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_hostile import rss_kib, start_server  # noqa: E402

PROMPTS = ["The quick brown fox", "Once upon a time", "Deterministic inference",
           "h\u00e9llo w\u00f6rld", "1 2 3 4 5", "Stream me"]


def templates():
    out = []
    for i, p in enumerate(PROMPTS):
        out.append({"prompt": p, "max_tokens": 8 + 4 * i, "temperature": 0, "ignore_eos": True})
        out.append({"prompt": p, "max_tokens": 8 + 4 * i, "temperature": 0.8, "seed": 100 + i,
                    "ignore_eos": True, "n": 1 + i % 3})
    return out


def post(port, body, stream=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    b = dict(body)
    if stream:
        b["stream"] = True
    c.request("POST", "/v1/completions", body=json.dumps(b),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, data


def answer(status, data, stream):
    """(texts per choice, digests per choice) of a 200 answer."""
    if not stream:
        j = json.loads(data)
        return ([c["text"] for c in j["choices"]], j["detinfer"]["digests"])
    texts, digests = {}, {}
    for line in data.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        for ch in ev.get("choices", []):
            texts[ch["index"]] = texts.get(ch["index"], "") + ch["text"]
            if ch.get("finish_reason"):
                digests[ch["index"]] = ev["detinfer"]["digest"]
    n = len(texts)
    return ([texts[i] for i in range(n)], [digests.get(i) for i in range(n)])


def leave_early(port, body, stream):
    b = dict(body, max_tokens=2000, stream=stream)
    payload = json.dumps(b).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
    if stream:
        s.settimeout(30)
        s.recv(256)  # the head and first bytes of the stream
    else:
        time.sleep(0.02)
    s.close()


def run_clients(client, clients, duration, pid):
    """Runs client(i) on `clients` threads; RSS (KiB) after the first 10% and at the end."""
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    time.sleep(duration * 0.1)
    warm = rss_kib(pid)
    for t in threads:
        t.join()
    return warm, rss_kib(pid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/release/bin/detinfer")
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--clients", type=int, default=32)
    a = ap.parse_args()
    model = os.path.join(tempfile.mkdtemp(prefix="soak-model-"), "tiny")
    subprocess.run([a.binary, "make-tiny-model", "--arch", "qwen2", "--seed", "1", "--out", model],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc, port = start_server(a.binary, model, [])
    tmpl = templates()
    stats = {"requests": 0, "cancelled_by_client": 0, "status": {}, "mismatches": 0,
             "errors": []}
    lock = threading.Lock()
    try:
        # References: each request alone, non-streamed.
        refs = []
        for t in tmpl:
            status, data = post(port, t)
            assert status == 200, data
            refs.append(answer(status, data, False))
        start = time.time()
        deadline = start + a.duration
        warm = {}

        def client(cid):
            rng = random.Random(cid)
            while time.time() < deadline:
                k = rng.randrange(len(tmpl))
                kind = rng.choice(["plain", "plain", "stream", "stream", "leave", "leave_stream"])
                try:
                    if kind.startswith("leave"):
                        leave_early(port, tmpl[k], kind == "leave_stream")
                        with lock:
                            stats["cancelled_by_client"] += 1
                        continue
                    stream = kind == "stream"
                    status, data = post(port, tmpl[k], stream)
                    with lock:
                        stats["requests"] += 1
                        stats["status"][status] = stats["status"].get(status, 0) + 1
                    if status == 200 and answer(status, data, stream) != refs[k]:
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
    out = {"duration_s": a.duration, "clients": a.clients, **stats,
           "status": {str(k): v for k, v in stats["status"].items()},
           "errors": stats["errors"][:5], "error_count": len(stats["errors"]),
           "rss_warm_kib": warm["rss_kib"], "rss_end_kib": end_rss,
           "rss_growth_pct": round(100 * growth, 2), "exit_code": proc.returncode}
    ok = (five_xx == 0 and stats["mismatches"] == 0 and not stats["errors"] and growth < 0.05
          and proc.returncode == 0)
    out["result"] = "pass" if ok else "FAIL"
    print(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
