"""The faults ``synclab chaos`` injects, parsed from ``--fault`` and applied to a live local cluster.

* ``kill:ROLE`` — SIGKILL one node's process. ROLE is ``coordinator``, ``ps`` (shard 0), ``worker`` (the
  highest-ranked worker that is not a Stanza FC node), ``fc`` (a Stanza FC node: a worker the strategy's
  ``plan.json`` gives the role ``fc``), or a node's name (``ps1``, ``worker0``).
* ``drop:LINK:SECONDS`` — the link of node LINK (a role as above, or a node name) drops every packet, both
  ways, for SECONDS. This kernel has no ``sch_netem`` and no ``act_gact`` (no ``action drop``), so the drop
  is a ``pfifo`` queue of length 0 as the root qdisc of both ends of the node's veth pair: every packet
  offered to it is dropped (``tc -s`` counts them; the record keeps the count). Needs ``netns`` isolation
  and an unshaped link (the root qdisc it replaces must be the default one, so nothing is lost on restore).
  Under ``network.isolation: docker`` the node's end is the container's ``eth0`` (entered with ``nsenter``)
  and the host's end the veth it is paired with.
* ``flap:LINK[:PERIOD[:TIMES]]`` — the node's interface goes down and up (``ip link set``), TIMES times
  (default 3), PERIOD seconds down then PERIOD up (default 1.0). A period longer than the heartbeat timeout
  outlasts the job's attempt: the restart replaces the namespaces, and a bring-up that finds the node's
  namespace gone is recorded as such (``restored: namespace gone``), not as a failure to apply the fault.
* ``disk-full[:SECONDS]`` — the run directory sits on its own small tmpfs; the fault fills it to the last
  byte for SECONDS (default 5), then frees it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

KINDS = ("kill", "drop", "flap", "disk-full")
ROLES = ("coordinator", "ps", "worker", "fc")
FILLER = ".chaos-filler"
FLAP_PERIOD_S, FLAP_TIMES = 1.0, 3  # flap:LINK without PERIOD and TIMES


class FaultError(ValueError):
    """A --fault that cannot be parsed or cannot apply to this job (the message says which and why)."""


@dataclass(frozen=True)
class Fault:
    kind: str            # kill | drop | flap | disk-full
    target: str = ""     # a role or node name (kill, drop, flap)
    seconds: float = 0.0  # drop, disk-full: how long; flap: the half-period
    times: int = 0       # flap: down/up cycles

    @property
    def label(self) -> str:
        """The short form used in the matrix's rows and record names (``kill:ps``, ``drop:worker:3``)."""
        if self.kind == "kill":
            return f"kill:{self.target}"
        if self.kind == "drop":
            return f"drop:{self.target}:{self.seconds:g}"
        if self.kind == "flap":
            default = (self.seconds, self.times) == (FLAP_PERIOD_S, FLAP_TIMES)
            return f"flap:{self.target}" if default else f"flap:{self.target}:{self.seconds:g}:{self.times}"
        return "disk-full"

    @property
    def needs_netns(self) -> bool:
        return self.kind in ("drop", "flap")


def parse_fault(text: str) -> Fault:
    """``kill:ROLE``, ``drop:LINK:SECONDS``, ``flap:LINK[:PERIOD[:TIMES]]`` or ``disk-full[:SECONDS]``."""
    parts = text.strip().split(":")
    kind = parts[0]
    try:
        if kind == "kill" and len(parts) == 2 and parts[1]:
            return Fault("kill", parts[1])
        if kind == "drop" and len(parts) == 3 and parts[1]:
            seconds = float(parts[2])
            if not 0 < seconds <= 600:
                raise FaultError(f"--fault {text!r}: SECONDS must be in (0, 600]")
            return Fault("drop", parts[1], seconds)
        if kind == "flap" and 2 <= len(parts) <= 4 and parts[1]:
            period = float(parts[2]) if len(parts) > 2 else FLAP_PERIOD_S
            times = int(parts[3]) if len(parts) > 3 else FLAP_TIMES
            if not (0 < period <= 60 and 1 <= times <= 100):
                raise FaultError(f"--fault {text!r}: PERIOD must be in (0, 60] and TIMES in [1, 100]")
            return Fault("flap", parts[1], period, times)
        if kind == "disk-full" and len(parts) <= 2:
            seconds = float(parts[1]) if len(parts) == 2 else 5.0
            if not 0 < seconds <= 600:
                raise FaultError(f"--fault {text!r}: SECONDS must be in (0, 600]")
            return Fault("disk-full", seconds=seconds)
    except ValueError as e:
        if isinstance(e, FaultError):
            raise
        raise FaultError(f"--fault {text!r}: {e}") from None
    raise FaultError(f"--fault {text!r} is not one of kill:ROLE, drop:LINK:SECONDS, flap:LINK[:PERIOD[:TIMES]], "
                     f"disk-full[:SECONDS] (ROLE/LINK: {', '.join(ROLES)} or a node name such as ps1, worker0)")


def fc_nodes(run_dir: Path) -> list[str]:
    """The nodes a strategy's ``plan.json`` names with the role ``fc`` (Stanza's FC workers); [] without one."""
    try:
        roles = json.loads((run_dir / "plan.json").read_text()).get("roles") or {}
    except (OSError, ValueError):
        return []
    return sorted(n for n, r in roles.items() if r == "fc")


