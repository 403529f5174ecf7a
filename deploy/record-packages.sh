#!/bin/sh
# Writes the image's resolved Debian package versions (deploy/Dockerfile):
#   /etc/detinfer/packages         every installed package, Package=Version, sorted;
#   /etc/detinfer/packages-direct  the packages of the compiler that built BINARY and of
#                                  the shared libraries BINARY links directly (its NEEDED).
# deploy/entrypoint.sh puts both into DETINFER_PACKAGES, which every fingerprint records.
# Usage: record-packages.sh BINARY
set -eu
bin="$1"
out=/etc/detinfer
mkdir -p "$out"
dpkg-query -W -f '${Package}=${Version}\n' | sort > "$out/packages"
owner() {  # the package owning file $1 (merged /usr: dpkg may know it under /lib)
  dpkg -S "$1" 2>/dev/null || dpkg -S "$(realpath "$1")" 2>/dev/null ||
    dpkg -S "$(realpath "$1" | sed 's,^/usr,,')" 2>/dev/null || true
}
{
  owner "$(realpath "$(command -v c++)")"
  for lib in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    path=$(ldd "$bin" | awk -v n="$lib" '$1 == n && $3 ~ /^\// {print $3}')
    [ -n "$path" ] && owner "$path"
  done
} | cut -d: -f1 | sort -u | xargs dpkg-query -W -f '${Package}=${Version}\n' > "$out/packages-direct"
