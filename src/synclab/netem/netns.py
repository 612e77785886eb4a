"""Network-namespace isolation for the local launcher: one namespace per node on a shared bridge.

:class:`Topology` is plain data — node names, addresses, each node's profile and
the names of everything that will be created — built and tested without root.
:class:`NetnsCluster` turns it into kernel objects: one bridge, one namespace per
node, a veth pair per node (host end on the bridge, node end ``eth0`` inside the
namespace with the node's address), the node's shaping on ``eth0`` (egress) and
through ``ifb0`` (ingress), an iptables ``FORWARD`` accept rule for the bridge
(Docker sets the policy to DROP) and ``/etc/netns/NS/{resolv.conf,hosts}`` so
nothing inside stalls on DNS and nodes resolve each other by name.

Every object is recorded the moment it exists, in memory and in a state file
(``/run/synclab/netns/PREFIX.json``), and :meth:`NetnsCluster.down` removes
exactly those, newest first; it is idempotent. :func:`cleanup_leftovers`
removes what a crashed run left behind, found by name prefix, skipping
prefixes whose owning process is still alive.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from synclab.linkprofile import LinkProfile, resolve_for_role
from synclab.netem import tc
from synclab.netem.tc import Applied, BackendChoice, Runner, ShapingError, run_cmd

PREFIX_BASE = "slb"
NODE_DEV = "eth0"
NODE_IFB = "ifb0"
IFNAMSIZ = 15
DEFAULT_STATE_DIR = Path("/run/synclab/netns")
ETC_NETNS = Path("/etc/netns")
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{1,8}$")
_NODE_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")


class NetnsUnavailable(ShapingError):
    """Namespace isolation cannot run here (not root, or iproute2 missing); the message says how to proceed."""


def new_prefix(base: str = PREFIX_BASE) -> str:
    """A short unique prefix for one cluster's objects: base + 4 hex digits ('slb3fa2')."""
    return f"{base}{secrets.token_hex(2)}"


def _subnet_for(prefix: str) -> ipaddress.IPv4Network:
    h = int.from_bytes(hashlib.sha256(prefix.encode()).digest()[:2], "big")
    return ipaddress.IPv4Network(f"10.{200 + h % 50}.{h >> 8}.0/24")


@dataclass(frozen=True)
class Node:
    """One node: its name, address, role and the (role-resolved) profile of its link; None = unshaped."""

    name: str
    address: str
    role: str | None = None
    profile: LinkProfile | None = None


