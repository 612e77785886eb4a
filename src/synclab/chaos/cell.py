"""One cell of the fault matrix: an undisturbed run, the same job with one fault injected, and the verdict.

Both runs are local clusters launched in this process (:class:`synclab.roles.launcher.LocalCluster`, or
:class:`synclab.roles.docker_cluster.DockerCluster` under ``network.isolation: docker``, supervised by
:func:`~synclab.roles.launcher.supervise` with the job's own restart policy), so the injector sees the live
nodes: their processes or containers, namespaces and veths. The fault goes in from a thread once
the coordinator reports half the iterations done (and, for a checkpointable strategy, a checkpoint taken).

The verdict (``outcome``):

* ``recovered`` — restarted, ended ``ok``, parameters bit-identical (``torch.equal``) to the undisturbed
  run's, every (worker, iteration) in ``iterations.csv`` exactly once, and every PS partition's version
  counter in the checkpoints both runs kept equal to the undisturbed run's (no update lost or applied twice);
* ``unaffected`` — the same, without a restart (the transport rode the fault out);
* ``failed-clean`` — ended ``failed`` with ``status.json`` (which must be on disk) naming the fault (the node, or the full
  disk), within the heartbeat timeout (plus :data:`TEARDOWN_SLACK_S`) of the fault's end;
* ``n/a`` — the job has no node of that role (``kill:ps`` on an all-reduce job);
* ``VIOLATION: ...`` — anything else: hung (killed by the watchdog), ``ok`` with other parameters,
  updates lost or doubled, a late or unnamed failure, or a process or namespace left behind.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import yaml

from synclab import hostlock
from synclab.chaos import faults
from synclab.chaos.faults import Fault, FaultError

TEARDOWN_SLACK_S = 15.0   # stopping every node and removing the namespaces, after the failure is seen
DEFAULT_SETTINGS = ("run.restart=on-failure", "run.max_restarts=2")
TMPFS_SPARE_MIB = 32  # the disk-full tmpfs: twice what the undisturbed run wrote, plus this


def chaos_overrides(spec_path: str | Path, overrides: list[str], *, heartbeat_timeout_s: float,
                    checkpoint_every: int, isolation: str) -> list[str]:
    """The overrides a chaos job runs with: the user's, then restart on failure, the heartbeat timeout,
    checkpoints every ``checkpoint_every`` iterations where the strategy is checkpointable, the isolation."""
    from synclab.config import load_spec
    from synclab.resources import spec_path as find_spec
    from synclab.strategies import registry

    spec = load_spec(find_spec(spec_path), overrides)
    if spec.network.isolation == "docker":  # asked for: every node a container, whatever the fault
        isolation = "docker"
    out = [*overrides, *DEFAULT_SETTINGS, f"run.heartbeat_timeout_s={heartbeat_timeout_s:g}",
           f"network.isolation={isolation}"]
    if registry.get(spec.strategy.name).checkpointable and not spec.run.checkpoint_every:
        every = min(checkpoint_every, max(1, spec.run.iterations // 4))
        out.append(f"run.checkpoint_every={every}")
    return out


def _netns_left(prefixes: set[str]) -> list[str]:
    from synclab.netem.netns import list_netns

    return [ns for ns in list_netns() if any(ns.startswith(f"{p}-") for p in prefixes)]


def _alive(pids: set[int]) -> list[int]:
    left = []
    for pid in sorted(pids):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if b"synclab" in cmd and stat.split(")")[-1].split()[0] != "Z":
            left.append(pid)
    return left


class _Injector(threading.Thread):
    """Applies one fault to a live cluster, once; notes when it began and ended and what it did."""

    def __init__(self, fault: Fault, cluster):
        super().__init__(daemon=True, name="chaos-injector")
        self.fault, self.cluster = fault, cluster
        self.node: str | None = None
        self.started_at = self.ended_at = 0.0
        self.detail: dict = {}
        self.error = ""

    def run(self) -> None:
        f, c = self.fault, self.cluster
        try:
            self.started_at = time.time()
            if f.kind == "disk-full":
                self.node = "disk"
                self.detail["filled_bytes"] = faults.fill_disk(c.run_dir)
                time.sleep(f.seconds)
                faults.free_disk(c.run_dir)
            elif f.kind == "kill":
                child = next(ch for ch in c.children if ch.name == self.node)
                child.proc.kill()  # SIGKILL of the process, or of the container's under docker isolation
                self.detail["pid"] = child.proc.pid
            else:
                machine = c.spec.machine_of(self.node)
                if c.isolation == "docker":
                    child = next(ch for ch in c.children if ch.name == machine)
                    ends = faults.container_link(child.proc.container)
                else:
                    topo = c.netns.topology
                    ends = faults.LinkEnds(topo.netns(machine), "eth0", topo.host_veth(machine))
                if f.kind == "drop":
                    self.detail["method"] = "pfifo limit 0 as root qdisc on both ends of the veth pair"
                    ends.drop_on()
                    try:  # counted while it lasts: a restart replaces the namespaces, and their counters
                        end = time.monotonic() + f.seconds
                        while (left := end - time.monotonic()) > 0:
                            time.sleep(min(0.5, left))
                            self.detail["dropped_packets"] = max(self.detail.get("dropped_packets", 0),
                                                                 ends.dropped())
                    finally:
                        ends.drop_off()
                else:
                    self.detail["method"] = "ip link set dev eth0 down/up in the node's namespace"
                    for n in range(f.times):
                        if n and ends.gone():  # a restart replaced the cluster: its new link is not this one
                            break
                        ends.set_up(False)
                        time.sleep(f.seconds)
                        try:
                            ends.set_up(True)
                            self.detail["restored"] = "link up again"
                        except RuntimeError:
                            if not ends.gone():
                                raise
                            self.detail["restored"] = "namespace gone (the attempt it was in had ended)"
                        time.sleep(f.seconds)
        except Exception as e:  # recorded: a fault that could not be applied is no result
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.ended_at = time.time()


def run_job(spec_path: str | Path, overrides: list[str], run_dir: Path, *, fault: Fault | None = None,
            deadline_s: float = 600.0) -> dict:
    """Run one job (with ``fault`` injected half-way, if given); its record: status.json's fields plus timing,
    what the injector did, and what was left behind."""
    from synclab.roles import checkpoint
    from synclab.roles.job import cluster_for, resolve_job
    from synclab.roles.launcher import supervise

    job = resolve_job(spec_path, overrides)
    spec = job.spec
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "spec.yaml").write_text(yaml.safe_dump(spec.to_dict(), sort_keys=False))
    cluster = cluster_for(job, run_dir)
    pids: set[int] = set()
    prefixes: set[str] = set()
    inject_at = max(1, spec.run.iterations // 2)
    injector = _Injector(fault, cluster) if fault else None
    record: dict = {"fault": fault.label if fault else None, "not_applicable": False}

    def seen() -> None:
        pids.update(ch.proc.pid for ch in cluster.children)
        if cluster.netns is not None:
            prefixes.add(cluster.netns.topology.prefix)

    def on_progress(done: int, total: int) -> None:
        seen()
        if injector is None or injector.started_at or record["not_applicable"] or injector.is_alive():
            return
        if done < inject_at or (spec.run.checkpoint_every and checkpoint.latest(run_dir) < spec.run.checkpoint_every):
            return
        if fault.kind != "disk-full":
            injector.node = faults.resolve_node(fault.target, [ch.name for ch in cluster.children], run_dir)
            if injector.node is None:  # no such node in this job: nothing to learn from running on
                record["not_applicable"] = True
                os.kill(os.getpid(), signal.SIGTERM)  # supervise() stops the job, no restart
                return
        record["injected_at_iteration"] = done
        injector.start()
        while not injector.started_at:
            time.sleep(0.001)

    hung = threading.Event()

    def watchdog() -> None:
        hung.set()
        os.kill(os.getpid(), signal.SIGTERM)  # supervise() stops the job on SIGTERM and records it

    timer = threading.Timer(deadline_s, watchdog)
    timer.daemon = True
    with hostlock.hold():  # one emulation on the host's cores at a time (a no-op under flock)
        t0 = time.time()
        try:
            cluster.start()
            seen()
            timer.start()
            status = supervise(cluster, on_progress=on_progress)
        except Exception as e:  # the launcher itself failed (e.g. it could not write on a full disk)
            cluster.terminate()
            status = {"status": "failed", "reason": f"launcher: {type(e).__name__}: {e}"}
        finally:
            timer.cancel()
    t_end = time.time()
    if injector is not None and injector.is_alive():
        injector.join(timeout=120)
    seen()
    pids.update(status.get("pids", {}).values())
    record.update(status=status["status"], reason=status.get("reason", ""), restarts=status.get("restarts", []),
                  hung=hung.is_set(), run_s=round(t_end - t0, 2), heartbeat_timeout_s=spec.run.heartbeat_timeout_s,
                  strategy=spec.strategy.name, checkpoint_every=spec.run.checkpoint_every,
                  iterations=spec.run.iterations, isolation=job.network.isolation)
    if injector is not None and injector.started_at:
        record.update(node=injector.node, fault_started=injector.started_at, fault_ended=injector.ended_at,
                      injection=injector.detail, injection_error=injector.error,
                      end_after_fault_s=round(t_end - injector.started_at, 2))
        if record["restarts"]:
            record["restart_after_fault_s"] = round(record["restarts"][0]["at"] - injector.started_at, 2)
    record["left_behind"] = {"processes": _alive(pids), "netns": _netns_left(prefixes)}
    if job.network.isolation == "docker":  # every attempt's containers and network carry the job's label
        from synclab.roles.docker_cluster import leftovers

        found = leftovers(cluster.client, cluster.job, force=True) if cluster.client is not None else {}
        record["left_behind"].update({k: [x.name for x in v] for k, v in found.items()})
    return record


def _updates(run_dir: Path) -> Counter:
    with open(run_dir / "iterations.csv") as f:
        return Counter((int(r["rank"]), int(r["iteration"])) for r in csv.DictReader(f))


def params_identical(a: Path, b: Path) -> bool:
    import torch

    pa, pb = torch.load(a / "params.pt"), torch.load(b / "params.pt")
    return pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)


def version_counters(run_dir: Path) -> dict[tuple, int]:
    """Every ``version`` counter the shards saved in the run's kept checkpoints, by (checkpoint, node, path)."""
    import torch

    out: dict[tuple, int] = {}

    def walk(x, where: tuple) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "version" and isinstance(v, int):
                    out[where] = v
                else:
                    walk(v, (*where, str(k)))

    for f in sorted((run_dir / "checkpoint").glob("*/ps*.pt")):
        walk(torch.load(f, map_location="cpu", weights_only=False), (f.parent.name, f.stem))
    return out


