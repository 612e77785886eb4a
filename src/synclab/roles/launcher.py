"""``synclab run``: launch a local cluster (coordinator, PS shards, workers) as OS processes and supervise it.

Children run in their own session (Ctrl-C reaches only the launcher, which then
stops the job cleanly) and die with the launcher (PR_SET_PDEATHSIG), so no
orphans survive a crash. The launcher writes ``status.json`` in every case:
``ok``, ``failed`` (which node, its exit code) or ``interrupted``.

With ``run.restart: on-failure`` a failed job is restarted, up to
``run.max_restarts`` times, from its last consistent checkpoint
(:mod:`synclab.roles.checkpoint`; from the start when there is none), by the
policy of :mod:`synclab.roles.restart` that the container supervisor shares. The
unit of restart is the whole job, as in torchelastic: a synchronous job cannot go
on with one node rewound, so every node stops and resumes from the same cut.
``status.json`` lists each restart with its cause.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import grpc

from synclab.config import Spec
from synclab.fileio import write_atomic
from synclab.roles.bootstrap import free_port
from synclab.roles.restart import next_attempt, restart_due
from synclab.wire import pb, rpc
from synclab.wire.channels import open_channel

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:  # not Linux/glibc: the launcher's finally block still reaps children
        pass


def node_args(role: str, name: str, *, address: str, coordinator: str, spec_path: Path,
              run_dir: Path) -> list[str]:
    """The ``synclab ROLE ...`` arguments of one node (``address``: where it binds and what it advertises)."""
    if role == "coordinator":
        return ["coordinator", "--spec", str(spec_path), "--run-dir", str(run_dir), "--listen", coordinator]
    return [role, "--shard" if role == "ps" else "--rank", name.removeprefix(role), "--coordinator", coordinator,
            "--host", address, "--advertise", address]


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    log_path: Path


@dataclass
class LocalCluster:
    """The processes of one job on this machine; with ``netns`` isolation each in its own namespace."""

    spec: Spec
    run_dir: Path
    isolation: str = "none"
    host: str = "127.0.0.1"
    children: list[Child] = field(default_factory=list)
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    netns: object | None = None   # a NetnsCluster while one is up

    def node_names(self) -> list[tuple[str, str]]:
        return ([("coordinator", "coordinator")] + [(f"ps{i}", "ps") for i in range(self.spec.n_ps)]
                + [(f"worker{r}", "worker") for r in range(self.spec.n_workers)])

    def _host_profile(self):
        """The spec's link profile as this host shapes it (divided by ``run.dilation``)."""
        from synclab.netem.dilation import dilate

        p = self.spec.network.link_profile()
        return None if p is None else dilate(p, self.spec.run.dilation)

    def _build_netns(self) -> None:
        from synclab.netem.netns import NetnsCluster, Topology

        names = [(n, role) for n, role in self.node_names() if self.spec.machine_of(n) == n]
        kernel = self.spec.network.backend in ("netem", "htb", "tbf")
        topo = Topology.star([n for n, _ in names], roles=dict(names), host_address=True,
                             profile=self._host_profile() if kernel else None)
        self.netns = NetnsCluster(topo, notsent_lowat=self.spec.network.tcp_notsent_lowat)
        self.netns.up()
        write_atomic(self.run_dir / "network.json", json.dumps({
            "isolation": "netns", "bridge": topo.bridge, "subnet": str(topo.subnet),
            "nodes": {n.name: {"address": n.address, "netns": topo.netns(n.name),
                               "backend": (a.backend if (a := self.netns.applied.get(n.name)) else "none"),
                               "left_to_transport": sorted(a.left_to_app) if a else []}
                      for n in topo.nodes},
            # cluster.colocate_ps: a shard in its worker's namespace, on its worker's link
            "colocated": {n: self.spec.machine_of(n) for n, _ in self.node_names() if self.spec.machine_of(n) != n},
            "notes": self.netns.notes}, indent=2) + "\n")

    def _where(self, name: str) -> tuple[list[str], str]:
        """(argv prefix, address) of a node."""
        if self.netns is None:
            return [], self.host
        machine = self.spec.machine_of(name)
        return self.netns.exec_prefix(machine), self.netns.address(machine)

    def _tls_env(self) -> dict[str, str]:
        """With ``transport.tls`` and no ``$SYNCLAB_TLS_DIR`` of the user's: a CA made for this job."""
        from synclab.wire.tls import ENV, FILES, make_cluster_ca

        if not self.spec.transport.tls or os.environ.get(ENV):
            return {}
        d = self.run_dir / "tls"
        if not (d / FILES["key"]).exists():
            make_cluster_ca(d)
        return {ENV: str(d.resolve())}

    def _spawn(self, name: str, args: list[str]) -> Child:
        logs = self.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"{name}.log"
        env = dict(os.environ, SYNCLAB_TOKEN=self.token, PYTHONUNBUFFERED="1", **self._tls_env())
        with log_path.open("wb") as out:
            prefix, _ = self._where(name)
            proc = subprocess.Popen([*prefix, sys.executable, "-m", "synclab", *args], stdout=out,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                    preexec_fn=_die_with_parent)
        child = Child(name, proc, log_path)
        self.children.append(child)
        return child

    def start(self, spec_path: Path | None = None) -> str:
        spec_path = spec_path or self.run_dir / "spec.yaml"
        if self.isolation == "netns":
            self._build_netns()
        _, coord_host = self._where("coordinator")
        port = free_port(self.host) if self.netns is None else 50051
        address = f"{coord_host}:{port}"
        for name, role in self.node_names():
            self._spawn(name, node_args(role, name, address=self._where(name)[1], coordinator=address,
                                        spec_path=spec_path, run_dir=self.run_dir))
        self._write_control(address)
        return address

    def _write_control(self, address: str, **extra: str) -> None:
        """``control.json``: what lets ``synclab shape --run DIR`` reach the job (readable by its owner only)."""
        self.address = address
        write_atomic(self.run_dir / "control.json",
                     json.dumps({"coordinator": address, "token": self.token, **extra,
                                 **{"tls_dir": v for v in self._tls_env().values()}}) + "\n", mode=0o600)

    def coordinator_stub(self) -> rpc.CoordinatorStub:
        if not hasattr(self, "_stub"):
            from synclab.wire.tls import ENV, TlsFiles

            tls_dir = self._tls_env().get(ENV) or os.environ.get(ENV)
            self._channel = open_channel(self.address, self.token, "launcher",
                                         tls=TlsFiles.load(tls_dir) if tls_dir else None)
            self._stub = rpc.CoordinatorStub(self._channel)
        return self._stub

    def status(self) -> pb.StatusReply | None:
        try:
            return self.coordinator_stub().Status(pb.StatusRequest(), timeout=2)
        except grpc.RpcError:
            return None

    def stop_job(self, reason: str) -> None:
        try:
            self.coordinator_stub().Control(pb.ControlCommand(kind="stop", args_json=reason), timeout=2)
        except grpc.RpcError:
            pass

    def terminate(self, grace_s: float = 5.0) -> None:
        """SIGTERM every live child, then SIGKILL what is left after ``grace_s``."""
        for c in self.children:
            if c.proc.poll() is None:
                c.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for c in self.children:
            try:
                c.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait()
        if hasattr(self, "_channel"):
            self._channel.close()
        if self.netns is not None:
            self.netns.down()
            self.netns = None

    def exit_codes(self) -> dict[str, int | None]:
        return {c.name: c.proc.poll() for c in self.children}

    def restart(self) -> int:
        """Stop every node, then start the job again from its last consistent checkpoint; returns its iteration."""
        self.terminate()
        for attr in ("_stub", "_channel"):
            if hasattr(self, attr):
                delattr(self, attr)
        self.children = []
        logs = self.run_dir / "logs"
        if logs.exists():  # the failed attempt's logs stay, numbered
            self.previous_logs = self.run_dir / f"logs-attempt{len(list(self.run_dir.glob('logs-attempt*'))) + 1}"
            logs.rename(self.previous_logs)
        spec_path, resume = next_attempt(self.run_dir, self.spec.to_dict())
        self.start(spec_path)
        return resume


