#!/usr/bin/env bash
# Build the SyncLab and Prometheus images with docker compose, offline-friendly:
#  - a torch wheel found in TORCH_WHEEL_DIR (default /opt/wheels) is hard-linked into
#    services/wheels/ so the build installs it instead of downloading torch;
#  - with BASE_IMAGE=local/bookworm:base the base is built first (scripts/docker/base-image.sh);
#  - the host's CA bundle is handed to pip as a build secret when it exists.
#
#   scripts/docker/build.sh                 # what .env says
#   LOCAL_BASE=1 scripts/docker/build.sh    # BASE_IMAGE=local/bookworm:base (no registry)
# Extra arguments go to `docker compose build`.
set -euo pipefail
cd "$(dirname "$0")/../.."
here="scripts/docker"

if [ "${LOCAL_BASE:-0}" = 1 ]; then
    export BASE_IMAGE=local/bookworm:base
fi
if [ "${BASE_IMAGE:-}" = local/bookworm:base ]; then
    "$here/base-image.sh" "$BASE_IMAGE"
fi

wheel_dir="${TORCH_WHEEL_DIR:-/opt/wheels}"
for w in "$wheel_dir"/torch-*+cpu-cp311-*.whl; do
    [ -f "$w" ] || continue
    dest="services/wheels/$(basename "$w")"
    if [ ! "$dest" -ef "$w" ]; then
        rm -f "$dest"
        ln "$w" "$dest" 2>/dev/null || cp "$w" "$dest"   # hard link; a copy across filesystems
    fi
done

bundle="${BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
if [ -s "$bundle" ]; then
    export BUILD_CA_BUNDLE="$bundle"
fi

# The node image's io.synclab.source label: the digest of the files it is built from, which
# `synclab run` (network.isolation docker) compares with its checkout to rebuild stale images.
if [ -z "${SOURCE_DIGEST:-}" ]; then
    SOURCE_DIGEST="$(python3 src/synclab/roles/image_source.py .)"
    export SOURCE_DIGEST
fi

[ $# -gt 0 ] || set -- coordinator prometheus
docker compose build "$@"
# A rebuilt tag leaves its previous image dangling; drop ours only (they carry the label).
# KEEP_DANGLING=1 leaves them, e.g. on a daemon shared with other people's SyncLab builds.
if [ "${KEEP_DANGLING:-0}" != 1 ]; then
    docker image prune -f --filter label=io.synclab.image >/dev/null
fi