def compare_versions(faulted: Path, baseline: Path) -> tuple[int, list[str]]:
    """(counters compared, those that differ): each shard partition's update count at each checkpoint both
    runs kept must be the undisturbed run's (an update lost or applied twice changes it)."""
    a, b = version_counters(faulted), version_counters(baseline)
    common = sorted(a.keys() & b.keys())
    return len(common), [f"{'/'.join(k)}: {a[k]} != {b[k]}" for k in common if a[k] != b[k]]


def names_the_fault(record: dict) -> bool:
    reason = record["reason"] + " ".join(r["reason"] for r in record["restarts"])
    if record["fault"] == "disk-full":
        return "No space left" in reason or "Errno 28" in reason or "ENOSPC" in reason
    return bool(record.get("node")) and record["node"] in reason


def _status_on_disk(run_dir: Path) -> str:
    try:
        return json.loads((run_dir / "status.json").read_text())["status"]
    except (OSError, ValueError, KeyError, TypeError):
        return "missing or unreadable"


def verdict(record: dict, faulted: Path, baseline: Path) -> str:
    """The cell's outcome (see the module's docstring), from the faulted run's record and both run dirs."""
    left = record["left_behind"]
    if any(left.values()):
        return f"VIOLATION: left behind {left}"
    if record["hung"]:
        return "VIOLATION: hung (stopped by the watchdog)"
    if record["not_applicable"]:
        return "n/a"
    if record.get("injection_error"):
        return f"VIOLATION: the fault could not be applied ({record['injection_error']})"
    if "fault_started" not in record:
        return "VIOLATION: the job ended before the fault was injected"
    on_disk = _status_on_disk(faulted)
    if on_disk != record["status"]:
        return f"VIOLATION: status.json says {on_disk!r}, the launcher returned {record['status']!r}"
    if record["status"] == "ok":
        if not params_identical(faulted, baseline):
            return "VIOLATION: ended ok with parameters that differ from the undisturbed run's"
        want = Counter({(r, i): 1 for r, i in _updates(baseline)})
        if _updates(faulted) != want:
            return "VIOLATION: ended ok with an update lost or applied twice"
        record["version_counters_checked"], differ = compare_versions(faulted, baseline)
        if differ:
            return f"VIOLATION: shard version counters differ from the undisturbed run's: {differ[:3]}"
        return "recovered" if record["restarts"] else "unaffected"
    if not names_the_fault(record):
        return f"VIOLATION: failed without naming the fault ({record['reason'][:200]})"
    late = record["end_after_fault_s"] - (record["fault_ended"] - record["fault_started"])
    if late > record["heartbeat_timeout_s"] * (1 + len(record["restarts"])) + TEARDOWN_SLACK_S:
        return f"VIOLATION: failed {late:.1f} s after the fault, beyond the heartbeat timeout"
    return "failed-clean"