def supervise(cluster: LocalCluster, on_progress: Callable[[int, int], None] | None = None,
              poll_s: float = 0.25) -> dict:
    """Wait for the job (restarting it as ``run.restart`` says); returns the status record (also status.json)."""
    status = {"status": "ok", "reason": ""}

    # Ctrl-C, `kill`, `timeout` and container stops end the job. The handler only raises a flag, checked
    # once per poll: a KeyboardInterrupt raised inside a blocking gRPC call (the status poll) could leave
    # that call waiting for ever (seen twice in CI: the launcher never stopped), so none is raised there.
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    restarts: list[dict] = []
    try:
        while True:
            status = _watch(cluster, on_progress, poll_s, stop)
            if status["status"] != "failed" or not restart_due(cluster.spec.run, len(restarts)):
                break
            try:
                resumed = cluster.restart()
            except OSError as e:  # e.g. no space left under the run directory: the job ends failed, saying why
                status = {"status": "failed", "reason": f"{status['reason']}; the restart failed: {e}"}
                break
            restarts.append({"reason": status["reason"], "resumed_from": resumed, "at": time.time(),
                             "logs": str(getattr(cluster, "previous_logs", ""))})
        if status["status"] == "ok":
            for c in cluster.children[1:]:
                try:
                    c.proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    pass
    except KeyboardInterrupt:
        cluster.stop_job("interrupted by the user (Ctrl-C or SIGTERM)")
        status = {"status": "interrupted", "reason": "interrupted by the user (Ctrl-C or SIGTERM)"}
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if restarts:
            status["restarts"] = restarts
        try:
            cluster.terminate()
        except BaseException as e:  # the job's record still gets written, with why teardown failed
            status["teardown_error"] = f"{type(e).__name__}: {e}"
            raise
        finally:
            status["exit_codes"] = cluster.exit_codes()
            status["pids"] = {c.name: c.proc.pid for c in cluster.children}
            _write_status(cluster.run_dir / "status.json", status)
    return status


