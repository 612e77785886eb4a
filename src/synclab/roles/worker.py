"""``synclab worker --rank R``: one training worker process.

Wiring only: join the job, build model, data and engine, connect the links the
strategy needs, agree on initial parameters, train, report, save. With
``run.eval_every`` rank 0 also scores its parameters on the held-out split
between iterations (:mod:`synclab.compute.evaluation`).
"""

from __future__ import annotations

import io
import logging
import math
import time

import torch

from synclab.compute.engine import Engine
from synclab.compute.evaluation import EvalLog, eval_iterations
from synclab.compute.events import EventLog
from synclab.compute.replay import ReplayEngine
from synclab.core import CommFailed
from synclab.data import make_dataset
from synclab.fileio import write_atomic
from synclab.metrics.gcpause import GcPauses
from synclab.models import build_model, model_input_spec
from synclab.plans.schema import read_plan
from synclab.roles import checkpoint
from synclab.roles.bootstrap import join, message_limits, report_network, reshaper, shaper_for
from synclab.roles.client import JobAborted
from synclab.strategies import WorkerContext, registry
from synclab.transport.inbox import Inbox
from synclab.transport.node import NodeTransport, stream_address
from synclab.transport.spans import SpanLog
from synclab.wire import pb
from synclab.wire.frames import MessageLimits

log = logging.getLogger(__name__)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("compute.device is 'cuda' but torch sees no CUDA device")
    return torch.device(name)


def params_checksum(tensors: list[torch.Tensor]) -> float:
    """An order-sensitive fingerprint of all parameters (equal params give equal values)."""
    with torch.no_grad():
        return float(sum((i + 1) * t.detach().double().sum() for i, t in enumerate(tensors)))


def run_worker(rank: int, coordinator: str, token: str, *, host: str = "0.0.0.0", advertise: str = "127.0.0.1",
               port: int = 0, metrics_port: int = 0, connect_timeout_s: float = 30.0) -> int:
    j = join("worker", rank, coordinator, token, host=host, advertise=advertise, port=port,
             metrics_port=metrics_port, connect_timeout_s=connect_timeout_s)
    spec, client, metrics = j.spec, j.client, j.metrics
    rank = j.node.index
    cls = registry.get(spec.strategy.name)
    torch.manual_seed(spec.run.seed)
    torch.set_num_threads(spec.compute.threads)
    device = pick_device(spec.compute.device)
    if spec.compute.mode == "replay":
        engine = replay_engine(spec, device)
    else:
        model = build_model(spec.model.name, **spec.model.options).to(device)
        engine = Engine(model, torch.nn.CrossEntropyLoss(), device)
    engine.factors = spec.cluster.compute_factors(rank, spec.run.iterations, spec.run.seed)  # slow workers
    # Until the plan is read, no message may exceed the whole model (or whatever the strategy's rule gives
    # without a plan); the plan then tightens the limits before any peer sends data.
    element_bytes = engine.tensors[0].element_size() if engine.tensors else 4
    limits = MessageLimits.for_payload(sum(p.numel for p in engine.infos) * element_bytes, spec.transport.queue_bytes)
    inbox = Inbox(limits)
    events = EventLog(j.name, [i.name for i in engine.infos], enabled=spec.run.events)
    engine.events = events
    spans = SpanLog(j.name, enabled=spec.run.events)
    engine.spans = spans
    stop_reason: list[str] = []

    def on_error(peer, err):
        reason = f"stream with {peer} failed: {getattr(err, 'details', lambda: err)() or err}"
        stop_reason.append(reason)
        inbox.fail(CommFailed(reason))
        engine.gates.fail(CommFailed(reason))

    def on_stop(reason):
        stop_reason.append(reason)
        engine.gates.fail(JobAborted(reason))
        inbox.fail(JobAborted(reason))

    transport = NodeTransport(j.name, token, on_message=inbox.deliver, on_error=on_error, policy=cls.send_policy,
                              chunk_bytes=spec.transport.chunk_bytes, queue_bytes=spec.transport.queue_bytes,
                              shaper=shaper_for(spec, "worker"), meter=metrics, connect_timeout_s=spec.run.connect_timeout_s,
                              spans=spans, keepalive_scale=spec.run.dilation, limits=limits, sinks=inbox,
                              engine=spec.transport.engine)
    try:
        transport.serve(host, j.port, peer=True, tcp_port=j.tcp_port)
    finally:
        j.release_port()
    report_network(spec, "worker", metrics)
    ok, message = False, ""
    current = [-1]
    try:
        nodes = client.cluster(timeout=spec.run.connect_timeout_s)
        client.start_heartbeat(spec.run.heartbeat_s, on_stop=on_stop, iteration=lambda: current[0],
                               on_command=reshaper(spec, "worker", j.name, transport.shaper, metrics))
        workers = {n.index: n for n in nodes if n.role == pb.WORKER}
        shards = {n.index: n for n in nodes if n.role == pb.PS}
        world = len(workers)
        transport.set_peers(n.name for n in workers.values())  # only the job's workers open streams to a worker
        if rank == 0:
            plan = cls.make_plan(engine.infos, ps_shards=len(shards), workers=world, seed=spec.run.seed,
                                 options=spec.strategy.options)
            client.publish_plan(plan.model_dump_json())
        plan = read_plan(cls.Plan, client.plan(timeout=spec.run.connect_timeout_s * 4), cls.name)
        limits.update(message_limits(cls, plan, engine.infos, spec, element_bytes))
        ctx = WorkerContext(rank=rank, world=world, node=j.name, params=engine.infos, tensors=engine.tensors,
                            lr=spec.optimizer.lr, momentum=spec.optimizer.momentum,
                            weight_decay=spec.optimizer.weight_decay, seed=spec.run.seed,
                            mark_fresh=engine.mark_fresh, inbox=inbox, run_dir=j.run_dir,
                            batch_size=spec.model.batch_size, record_event=events.record, update=engine.update,
                            ps_names={i: n.name for i, n in shards.items()},
                            worker_names={i: n.name for i, n in workers.items()}, plan=plan,
                            options=spec.strategy.options)
        strategy = cls(ctx)
        engine.attach(strategy)
        rng = _resume(spec, engine, strategy, j.run_dir, j.name) if spec.run.resume_from else None
        for i, n in shards.items():
            ctx.ps_links[i] = transport.connect(n.name, stream_address(n, transport.engine), "ps")
        for r in sorted(strategy.peers()):
            ctx.peer_links[r] = transport.connect(workers[r].name, stream_address(workers[r], transport.engine),
                                                  "peer")
        n_nodes = len(nodes)
        client.barrier("connected", n_nodes)
        strategy.setup()
        if rng is not None:
            torch.set_rng_state(rng)
        pauses = GcPauses().install()
        client.barrier("ready", n_nodes)
        _train(spec, engine, strategy, client, metrics, None if engine.replay else dataset_for(spec), current,
               n_nodes, spans)
        engine.drain_comm()  # the gates are open; the callbacks that opened them may still be running
        strategy.on_train_end()
        events.write(j.run_dir / f"events-{j.name}.csv")
        spans.write(j.run_dir / f"spans-{j.name}.csv")
        pauses.remove()
        pauses.write(j.run_dir / f"gc-{j.name}.json")
        if rank == 0:
            buf = io.BytesIO()  # whole or not at all: other commands compare runs by it
            torch.save(engine.state_dict(), buf)
            write_atomic(j.run_dir / "params.pt", buf.getvalue())
        client.flush_reports()
        client.barrier("end", n_nodes)
        strategy.finish()
        ok = True
    except (CommFailed, JobAborted) as e:
        message = "; ".join(stop_reason) or str(e)
        log.error("%s stopped: %s", j.name, message)
    except Exception as e:
        message = f"{type(e).__name__}: {e}"
        log.exception("%s failed", j.name)
    finally:
        client.done(ok, message, metrics.sent_by_peer(), metrics.received_by_peer())
        engine.close()
        transport.close()
        client.close()
        j.sampler.stop()
        if ok and spec.run.linger_s:
            time.sleep(spec.run.linger_s)  # let scrapers read the final counters
    return 0 if ok else 1


