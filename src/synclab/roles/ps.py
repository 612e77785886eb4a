"""``synclab ps --shard I``: one parameter-server shard process.

The strategy's plan sets the shard's behaviour: ``server_mode`` (see
:data:`synclab.ps.shard.SERVER_MODES`), ``serve_order`` (process arrivals as
they come, or highest priority first: P3 §4.2) and ``max_ahead``. Outgoing
links always use the priority policy: priorities are data stamped by the plan's
partitions, and where they are all equal (the ``ps`` baseline) the order is FIFO.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import grpc

from synclab.metrics.gcpause import GcPauses
from synclab.plans.schema import PlanError, ServerPlan, read_plan
from synclab.plans.sharding import Partition
from synclab.ps.serve_queue import make_serve_queue
from synclab.ps.shard import PushRejected, Shard
from synclab.roles import checkpoint
from synclab.roles.bootstrap import join, message_limits, report_network, reshaper, shaper_for
from synclab.strategies import registry
from synclab.transport.node import NodeTransport
from synclab.transport.spans import SpanLog
from synclab.wire import pb
from synclab.wire.channels import caller_node
from synclab.wire.frames import MessageLimits, NotReady, refusal_status

log = logging.getLogger(__name__)


def update_hold(spec) -> Callable[[Partition], float] | None:
    """``compute.ps_update: profile``: the host seconds an update of a partition holds, its values' share of
    the profile's ``update_seconds`` x ``compute.scale`` x ``run.dilation`` (the worker-side optimizer step
    measured on the profiled device, scaled like compute, so the emulated time is the same at any D; the
    simulator's shard charges the same share, ``SimShard._update_s``). A per-request cost has no stated
    source and is not added. ``host``: None (the shard's arithmetic alone, divided by the dilation)."""
    if spec.compute.ps_update != "profile":
        return None
    profile = spec.compute.model_profile()
    if profile is None or profile.update_seconds is None:
        raise ValueError("compute.ps_update: profile needs a model profile that measured update_seconds")
    per_value = profile.update_seconds / profile.params * spec.compute.scale * spec.run.dilation
    return lambda p: per_value * p.length


def run_ps(shard: int, coordinator: str, token: str, *, host: str = "0.0.0.0", advertise: str = "127.0.0.1",
           port: int = 0, metrics_port: int = 0, connect_timeout_s: float = 30.0) -> int:
    j = join("ps", shard, coordinator, token, host=host, advertise=advertise, port=port, metrics_port=metrics_port,
             connect_timeout_s=connect_timeout_s)
    spec = j.spec
    holder: dict[str, Shard] = {}
    failure: list[str] = []

    def on_message(msg):
        serve = holder.get("serve")
        if serve is None:  # the plan, and so the shard, does not exist yet: no worker sends before it does
            raise NotReady(f"{j.name} has no shard yet (its plan has not arrived)")
        serve.put(msg)

    def on_error(peer, err):
        failure.append(f"stream with {peer} failed: {err}")
        log.error("%s: %s", j.name, failure[-1])

    def pull(request, context):
        shard = holder.get("shard")
        if shard is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{j.name} has no shard yet (its plan has not arrived)")
        try:
            frames = shard.pull_frames(request.key, request.slice, j.name, spec.transport.chunk_bytes,
                                       caller=caller_node(context))
        except PushRejected as e:
            context.abort(getattr(grpc.StatusCode, refusal_status(e)), str(e))
        yield from frames

    sinks = _ShardSinks()
    spans = SpanLog(j.name, enabled=spec.run.events)
    transport = NodeTransport(j.name, token, on_message=on_message, on_error=on_error, policy="priority",
                              chunk_bytes=spec.transport.chunk_bytes, queue_bytes=spec.transport.queue_bytes,
                              shaper=shaper_for(spec, "ps"), meter=j.metrics,
                              connect_timeout_s=spec.run.connect_timeout_s, spans=spans,
                              keepalive_scale=spec.run.dilation,
                              limits=MessageLimits.for_payload(0, spec.transport.queue_bytes),  # the plan widens them
                              engine=spec.transport.engine, sinks=sinks)
    try:
        transport.serve(host, j.port, ps=True, pull_handler=pull, tcp_port=j.tcp_port)
    finally:
        j.release_port()
    report_network(spec, "ps", j.metrics)
    client = j.client
    ok, message = False, ""
    try:
        nodes = client.cluster(timeout=spec.run.connect_timeout_s)
        workers = [n.name for n in nodes if n.role == pb.WORKER]
        strategy = registry.get(spec.strategy.name)
        plan = read_plan(strategy.Plan, client.plan(timeout=spec.run.connect_timeout_s * 4), strategy.name)
        if not isinstance(plan, ServerPlan):
            raise PlanError(f"strategy {strategy.name!r} publishes a {type(plan).__name__}, which has no PS placement")
        transport.set_limits(message_limits(strategy, plan, [], spec))  # before any worker pushes
        transport.set_peers(workers)  # only the job's workers open streams to a shard
        parts = list(plan.partitions)
        holder["shard"] = shard = Shard(j.node.index, parts, workers, lr=spec.optimizer.lr,
                                        momentum=spec.optimizer.momentum, weight_decay=spec.optimizer.weight_decay,
                                        mode=plan.server_mode, max_ahead=plan.max_ahead,
                                        send=lambda w, m: transport.reverse_link(w, spec.run.connect_timeout_s).send(m),
                                        on_aggregated=j.metrics.observe_aggregation, update_hold_s=update_hold(spec))
        sinks.shard = shard

        if spec.run.resume_from:  # a restart: values, momentum and versions as of the checkpoint
            shard.load_state_dict(checkpoint.load(j.run_dir, spec.run.resume_from, j.name)["shard"])
            shard.expect_reseed()  # rank 0 re-seeds before "ready": wait for it as for the first values

        def refuse(msg, err):
            """What the transport does for an inline handler's error: refuse the sender's stream. Refusing a
            worker of the job fails the job (that worker's stream is gone); anyone else is only logged."""
            line = f"refused a message from {msg.sender}: {err}"
            if msg.sender in workers:
                failure.append(line)
            log.warning("%s: %s", j.name, line)
            transport.reverse_link(msg.sender, spec.run.connect_timeout_s).close(err, abort=True)

        holder["serve"] = make_serve_queue(plan.serve_order, shard.handle, refuse)
        client.start_heartbeat(spec.run.heartbeat_s, on_stop=lambda r: failure.append(r),
                               on_command=reshaper(spec, "ps", j.name, transport.shaper, j.metrics))
        n_nodes = len(nodes)
        client.barrier("connected", n_nodes)
        if not holder["shard"].initialized.wait(spec.run.connect_timeout_s * 4):
            raise TimeoutError(f"{j.name}: initial parameters did not arrive")
        pauses = GcPauses().install()
        client.barrier("ready", n_nodes)
        client.barrier("start", n_nodes)
        for n in spec.run.checkpoints():
            while not shard.wait_settled(n, timeout=1.0):  # every update of iteration n applied, pulls answered
                if failure:
                    raise RuntimeError(failure[-1])
            checkpoint.save(j.run_dir, n, j.name, {"shard": shard.state_dict()})
            client.barrier(checkpoint.barrier_name(n), n_nodes)
        client.barrier("end", n_nodes)
        if not shard.wait_settled(spec.run.iterations, spec.run.connect_timeout_s):
            raise TimeoutError(f"{j.name}: pushes or pulls of the last iterations did not arrive")
        spans.write(j.run_dir / f"spans-{j.name}.csv")
        pauses.remove()
        pauses.write(j.run_dir / f"gc-{j.name}.json")
        ok = not failure
        message = "; ".join(failure)
    except Exception as e:  # reported to the coordinator, then re-raised for the exit code
        message = f"{type(e).__name__}: {e}"
        raise
    finally:
        sent = _per_peer(j.metrics, "sent")
        received = _per_peer(j.metrics, "received")
        client.done(ok, message, sent, received)
        transport.close()
        client.close()
        j.sampler.stop()
        if ok and spec.run.linger_s:
            time.sleep(spec.run.linger_s)  # let scrapers read the final counters
    return 0 if ok else 1


class _ShardSinks:
    """The transport's ``sinks`` (it is built before the plan says what the shard holds): once :attr:`shard` is
    set, the shard sums pushes as their chunks stream in; before, every message is staged whole."""

    shard: Shard | None = None

    def claim_sink(self, sender: str, mid):
        return None if self.shard is None else self.shard.claim_sink(sender, mid)


def _per_peer(metrics, direction: str) -> dict[str, int]:
    return dict(metrics.sent_by_peer() if direction == "sent" else metrics.received_by_peer())
