"""The coordinator: registers nodes, hands out spec and plan, runs barriers and heartbeats, writes run records.

It is the only node that writes ``iterations.csv``, ``summary.json`` and
``endpoints.json`` (rank 0 writes ``eval.csv``, which the summary reads). When any node fails (it says so, its heartbeat stops, or a
user sends ``stop``) the job is marked failed, every blocked barrier is aborted,
every heartbeat reply says stop, and ``failure.json`` records why.

Who may say what. The job token admits a caller; Register makes it a node and hands it a ``session``, a secret
of that registration. Every call a node makes as itself (Barrier, PublishPlan, Heartbeat, ReportIteration, Done)
must name a registered node and carry its session, else it is refused with PERMISSION_DENIED, logged, and
changes nothing: a token holder cannot keep a dead node alive, end or fail the job in a node's name, or pass a
barrier for it, and a node of an earlier attempt (a restarted coordinator at the same address) is told apart
from the node that registered under its name in this one. Control (shape, stop) is the operator's call: the
token holder who started the job.
What goes into ``iterations.csv`` and ``summary.json`` is :mod:`synclab.roles.records`.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from synclab.config import Spec
from synclab.fileio import write_atomic
from synclab.metrics import hostcpu
from synclab.roles import checkpoint
from synclab.roles.records import build_summary, calibration_of, write_iterations
from synclab.wire import pb, rpc
from synclab.wire.channels import bind, make_server

log = logging.getLogger(__name__)

ROLE_PREFIX = {pb.WORKER: "worker", pb.PS: "ps"}
# How long a control command (`synclab shape`) waits for every node's answer: at least this, or ten heartbeats.
COMMAND_ANSWER_MIN_S = 10.0


@dataclass
class JobState:
    spec: Spec
    run_dir: Path
    job_id: str
    network_backend: str
    link_rate_bps: float | None
    expected: dict[int, int]
    nodes: dict[str, pb.NodeInfo] = field(default_factory=dict)
    placement: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> where it runs
    sessions: dict[str, str] = field(default_factory=dict)  # node -> the secret its registration was given
    plan_json: str | None = None
    barriers: dict[str, set] = field(default_factory=dict)
    heartbeats: dict[str, float] = field(default_factory=dict)
    reports: list[pb.IterationReport] = field(default_factory=list)
    done: dict[str, pb.DoneRequest] = field(default_factory=dict)
    commands: dict[str, list[pb.ControlCommand]] = field(default_factory=dict)
    command_results: dict[str, dict[str, pb.CommandResult]] = field(default_factory=dict)  # id -> node -> result
    profile: Any = None        # the LinkProfile the links have now (the spec's, then the last reshape's)
    heartbeat_s: float = 1.0
    state: str = "registering"
    failure: str = ""
    started_at: float = field(default_factory=time.time)
    # the host's CPU counters when the first report at or after the warm-up came in, and when every node was done
    cpu_window: list = field(default_factory=list)

    @property
    def total_nodes(self) -> int:
        return sum(self.expected.values())


class CoordinatorService(rpc.CoordinatorServicer):
    def __init__(self, job: JobState, reshape_own_link: Callable[[pb.ControlCommand], None] | None = None):
        self.job = job
        self.cv = threading.Condition()
        # Set when the coordinator sits behind a shaped link of its own (a container, a netns node).
        self.reshape_own_link = reshape_own_link
        # host_cpu's window opens with the report of this iteration: the end of warm-up and calibration
        run = job.spec.run
        self.cpu_window_from = max(run.warmup, min(calibration_of(job.spec), run.iterations - 1), 1)

    # -- failure ---------------------------------------------------------------------
    def fail(self, reason: str) -> None:
        with self.cv:
            if self.job.state in ("failed", "finished"):
                return
            log.error("job failed: %s", reason)
            self.job.state, self.job.failure = "failed", reason
            self.cv.notify_all()

    def _abort_if_failed(self, context) -> None:
        if self.job.state == "failed":
            context.abort(grpc.StatusCode.ABORTED, f"job failed: {self.job.failure}")

    def _wait(self, context, predicate, timeout: float | None) -> None:
        if timeout is not None and timeout > 1e6:  # no deadline set by the caller
            timeout = None
        with self.cv:
            ok = self.cv.wait_for(lambda: predicate() or self.job.state == "failed" or not context.is_active(),
                                  timeout=timeout)
        self._abort_if_failed(context)
        if not ok:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "timed out waiting for the other nodes")

    def _as_node(self, context, node: str, session: str, call: str) -> None:
        """Refuse (PERMISSION_DENIED, logged) a call made as ``node`` unless that node registered in this job and
        ``session`` is the secret its registration was given. Called under ``self.cv``."""
        known = self.job.sessions.get(node)
        if known is None:
            why = f"{node!r} is not a registered node of job {self.job.job_id}"
        elif not hmac.compare_digest(session.encode(), known.encode()):
            why = f"{call} as {node!r} without that node's session (a spoofed name, or a node of an earlier attempt)"
        else:
            return
        log.warning("refused %s from %s: %s", call, _peer(context), why)
        context.abort(grpc.StatusCode.PERMISSION_DENIED, why)

    # -- RPCs ------------------------------------------------------------------------
    def Register(self, request, context):
        job = self.job
        with self.cv:
            self._abort_if_failed(context)
            prefix = ROLE_PREFIX.get(request.role)
            if prefix is None:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "only workers and PS shards register")
            limit = job.expected[request.role]
            taken = {n.index for n in job.nodes.values() if n.role == request.role}
            index = request.requested_index
            if index < 0:
                free = [i for i in range(limit) if i not in taken]
                if not free:
                    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"all {limit} {prefix} slots are taken")
                index = free[0]
            elif index >= limit:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"{prefix} index {index} is out of range: this job has {limit} {prefix}(s)")
            elif index in taken:
                context.abort(grpc.StatusCode.ALREADY_EXISTS, f"{prefix}{index} is already registered")
            node = pb.NodeInfo(role=request.role, index=index, name=f"{prefix}{index}", address=request.address,
                               metrics_url=request.metrics_url, capabilities=request.capabilities)
            job.nodes[node.name] = node
            job.sessions[node.name] = session = secrets.token_hex(16)
            job.placement[node.name] = dict(request.placement)
            job.heartbeats[node.name] = time.monotonic()
            if len(job.nodes) == job.total_nodes:
                job.state = "running"
                self._write_endpoints()
            self.cv.notify_all()
        log.info("registered %s at %s", node.name, node.address)
        return pb.RegisterReply(node=node, spec_json=json.dumps(job.spec.to_dict()), run_dir=str(job.run_dir),
                                job_id=job.job_id, session=session)

    def _write_endpoints(self) -> None:
        endpoints = {name: {"role": pb.Role.Name(n.role).lower(), "address": n.address, "metrics_url": n.metrics_url}
                     for name, n in sorted(self.job.nodes.items())}
        write_atomic(self.job.run_dir / "endpoints.json", json.dumps(endpoints, indent=2) + "\n")

    def GetCluster(self, request, context):
        self._wait(context, lambda: len(self.job.nodes) == self.job.total_nodes, context.time_remaining())
        return pb.ClusterReply(nodes=sorted(self.job.nodes.values(), key=lambda n: (n.role, n.index)))

    def PublishPlan(self, request, context):
        with self.cv:
            planner = f"{ROLE_PREFIX[pb.WORKER]}0"
            if request.node != planner:
                context.abort(grpc.StatusCode.PERMISSION_DENIED,
                              f"only {planner} publishes the plan, once registered (asked by {request.node!r})")
            self._as_node(context, request.node, request.session, "PublishPlan")
            if self.job.plan_json is not None and self.job.plan_json != request.plan_json:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "the plan is already published; it cannot change")
            try:
                json.loads(request.plan_json)
            except ValueError as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the plan is not JSON: {e}")
            self.job.plan_json = request.plan_json
            record = self.job.run_dir / "plan.json"
            if not (self.job.spec.run.resume_from and record.exists()):  # a restart keeps what was planned
                write_atomic(record, json.dumps(json.loads(request.plan_json), indent=1) + "\n")
            self.cv.notify_all()
        return pb.Ack()

    def GetPlan(self, request, context):
        self._wait(context, lambda: self.job.plan_json is not None, context.time_remaining())
        return pb.PlanReply(plan_json=self.job.plan_json)

    def Barrier(self, request, context):
        with self.cv:
            # an unregistered or spoofed name would make a barrier pass early
            self._as_node(context, request.node, request.session, f"Barrier {request.name!r}")
            if request.participants != self.job.total_nodes:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"barrier {request.name!r} for "
                              f"{request.participants} participants; this job has {self.job.total_nodes} nodes")
            arrived = self.job.barriers.setdefault(request.name, set())
            arrived.add(request.node)
            n = checkpoint.iteration_of_barrier(request.name)
            if n is not None and len(arrived) == request.participants:
                self._checkpoint(n)  # under the lock: no node passes the barrier before LATEST names it
            self.cv.notify_all()
        self._wait(context, lambda: len(arrived) >= request.participants, context.time_remaining())
        return pb.BarrierReply(arrived=len(arrived))

    def _checkpoint(self, iteration: int) -> None:
        """Every node saved its state for ``iteration``: save the reports so far, then mark it consistent."""
        job = self.job
        try:
            reports = [r.SerializeToString() for r in job.reports if r.iteration <= iteration]
            checkpoint.save(job.run_dir, iteration, "coordinator", {"reports": reports})
            checkpoint.commit(job.run_dir, iteration, [*job.nodes, "coordinator"])
        except (OSError, ValueError) as e:
            self.fail(f"checkpoint {iteration} could not be completed: {e}")
            return
        log.info("checkpoint %d complete", iteration)

    def Heartbeat(self, request, context):
        with self.cv:
            # a spoofed name, or a process of an earlier attempt (a restarted coordinator): it must not keep
            # this job's node alive; the client takes the refusal as its stop
            self._as_node(context, request.node, request.session, "Heartbeat")
            self.job.heartbeats[request.node] = time.monotonic()
            for r in request.results:
                if r.id in self.job.command_results:
                    self.job.command_results[r.id][request.node] = r
            if request.results:
                self.cv.notify_all()
            cmds = self.job.commands.pop(request.node, [])
        stop = self.job.state == "failed"
        return pb.HeartbeatReply(stop=stop, reason=self.job.failure if stop else "", commands=cmds)

    def ReportIteration(self, request, context):
        with self.cv:
            self._as_node(context, request.node, request.session, "ReportIteration")
            node = self.job.nodes[request.node]
            if node.role != pb.WORKER or node.index != request.rank:
                context.abort(grpc.StatusCode.PERMISSION_DENIED, f"an iteration report of rank {request.rank} "
                              f"from {request.node!r}, which is not that registered worker")
            if not 0 <= request.iteration <= self.job.spec.run.iterations:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"iteration {request.iteration} is outside this "
                              f"job's 0..{self.job.spec.run.iterations}")
            self.job.reports.append(request)
            if not self.job.cpu_window and request.iteration >= self.cpu_window_from:
                self.job.cpu_window.append(hostcpu.sample())
        return pb.Ack()

    def Done(self, request, context):
        with self.cv:
            # a spoofed end, or an earlier attempt's node ending: neither is this job's end or failure
            self._as_node(context, request.node, request.session, "Done")
            self.job.done[request.node] = request
            self.cv.notify_all()
        if not request.ok:
            self.fail(f"{request.node}: {request.message}")
        return pb.Ack()

    def Control(self, request, context):
        if request.kind == "stop":
            log.warning("stop asked by %s (%s)", _peer(context), request.args_json or "no reason given")
            self.fail(f"stopped by a user ({request.args_json or 'no reason given'})")
            return pb.ControlReply(accepted=True, message="stopping")
        if request.kind == "shape":
            return self._shape(request)
        return pb.ControlReply(accepted=False, message=f"unknown control command {request.kind!r}")

    def _shape(self, request: pb.ControlCommand) -> pb.ControlReply:
        """Reshape the targeted nodes and answer once they all applied it (or one failed, or time ran out).

        A change the running backend cannot make is refused up front (``unsupported``), nothing queued.
        Each node applies the command on its next heartbeat and reports the outcome on the one after; the
        coordinator's own link (when it has one) is reshaped at once, for every target but a role or
        another node.
        """
        from synclab.linkprofile import ProfileError, profile_from_mapping
        from synclab.netem.reshape import reshape_refusal

        try:
            profile = profile_from_mapping(json.loads(request.args_json).get("profile"), source="shape")
        except (ProfileError, ValueError, AttributeError) as e:
            return pb.ControlReply(accepted=False, message=f"invalid profile: {e}")
        refusal = reshape_refusal(self.job.network_backend, self.job.profile, profile)
        if refusal is not None:
            return pb.ControlReply(accepted=False, unsupported=True, message=refusal)
        cmd = pb.ControlCommand(kind=request.kind, target=request.target, args_json=request.args_json,
                                id=uuid.uuid4().hex[:12])
        with self.cv:
            if self.job.state != "running":
                return pb.ControlReply(accepted=False, message=f"the job is {self.job.state}, not running")
            nodes = [n for n in self.job.nodes.values()
                     if request.target in ("", n.name, pb.Role.Name(n.role).lower())]
            own = self.reshape_own_link is not None and request.target in ("", "coordinator")
            if not nodes and not own:
                return pb.ControlReply(accepted=False, message=f"no node or role named {request.target!r}; nodes: "
                                                               f"{', '.join(sorted(self.job.nodes))}")
            results = self.job.command_results[cmd.id] = {}
            for n in nodes:
                self.job.commands.setdefault(n.name, []).append(cmd)
            names = sorted(n.name for n in nodes) + (["coordinator"] if own else [])
        failures = []
        if own:
            try:
                self.reshape_own_link(cmd)
            except Exception as e:
                log.exception("coordinator: reshape of its own link failed")
                failures.append(f"coordinator: {e}")
        wait_s = max(COMMAND_ANSWER_MIN_S, 10 * self.job.heartbeat_s)
        with self.cv:
            self.cv.wait_for(lambda: len(results) == len(nodes), timeout=wait_s)
            del self.job.command_results[cmd.id]
            for n in nodes:  # a node that never took it must not apply it later
                queued = self.job.commands.get(n.name, [])
                if cmd in queued:
                    queued.remove(cmd)
        failures += [f"{name}: {r.message}" for name, r in sorted(results.items()) if not r.ok]
        silent = sorted(n.name for n in nodes if n.name not in results)
        failures += [f"{name}: no answer within {wait_s:g} s" for name in silent]
        applied = sorted(name for name, r in results.items() if r.ok) + (["coordinator"] if own and not any(
            f.startswith("coordinator:") for f in failures) else [])
        with self.cv, (self.job.run_dir / "network-changes.csv").open("a") as f:
            if f.tell() == 0:
                f.write("wall_time,target,profile,rate_bps,nodes,failed\n")
            f.write(f"{time.time():.3f},{request.target or 'all'},{profile.name},{profile.rate_bps or ''},"
                    f"{' '.join(applied)},{' '.join(sorted(set(names) - set(applied)))}\n")
            if not failures and request.target == "":
                self.job.profile = profile
        if failures:
            return pb.ControlReply(accepted=False, message=f"reshape to {profile.name or 'inline'} failed on "
                                                           f"{len(failures)} of {len(names)} node(s): "
                                                           + "; ".join(failures))
        return pb.ControlReply(accepted=True, message=f"reshaped {', '.join(names)} to {profile.name or 'inline'}")

    def Status(self, request, context):
        with self.cv:
            per_rank: dict[int, int] = {}
            for r in self.job.reports:
                per_rank[r.rank] = max(per_rank.get(r.rank, -1), r.iteration)
            n_workers = self.job.expected[pb.WORKER]
            done = min(per_rank.values()) + 1 if per_rank and len(per_rank) == n_workers else 0
            return pb.StatusReply(state=self.job.state, iterations_done=done,
                                  iterations_total=self.job.spec.run.iterations,
                                  nodes=list(self.job.nodes.values()), message=self.job.failure)

    # -- supervision -----------------------------------------------------------------
    def watch(self, stop: threading.Event) -> None:
        """Fail the job when a registered node stops sending heartbeats."""
        timeout = self.job.spec.run.heartbeat_timeout_s
        while not stop.wait(0.5):
            now = time.monotonic()
            with self.cv:
                silent = [n for n, t in self.job.heartbeats.items()
                          if n not in self.job.done and now - t > timeout]
            if silent:
                self.fail(f"no heartbeat from {', '.join(sorted(silent))} for {timeout:g} s")

    def all_done(self) -> bool:
        return len(self.job.done) == self.job.total_nodes


def _peer(context) -> str:
    """Who called, for a log line: the name it gave (``x-synclab-node``) and its address."""
    if context is None:  # called in process (tests)
        return "an in-process caller"
    from synclab.wire.channels import caller_node

    return f"{caller_node(context) or '?'} at {context.peer()}"


def network_backend(spec: Spec) -> str:
    """What shapes the links (resolved by the launcher; ``auto`` only when a node set was started by hand)."""
    return spec.network.backend


def own_link_reshaper(spec: Spec, metrics) -> Callable[[pb.ControlCommand], None] | None:
    """The handler of ``shape`` for the coordinator's own link, when the kernel shapes one it owns (a container
    or a netns node: ``network.isolation`` is not none); it also exports that link's rate."""
    if spec.network.backend not in ("netem", "htb", "tbf") or spec.network.isolation == "none":
        return None
    from synclab.roles.bootstrap import report_network, reshaper
    from synclab.transport.shaper import LinkShaper

    report_network(spec, "coordinator", metrics)
    return reshaper(spec, "coordinator", "coordinator", LinkShaper(), metrics)


