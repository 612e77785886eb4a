#!/bin/sh
# Start dockerd as the main process of a privileged container (a Swarm lab host).
# Arguments are passed on to dockerd. Run the container with --init so zombies get reaped.
set -eu

# Volumes that inner containers mount must propagate like on a real host.
mount --make-rshared / 2>/dev/null || true

# Without --privileged (an engine that cannot grant every capability: swarm-lab.sh then adds them one
# by one) /sys and the cgroup hierarchies are mounted read-only; dockerd writes to both.
if grep -qE ' /sys (sysfs|cgroup2?) ro[, ]| /sys/fs/cgroup[^ ]* cgroup2? ro[, ]' /proc/mounts; then
    mount -o remount,rw /sys
    grep -E '^[^ ]+ /sys/fs/cgroup/?[^ ]* cgroup2? ro[, ]' /proc/mounts | while read -r _ dir _; do
        mount -o remount,rw,bind "$dir"
    done
fi

# cgroup v2 allows processes only in leaf groups of a group that delegates controllers: move
# everything that runs here into a child, then hand every controller down. (cgroup v1, the
# usual case on the machines this was measured on, needs nothing: a privileged container sees
# its hierarchies read-write.)
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    mkdir -p /sys/fs/cgroup/dind-init
    while read -r pid; do
        echo "$pid" >/sys/fs/cgroup/dind-init/cgroup.procs 2>/dev/null || true
    done </sys/fs/cgroup/cgroup.procs
    for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
        echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
    done
fi

# A container started again keeps its volume, and with it the pid files of the last engine.
rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid
exec dockerd "$@"
