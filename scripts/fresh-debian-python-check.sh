#!/usr/bin/env bash
# The README's Python install on a fresh Debian 12, offline (issue 31's acceptance; not a
# CI test: it compiles the whole library, ~12 minutes on one core). As root, on a Debian
# host with network access to deb.debian.org:
#   scripts/fresh-debian-python-check.sh WORKDIR
# 1. debootstraps a minimal bookworm into WORKDIR/root;
# 2. copies this checkout's committed tree (git archive HEAD) and a tiny model into it;
# 3. runs scripts/install-deps.sh inside (online: Debian packages only);
# 4. without any network (unshare -n) and with an empty environment: creates a venv that
#    sees Debian's packages, runs `pip install --no-index --no-build-isolation ./python`,
#    then the README's Python example and `python3 -m detinfer generate`, whose output
#    must equal the README's.
set -euo pipefail
work=${1:?usage: $0 WORKDIR}
here=$(cd "$(dirname "$0")/.." && pwd)
root="$work/root"
cli="${DETINFER_CLI:-$here/build/release/bin/detinfer}"
mkdir -p "$work"
[ -x "$root/bin/bash" ] || debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian
cp /etc/resolv.conf "$root/etc/resolv.conf"
for m in proc dev sys; do mountpoint -q "$root/$m" || mount --rbind "/$m" "$root/$m"; done
rm -rf "$root/root/detinfer" "$root/root/tiny" "$root/root/venv"
mkdir -p "$root/root/detinfer"
git -C "$here" archive HEAD | tar -x -C "$root/root/detinfer"
"$cli" make-tiny-model --arch qwen2 --seed 1 --out "$root/root/tiny" >/dev/null
# The README's example, taken from README.md itself (the first python block after
# "## Use it from Python") and its expected output (the block after it).
python3 - "$here/README.md" "$root/root" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section = text[text.index("## Use it from Python"):]
blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
code = next(b for lang, b in blocks if lang == "python")
expected = blocks[[b for _, b in blocks].index(code) + 1][1]
open(sys.argv[2] + "/readme_example.py", "w").write(code)
open(sys.argv[2] + "/readme_expected.txt", "w").write(expected)
PY
chroot "$root" bash -c 'cd /root/detinfer && bash scripts/install-deps.sh'
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root unshare -n chroot "$root" bash -ec '
  cd /root
  python3 -m venv --system-site-packages venv
  (cd detinfer && time DETINFER_BUILD_JOBS=${JOBS:-1} /root/venv/bin/pip install --no-index \
      --no-build-isolation ./python)
  venv/bin/python readme_example.py > readme_actual.txt
  diff readme_expected.txt readme_actual.txt
  venv/bin/python -m detinfer generate --model tiny --prompt Hello --max-new-tokens 8 \
      --temperature 0.7 --seed 1 --json
  echo "fresh Debian 12 offline pip install: the README example printed what the README says"'
