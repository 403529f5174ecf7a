#!/bin/sh
# Exports the image's resolved package versions so that every run fingerprint records
# them (environment.env_vars.DETINFER_PACKAGES): one sha256 over the whole installed set
# (/etc/detinfer/packages) followed by the versions of the compiler and of the libraries
# detinfer links directly (/etc/detinfer/packages-direct), then runs detinfer.
set -eu
if [ -r /etc/detinfer/packages ]; then
  DETINFER_PACKAGES="sha256:$(sha256sum /etc/detinfer/packages | cut -c1-64)"
  if [ -r /etc/detinfer/packages-direct ]; then
    DETINFER_PACKAGES="$DETINFER_PACKAGES $(tr '\n' ' ' < /etc/detinfer/packages-direct)"
    DETINFER_PACKAGES="${DETINFER_PACKAGES% }"
  fi
  export DETINFER_PACKAGES
fi
exec /usr/local/bin/detinfer "$@"
