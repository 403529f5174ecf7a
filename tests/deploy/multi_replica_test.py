#!/usr/bin/env python3
"""Scale-out on existing components (issue 17, item 7): Redis, two `detinfer serve`
replicas sharing it as their prefix-cache tier, and HAProxy round robin in front, all on
loopback with ports chosen at run time.

Checks: 200 mixed requests through HAProxy are bitwise equal (digest, tokens as text,
seed) to the same requests on a single separate replica; prefix-cache hits cross
replicas (Redis-tier hits in both replicas' /metrics); SIGKILL of one replica in the
middle of a run loses no request (HAProxy retries elsewhere) and its restart rejoins
(it answers requests again); a replica in another numerics mode is refused by the
fingerprint check (--expect-system-fingerprint exits 4; X-Detinfer-Expect-Fingerprint
gets 421). Everything is torn down on any exit. Readiness is polled with deadlines.

With --bench N it instead measures throughput and p50/p99 latency of one replica vs two
behind HAProxy under the same bounded closed-loop load (docs/performance.md).
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

DEADLINE_S = 60


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, headers=None, timeout=120):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def poll(what, fn, deadline_s=DEADLINE_S):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if fn():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def metric(text, series):
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


class Fleet:
    def __init__(self, args, tmp):
        self.args, self.tmp, self.procs = args, tmp, {}

    def spawn(self, name, argv):
        log = open(os.path.join(self.tmp, name + ".log"), "w")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        return self.procs[name]

    def stop(self, name, sig=signal.SIGTERM):
        p = self.procs.pop(name, None)
        if p and p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def teardown(self):
        for name in list(self.procs):
            self.stop(name, signal.SIGKILL)

    def log(self, name):
        with open(os.path.join(self.tmp, name + ".log")) as f:
            return f.read()

    def replica(self, name, port, extra=(), threads=1):
        a = self.args
        argv = [a.detinfer, "serve", "--model", self.model, "--host", "127.0.0.1",
                "--port", str(port), "--config", os.path.join(a.source_dir, "deploy/config.json"),
                "--cache-dir", "", "--threads", str(threads), "--log-level", "warn"] + list(extra)
        self.spawn(name, argv)
        poll(name + " /health", lambda: self.alive(name) and
             request(port, "GET", "/health", timeout=2)[0] == 200)

    def alive(self, name):
        p = self.procs[name]
        if p.poll() is not None:
            raise AssertionError(name + " exited with %d:\n%s" % (p.returncode, self.log(name)))
        return True

    def redis(self):
        self.redis_port = free_port()
        self.spawn("redis", ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"])
        poll("redis", lambda: socket.create_connection(("127.0.0.1", self.redis_port), 1).close()
             or True)

    def haproxy(self, backends):
        self.lb_port = free_port()
        cfg = os.path.join(self.tmp, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(HAPROXY_CFG % self.lb_port)
            for i, port in enumerate(backends):
                f.write("  server r%d 127.0.0.1:%d check\n" % (i, port))
        self.spawn("haproxy", ["haproxy", "-db", "-f", cfg])
        poll("haproxy", lambda: self.alive("haproxy") and
             request(self.lb_port, "GET", "/health", timeout=2)[0] == 200)


HAPROXY_CFG = """global
  maxconn 1024
defaults
  mode http
  timeout connect 1s
  timeout client 120s
  timeout server 120s
  retries 10
  option http-buffer-request
  option redispatch 1
  retry-on conn-failure empty-response junk-response response-timeout 503
frontend fe
  bind 127.0.0.1:%d
  default_backend be
backend be
  balance roundrobin
  option httpchk GET /health
  http-check expect status 200
  default-server inter 200ms fall 1 rise 1