def _write_status(path: Path, status: dict, patience_s: float = 30.0) -> None:
    """status.json, written again while the disk is full (ENOSPC) for up to ``patience_s``: a job stopped by
    a full disk still leaves its record once a little space comes back (``synclab chaos --fault disk-full``)."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            write_atomic(path, json.dumps(status, indent=2) + "\n")
            return
        except OSError as e:
            if e.errno != errno.ENOSPC or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _watch(cluster: LocalCluster, on_progress, poll_s: float, stop: threading.Event) -> dict:
    """Poll one attempt of the job until the coordinator exits or a node crashes; the attempt's status."""
    coordinator = cluster.children[0]
    status = {"status": "ok", "reason": ""}
    while True:
        if stop.is_set():
            raise KeyboardInterrupt
        rc = coordinator.proc.poll()
        if rc is not None:
            if rc != 0:
                status = {"status": "failed", "reason": _failure_reason(cluster, rc)}
            break
        crashed = [c for c in cluster.children[1:] if c.proc.poll() not in (None, 0)]
        if crashed:
            time.sleep(poll_s)  # a killed node's peers fail right after it: report the cause, not them
            crashed = [c for c in cluster.children[1:] if c.proc.poll() not in (None, 0)]
            c = min(crashed, key=lambda c: c.proc.returncode >= 0)  # killed by a signal first
            reason = f"{c.name} exited with code {c.proc.returncode}{_last_words(c.log_path)} (log: {c.log_path})"
            cluster.stop_job(reason)
            status = {"status": "failed", "reason": reason}
            try:
                coordinator.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            break
        if on_progress is not None:
            st = cluster.status()
            if st is not None:
                on_progress(st.iterations_done, st.iterations_total)
        time.sleep(poll_s)
    return status


def _failure_reason(cluster: LocalCluster, rc: int) -> str:
    failure = cluster.run_dir / "failure.json"
    if failure.exists():
        return json.loads(failure.read_text()).get("reason", "")
    log = cluster.children[0].log_path
    return f"coordinator exited with code {rc}{_last_words(log)} (log: {log})"


def _last_words(log_path) -> str:
    """The log's last non-blank line (a crashed node's exception, usually), as ': line', or ''."""
    try:
        with open(log_path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return f": {lines[-1][:300]}" if lines else ""
