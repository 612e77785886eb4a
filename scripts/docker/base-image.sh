#!/usr/bin/env bash
# Build a Debian bookworm base image from the Debian mirror, for hosts that cannot reach a
# container registry: debootstrap --variant=minbase + `docker import`. Skipped when the image
# exists already, because a rebuilt base busts every cached layer built on it.
#
#   scripts/docker/base-image.sh [TAG]      # default local/bookworm:base
#   FORCE=1 scripts/docker/base-image.sh    # rebuild anyway
#
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

TAG="${1:-${BASE_TAG:-local/bookworm:base}}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER="$(command -v docker)"

say() { printf 'base-image.sh: %s\n' "$*" >&2; }

if [ "${FORCE:-0}" != 1 ] && "$DOCKER" image inspect "$TAG" >/dev/null 2>&1; then
    say "$TAG present; not rebuilding (FORCE=1 to rebuild)"
    exit 0
fi
[ "$(id -u)" = 0 ] || { say "error: debootstrap needs root"; exit 1; }
command -v debootstrap >/dev/null || { say "error: debootstrap missing (scripts/docker/setup.sh installs it)"; exit 1; }

root="$(mktemp -d /var/tmp/synclab-bookworm.XXXXXX)"
trap 'rm -rf "$root"' EXIT

say "debootstrap minbase bookworm from $MIRROR"
debootstrap --variant=minbase bookworm "$root" "$MIRROR" >"$root.log" 2>&1 \
    || { tail -n 30 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"

cat >"$root/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY_MIRROR bookworm-security main
SOURCES
# Keep the image lean the way the official Debian images do.
cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'CLEAN'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
CLEAN
# Like Debian's -slim images: no docs, man pages or translations, now or in later installs.
cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'SLIM'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
SLIM
find "$root/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete 2>/dev/null || true
rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* "$root"/usr/share/lintian/*
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
: >"$root/etc/resolv.conf"
: >"$root/etc/hostname"

say "importing as $TAG"
tar -C "$root" -c . | "$DOCKER" import \
    -c 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["bash"]' - "$TAG" >/dev/null
say "built $TAG ($("$DOCKER" image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}'))"