def resolve_node(target: str, nodes: list[str], run_dir: Path) -> str | None:
    """The node a role names in this job (None: the job has no such node, e.g. ``ps`` in a ring job)."""
    if target == "coordinator":
        return "coordinator"
    if target == "ps":
        return "ps0" if "ps0" in nodes else None
    if target == "fc":
        fc = fc_nodes(run_dir)
        return fc[0] if fc else None
    if target == "worker":
        fc = set(fc_nodes(run_dir))
        workers = [n for n in nodes if n.startswith("worker") and n not in fc]
        return max(workers, key=lambda n: int(n.removeprefix("worker")), default=None)
    return target if target in nodes else None


def _run(cmd: list[str], netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    full = ["ip", "netns", "exec", netns, *cmd] if netns else cmd
    r = subprocess.run(full, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(full)} failed: {(r.stderr or r.stdout).strip()}")
    return r


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


@dataclass
class LinkEnds:
    """The two ends of a node's link: ``dev`` in namespace ``netns`` (or, with ``pid``, in the network
    namespace of that process: a container's), and its host-side peer ``host_dev``."""

    netns: str
    dev: str
    host_dev: str
    pid: int = 0

    def _node(self, cmd: list[str], check: bool = True) -> subprocess.CompletedProcess:
        if self.pid:
            return _run(["nsenter", "-t", str(self.pid), "-n", *cmd], check=check)
        return _run(cmd, self.netns, check=check)

    def _root(self, side: str) -> str:
        r = self._node(["tc", "qdisc", "show", "dev", self.dev]) if side == "node" else \
            _run(["tc", "qdisc", "show", "dev", self.host_dev])
        return next((ln for ln in r.stdout.splitlines() if " root " in f" {ln} "), "")

    def check_unshaped(self) -> None:
        for side in ("node", "host"):
            root = self._root(side)
            if root and not root.startswith("qdisc noqueue"):
                raise FaultError(f"the {side} end of the link has a root qdisc ({root.strip()}); a drop replaces "
                                 "it and could not restore it: run the chaos job unshaped (network.rate=null)")

    def drop_on(self) -> None:
        self.check_unshaped()
        self._node(["tc", "qdisc", "replace", "dev", self.dev, "root", "pfifo", "limit", "0"])
        _run(["tc", "qdisc", "replace", "dev", self.host_dev, "root", "pfifo", "limit", "0"])

    def dropped(self) -> int:
        """Packets the drop queues dropped so far (both ends)."""
        total = 0
        for r in (self._node(["tc", "-s", "qdisc", "show", "dev", self.dev], check=False),
                  _run(["tc", "-s", "qdisc", "show", "dev", self.host_dev], check=False)):
            for ln in r.stdout.splitlines():
                if "dropped" in ln:
                    total += int(ln.split("dropped", 1)[1].split(",")[0].strip())
                    break
        return total

    def drop_off(self) -> None:
        self._node(["tc", "qdisc", "del", "dev", self.dev, "root"], check=False)
        _run(["tc", "qdisc", "del", "dev", self.host_dev, "root"], check=False)

    def set_up(self, up: bool) -> None:
        self._node(["ip", "link", "set", "dev", self.dev, "up" if up else "down"])

    def gone(self) -> bool:
        """Whether the node's namespace no longer exists (the job's attempt ended and took it down)."""
        if self.pid:
            return not Path(f"/proc/{self.pid}/ns/net").exists()
        from synclab.netem.netns import list_netns

        return self.netns not in list_netns()


def container_link(container) -> LinkEnds:
    """The ends of a running container's ``eth0``: the container's network namespace (through its main
    process) and the host veth paired with it (``eth0@ifN``: the host interface of index N)."""
    container.reload()
    pid = int(container.attrs["State"]["Pid"])
    if not pid:
        raise FaultError(f"container {container.name} is not running")
    line = _run(["nsenter", "-t", str(pid), "-n", "ip", "-o", "link", "show", "dev", "eth0"]).stdout
    peer = line.split(":", 2)[1].strip().partition("@if")[2]
    for ln in _run(["ip", "-o", "link", "show"]).stdout.splitlines():
        index, name = ln.split(":", 2)[:2]
        if index.strip() == peer:
            return LinkEnds(container.name, "eth0", name.strip().partition("@")[0], pid=pid)
    raise FaultError(f"no host interface is paired with {container.name}'s eth0 ({line.strip()})")


def fill_disk(directory: Path) -> int:
    """Write zeros into ``directory/FILLER`` until the file system is full; the bytes written."""
    written = 0
    block = b"\0" * (1 << 20)
    with open(directory / FILLER, "wb", buffering=0) as f:
        while True:
            try:
                written += f.write(block)
            except OSError:
                break
        for size in (1 << 16, 1 << 12, 1):  # the last few bytes too
            while True:
                try:
                    written += f.write(block[:size])
                except OSError:
                    break
    return written


def free_disk(directory: Path) -> None:
    (directory / FILLER).unlink(missing_ok=True)


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    _run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "synclab-chaos", str(path)])


def unmount(path: Path) -> None:
    for _ in range(20):
        if _run(["umount", str(path)], check=False).returncode == 0:
            return
        time.sleep(0.25)
    _run(["umount", "-l", str(path)], check=False)