@dataclass(frozen=True)
class Topology:
    """The picture to build: nodes on one bridge in ``subnet``; names derive from ``prefix``.

    Build with :meth:`star`. Host side names: bridge ``PREFIXbr``, veth ``PREFIXvI``;
    namespaces ``PREFIX-NODE``; inside each namespace ``eth0`` and ``ifb0``.
    """

    prefix: str
    subnet: ipaddress.IPv4Network
    nodes: tuple[Node, ...]
    host_address: str | None = None

    def __post_init__(self):
        if not _PREFIX_RE.match(self.prefix):
            raise ValueError(f"prefix {self.prefix!r} must be 2-9 lowercase letters/digits starting with a letter")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"node names must be unique, got {names}")
        for n in self.nodes:
            if not _NODE_RE.match(n.name):
                raise ValueError(f"node name {n.name!r}: use lowercase letters, digits, '-', '_', '.' (max 40)")
            if ipaddress.IPv4Address(n.address) not in self.subnet:
                raise ValueError(f"node {n.name}: address {n.address} is outside {self.subnet}")
        for name in [self.bridge, *(self.host_veth(n.name) for n in self.nodes)]:
            if len(name) > IFNAMSIZ:
                raise ValueError(f"interface name {name!r} is longer than {IFNAMSIZ} characters")

    @classmethod
    def star(cls, names: Sequence[str], *, profile: LinkProfile | None = None,
             roles: Mapping[str, str] | None = None, profiles: Mapping[str, LinkProfile] | None = None,
             prefix: str | None = None, subnet: str | None = None, host_address: bool = False) -> Topology:
        """Nodes ``names`` on one bridge; addresses .2, .3, ... of ``subnet`` (default derived from the prefix).

        Each node's profile is ``profiles[name]`` if given, else ``profile`` resolved
        for the node's role (``roles[name]``); ``host_address`` gives the bridge .1
        so host processes can reach the nodes.
        """
        prefix = prefix or new_prefix()
        net = ipaddress.IPv4Network(subnet) if subnet else _subnet_for(prefix)
        hosts = list(net.hosts())
        if len(names) > len(hosts) - 1:
            raise ValueError(f"{len(names)} nodes do not fit in {net}")
        roles = dict(roles or {})
        nodes = []
        for i, name in enumerate(names):
            role = roles.get(name)
            p = (profiles or {}).get(name)
            if p is None and profile is not None:
                p = resolve_for_role(profile, role)
            nodes.append(Node(name=name, address=str(hosts[i + 1]), role=role, profile=p))
        return cls(prefix=prefix, subnet=net, nodes=tuple(nodes),
                   host_address=str(hosts[0]) if host_address else None)

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    def index(self, node: str) -> int:
        for i, n in enumerate(self.nodes):
            if n.name == node:
                return i
        raise KeyError(f"no node {node!r}; nodes: {', '.join(n.name for n in self.nodes)}")

    def node(self, name: str) -> Node:
        return self.nodes[self.index(name)]

    def netns(self, node: str) -> str:
        self.index(node)
        return f"{self.prefix}-{node}"

    def host_veth(self, node: str) -> str:
        return f"{self.prefix}v{self.index(node)}"

    def hosts_file(self) -> str:
        lines = ["127.0.0.1\tlocalhost"] + [f"{n.address}\t{n.name}" for n in self.nodes]
        return "\n".join(lines) + "\n"

    def plan(self) -> list[Step]:
        """Every step :class:`NetnsCluster` takes before shaping, with what each creates (pure, for tests)."""
        br, plen = self.bridge, self.subnet.prefixlen
        steps = [Step(["ip", "link", "add", "name", br, "type", "bridge"], created=("link", br)),
                 Step(["ip", "link", "set", "dev", br, "up"])]
        if self.host_address:
            steps.append(Step(["ip", "addr", "add", f"{self.host_address}/{plen}", "dev", br]))
        for n in self.nodes:
            ns, hv = self.netns(n.name), self.host_veth(n.name)
            steps += [
                Step(["ip", "netns", "add", ns], created=("netns", ns)),
                Step(["ip", "link", "add", "name", hv, "type", "veth", "peer", "name", NODE_DEV, "netns", ns],
                     created=("link", hv)),
                Step(["ip", "link", "set", "dev", hv, "master", br]),
                Step(["ip", "link", "set", "dev", hv, "up"]),
                Step(["ip", "link", "set", "dev", "lo", "up"], netns=ns),
                Step(["ip", "addr", "add", f"{n.address}/{plen}", "dev", NODE_DEV], netns=ns),
                Step(["ip", "link", "set", "dev", NODE_DEV, "up"], netns=ns),
            ]
        return steps

    def forward_rule(self) -> list[str]:
        """The iptables rule (without -I/-D) that lets the bridge forward between its own ports."""
        return ["FORWARD", "-i", self.bridge, "-o", self.bridge, "-m", "comment", "--comment", self.prefix,
                "-j", "ACCEPT"]


@dataclass(frozen=True)
class Step:
    cmd: list[str]
    netns: str | None = None
    created: tuple[str, str] | None = None  # (kind, name) recorded once the command succeeded


def check_netns_support(*, privileged: bool | None = None, missing: Sequence[str] | None = None) -> None:
    """Raise :class:`NetnsUnavailable` saying what is missing (root/CAP_NET_ADMIN, iproute2) and what to do."""
    missing = tc.iproute2_missing() if missing is None else list(missing)
    privileged = tc.has_net_admin() if privileged is None else privileged
    problems = []
    if not privileged:
        problems.append("network-namespace isolation needs root (CAP_NET_ADMIN)")
    if missing:
        problems.append(f"iproute2 is not installed ({', '.join(missing)} not found; apt-get install iproute2)")
    if problems:
        raise NetnsUnavailable("; ".join(problems) + ". To run unprivileged use --isolation none: nodes talk over "
                               "loopback and the transport shapes the links itself (app backend).")


def netns_unavailable_reason() -> str | None:
    """Why ``--isolation netns`` cannot run here (None when it can): for choosing the default isolation."""
    try:
        check_netns_support()
    except NetnsUnavailable as e:
        return str(e)
    return None


