#!/usr/bin/env bash
# Builds deploy/Dockerfile with buildah without any registry: a Debian 12 root made by
# debootstrap is imported as debian:bookworm, the image is built with --isolation
# chroot, then `detinfer serve` runs inside it and must answer /health and a completion.
# Needs root, debootstrap, buildah and a Debian mirror. Usage: deploy/build-image.sh
set -euo pipefail
cd "$(dirname "$0")/.."
WORK="${DETINFER_IMAGE_WORK:-/var/tmp/detinfer-image}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PORT="${DETINFER_IMAGE_PORT:-18080}"
mkdir -p "$WORK"

if [ -z "$(buildah images -q debian:bookworm 2>/dev/null)" ]; then
  [ -x "$WORK/rootfs/bin/sh" ] || debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR"
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  cp -a "$WORK/rootfs/." "$mnt/"
  buildah umount "$ctr"
  buildah commit "$ctr" debian:bookworm
  buildah rm "$ctr"
fi

buildah bud --isolation chroot -f deploy/Dockerfile -t detinfer:latest .

ctr=$(buildah from detinfer:latest)
cleanup() { kill "${pid:-0}" 2>/dev/null || true; buildah rm "$ctr" >/dev/null || true; }
trap cleanup EXIT
buildah run --isolation chroot "$ctr" -- /usr/local/bin/detinfer-entrypoint serve \
  --model /models/tiny --host 127.0.0.1 --port "$PORT" --config /etc/detinfer/config.json \
  --redis-host "" --cache-dir "" &
pid=$!
for _ in $(seq 600); do
  curl -fsS "http://127.0.0.1:$PORT/health" && break
  sleep 0.1
done
echo
curl -fsS "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "The quick brown fox", "max_tokens": 8, "temperature": 0}'
echo
buildah run --isolation chroot "$ctr" -- /usr/local/bin/detinfer-entrypoint env --json | head -5
buildah run --isolation chroot "$ctr" -- sh -c 'cat /etc/detinfer/packages | wc -l'
