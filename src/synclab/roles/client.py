"""The coordinator client every node uses: register, cluster map, plan, barriers, heartbeats, reports."""

from __future__ import annotations

import logging
import queue
import threading
from typing import Callable

import grpc

from synclab.roles.placement import node_placement
from synclab.wire import pb, rpc
from synclab.wire.channels import open_channel

log = logging.getLogger(__name__)

ROLE_NAMES = {"coordinator": pb.COORDINATOR, "worker": pb.WORKER, "ps": pb.PS}


class CoordinatorUnreachable(ConnectionError):
    pass


class JobAborted(RuntimeError):
    """The coordinator ended the job (another node failed, or a user stopped it)."""


class CoordinatorClient:
    def __init__(self, address: str, token: str, node_hint: str, connect_timeout_s: float = 30.0):
        self.address = address
        self._channel = open_channel(address, token, node_hint)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=connect_timeout_s)
        except grpc.FutureTimeoutError:
            self._channel.close()
            raise CoordinatorUnreachable(
                f"the coordinator at {address} is unreachable (no connection within {connect_timeout_s:g} s); "
                "is it running, and is --coordinator host:port right?") from None
        self.stub = rpc.CoordinatorStub(self._channel)
        self.node = node_hint
        self.session = ""  # the secret Register hands this node; every call made as the node carries it
        self._reports: queue.SimpleQueue = queue.SimpleQueue()
        self._reporter: threading.Thread | None = None
        self._hb_stop = threading.Event()

    def _call(self, fn, request, timeout: float | None = None):
        try:
            return fn(request, timeout=timeout)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.ABORTED:
                raise JobAborted(e.details()) from None
            if e.code() == grpc.StatusCode.UNAVAILABLE:
                raise CoordinatorUnreachable(f"lost the coordinator at {self.address}: {e.details()}") from None
            raise

    def register(self, role: str, index: int, address: str, metrics_url: str,
                 capabilities: tuple[str, ...] = ()) -> pb.RegisterReply:
        reply = self._call(self.stub.Register, pb.RegisterRequest(
            role=ROLE_NAMES[role], requested_index=index, address=address, metrics_url=metrics_url,
            capabilities=list(capabilities), placement=node_placement()), timeout=30)
        self.node, self.session = reply.node.name, reply.session
        return reply

    def cluster(self, timeout: float) -> list[pb.NodeInfo]:
        return list(self._call(self.stub.GetCluster, pb.ClusterRequest(node=self.node), timeout=timeout).nodes)

    def publish_plan(self, plan_json: str) -> None:
        """Publish rank 0's plan (a validated plan model as JSON, see synclab.plans.schema)."""
        self._call(self.stub.PublishPlan, pb.PublishPlanRequest(node=self.node, plan_json=plan_json,
                                                                          session=self.session), timeout=30)

    def plan(self, timeout: float) -> str:
        """The published plan as JSON; the reader validates it with its strategy's plan model."""
        return self._call(self.stub.GetPlan, pb.PlanRequest(node=self.node), timeout=timeout).plan_json

    def barrier(self, name: str, participants: int, timeout: float | None = None) -> None:
        self._call(self.stub.Barrier, pb.BarrierRequest(name=name, node=self.node, participants=participants,
                                                                  session=self.session),
                   timeout=timeout)

    def report(self, report: pb.IterationReport) -> None:
        """Queue an iteration report; a background thread sends it (never blocks compute)."""
        if self._reporter is None:
            self._reporter = threading.Thread(target=self._send_reports, name="reporter", daemon=True)
            self._reporter.start()
        report.session = self.session
        self._reports.put(report)

    def _send_reports(self) -> None:
        while (r := self._reports.get()) is not None:
            try:
                self.stub.ReportIteration(r, timeout=30)
            except grpc.RpcError as e:
                log.warning("iteration report lost: %s", e.details())

    def flush_reports(self) -> None:
        if self._reporter is not None:
            self._reports.put(None)
            self._reporter.join(timeout=30)
            self._reporter = None

    def start_heartbeat(self, interval_s: float, on_stop: Callable[[str], None],
                        on_command: Callable[[pb.ControlCommand], None] | None = None,
                        iteration: Callable[[], int] = lambda: -1) -> None:
        def beat():
            misses = 0
            results: list[pb.CommandResult] = []  # outcomes of commands run, reported on the next beat
            while not self._hb_stop.wait(interval_s):
                try:
                    reply = self.stub.Heartbeat(pb.HeartbeatRequest(node=self.node, iteration=iteration(),
                                                                    results=results, session=self.session),
                                                timeout=max(5.0, interval_s * 5))
                    misses = 0
                    results = []
                except grpc.RpcError as e:
                    if e.code() == grpc.StatusCode.PERMISSION_DENIED:  # not (or no longer) a node of this job
                        on_stop(f"the coordinator refused this node's heartbeat: {e.details()}")
                        return
                    misses += 1
                    if misses >= 5:
                        on_stop(f"lost the coordinator: {e.details()}")
                        return
                    continue
                for cmd in reply.commands:
                    if on_command is None:
                        results.append(pb.CommandResult(id=cmd.id, ok=False, message="this node takes no commands"))
                        continue
                    try:
                        on_command(cmd)
                        results.append(pb.CommandResult(id=cmd.id, ok=True))
                    except Exception as e:  # the command fails, visibly; training goes on
                        log.exception("%s: %s command failed", self.node, cmd.kind)
                        results.append(pb.CommandResult(id=cmd.id, ok=False, message=f"{type(e).__name__}: {e}"))
                if reply.stop:
                    on_stop(reply.reason or "stopped by the coordinator")
                    return

        threading.Thread(target=beat, name="heartbeat", daemon=True).start()

    def done(self, ok: bool, message: str = "", bytes_sent: dict | None = None,
             bytes_received: dict | None = None) -> None:
        self._hb_stop.set()
        try:
            self.stub.Done(pb.DoneRequest(node=self.node, ok=ok, message=message, bytes_sent=bytes_sent or {},
                                          bytes_received=bytes_received or {}, session=self.session), timeout=10)
        except grpc.RpcError as e:
            log.warning("could not tell the coordinator we are done: %s", e.details())

    def close(self) -> None:
        self._hb_stop.set()
        self._channel.close()
