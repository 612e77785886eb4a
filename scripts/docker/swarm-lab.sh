#!/usr/bin/env bash
# A multi-host Docker Swarm on one machine: three Docker-in-Docker "hosts" (privileged containers, or
# the same privileges by parts where the engine refuses --privileged; each with its own dockerd and
# /var/lib/docker on a volume of its own) on one bridge, joined into one
# Swarm whose overlay network is real VXLAN between them. The SyncLab stack runs on it with the
# coordinator and Prometheus on host 1, the workers on host 2 and the PS shards on host 3, so every
# gradient and parameter crosses the overlay between hosts (services/README.md, "Multi-host Swarm").
#
#   scripts/docker/swarm-lab.sh up          # hosts' image (cached build), hosts, images loaded, swarm formed
#   scripts/docker/swarm-lab.sh run [OUT]   # deploy the stack, wait for the job, copy its records to OUT
#   scripts/docker/swarm-lab.sh status      # hosts, swarm nodes, tasks
#   scripts/docker/swarm-lab.sh down        # remove every container, volume and network `up` made
#
# `run` reads the job's settings like compose does (.env, then the shell: STRATEGY, MODEL, PROFILE,
# WORKERS, SHARDS, ITERATIONS, SPEC_SET; REPEAT is always 1) and leaves the stack deployed so
# Prometheus stays up: its address is printed, and `run` again replaces the stack. It exits 0 when
# the job ended ok with its summary. OUT (default runs/swarm-lab/<time>) gets:
#   records/          the job's run directory from the coordinator's host (summary.json, iterations.csv, ...)
#   hosts/<host>/     each host's whole `runs` volume (traffic-<node>.csv of the nodes it ran), and
#   hosts/<host>-containers.json   `docker inspect` of the stack's containers there (exits, health checks)
#   tasks.json        every task of the stack with the swarm node it ran on; logs/<service>.log; stack.json
#   lab.json          hosts (address, labels, bytes on the bridge during the job), image IDs, the
#                     Prometheus URL and the job's time window
#
# Environment:
#   LAB_PREFIX        names of everything made (default synclab-lab): containers PREFIX-host1..3,
#                     volumes PREFIX-hostN-docker, network PREFIX-net, all labelled io.synclab.swarm-lab=PREFIX
#   SYNCLAB_IMAGE / PROMETHEUS_IMAGE   images loaded into every host (default synclab:latest,
#                     synclab-prometheus:latest; build them first: scripts/docker/build.sh)
#   LAB_HOST_IMAGE    the hosts' image (default synclab-swarm-host:latest), built by `up` from
#                     services/swarm-host/ on BASE_IMAGE (LOCAL_BASE=1 as in build.sh; unset: local/bookworm:base
#                     where it exists, else debian:bookworm-slim)
#   LAB_STACK         stack name inside the swarm (default synclab)
#   LAB_TIMEOUT_S     how long `run` waits for the job (default 600)
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO="$PWD"
here="scripts/docker"

PREFIX="${LAB_PREFIX:-synclab-lab}"
HOSTS=3
NET="$PREFIX-net"
LABEL="io.synclab.swarm-lab=$PREFIX"
SYNCLAB_IMAGE="${SYNCLAB_IMAGE:-synclab:latest}"
PROMETHEUS_IMAGE="${PROMETHEUS_IMAGE:-synclab-prometheus:latest}"
HOST_IMAGE="${LAB_HOST_IMAGE:-synclab-swarm-host:latest}"
STACK="${LAB_STACK:-synclab}"
TIMEOUT_S="${LAB_TIMEOUT_S:-600}"
SERVICES=(coordinator worker ps prometheus)
# Which hosts carry which roles: swarm node labels that docker-compose.swarm-hosts.yml places by.
ROLE_LABELS=("synclab.coordinator=true" "synclab.worker=true" "synclab.ps=true")
# The engine's own client (see scripts/docker/setup.sh): builds with BuildKit, speaks the engine's API.
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER="$(command -v docker)"

