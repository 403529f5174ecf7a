#!/usr/bin/env python3
"""The deployment files of deploy/ stay valid against the program they deploy
(docs/deploy.md): every configuration they give detinfer (deploy/config.json, the
Kubernetes ConfigMap) is accepted by `detinfer serve --print-config`, which rejects unknown
keys and wrong types; the Dockerfile's and the Deployment's serve arguments parse; the
probes and the Service point at the port the replica listens on and the Deployment keeps
the image's entrypoint (which exports DETINFER_PACKAGES); HAProxy and Prometheus accept
their files (`haproxy -c`, `promtool check config`, with the compose service names
resolved to loopback); the multi-replica test uses the shipped retry policy; every file
the compose file mounts exists.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml  # python3-yaml: a dependency of python3-torch (scripts/install-deps.sh)

FAILED = []


def check(cond, what):
    print(("ok: " if cond else "FAILED: ") + what, flush=True)
    if not cond:
        FAILED.append(what)


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)


def failure(r):
    """What a failed command said, for the check's message."""
    return "" if r.returncode == 0 else " (exit %d): %s" % (r.returncode,
                                                           (r.stdout + r.stderr)[-500:])


def print_config(args, model, config_path, extra=()):
    """`serve --print-config` of a configuration, the disk tier off (its folder is the
    container's); returns (exit code, parsed effective configuration or stderr)."""
    r = run([args.detinfer, "serve", "--model", model, "--config", config_path,
             "--cache-dir", "", "--print-config"] + list(extra))
    if r.returncode != 0:
        return r.returncode, r.stderr
    return 0, json.loads(r.stdout)


def serve_args(argv):
    """The options of a `serve` command line as a dict (flag -> value)."""
    assert argv[0] == "serve", argv
    return {argv[i]: argv[i + 1] for i in range(1, len(argv) - 1, 2)}


def dockerfile_cmd(src):
    text = open(os.path.join(src, "deploy/Dockerfile")).read().replace("\\\n", " ")
    cmd = re.search(r"^CMD (\[.*\])", text, re.M).group(1)
    entry = re.search(r"^ENTRYPOINT (\[.*\])", text, re.M).group(1)
    return json.loads(entry), json.loads(cmd)


def test_configs(args, src, model, tmp):
    code, cfg = print_config(args, model, os.path.join(src, "deploy/config.json"))
    check(code == 0, "deploy/config.json is a valid --config (%s)" % (cfg if code else "ok"))
    if code == 0:
        check(cfg["consistency"]["fail_below"] == 0.99 and cfg["consistency"]["alert_below"]
              == 0.999, "deploy/config.json: the documented consistency thresholds")
    docs = {d["kind"]: d for f in ["configmap.yaml", "deployment.yaml", "service.yaml"]
            for d in yaml.safe_load_all(open(os.path.join(src, "deploy/k8s", f)))}
    k8s_cfg = os.path.join(tmp, "k8s-config.json")
    with open(k8s_cfg, "w") as f:
        f.write(docs["ConfigMap"]["data"]["config.json"])
    code, cfg = print_config(args, model, k8s_cfg)
    check(code == 0, "the ConfigMap's config.json is a valid --config (%s)" % (
        cfg if code else "ok"))
    return docs


def test_k8s(src, docs):
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    check("command" not in c, "the Deployment keeps the image's entrypoint (DETINFER_PACKAGES)")
    port = int(serve_args(c["args"])["--port"])
    named = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe in ["readinessProbe", "livenessProbe"]:
        get = c[probe]["httpGet"]
        check(get["path"] == "/health" and named.get(get["port"], get["port"]) == port,
              "%s probes /health on the serve port %d" % (probe, port))
    svc = docs["Service"]["spec"]
    check(svc["selector"] == docs["Deployment"]["spec"]["selector"]["matchLabels"] and
          named.get(svc["ports"][0]["targetPort"]) == port,
          "the Service selects the Deployment's pods on the serve port")
    mount = c["volumeMounts"][0]["mountPath"]
    check(serve_args(c["args"])["--config"] == mount, "the Deployment reads the ConfigMap")
    _, cmd = dockerfile_cmd(src)
    check(serve_args(cmd)["--port"] == str(port), "the image's CMD serves on the same port")


def test_image_args(args, src, model):
    entry, cmd = dockerfile_cmd(src)
    check(entry == ["/usr/local/bin/detinfer-entrypoint"], "the image runs entrypoint.sh")
    opts = serve_args(cmd)
    argv = [args.detinfer] + cmd[:1] + [x for k, v in opts.items() if k not in (
        "--model", "--config") for x in (k, v)]
    argv += ["--model", model, "--config", os.path.join(src, "deploy/config.json"),
             "--cache-dir", "", "--print-config"]
    r = run(argv)
    check(r.returncode == 0, "the image's CMD arguments parse" + failure(r))


def test_proxies(src, tmp):
    hap = open(os.path.join(src, "deploy/haproxy/haproxy.cfg")).read()
    local = os.path.join(tmp, "haproxy.cfg")
    with open(local, "w") as f:
        f.write(re.sub(r"detinfer-[ab]:", "127.0.0.1:", hap))
    r = run(["haproxy", "-c", "-f", local])
    check(r.returncode == 0, "haproxy -c accepts deploy/haproxy/haproxy.cfg" + failure(r))
    policy = [l.strip() for l in hap.splitlines() if re.match(r"\s*(retries|retry-on|option "
                                                             r"redispatch)", l)]
    test_src = open(os.path.join(src, "tests/deploy/multi_replica_test.py")).read()
    check(len(policy) == 3 and all(p in test_src for p in policy),
          "multi_replica_test uses the shipped retry policy %s" % policy)
    prom = open(os.path.join(src, "deploy/prometheus/prometheus.yml")).read()
    local = os.path.join(tmp, "prometheus.yml")
    with open(local, "w") as f:
        f.write(prom.replace("/etc/prometheus/alerts.yml",
                             os.path.join(src, "deploy/prometheus/alerts.yml")))
    r = run(["promtool", "check", "config", local])
    check(r.returncode == 0, "promtool check config accepts prometheus.yml" + failure(r))


def test_compose(src):
    compose = yaml.safe_load(open(os.path.join(src, "deploy/docker-compose.yml")))
    for name, svc in compose["services"].items():
        for vol in svc.get("volumes", []):
            host = vol.split(":")[0]
            check(os.path.exists(os.path.join(src, "deploy", host)),
                  "compose %s mounts an existing file %s" % (name, host))
    a = compose["services"]["detinfer-a"]
    check(a["build"]["dockerfile"] == "deploy/Dockerfile" and
          compose["services"]["detinfer-b"] == a, "both replicas are the same image and config")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--detinfer", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--tmp", default=None)
    args = ap.parse_args()
    if args.tmp:
        os.makedirs(args.tmp, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="deploy-manifests-", dir=args.tmp)
    try:
        model = os.path.join(tmp, "model")
        run([args.detinfer, "make-tiny-model", "--out", model]).check_returncode()
        src = os.path.abspath(args.source_dir)
        docs = test_configs(args, src, model, tmp)
        test_k8s(src, docs)
        test_image_args(args, src, model)
        test_proxies(src, tmp)
        test_compose(src)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILED:
        print("%d check(s) failed" % len(FAILED), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