@dataclass
class NetnsCluster:
    """Builds a :class:`Topology` in the kernel and tears down exactly what it built.

    Use as a context manager (``with NetnsCluster(topo) as c:``) or call
    :meth:`up` / :meth:`down`; a failed ``up`` removes what it had made.
    ``available`` (default: detected at the first :meth:`shape`, then kept) and
    ``prefer`` steer :func:`tc.choose_backend` for every node, e.g.
    ``available=frozenset({"htb", "ifb"})`` to force htb or to simulate a kernel
    without netem; ``offloads="off"`` switches TSO/GSO/GRO off on
    each shaped ``eth0``; ``notsent_lowat`` sets ``net.ipv4.tcp_notsent_lowat`` in
    every namespace, so a socket holds at most that many unsent bytes and a priority
    decision of the transport is not undone by megabytes already written (P3 §4.2).
    """

    topology: Topology
    runner: Runner = run_cmd
    state_dir: Path = DEFAULT_STATE_DIR
    offloads: Literal["off", "keep"] = "keep"
    available: frozenset[str] | None = None
    prefer: tuple[str, ...] | None = None  # None: tc.rate_backend_order of each profile
    notsent_lowat: int | None = None  # net.ipv4.tcp_notsent_lowat in every namespace (None: the kernel's default)
    created: list[tuple[str, str]] = field(default_factory=list)
    applied: dict[str, Applied] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __enter__(self) -> NetnsCluster:
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()

    @property
    def state_file(self) -> Path:
        return self.state_dir / f"{self.topology.prefix}.json"

    def _record(self, kind: str, name: str) -> None:
        self.created.append((kind, name))
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "prefix": self.topology.prefix, "created": self.created}))
        tmp.replace(self.state_file)

    def up(self) -> NetnsCluster:
        """Create bridge, namespaces, veths, addresses, DNS files, forward rule; shape every node.

        On any failure (or Ctrl-C) what was already created is removed before the error propagates.
        """
        check_netns_support()
        try:
            self._build()
        except BaseException:
            self.down()
            raise
        return self

    def _build(self) -> None:
        topo = self.topology
        self._record("state", str(self.state_file))
        for step in topo.plan():
            self.runner(step.cmd, step.netns)
            if step.created:
                self._record(*step.created)
            if step.created and step.created[0] == "netns":
                self._write_etc(step.created[1])
        self._allow_forwarding()
        if self.notsent_lowat is not None:
            for n in topo.nodes:  # per-namespace sysctl: bounds the unsent bytes a socket may hold
                self.runner(["sysctl", "-q", "-w", f"net.ipv4.tcp_notsent_lowat={int(self.notsent_lowat)}"],
                            topo.netns(n.name))
        for n in topo.nodes:
            if n.profile is not None:
                self.shape(n.name, n.profile)

    def _write_etc(self, ns: str) -> None:
        d = ETC_NETNS / ns
        d.mkdir(parents=True, exist_ok=True)
        self._record("etc", str(d))
        # 127.0.0.1 answers at once with "connection refused": resolvers fail fast instead of timing out
        (d / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
        (d / "hosts").write_text(self.topology.hosts_file())

    def _allow_forwarding(self) -> None:
        if shutil.which("iptables") is None:
            self.notes.append("iptables not installed: no FORWARD rule added (fine unless Docker's "
                              "br_netfilter + FORWARD DROP is active)")
            return
        rule = self.topology.forward_rule()
        self.runner(["iptables", "-I", *rule])
        self._record("iptables", json.dumps(rule))

    def exec_prefix(self, node: str) -> list[str]:
        """argv prefix that runs a command inside ``node``'s namespace."""
        return ["ip", "netns", "exec", self.topology.netns(node)]

    def address(self, node: str) -> str:
        return self.topology.node(node).address

    def shape(self, node: str, profile: LinkProfile | None, *, choice: BackendChoice | None = None) -> Applied:
        """(Re)shape ``node``'s link now (live reshaping); ``None`` clears it. Returns what was applied."""
        ns = self.topology.netns(node)
        profile = profile if profile is not None else LinkProfile(name="unshaped")
        if choice is None:
            if self.available is None:
                self.available = tc.detect_backends()  # probed once, kept for every node of this cluster
            choice = tc.choose_backend(profile, self.available, True, prefer=self.prefer)
        applied = tc.apply(NODE_DEV, profile, ns, choice=choice, ifb_dev=NODE_IFB, privileged=True,
                           offloads=self.offloads, runner=self.runner)
        self.applied[node] = applied
        return applied

    def down(self) -> list[str]:
        """Remove everything recorded, newest first; safe to call twice. Returns what it removed.

        Processes still running inside the cluster's namespaces are killed first (they
        belong to this run and would keep the namespace alive).
        """
        removed = _remove(list(reversed(self.created)), self.runner)
        self.created.clear()
        self.applied.clear()
        return removed


def _remove(records: Iterable[tuple[str, str]], runner: Runner) -> list[str]:
    """Remove recorded objects, ignoring ones already gone; raise at the end if something would not go."""
    removed, errors = [], []
    for kind, name in records:
        try:
            if kind == "link":
                if tc.link_exists(name, runner=runner):
                    runner(["ip", "link", "del", "dev", name])
                    removed.append(f"link {name}")
            elif kind == "netns":
                if name in list_netns(runner):
                    _kill_netns_pids(name, runner)
                    runner(["ip", "netns", "del", name])
                    removed.append(f"netns {name}")
            elif kind == "iptables":
                rule = json.loads(name)
                if runner(["iptables", "-C", *rule], check=False).returncode == 0:
                    runner(["iptables", "-D", *rule])
                    removed.append(f"iptables {' '.join(rule)}")
            elif kind == "etc":
                if Path(name).exists():
                    shutil.rmtree(name)
                    removed.append(f"dir {name}")
            elif kind == "state":
                if Path(name).exists():
                    Path(name).unlink()
        except (ShapingError, OSError) as e:
            errors.append(f"{kind} {name}: {e}")
    if errors:
        raise ShapingError("teardown left things behind: " + "; ".join(errors))
    return removed


def _kill_netns_pids(ns: str, runner: Runner) -> None:
    """Processes still inside a namespace being removed belong to this cluster's run: stop them."""
    r = runner(["ip", "netns", "pids", ns], check=False)
    for pid in r.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def list_netns(runner: Runner = run_cmd) -> list[str]:
    """Names of the named network namespaces (``ip netns list``)."""
    return [line.split()[0] for line in runner(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]


def list_links(runner: Runner = run_cmd) -> list[str]:
    """Names of the host's interfaces (``ip -o link show``), without the ``@peer`` suffix."""
    names = []
    for line in runner(["ip", "-o", "link", "show"]).stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def _owner_alive(state_file: Path) -> bool:
    try:
        pid = int(json.loads(state_file.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_OURS_RE = re.compile(rf"^({PREFIX_BASE}[0-9a-f]{{4}})(?:br|v\d+|-.+)$")


def _ours(name: str, prefix: str) -> str | None:
    """The cluster prefix ``name`` belongs to when it is one of ours under ``prefix`` (else None)."""
    m = _OURS_RE.match(name)
    if m and m.group(1).startswith(prefix):
        return m.group(1)
    m = re.match(rf"^{tc.PROBE_PREFIX}\d+$", name)
    if m and name.startswith(prefix):
        return name
    return None


def cleanup_leftovers(prefix: str = PREFIX_BASE, *, state_dir: Path = DEFAULT_STATE_DIR, force: bool = False,
                      runner: Runner = run_cmd) -> list[str]:
    """Remove namespaces, links, iptables rules and /etc/netns dirs left by crashed runs under ``prefix``.

    Only names of SyncLab's own pattern are touched (``slbXXXX-node``,
    ``slbXXXXbr``, ``slbXXXXvN``, ``slbprobePID``, XXXX four hex digits as
    :func:`new_prefix` makes them); a :class:`Topology` with a custom prefix is
    not found here. A prefix whose state file names
    a live owner process is skipped unless ``force``. Returns what was removed.
    """
    check_netns_support()
    groups: dict[str, list[tuple[str, str]]] = {}
    for ns in list_netns(runner):
        if (owner := _ours(ns, prefix)) is not None:
            groups.setdefault(owner, []).append(("netns", ns))
    for link in list_links(runner):
        if (owner := _ours(link, prefix)) is not None:
            groups.setdefault(owner, []).append(("link", link))
    if shutil.which("iptables"):
        for line in runner(["iptables", "-S", "FORWARD"]).stdout.splitlines():
            m = re.search(r"--comment (\S+)", line)
            if line.startswith("-A FORWARD") and m and (owner := _ours(m.group(1) + "br", prefix)):
                groups.setdefault(owner, []).append(("iptables", json.dumps(line.split()[1:])))
    if ETC_NETNS.is_dir():
        for d in ETC_NETNS.iterdir():
            if (owner := _ours(d.name, prefix)) is not None:
                groups.setdefault(owner, []).append(("etc", str(d)))
    if state_dir.is_dir():
        for f in state_dir.glob("*.json"):
            if _ours(f.stem + "br", prefix):
                groups.setdefault(f.stem, []).append(("state", str(f)))
    removed = []
    for owner, records in sorted(groups.items()):
        if owner.startswith(tc.PROBE_PREFIX):
            pid = int(owner[len(tc.PROBE_PREFIX):])
            if not force and (pid == os.getpid() or _pid_alive(pid)):
                continue
        elif not force and _owner_alive(state_dir / f"{owner}.json"):
            continue
        # veths before their namespaces and bridge, the state file last
        order = {"link": 0, "netns": 1, "iptables": 2, "etc": 3, "state": 4}
        records.sort(key=lambda r: (order[r[0]], r[1].endswith("br")))
        removed += _remove(records, runner)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