def run_cell(spec_path: str | Path, overrides: list[str], fault: Fault, out: Path, *,
             heartbeat_timeout_s: float = 10.0, checkpoint_every: int = 5, baseline: Path | None = None,
             deadline_s: float | None = None) -> dict:
    """Run the cell ``fault`` × ``spec`` into ``out`` (``out/baseline``, ``out/faulted``) and return its record
    (also ``out/cell.json``). ``baseline``: an undisturbed run of the same settings to compare against
    instead of running one."""
    isolation = "netns" if fault.needs_netns else default_isolation()
    settings = chaos_overrides(spec_path, overrides, heartbeat_timeout_s=heartbeat_timeout_s,
                               checkpoint_every=checkpoint_every, isolation=isolation)
    out.mkdir(parents=True, exist_ok=True)
    base_record = None
    if baseline is None:
        baseline = out / "baseline"
        base_record = run_job(spec_path, settings, baseline, deadline_s=deadline_s or 600.0)
        if base_record["status"] != "ok":
            raise RuntimeError(f"the undisturbed run failed: {base_record['reason']} (records in {baseline})")
    base_s = base_record["run_s"] if base_record else json.loads((baseline / "chaos-run.json").read_text())["run_s"]
    if base_record:
        (baseline / "chaos-run.json").write_text(json.dumps(base_record, indent=2) + "\n")
    limit = deadline_s or (3 * base_s + 3 * heartbeat_timeout_s + fault.seconds * max(1, fault.times) * 2 + 90)
    faulted = out / "faulted"
    if fault.kind == "disk-full":  # room for the whole undisturbed run (checkpoints too), then filled
        faults.mount_tmpfs(faulted, f"{_size_mib(baseline) * 2 + TMPFS_SPARE_MIB}m")
        try:
            record = run_job(spec_path, settings, faulted, fault=fault, deadline_s=limit)
        finally:
            shutil.copytree(faulted, out / "faulted-records", dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns(faults.FILLER))
            faults.unmount(faulted)
        shutil.rmtree(faulted, ignore_errors=True)
        (out / "faulted-records").rename(faulted)
    else:
        record = run_job(spec_path, settings, faulted, fault=fault, deadline_s=limit)
    record.update(spec=str(spec_path), overrides=overrides, baseline_s=base_s, deadline_s=round(limit, 1))
    record["outcome"] = verdict(record, faulted, baseline)
    (out / "cell.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def _size_mib(directory: Path) -> int:
    return 1 + sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) // (1 << 20)


def default_isolation() -> str:
    from synclab.netem.netns import netns_unavailable_reason

    return "none" if netns_unavailable_reason() else "netns"


__all__ = ["FaultError", "run_cell", "run_job", "verdict", "chaos_overrides"]
