#!/usr/bin/env bash
# Builds deploy/Dockerfile with buildah without any registry: a Debian 12 root made by
# debootstrap is imported as debian:bookworm, the image is built with --isolation
# chroot, then `detinfer serve` runs inside it and must answer /health and a completion.
# Needs root, debootstrap, buildah and a Debian mirror. Usage: deploy/build-image.sh
set -euo pipefail
cd "$(dirname "$0")/.."
WORK="${DETINFER_IMAGE_WORK:-/var/tmp/detinfer-image}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
PORT="${DETINFER_IMAGE_PORT:-18080}"
mkdir -p "$WORK"

# The base: what the official debian:bookworm image is, made locally (no registry is
# reachable): a minbase debootstrap, the same apt sources (bookworm, -updates,
# -security), and the policy-rc.d that keeps package scripts from starting daemons
# (redis-server) inside the build.
if [ -z "$(buildah images -q debian:bookworm 2>/dev/null)" ]; then
  [ -x "$WORK/rootfs/bin/sh" ] || debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR"
  rm -f "$WORK/rootfs/etc/apt/sources.list"
  cat > "$WORK/rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY_MIRROR
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  printf '#!/bin/sh\nexit 101\n' > "$WORK/rootfs/usr/sbin/policy-rc.d"
  chmod 0755 "$WORK/rootfs/usr/sbin/policy-rc.d"
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  cp -a "$WORK/rootfs/." "$mnt/"
  buildah umount "$ctr"
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd bash "$ctr"
  buildah commit "$ctr" debian:bookworm
  buildah rm "$ctr"
fi

REV=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || REV="$REV-dirty"
buildah bud --isolation chroot --layers --format docker -f deploy/Dockerfile \
  --build-arg DETINFER_GIT_REVISION="$REV" -t detinfer:latest .

# Run the image's entrypoint: `detinfer serve` (the cache tiers that need the compose
# file's Redis and volume turned off) must answer /health and a completion. With chroot
# isolation the container shares the host's network and process ids.
ctr=$(buildah from detinfer:latest)
cleanup() {
  buildah run --isolation chroot "$ctr" -- sh -c 'kill "$(cat /run/serve.pid)"' 2>/dev/null || true
  wait "${pid:-}" 2>/dev/null || true
  buildah rm "$ctr" >/dev/null || true
}
trap cleanup EXIT
buildah run --isolation chroot "$ctr" -- sh -c 'echo $$ > /run/serve.pid &&
  exec /usr/local/bin/detinfer-entrypoint "$@"' serve serve --model /models/tiny \
  --host 127.0.0.1 --port "$PORT" --config /etc/detinfer/config.json \
  --redis-host "" --prefix-cache-redis=false --cache-dir "" &
pid=$!
for _ in $(seq 600); do
  curl -fsS "http://127.0.0.1:$PORT/health" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { echo "build-image: detinfer serve exited" >&2; exit 1; }
  sleep 0.1
done
echo
curl -fsS "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "The quick brown fox", "max_tokens": 8, "temperature": 0}'
echo
curl -fsS "http://127.0.0.1:$PORT/v1/models"
echo
buildah run --isolation chroot "$ctr" -- /usr/local/bin/detinfer-entrypoint env --json
# What a run fingerprint made inside the image records: the build and the packages.
buildah run --isolation chroot "$ctr" -- sh -c '/usr/local/bin/detinfer-entrypoint generate \
  --model /models/tiny --prompt "The quick brown fox" --max-new-tokens 8 \
  --fingerprint /tmp/fp.json > /dev/null && python3 -c "import json
fp = json.load(open(\"/tmp/fp.json\"))
print(json.dumps({\"library\": fp[\"library\"], \"environment\": fp[\"environment\"]}, indent=2))"'
buildah run --isolation chroot "$ctr" -- sh -c 'wc -l < /etc/detinfer/packages'
