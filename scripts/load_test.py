#!/usr/bin/env python3
"""Bounded load test of `detinfer serve` over loopback HTTP (issue 32 item 5).

Sends N concurrent POST /v1/completions requests (one thread each) with short distinct
prompts and a fixed mix of `max_tokens`, `ignore_eos: true` (so every request generates
exactly what it asks), about half greedy (temperature 0), the rest seeded sampling (temperature
0.8, `seed` per request); which request gets which is drawn from `--seed`. Records per
request the latency (submit to the last byte of the answer), the tokens generated and the
chain digest of the answer (`detinfer.digest`). Reports throughput (generated tokens /
wall seconds of the whole batch), p50/p99 latency, completed/failed counts and the
server's `detinfer_preemptions_total` / `detinfer_resumptions_total` (absent before
preemption existed: reported as null).

Bounded: `--max-wall` seconds for the whole batch (requests unanswered by then count as
failed) and the request count the mix sets. Standard library only.

Usage:
  # start the server itself (flags after --serve-args are passed to `detinfer serve`):
  scripts/load_test.py --binary build/release/bin/detinfer --model /tmp/m \\
      --serve-args "--threads 2 --kv-budget-bytes 16777216" \\
      --digests-out /tmp/old.digests --json-out /tmp/old.json
  # or against a running server, comparing every request's digest with another run:
  scripts/load_test.py --url http://127.0.0.1:8080 --compare /tmp/old.digests

  # solo runs: only requests 3 and 17 of the same mix, one after the other (each alone on
  # the server), their digests compared with a concurrent run's:
  scripts/load_test.py --model /tmp/m --solo 3,17 --compare /tmp/old.digests

Under `chrt -f 10 python3 scripts/load_test.py ...` the server it starts inherits the
real-time policy. Exit status: 0, or 1 when a request failed or a digest differs.
"""
import argparse
import http.client
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

DEFAULT_MIX = "2048:4,512:4,256:8,128:8,64:8,32:8,16:8"
WORDS = ["river", "engine", "orange", "quiet", "silver", "garden", "window", "number",
         "planet", "letter", "winter", "yellow", "market", "bridge", "forest", "candle"]


def parse_mix(text):
    """'2048:4,16:8' -> [(2048, 4), (16, 8)] (max_tokens, how many requests)."""
    out = []
    for part in text.split(","):
        tokens, count = part.split(":")
        out.append((int(tokens), int(count)))
    return out


def make_requests(mix, seed):
    """The request bodies, in submission order: the mix shuffled by `seed`; every request
    has its own prompt; half (chosen by `seed`) sample with their own seed."""
    rng = random.Random(seed)
    lengths = [t for t, n in mix for _ in range(n)]
    rng.shuffle(lengths)
    bodies = []
    for i, max_tokens in enumerate(lengths):
        words = " ".join(rng.choice(WORDS) for _ in range(4))
        body = {"prompt": f"Request {i}: {words}", "max_tokens": max_tokens,
                "ignore_eos": True, "temperature": 0}
        if rng.random() < 0.5:
            body.update(temperature=0.8, seed=1000 + i)
        bodies.append(body)
    return bodies


def start_server(binary, model, serve_args):
    """Starts `detinfer serve` on a free port; (process, base URL, log path)."""
    d = tempfile.mkdtemp(prefix="load-test-")
    port_file, log_path = os.path.join(d, "port"), os.path.join(d, "log")
    log = open(log_path, "w")
    cmd = [binary, "serve", "--model", model, "--port", "0", "--port-file", port_file]
    proc = subprocess.Popen(cmd + shlex.split(serve_args), stdout=log, stderr=log)
    for _ in range(1200):
        if os.path.exists(port_file):
            with open(port_file) as f:
                text = f.read()
            if text.endswith("\n"):
                return proc, f"http://127.0.0.1:{int(text)}", log_path
        if proc.poll() is not None:
            sys.exit(f"server exited: see {log_path}")
        time.sleep(0.1)
    proc.kill()
    sys.exit(f"server did not start: see {log_path}")


