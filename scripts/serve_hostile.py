#!/usr/bin/env python3
"""Acceptance measurements of `detinfer serve` under hostile clients (issue 15).

Starts the server on the tiny model (or --model DIR), then:
  1. idle RSS, and the median latency of /health and of a short completion;
  2. opens N slow clients (1 byte/s of a request header) and N connections announcing a
     10 GB body (refused with 413 at once) plus N announcing an allowed body they never
     send (held open), and measures /health and a short completion again (fresh
     connections) and the RSS;
  3. median latency of a short completion on one reused connection vs fresh connections.
Prints one JSON object with the figures; exits 1 if an acceptance bound fails
(100 ms under load, RSS < 2x idle, reused within 2 ms of fresh).
Standard library only.
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def start_server(binary, model, extra):
    d = tempfile.mkdtemp(prefix="serve-hostile-")
    port_file = os.path.join(d, "port")
    log = open(os.path.join(d, "log"), "w")
    proc = subprocess.Popen([binary, "serve", "--model", model, "--port", "0", "--port-file",
                             port_file, "--threads", "1"] + extra, stdout=log, stderr=log)
    for _ in range(600):
        if os.path.exists(port_file):
            with open(port_file) as f:
                text = f.read()
            if text.endswith("\n"):
                return proc, int(text)
        if proc.poll() is not None:
            sys.exit("server exited: see " + d)
        time.sleep(0.1)
    sys.exit("server did not start")


SHORT = json.dumps({"prompt": "Hello", "max_tokens": 1, "temperature": 0}).encode()


def timed(conn, method, path, body=None):
    t0 = time.perf_counter()
    headers = {"Content-Type": "application/json"} if body else {}
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    r.read()
    dt = (time.perf_counter() - t0) * 1000
    if r.status != 200:
        raise RuntimeError(f"{method} {path}: {r.status}")
    return dt


def fresh(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        return timed(c, method, path, body)
    finally:
        c.close()


def medians(port, n):
    health = [fresh(port, "GET", "/health") for _ in range(n)]
    short = [fresh(port, "POST", "/v1/completions", SHORT) for _ in range(n)]
    return {"health_ms_median": statistics.median(health), "health_ms_max": max(health),
            "completion_ms_median": statistics.median(short), "completion_ms_max": max(short)}


def hostile(port, n, stop):
    """n slow clients (1 byte/s), n 10 GB announcements, n stalled announced bodies."""
    slow, stalled, refused = [], [], 0
    header = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        slow.append(s)
        g = socket.create_connection(("127.0.0.1", port))
        g.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: 10737418240\r\n\r\n")
        g.settimeout(10)
        if g.recv(64).startswith(b"HTTP/1.1 413"):
            refused += 1
        g.close()
        h = socket.create_connection(("127.0.0.1", port))
        h.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
        stalled.append(h)

    def trickle():
        i = 0
        while not stop.is_set():
            for s in slow:
                try:
                    s.send(header[i % len(header):i % len(header) + 1])
                except OSError:
                    pass
            i += 1
            stop.wait(1.0)
    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    return slow + stalled, refused, t


def reuse_vs_fresh(port, n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    reused, new = [], []
    for _ in range(n):
        reused.append(timed(c, "POST", "/v1/completions", SHORT))
        new.append(fresh(port, "POST", "/v1/completions", SHORT))
    c.close()
    return statistics.median(reused), statistics.median(new)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/release/bin/detinfer")
    ap.add_argument("--model", default="")
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--samples", type=int, default=50)
    a = ap.parse_args()
    model = a.model
    if not model:
        model = os.path.join(tempfile.mkdtemp(prefix="serve-hostile-model-"), "tiny")
        subprocess.run([a.binary, "make-tiny-model", "--arch", "qwen2", "--seed", "1", "--out",
                        model], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Slow clients are held for the whole measurement (not dropped by the 10 s default).
    proc, port = start_server(a.binary, model, ["--request-timeout", "600"])
    out = {"clients_each": a.clients}
    try:
        medians(port, 5)  # warm-up
        out["idle_rss_kib"] = rss_kib(proc.pid)
        out["idle"] = medians(port, a.samples)
        stop = threading.Event()
        held, refused, trickler = hostile(port, a.clients, stop)
        out["refused_10gb_with_413"] = refused
        time.sleep(3)  # a few trickled bytes each
        out["under_load"] = medians(port, a.samples)
        out["under_load_rss_kib"] = rss_kib(proc.pid)
        out["open_hostile_connections"] = len(held)
        stop.set()
        trickler.join()
        for s in held:
            s.close()
        r, f = reuse_vs_fresh(port, a.samples * 4)
        out["reused_completion_ms_median"] = r
        out["fresh_completion_ms_median"] = f
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    ok = (out["under_load"]["health_ms_max"] < 100 and
          out["under_load"]["completion_ms_max"] < 100 and
          out["under_load_rss_kib"] < 2 * out["idle_rss_kib"] and
          out["reused_completion_ms_median"] <= out["fresh_completion_ms_median"] + 2)
    out["acceptance"] = "pass" if ok else "FAIL"
    print(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