def _resume(spec, engine, strategy, run_dir, node: str) -> torch.Tensor:
    """Load this worker's state from checkpoint ``run.resume_from``; returns the RNG state to restore."""
    state = checkpoint.load(run_dir, spec.run.resume_from, node)
    if len(state["tensors"]) != len(engine.tensors):
        raise ValueError(f"checkpoint {spec.run.resume_from} of {node} holds {len(state['tensors'])} tensors, "
                         f"the model {len(engine.tensors)}")
    with torch.no_grad():
        for t, saved in zip(engine.tensors, state["tensors"]):
            t.copy_(saved)
    strategy.load_state_dict(state["strategy"])
    log.info("%s resumes after iteration %d", node, spec.run.resume_from)
    return state["rng"]


def _save_checkpoint(engine, strategy, client, iteration: int, n_nodes: int) -> None:
    """Iteration ``iteration``'s synchronization is complete: save, then wait for every node to have saved."""
    engine.drain_comm()  # the strategy's state, read below, is its comm thread's to write until then
    checkpoint.save(strategy.ctx.run_dir, iteration, strategy.ctx.node,
                    {"tensors": [t.detach().cpu().clone() for t in engine.tensors],
                     "strategy": strategy.state_dict(), "rng": torch.get_rng_state()})
    client.barrier(checkpoint.barrier_name(iteration), n_nodes)


def replay_engine(spec, device: torch.device) -> ReplayEngine:
    """A :class:`ReplayEngine` for the spec's (inline) profile: real tensors of the model's shapes, seeded."""
    from synclab.core import param_layout
    from synclab.strategies import registry

    profile = spec.compute.model_profile()
    with torch.device("meta"):
        meta = build_model(spec.model.name, **spec.model.options)
    infos, meta_tensors, layers = param_layout(meta)
    g = torch.Generator().manual_seed(spec.run.seed)
    tensors = [torch.empty(t.shape).normal_(0.0, 0.01, generator=g).to(device) for t in meta_tensors]
    single = registry.get(spec.strategy.name).single_process
    factor = spec.cluster.workers if single else 1  # ``local`` replays the global batch in one process
    return ReplayEngine(profile, infos, tensors, len(layers), time_factor=spec.compute.scale * spec.run.dilation,
                        batch_factor=factor, samples=spec.model.batch_size * factor)


