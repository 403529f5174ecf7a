#!/bin/sh
# Exports the image's resolved package versions (one hash over /etc/detinfer/packages)
# so that run fingerprints record them, then runs detinfer.
set -eu
if [ -r /etc/detinfer/packages ]; then
  DETINFER_PACKAGES="sha256:$(sha256sum /etc/detinfer/packages | cut -c1-64)"
  export DETINFER_PACKAGES
fi
exec /usr/local/bin/detinfer "$@"