def listen_host(listen: str) -> str:
    """The address part of ``host:port`` (``[v6]:port`` without brackets): where the coordinator's other
    listeners bind, so none is wider than its gRPC server (loopback in a local run, the cluster network's
    address in a container)."""
    host = listen.rpartition(":")[0]
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def run_coordinator(spec: Spec, run_dir: Path, listen: str, token: str, *, metrics_port: int = 0,
                    job_id: str | None = None) -> int:
    """Serve the job until every node is done (exit 0) or it fails (exit 1)."""
    from synclab.metrics import NodeMetrics, serve

    run_dir.mkdir(parents=True, exist_ok=True)
    job = JobState(spec=spec, run_dir=run_dir, job_id=job_id or uuid.uuid4().hex[:12],
                   network_backend=network_backend(spec), link_rate_bps=spec.network.rate_bps,
                   expected={pb.WORKER: spec.n_workers, pb.PS: spec.n_ps},
                   profile=spec.network.link_profile(), heartbeat_s=spec.run.heartbeat_s)
    if spec.run.resume_from:  # a restart: the reports of the iterations before the checkpoint are kept
        saved = checkpoint.load(run_dir, spec.run.resume_from, "coordinator")
        job.reports = [pb.IterationReport.FromString(b) for b in saved["reports"]]
        log.info("resuming from checkpoint %d with %d iteration reports", spec.run.resume_from, len(job.reports))
    metrics = NodeMetrics("coordinator", "coordinator")
    service = CoordinatorService(job, reshape_own_link=own_link_reshaper(spec, metrics))
    server = make_server(token, max_workers=16 + 4 * job.total_nodes)
    rpc.add_CoordinatorServicer_to_server(service, server)
    if bind(server, listen) == 0:
        raise OSError(f"coordinator: cannot listen on {listen}")
    serve(metrics, host=listen_host(listen), port=metrics_port)  # /metrics where the gRPC server is, no wider
    server.start()
    stop = threading.Event()
    threading.Thread(target=service.watch, args=(stop,), name="watch", daemon=True).start()
    log.info("coordinator for job %s listening on %s; expecting %d worker(s), %d PS shard(s)", job.job_id, listen,
             spec.n_workers, spec.n_ps)
    with service.cv:
        service.cv.wait_for(lambda: service.all_done() or job.state == "failed")
    stop.set()
    job.cpu_window.append(hostcpu.sample())
    rows = write_iterations(run_dir / "iterations.csv", job.reports, spec)
    if job.state == "failed":
        # Give nodes a moment to see the stop in a heartbeat or an aborted barrier.
        time.sleep(min(2.0, 2 * spec.run.heartbeat_s))
        write_atomic(run_dir / "failure.json", json.dumps(
            {"status": "failed", "reason": job.failure, "nodes_done": sorted(job.done)}, indent=2) + "\n")
        server.stop(1)
        return 1
    job.state = "finished"
    from synclab.compute.events import earliest_event_time, merge_events, write_timeline
    from synclab.report.overlap import overlap_rows, write_overlap
    from synclab.transport.spans import merge_spans, read_raw_spans

    raw_spans = read_raw_spans(run_dir)
    starts = [t for t in (earliest_event_time(run_dir), min((r["start_s"] for r in raw_spans), default=None))
              if t is not None]
    t0 = min(starts) if starts else 0.0
    event_rows = merge_events(run_dir, t0=t0, dilation=spec.run.dilation)
    span_rows = merge_spans(run_dir, t0=t0, dilation=spec.run.dilation)
    if event_rows or span_rows:
        write_timeline(run_dir, event_rows, span_rows)
    overlap = overlap_rows(span_rows)
    if overlap:
        write_overlap(run_dir / "overlap.csv", overlap)
    write_atomic(run_dir / "summary.json", json.dumps(build_summary(job, rows, overlap), indent=2) + "\n")
    server.stop(1).wait(3)
    return 0