"""

PREFIXES = [
    "The quick brown fox jumps over the lazy dog and then ",
    "In a hole in the ground there lived a hobbit, not a nasty dirty wet hole but ",
    "It was the best of times, it was the worst of times, it was the age of wisdom ",
]


def mixed_requests(n):
    out = []
    for i in range(n):
        body = {"prompt": PREFIXES[i % 3] + "variant %d" % (i % 7), "max_tokens": 1 + i % 12}
        if i % 2:
            body.update({"temperature": 0.8, "seed": 1000 + i, "top_p": 0.9})
        else:
            body["temperature"] = 0
        out.append(body)
    return out


def outcome(port, body):
    status, text = request(port, "POST", "/v1/completions", body)
    if status != 200:
        raise AssertionError("HTTP %d for %s: %s" % (status, body, text))
    r = json.loads(text)
    return (r["choices"][0]["text"], r["detinfer"]["digest"], r["detinfer"]["seed"])


def run_all(port, bodies, workers=8):
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        return list(ex.map(lambda b: outcome(port, b), bodies))


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what, flush=True)


def test(fleet):
    fleet.redis()
    # Generous Redis timeouts: a loaded CI machine must not turn a slow GET into a miss.
    redis = ["--redis-host", "127.0.0.1", "--redis-port", str(fleet.redis_port),
             "--redis-command-timeout-ms", "5000", "--redis-connect-timeout-ms", "5000"]
    ports = [free_port(), free_port()]
    fleet.replica("a", ports[0], redis)
    fleet.replica("b", ports[1], redis)
    fleet.haproxy(ports)
    ref_port = free_port()
    fleet.replica("single", ref_port, ["--no-prefix-cache-redis", "--no-prefix-cache"])

    # Prefix-cache hits cross replicas: each prompt twice in a row goes to both replicas.
    for i in range(4):
        if i == 2:  # shift the round robin by one so that the other replica reads Redis
            request(fleet.lb_port, "GET", "/health")
        body = {"prompt": PREFIXES[i % 3] * 2 + "cross %d" % i, "max_tokens": 2, "temperature": 0}
        check(outcome(fleet.lb_port, body) == outcome(fleet.lb_port, body),
              "prompt %d gives the same bits on both replicas" % i)
    hits = [metric(request(p, "GET", "/metrics")[1],
                   'detinfer_cache_tier_hits_total{cache="prefix",tier="redis"}') for p in ports]
    check(all(h > 0 for h in hits), "both replicas served prefix blocks from Redis: %s" % hits)

    # Every family the alert rules and the dashboard use exists in a replica's /metrics.
    text = request(ports[0], "GET", "/metrics")[1]
    families = set(re.findall(r"^# TYPE (\S+)", text, re.M))
    for f in ["deploy/prometheus/alerts.yml", "deploy/grafana/detinfer.json"]:
        with open(os.path.join(fleet.args.source_dir, f)) as fh:
            used = set(re.findall(r"\b((?:detinfer|process)_[a-z0-9_]+)", fh.read()))
        used = {re.sub(r"_(bucket|sum|count)$", "", u) if u not in families else u for u in used}
        check(used <= families, "%s uses only exported families (missing: %s)" % (
            f, sorted(used - families)))

    bodies = mixed_requests(200)
    got = run_all(fleet.lb_port, bodies)
    want = run_all(ref_port, bodies)
    check(got == want, "200 mixed requests through HAProxy equal a single replica's bitwise")
    served = [metric(request(p, "GET", "/metrics")[1], "detinfer_generated_tokens_total")
              for p in ports]
    check(all(s >= 100 for s in served), "both replicas generated (tokens %s)" % served)

    # Kill one replica in the middle of a run: no request is lost.
    bodies = mixed_requests(120)
    done = [0]
    lock = threading.Lock()
    killed = threading.Event()

    def one(b):
        r = outcome(fleet.lb_port, b)
        with lock:
            done[0] += 1
            if done[0] == 30 and not killed.is_set():
                killed.set()
                fleet.stop("b", signal.SIGKILL)
        return r

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        got = list(ex.map(one, bodies))
    check(killed.is_set() and got == run_all(ref_port, bodies),
          "SIGKILL of a replica mid-run lost no request (120 answered, all equal)")
    fleet.replica("b", ports[1], redis)
    poll("b back in rotation", lambda: run_all(fleet.lb_port, mixed_requests(8), 4) and metric(
        request(ports[1], "GET", "/metrics")[1], "detinfer_generated_tokens_total") > 0)
    check(True, "the restarted replica rejoined (answers requests through HAProxy)")

    # A replica in another numerics mode: refused at start, and 421 for expectant requests.
    fp = json.loads(request(ports[0], "GET", "/v1/models")[1])["data"][0]["detinfer"][
        "system_fingerprint"]
    r = subprocess.run([fleet.args.detinfer, "serve", "--model", fleet.model, "--port", "0",
                        "--mode", "fast", "--threads", "1", "--expect-system-fingerprint", fp],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 4, "a fast-mode replica refuses to join the fleet (exit %d)" % r.returncode)
    fast_port = free_port()
    fleet.replica("fast", fast_port, ["--mode", "fast"])
    status, _ = request(fast_port, "POST", "/v1/completions",
                        {"prompt": "x", "max_tokens": 1, "seed": 1},
                        {"X-Detinfer-Expect-Fingerprint": fp})
    check(status == 421, "the fast-mode replica answers 421 to a request expecting %s" % fp)


def one_pass(port, bodies, concurrency):
    """Closed-loop load: `concurrency` clients send `bodies`; requests/s over the pass's
    wall time, latency percentiles per request."""
    lat = []

    def timed(b):
        t = time.monotonic()
        outcome(port, b)
        lat.append(time.monotonic() - t)

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(timed, bodies))
    wall = time.monotonic() - t0
    lat.sort()
    return {"requests_per_s": len(bodies) / wall, "p50_ms": 1000 * lat[len(lat) // 2],
            "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))]}


def bench(fleet, n, concurrency, rounds):
    """Same load on: one 1-thread replica, two 1-thread replicas behind HAProxy, and one
    2-thread replica (the cores of the pair), interleaved for `rounds` rounds; medians
    over the rounds, with the machine's load average before and after."""
    fleet.redis()
    redis = ["--redis-host", "127.0.0.1", "--redis-port", str(fleet.redis_port)]
    ports = [free_port(), free_port(), free_port()]
    fleet.replica("a", ports[0], redis)
    fleet.replica("b", ports[1], redis)
    fleet.replica("wide", ports[2], redis, threads=2)
    fleet.haproxy(ports[:2])
    bodies = mixed_requests(n)
    run_all(ports[2], bodies, concurrency)  # warm-up: page in, fill the Redis prefix tier
    with open("/proc/loadavg") as f:
        print("load average before:", f.read().strip(), flush=True)
    configs = [("one replica, 1 thread", ports[0]), ("two replicas + HAProxy", fleet.lb_port),
               ("one replica, 2 threads", ports[2])]
    passes = {name: [] for name, _ in configs}
    for r in range(rounds):
        for name, port in configs:
            res = one_pass(port, bodies, concurrency)
            passes[name].append(res)
            print("round %d  %-24s %8.1f req/s  p50 %7.1f ms  p99 %7.1f ms" % (
                r + 1, name, res["requests_per_s"], res["p50_ms"], res["p99_ms"]), flush=True)
    with open("/proc/loadavg") as f:
        print("load average after:", f.read().strip(), flush=True)
    med = {}
    for name, _ in configs:
        med[name] = {k: sorted(p[k] for p in passes[name])[rounds // 2]
                     for k in ("requests_per_s", "p50_ms", "p99_ms")}
        print("median   %-24s %8.1f req/s  p50 %7.1f ms  p99 %7.1f ms" % (
            name, med[name]["requests_per_s"], med[name]["p50_ms"], med[name]["p99_ms"]))
    print("two replicas / one 1-thread replica: %.2fx; / one 2-thread replica: %.2fx" % (
        med["two replicas + HAProxy"]["requests_per_s"] /
        med["one replica, 1 thread"]["requests_per_s"],
        med["two replicas + HAProxy"]["requests_per_s"] /
        med["one replica, 2 threads"]["requests_per_s"]), flush=True)
    return med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--detinfer", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--bench", type=int, default=0, help="requests per configuration")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5, help="with --bench: rounds (median)")
    ap.add_argument("--model-args", default="",
                    help="extra make-tiny-model arguments (a larger model for --bench)")
    args = ap.parse_args()
    if args.tmp:
        os.makedirs(args.tmp, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="multi-replica-", dir=args.tmp)
    fleet = Fleet(args, tmp)
    try:
        fleet.model = os.path.join(tmp, "model")
        subprocess.run([args.detinfer, "make-tiny-model", "--out", fleet.model] +
                       args.model_args.split(), check=True, capture_output=True)
        if args.bench:
            bench(fleet, args.bench, args.concurrency, args.rounds)
        else:
            test(fleet)
    except AssertionError as e:
        print("FAILED:", e, file=sys.stderr)
        for name in ["a", "b", "haproxy"]:
            if os.path.exists(os.path.join(tmp, name + ".log")):
                print("--- %s log:\n%s" % (name, fleet.log(name)[-3000:]), file=sys.stderr)
        return 1
    finally:
        fleet.teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