say() { printf 'swarm-lab: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
host() { echo "$PREFIX-host$1"; }
# `docker` inside lab host N.
in_host() { local n="$1"; shift; "$DOCKER" exec "$(host "$n")" docker "$@"; }
in_host_i() { local n="$1"; shift; "$DOCKER" exec -i "$(host "$n")" docker "$@"; }
host_ip() { "$DOCKER" inspect -f "{{(index .NetworkSettings.Networks \"$NET\").IPAddress}}" "$(host "$1")"; }
image_id() { "$DOCKER" image inspect -f '{{.Id}}' "$1"; }
now() { date +%s.%N | cut -c1-14; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Built every time: the build cache makes that a second when nothing changed.
host_image() {
    [ "${LOCAL_BASE:-0}" = 1 ] && BASE_IMAGE=local/bookworm:base
    local base="${BASE_IMAGE:-}"
    if [ -z "$base" ]; then  # the local base where one was built (no registry), else Debian's
        base=debian:bookworm-slim
        "$DOCKER" image inspect local/bookworm:base >/dev/null 2>&1 && base=local/bookworm:base
    fi
    [ "$base" = local/bookworm:base ] && "$here/base-image.sh" "$base"
    DOCKER_BUILDKIT=1 "$DOCKER" build -q --build-arg BASE_IMAGE="$base" -t "$HOST_IMAGE" \
        -f services/swarm-host/Dockerfile services/swarm-host >/dev/null
}

# Every capability by name, by bit (linux/capability.h), to drop those the engine cannot grant.
CAPS=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE
      NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT
      SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE
      AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ
      PERFMON BPF CHECKPOINT_RESTORE)

# How the hosts run: --privileged where the engine can give a container every capability; where its
# own bounding set lacks some (this VM's lacks SYS_RESOURCE, and runc then refuses --privileged with
# "unable to apply caps"), the same by parts: every capability it has, no seccomp or AppArmor
# profile, /proc unmasked, every device, a cgroup namespace of its own (the hosts' entrypoint
# remounts /sys and the cgroups read-write).
HOST_OPTS=()
host_run_options() {
    [ "${#HOST_OPTS[@]}" = 0 ] || return 0
    if "$DOCKER" run --rm --privileged --entrypoint true "$HOST_IMAGE" >/dev/null 2>&1; then
        HOST_OPTS=(--privileged)
        return
    fi
    local bnd; bnd=$((16#$(awk '/^CapBnd:/ { print $2 }' "/proc/$(pgrep -xo dockerd)/status")))
    local drop=() missing=()
    for bit in "${!CAPS[@]}"; do
        (( bnd >> bit & 1 )) || { drop+=(--cap-drop "${CAPS[$bit]}"); missing+=("${CAPS[$bit]}"); }
    done
    say "--privileged refused by the engine; hosts run with every capability but ${missing[*]}"
    HOST_OPTS=(--cap-add ALL "${drop[@]}" --security-opt seccomp=unconfined --security-opt apparmor=unconfined
               --security-opt systempaths=unconfined --device-cgroup-rule 'a *:* rwm' --cgroupns private)
}

start_hosts() {
    "$DOCKER" network inspect "$NET" >/dev/null 2>&1 \
        || "$DOCKER" network create --driver bridge --label "$LABEL" "$NET" >/dev/null
    for n in $(seq "$HOSTS"); do
        local name; name="$(host "$n")"
        if [ "$("$DOCKER" inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" = true ]; then
            continue
        fi
        "$DOCKER" rm -f "$name" >/dev/null 2>&1 || true
        # dockerd makes namespaces, cgroups, bridges, iptables rules and VXLAN devices.
        # ./examples at the same path as on this machine: the coordinator bind-mounts it (the checkout's
        # examples links to src/synclab/examples, so the real directory is mounted at the link's path).
        host_run_options
        "$DOCKER" run -d "${HOST_OPTS[@]}" --init --name "$name" --hostname "$name" --network "$NET" \
            --label "$LABEL" --mount "type=volume,src=$name-docker,dst=/var/lib/docker,volume-label=$LABEL" \
            -v "$REPO/src/synclab/examples:$REPO/examples:ro" \
            "$HOST_IMAGE" --log-level=warn >/dev/null
    done
    for n in $(seq "$HOSTS"); do
        local waited=0
        until in_host "$n" info >/dev/null 2>&1; do
            [ "$waited" -lt 60 ] || { "$DOCKER" logs --tail 30 "$(host "$n")" >&2; die "dockerd in $(host "$n") did not start"; }
            sleep 1; waited=$((waited + 1))
        done
    done
}

# docker save | docker load into every host that lacks the image (by ID): no registry, no compression.
# `docker save` runs once per image into a file, and the hosts load it at the same time.
load_images() {
    local tmp; tmp="$(mktemp -d /var/tmp/synclab-lab.XXXXXX)"
    for image in "$SYNCLAB_IMAGE" "$PROMETHEUS_IMAGE"; do
        local id; id="$(image_id "$image")" || { rm -rf "$tmp"; die "$image missing: build it first (scripts/docker/build.sh)"; }
        local tar="$tmp/image.tar" pids=() t0
        for n in $(seq "$HOSTS"); do
            [ "$(in_host "$n" image inspect -f '{{.Id}}' "$image" 2>/dev/null)" = "$id" ] && continue
            if [ ! -f "$tar" ]; then
                t0="$(now)"
                "$DOCKER" save -o "$tar" "$image"
                say "saved $image ($(du -m "$tar" | cut -f1) MB) in $(since "$t0") s"
                t0="$(now)"
            fi
            in_host_i "$n" load -q <"$tar" >/dev/null &
            pids+=($!)
        done
        for pid in "${pids[@]}"; do
            wait "$pid" || { rm -rf "$tmp"; die "docker load of $image into a lab host failed"; }
        done
        [ "${#pids[@]}" = 0 ] || say "loaded $image into ${#pids[@]} hosts in $(since "$t0") s"
        rm -f "$tar"
    done
    rm -rf "$tmp"
}

form_swarm() {
    if [ "$(in_host 1 info -f '{{.Swarm.LocalNodeState}}')" != active ]; then
        in_host 1 swarm init --advertise-addr "$(host_ip 1)" >/dev/null
    fi
    local token; token="$(in_host 1 swarm join-token -q worker)"
    for n in $(seq 2 "$HOSTS"); do
        [ "$(in_host "$n" info -f '{{.Swarm.LocalNodeState}}')" = active ] && continue
        in_host "$n" swarm join --advertise-addr "$(host_ip "$n")" --token "$token" "$(host_ip 1):2377" >/dev/null
    done
    for n in $(seq "$HOSTS"); do
        in_host 1 node update --label-add "${ROLE_LABELS[$((n - 1))]}" "$(host "$n")" >/dev/null
    done
}

up() {
    local t0; t0="$(now)"
    host_image
    start_hosts
    load_images
    form_swarm
    say "up in $(since "$t0") s: $(in_host 1 node ls --format '{{.Hostname}} ({{.Status}})' | paste -sd' ')"
}

remove_stack() {
    in_host 1 stack rm "$STACK" >/dev/null 2>&1 || return 0
    local waited=0
    for n in $(seq "$HOSTS"); do
        while [ -n "$(in_host "$n" ps -aq --filter "label=com.docker.stack.namespace=$STACK")" ] && [ "$waited" -lt 90 ]; do
            sleep 1; waited=$((waited + 1))
        done
        in_host "$n" volume rm "${STACK}_runs" "${STACK}_prometheus" >/dev/null 2>&1 || true
    done
}

# Bytes a host sent and received on the lab bridge (its eth0): the overlay's VXLAN packets between hosts.
underlay_bytes() {
    "$DOCKER" exec "$(host "$1")" cat /sys/class/net/eth0/statistics/tx_bytes /sys/class/net/eth0/statistics/rx_bytes \
        | paste -sd' '
}

tasks_json() {
    in_host 1 stack ps "$STACK" --no-trunc --format '{{json .}}' 2>/dev/null || true
}

stack_file() {
    # compose reads .env and interpolates; the shell wins. NETWORK_MTU: VXLAN adds 50 bytes to the
    # lab bridge's 1500. SYNCLAB_NODE_IMAGE: what every node records as its image (ref@image ID).
    # Prometheus is published on host 1 (docker-compose.swarm-prometheus.yml): the lab's hosts sit on a private
    # bridge of this machine, and the tests read the job's metrics from there. The overlay is not encrypted
    # (docker-compose.swarm-unencrypted.yml): the lab's hosts share this machine's kernel, and a kernel without
    # ESP (CONFIG_INET_ESP unset, as on the CI machines) carries no IPsec traffic between them.
    REPEAT=1 NETWORK_MTU="${NETWORK_MTU:-1450}" SYNCLAB_IMAGE="$SYNCLAB_IMAGE" PROMETHEUS_IMAGE="$PROMETHEUS_IMAGE" \
        SYNCLAB_NODE_IMAGE="$SYNCLAB_IMAGE@$(image_id "$SYNCLAB_IMAGE")" PROMETHEUS_PORT=9090 \
        "$DOCKER" compose -f docker-compose.yml -f docker-compose.swarm.yml -f docker-compose.swarm-hosts.yml \
        -f docker-compose.swarm-prometheus.yml -f docker-compose.swarm-unencrypted.yml config --format json "${SERVICES[@]}" | python3 "$here/stack-file.py"
}

run() {
    local out="${1:-runs/swarm-lab/$(date -u +%Y%m%d-%H%M%S)}"
    [ "$(in_host 1 info -f '{{.Swarm.LocalNodeState}}' 2>/dev/null)" = active ] || die "no lab swarm: run \`$0 up\` first"
    mkdir -p "$out/logs" "$out/hosts"
    remove_stack
    stack_file >"$out/stack.json"
    local before=() n; for n in $(seq "$HOSTS"); do before+=("$(underlay_bytes "$n")"); done
    local t0; t0="$(now)"
    in_host_i 1 stack deploy --resolve-image never -c - "$STACK" <"$out/stack.json" >/dev/null
    say "deployed stack $STACK; waiting for its job (at most ${TIMEOUT_S}s)"
    local state="" deadline=$(( $(date +%s) + TIMEOUT_S ))
    while :; do
        # The coordinator's task Complete (job ended) or any task Failed/Rejected.
        state="$(tasks_json | python3 -c '
import json, sys
tasks = [json.loads(line) for line in sys.stdin if line.strip()]
bad = [t for t in tasks if t["CurrentState"].startswith(("Failed", "Rejected"))]
coord = [t for t in tasks if t["Name"].split(".")[0].endswith("_coordinator")]
nodes = [t for t in tasks if not t["Name"].split(".")[0].endswith("_prometheus")]
if bad:
    print("failed " + "; ".join("%(Name)s on %(Node)s: %(CurrentState)s %(Error)s" % t for t in bad))
elif coord and all(t["CurrentState"].startswith("Complete") for t in coord):
    done = all(t["CurrentState"].startswith(("Complete", "Shutdown")) for t in nodes)
    print("complete" if done else "ending")
')"
        case "$state" in complete|failed*) break ;; esac
        [ "$(date +%s)" -lt "$deadline" ] || { state="timeout"; break; }
        sleep 2
    done
    local t1; t1="$(now)"
    say "job: $state after $(since "$t0") s"

    tasks_json >"$out/tasks.json"
    for s in coordinator worker ps prometheus; do
        in_host 1 service logs --raw "${STACK}_$s" >"$out/logs/$s.log" 2>&1 || true
    done
    # Records: each host's `runs` volume, read from the volume's directory in that host; beside it
    # `docker inspect` of every container the stack ran there (exit codes, health check logs).
    for n in $(seq "$HOSTS"); do
        local dir="$out/hosts/$(host "$n")"; mkdir -p "$dir"
        local ids; ids="$(in_host "$n" ps -aq --filter "label=com.docker.stack.namespace=$STACK")"
        [ -z "$ids" ] || in_host "$n" inspect $ids >"$out/hosts/$(host "$n")-containers.json" || true
        "$DOCKER" exec "$(host "$n")" sh -c "cd /var/lib/docker/volumes/${STACK}_runs/_data 2>/dev/null && tar -c ." \
            | tar -x -C "$dir" 2>/dev/null || true
    done
    local latest="$out/hosts/$(host 1)/latest"
    if [ -L "$latest" ]; then
        mkdir -p "$out/records"
        cp -r "$out/hosts/$(host 1)/$(basename "$(readlink "$latest")")/." "$out/records/"
    fi
    local hosts_tsv="" n
    for n in $(seq "$HOSTS"); do
        hosts_tsv+="$(host "$n")\t$(host_ip "$n")\t${ROLE_LABELS[$((n - 1))]}\t${before[$((n - 1))]}\t$(underlay_bytes "$n")\n"
    done
    printf "$hosts_tsv" | python3 -c '
import json, sys
prefix, stack, state, t0, t1, prom, *images = sys.argv[1:]
hosts = {}
for line in sys.stdin:
    name, address, labels, before, after = line.rstrip("\n").split("\t")
    (tx0, rx0), (tx1, rx1) = (map(int, v.split()) for v in (before, after))
    hosts[name] = {"address": address, "labels": labels, "underlay_tx_bytes": tx1 - tx0, "underlay_rx_bytes": rx1 - rx0}
json.dump({"prefix": prefix, "stack": stack, "state": state, "start": float(t0), "end": float(t1), "prometheus": prom,
           "images": dict(zip(images[::2], images[1::2])), "hosts": hosts}, sys.stdout, indent=1)
' "$PREFIX" "$STACK" "$state" "$t0" "$t1" "http://$(host_ip 1):9090" \
        "$SYNCLAB_IMAGE" "$(image_id "$SYNCLAB_IMAGE")" "$PROMETHEUS_IMAGE" "$(image_id "$PROMETHEUS_IMAGE")" >"$out/lab.json"
    say "records in $out; Prometheus at http://$(host_ip 1):9090 (until \`$0 down\` or the next run)"
    [ "$state" = complete ] && [ -f "$out/records/summary.json" ] \
        && grep -q '"status": *"ok"' "$out/records/summary.json" \
        || { say "the job did not end ok ($state); see $out/logs"; return 1; }
}

status() {
    "$DOCKER" ps -a --filter "label=$LABEL" --format '{{.Names}}\t{{.Status}}'
    [ "$(in_host 1 info -f '{{.Swarm.LocalNodeState}}' 2>/dev/null)" = active ] || return 0
    in_host 1 node ls
    in_host 1 stack ps "$STACK" 2>/dev/null || true
}

down() {
    local containers; containers="$("$DOCKER" ps -aq --filter "label=$LABEL")"
    local c t0; t0="$(now)"
    if [ -n "$containers" ]; then
        # Each engine removes its own containers first (their cgroups go with them), then goes;
        # the stack first, so that Swarm does not start them again meanwhile.
        in_host 1 stack rm "$STACK" >/dev/null 2>&1 || true
        for c in $containers; do
            "$DOCKER" exec "$c" sh -c 'ids="$(docker ps -aq)"; [ -z "$ids" ] || docker rm -f $ids' >/dev/null 2>&1 &
        done
        wait
        say "down: the hosts' containers removed in $(since "$t0") s"
        "$DOCKER" rm -f -v $containers >/dev/null
    fi
    say "down: hosts removed in $(since "$t0") s"
    local volumes; volumes="$("$DOCKER" volume ls -q --filter "label=$LABEL")"
    [ -z "$volumes" ] || "$DOCKER" volume rm $volumes >/dev/null
    local networks; networks="$("$DOCKER" network ls -q --filter "label=$LABEL")"
    [ -z "$networks" ] || "$DOCKER" network rm $networks >/dev/null
    say "down: removed $(echo $containers | wc -w) containers, $(echo $volumes | wc -w) volumes, $(echo $networks | wc -w) networks"
}

case "${1:-}" in
    up) up ;;
    run) shift; run "$@" ;;
    status) status ;;
    down) down ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