def stop_server(proc):
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:  # requests left running past the wall-time cap
        proc.kill()
        proc.wait()


def connect(url, timeout):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=max(timeout, 0.1))


def get_text(url, path, timeout=30):
    c = connect(url, timeout)
    c.request("GET", path)
    r = c.getresponse()
    data = r.read().decode("utf-8", "replace")
    c.close()
    if r.status != 200:
        raise RuntimeError(f"GET {path}: {r.status}")
    return data


def metric(text, name):
    """The value of an unlabelled counter in Prometheus text, or None when absent."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == name:
            v = float(parts[1])
            return int(v) if v.is_integer() else v
    return None


def send(url, body, deadline):
    """One request; a record with latency, tokens, digest, or the error."""
    rec = {"max_tokens": body["max_tokens"], "seed": body.get("seed")}
    t0 = time.perf_counter()
    try:
        c = connect(url, deadline - time.time())
        c.request("POST", "/v1/completions", body=json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        rec["latency_s"] = time.perf_counter() - t0
        c.close()
        if r.status != 200:
            rec["error"] = f"HTTP {r.status}: {data[:200].decode('utf-8', 'replace')}"
            return rec
        j = json.loads(data)
        rec["tokens"] = j["usage"]["completion_tokens"]
        rec["prompt_tokens"] = j["usage"]["prompt_tokens"]
        rec["digest"] = j["detinfer"]["digest"]
        if rec["tokens"] != body["max_tokens"]:
            rec["error"] = f"generated {rec['tokens']} of {body['max_tokens']} tokens"
    except Exception as e:  # noqa: BLE001 - reported per request
        rec["error"] = repr(e)[:200]
        rec["failed_after_s"] = round(time.perf_counter() - t0, 3)
    return rec


def run_batch(url, bodies, max_wall, stagger_s):
    """Sends every body on its own thread (started `stagger_s` apart, in order); the
    records in request order and the wall seconds from the first send to the last answer."""
    records = [None] * len(bodies)
    start = time.time()
    deadline = start + max_wall

    def worker(i):
        records[i] = send(url, bodies[i], deadline)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True)
               for i in range(len(bodies))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
        time.sleep(stagger_s)
    for t in threads:
        t.join(max(deadline - time.time(), 0))
    wall = time.perf_counter() - t0
    for i, r in enumerate(records):
        if r is None:  # still running at the wall-time cap
            records[i] = {"max_tokens": bodies[i]["max_tokens"], "error": "wall-time cap"}
    return records, wall


def run_solo(url, bodies, indices, max_wall):
    """Sends bodies[i] for each i in `indices`, one after the other (each request alone on
    the server); the records (None for requests not sent) and the wall seconds."""
    records = [None] * len(bodies)
    deadline = time.time() + max_wall
    t0 = time.perf_counter()
    for i in indices:
        records[i] = send(url, bodies[i], deadline)
    return records, time.perf_counter() - t0


def percentile(values, q):
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


def summarize(records, wall, metrics_text):
    records = [r for r in records if r is not None]  # (--solo: the requests sent)
    ok = [r for r in records if "error" not in r]
    lat = [r["latency_s"] for r in ok]
    tokens = sum(r["tokens"] for r in ok)
    return {"requests": len(records), "completed": len(ok), "failed": len(records) - len(ok),
            "wall_s": round(wall, 3), "generated_tokens": tokens,
            "throughput_tok_s": round(tokens / wall, 2) if wall > 0 else None,
            "latency_p50_s": round(percentile(lat, 50), 3) if lat else None,
            "latency_p99_s": round(percentile(lat, 99), 3) if lat else None,
            "latency_max_s": round(max(lat), 3) if lat else None,
            "preemptions": metric(metrics_text, "detinfer_preemptions_total"),
            "resumptions": metric(metrics_text, "detinfer_resumptions_total"),
            "errors": [r["error"] for r in records if "error" in r][:5]}


def write_digests(path, records):
    """One line per request, in request order: index, max_tokens, digest (or '-')."""
    with open(path, "w") as f:
        for i, r in enumerate(records):
            if r is not None:
                f.write(f"{i} {r['max_tokens']} {r.get('digest', '-')}\n")


def compare_digests(path, records):
    """Requests of this run whose digest differs from (or is missing in) the other run's
    file (lines: index, max_tokens, digest)."""
    with open(path) as f:
        other = {int(i): (int(t), d) for i, t, d in (line.split() for line in f if line.strip())}
    bad = 0
    for i, r in enumerate(records):
        if r is None:  # not sent (--solo)
            continue
        t, d = other.get(i, (None, "-"))
        if t != r["max_tokens"] or d == "-" or r.get("digest") != d:
            bad += 1
    return bad


def print_table(s):
    rows = [("requests completed / failed", f"{s['completed']} / {s['failed']}"),
            ("wall s", s["wall_s"]), ("generated tokens", s["generated_tokens"]),
            ("throughput tok/s", s["throughput_tok_s"]),
            ("latency p50 / p99 / max s",
             f"{s['latency_p50_s']} / {s['latency_p99_s']} / {s['latency_max_s']}"),
            ("preemptions / resumptions", f"{s['preemptions']} / {s['resumptions']}")]
    if "digest_mismatches" in s:
        rows.append(("digest mismatches", s["digest_mismatches"]))
    for k, v in rows:
        print(f"{k:<28} {v}", file=sys.stderr)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running server (else --binary and --model start one)")
    ap.add_argument("--binary", default="build/release/bin/detinfer")
    ap.add_argument("--model", help="model folder for the server this script starts")
    ap.add_argument("--serve-args", default="", help="extra `detinfer serve` flags")
    ap.add_argument("--mix", default=DEFAULT_MIX, help="max_tokens:count,... (default %(default)s)")
    ap.add_argument("--seed", type=int, default=32, help="shuffles the mix, picks sampling")
    ap.add_argument("--max-wall", type=float, default=300, help="cap for the batch, seconds")
    ap.add_argument("--stagger-ms", type=float, default=5, help="between request starts")
    ap.add_argument("--digests-out", help="write each request's chain digest here")
    ap.add_argument("--compare", help="count requests whose digest differs from this file")
    ap.add_argument("--solo", help="only these request indices (0-based, comma-separated), "
                    "sent one after the other, each alone on the server")
    ap.add_argument("--json-out", help="also write the JSON summary (and records) here")
    a = ap.parse_args()
    if not a.url and not a.model:
        ap.error("give --url or --model")
    return a


def main():
    a = parse_args()
    bodies = make_requests(parse_mix(a.mix), a.seed)
    proc, url = None, a.url
    if not url:
        proc, url, log_path = start_server(a.binary, a.model, a.serve_args)
        print(f"server log: {log_path}", file=sys.stderr)
    try:
        if a.solo:
            indices = [int(i) for i in a.solo.split(",")]
            if any(i < 0 or i >= len(bodies) for i in indices):
                sys.exit(f"--solo: indices must lie in 0..{len(bodies) - 1}")
            records, wall = run_solo(url, bodies, indices, a.max_wall)
        else:
            records, wall = run_batch(url, bodies, a.max_wall, a.stagger_ms / 1000)
        summary = summarize(records, wall, get_text(url, "/metrics"))
    finally:
        if proc:
            stop_server(proc)
    summary["mix"], summary["seed"] = a.mix, a.seed
    if a.digests_out:
        write_digests(a.digests_out, records)
    if a.compare:
        summary["digest_mismatches"] = compare_digests(a.compare, records)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(dict(summary, records=records), f, indent=1)
    print(json.dumps(summary))
    print_table(summary)
    bad = summary["failed"] or summary.get("digest_mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
