#!/usr/bin/env bash
# Installs every Debian package detinfer's build, tests and demo need. Idempotent and
# quiet: packages already present are not touched, and apt-get update runs only when
# something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache git
  libtorch-dev libxxhash-dev libspdlog-dev libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libpcre2-dev libhiredis-dev redis-server
  libcpp-httplib-dev libopenblas0-pthread python3 python3-torch clang-format python3-jinja2
  python3-jsonschema
  nodejs
  prometheus haproxy
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest python3-setuptools python3-venv
  python3-wheel
)

missing=()
for p in "${PACKAGES[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