def dataset_for(spec):
    input_spec = model_input_spec(spec.model.name, **spec.model.options)
    return make_dataset(spec.data.name, input_spec, seed=spec.run.seed, root=spec.data.root, size=spec.data.size)


def _train(spec, engine: Engine, strategy, client, metrics, dataset, current: list[int], n_nodes: int,
           spans: SpanLog) -> None:
    rank = strategy.ctx.rank
    batch = spec.model.batch_size
    shard = strategy.data_shard()
    if strategy.single_process:  # the reference runs the global batch of all cluster.workers in one process
        data_rank, data_world, data_batch = 0, 1, batch * spec.cluster.workers
    elif shard is not None:
        data_rank, data_world, data_batch = shard[0], shard[1], batch
    else:
        data_rank = data_world = data_batch = None
    if dataset is None:  # replay: no data
        data_world = None
    dilation = spec.run.dilation  # records are in emulated time: host seconds / D
    evaluations = set(eval_iterations(spec.run.iterations, spec.run.eval_every, spec.run.resume_from)
                      if rank == 0 else ())
    if evaluations:
        held_out = dataset.test_split()
        eval_log = EvalLog(strategy.ctx.run_dir / "eval.csv", spec.run.resume_from)
        samples_per_iteration = data_batch * data_world

    def evaluate(iteration: int, now_s: float) -> None:
        """Rank 0 scores its parameters (every gate open) on the held-out split: eval.csv."""
        score = engine.evaluate(*held_out)
        eval_log.write(iteration, iteration * samples_per_iteration / len(dataset), now_s, score)

    if 0 in evaluations:  # the initial model, before the clock starts
        evaluate(0, 0.0)
    client.barrier("start", n_nodes)
    t_job = time.perf_counter()
    sent0, recv0 = metrics.total_sent(), metrics.total_received()

    def report(timing, end: float, checksum: float) -> None:
        """Iteration t spans [start_t, start_t+1); its communication spans [first gradient, all params fresh]."""
        nonlocal sent0, recv0
        iteration_s = (end - timing.start) / dilation
        compute_s = timing.compute_s / dilation
        comm_wait = max(0.0, iteration_s - compute_s)
        comm_span = max(0.0, engine.gates.synced_at.pop(timing.iteration, timing.first_grad) - timing.first_grad)
        sent, recv = metrics.total_sent(), metrics.total_received()
        metrics.observe_iteration(iteration_s, compute_s, comm_wait, timing.samples, timing.loss)
        client.report(pb.IterationReport(node=client.node, rank=rank, iteration=timing.iteration,
                                         start_s=(timing.start - t_job) / dilation, iteration_s=iteration_s,
                                         compute_s=compute_s, comm_wait_s=comm_wait, loss=timing.loss,
                                         samples=timing.samples, bytes_sent=sent - sent0, bytes_received=recv - recv0,
                                         params_checksum=checksum, comm_span_s=comm_span / dilation,
                                         schedule_error_s=timing.schedule_error_s / dilation))
        sent0, recv0 = sent, recv

    prev, prev_checksum = None, math.nan
    checkpoints = set(spec.run.checkpoints())
    for it in range(spec.run.resume_from + 1, spec.run.iterations + 1):
        current[0] = it
        start = time.perf_counter()
        x, y = dataset.batch(it - 1, data_rank, data_world, data_batch) if data_world else (None, None)
        timing = strategy.run_iteration(engine, it, x, y, start)
        computed = time.perf_counter()
        spans.add("compute", it, spans.wall(start), spans.wall(computed))
        if prev is not None:  # every gate of this forward opened, so the previous iteration's sync is complete
            report(prev, start, prev_checksum)
        prev_checksum = math.nan
        if spec.run.check_params:
            engine.wait_fresh()
            prev_checksum = params_checksum(engine.tensors)
        prev = timing
        evaluating = it in evaluations and it < spec.run.iterations  # the last one is evaluated after the drain
        if it in checkpoints or evaluating:  # drain this iteration's sync and report it; it+1 starts afresh
            engine.wait_fresh()
            drained = time.perf_counter()
            report(prev, drained, prev_checksum)
            prev = None
            if evaluating:  # after the report: rank 0's records never hold evaluation time
                evaluate(it, (drained - t_job) / dilation)
            if it in checkpoints:
                client.flush_reports()
                _save_checkpoint(engine, strategy, client, it, n_nodes)
    # Every iteration's span holds its own compute and one sync wait: the previous iteration's, which its
    # forward waits on (or, with run.check_params, its own, awaited before the checksum). The last sync
    # is then the job's drain, not a second sync of iteration N, which ends where its compute does.
    engine.wait_fresh()
    drained = time.perf_counter()
    report(prev, drained if spec.run.check_params else computed, prev_checksum)
    if spec.run.iterations in evaluations:
        evaluate(spec.run.iterations, (drained - t_job) / dilation)
