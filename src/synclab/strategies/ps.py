"""``ps``: the parameter-server baseline, MXNet KVStore or push-then-pull by ``strategy.protocol`` (P3 §4.1; Stanza §5.2).

``kvstore`` (the default) is MXNet KVStore, P3's baseline (P3 §4.1):

Placement: tensors above 10^6 params are split evenly over all shards, smaller
ones go to one (seeded) randomly chosen shard (:mod:`synclab.plans.sharding`).
As soon as backward produces a tensor's gradient the worker pushes it to its
shard(s). A shard aggregates until every worker has pushed that (key, slice) for
the iteration, runs the optimizer, and *notifies* every worker; once every
slice of a key has been notified the worker pulls all of them, and the replies
refresh the parameters (the "notify + pull" round trip P3 removes; P3 §4.2:
"MXNet only issues a pull request once it has received the update notification
for all the slices of a layer"). Pushes leave in FIFO order. Pushes overlap backward layer by layer, and
a worker's link carries pushes and the replies to its pulls at once (full duplex).

``push-then-pull`` is the PS of Stanza's PyTorch prototype (Stanza §5.2, Table 4), which its eq. 6
(§7.1, t_ps = 2 n_w P / (n_s B) + T_ps) models: after backward the worker pushes every gradient ("the
``push`` method is nonblocking"), waits until they have left, then pulls every tensor ("the ``pull``
method is called immediately after ``push``, and blocks until it receives all parameter updates"); the
next forward starts once every tensor has landed. The shards stay silent after an update (server mode
``pull``) and answer a pull once its iteration is applied, so the servers receive the gradients first and
send the parameters after: the two directions of eq. 6, one after the other.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from synclab.core import ParamInfo
from synclab.plans.schema import ServerPlan
from synclab.plans.sharding import Partition, kvstore_partitions
from synclab.strategies.base import Strategy, WorkerContext
from synclab.strategies.registry import register
from synclab.strategies.simmodel import ParameterServer
from synclab.transport.inbox import TensorSink
from synclab.wire import pb
from synclab.wire.frames import Message, MessageId, Received


def partitions_from_plan(plan: ServerPlan) -> list[Partition]:
    return list(plan.partitions)


@dataclass
class _Landing:
    """Where the values of one tensor for one iteration go, and how many slices are still to come."""

    into: torch.Tensor | None      # None: the live tensor, marked fresh once complete (if ``fresh``)
    remaining: int
    done: Future
    fresh: bool = True


class PsClient:
    """The worker side of a PS (KVWorker): push slices, pull, land the values, refresh params.

    Also used by later PS-based strategies. With ``pull_on_notify`` a NOTIFY makes it
    pull that slice (KVStore); without it, values may come unasked (a broadcasting
    server) or after :meth:`pull`. Values land in the live tensor, which is then
    marked fresh, unless :meth:`pull` names another tensor to land in.

    A reply the worker asked for is written into its place chunk by chunk as it
    arrives (``Inbox.expect_into``, named before the pull request leaves), so a
    worker never holds a second, staged copy of the values it pulls; values that
    come unasked (a broadcast) are staged whole and copied in.
    """

    def __init__(self, ctx: WorkerContext, partitions: list[Partition], *, pull_on_notify: bool = True):
        self.ctx = ctx
        self._by_key: dict[str, list[Partition]] = {}
        for p in partitions:
            self._by_key.setdefault(p.key, []).append(p)
        self._index = {info.name: info.index for info in ctx.params}
        self._lock = threading.Lock()
        self._landings: dict[tuple[int, int], _Landing] = {}  # (iteration, index) -> values still arriving
        self._notified: dict[tuple[int, str], int] = {}  # (iteration, key) -> slices notified so far
        self._unsent: set[Future] = set()  # gradient slices not yet handed to gRPC whole
        ctx.inbox.subscribe(pb.PARAMS, self._on_params)
        if pull_on_notify:
            ctx.inbox.subscribe(pb.NOTIFY, self._on_notify)

    def partitions(self, index: int) -> list[Partition]:
        return self._by_key[self.ctx.params[index].name]

    def push(self, iteration: int, index: int, grad: torch.Tensor, priority: int = 0) -> list[Future]:
        """Send every slice of the gradient to its shard; events mark the first and the last byte handed over.
        Returns the slices' futures, done once each is handed to gRPC whole."""
        flat = grad.reshape(-1)
        self.ctx.record_event(iteration, index, "send_start")
        futures = [self.ctx.ps_links[p.shard].send(Message(MessageId(pb.GRADIENT, p.key, p.slice, iteration),
                                                           flat[p.offset:p.offset + p.length], priority or p.priority))
                   for p in self.partitions(index)]
        remaining = [len(futures)]
        lock = threading.Lock()
        with self._lock:
            self._unsent.update(futures)

        def one_done(f):
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            with self._lock:
                self._unsent.discard(f)
            if last:
                self.ctx.record_event(iteration, index, "send_end")

        for f in futures:
            f.add_done_callback(one_done)
        return futures

    def wait_pushed(self, timeout: float) -> None:
        """Block until every gradient pushed so far has been handed to gRPC whole.

        A strategy whose last pushes no pull waits for (SSD-SGD between pulls) calls this before the job's
        end barrier: the transport's close gives in-flight streams a short grace, and a shaped (or dilated)
        link can hold more than that in its queue, so the shard would wait for pushes that never arrive."""
        with self._lock:
            pending = list(self._unsent)
        _, not_done = wait(pending, timeout=timeout)
        if not_done:
            raise TimeoutError(f"{len(not_done)} gradient slice(s) were still queued after {timeout:g} s")

    def pull(self, iteration: int, index: int, into: torch.Tensor | None = None, *, fresh: bool = True) -> Future:
        """Ask for tensor ``index`` as of ``iteration``; the future resolves once every slice has landed.

        ``into`` (same numel as the tensor) receives the values instead of the live
        tensor, which is then neither touched nor marked fresh. ``fresh=False``: the values land in the
        live tensor but the caller marks it fresh (a blocking pull opens every gate at once).
        """
        landing = self._landing(iteration, index, into, fresh)
        for p in self.partitions(index):
            self._expect_reply(landing, iteration, index, p)
            self.ctx.ps_links[p.shard].send(Message(MessageId(pb.PULL_REQUEST, p.key, p.slice, iteration),
                                                    priority=p.priority))
        return landing.done

    def push_initial(self) -> None:
        """Rank 0 seeds every shard with its initial parameter values: views of the live tensors, which
        nothing writes before every seed has been handed over (this waits for that), so no second copy."""
        futures = []
        for info in self.ctx.params:
            flat = self.ctx.tensors[info.index].detach().reshape(-1)
            for p in self.partitions(info.index):
                futures.append(self.ctx.ps_links[p.shard].send(
                    Message(MessageId(pb.PARAMS, p.key, p.slice, 0), flat[p.offset:p.offset + p.length])))
        for f in futures:
            f.result()

    def _landing(self, iteration: int, index: int, into: torch.Tensor | None = None, fresh: bool = True) -> _Landing:
        with self._lock:
            landing = self._landings.get((iteration, index))
            if landing is None:
                need = len(self.partitions(index))
                landing = self._landings[(iteration, index)] = _Landing(into, need, Future(), fresh)
            elif into is not None:
                raise RuntimeError(f"tensor {index} of iteration {iteration} is already being received")
            return landing

    def _on_notify(self, msg: Received) -> None:
        """KVStore: pull a key once all of its slices are notified (one slice: at once)."""
        key, iteration = msg.mid.key, msg.mid.iteration
        slices = self._by_key[key]
        with self._lock:
            seen = self._notified.get((iteration, key), 0) + 1
            if seen < len(slices):
                self._notified[(iteration, key)] = seen
                return
            self._notified.pop((iteration, key), None)
        index = self._index[key]
        landing = self._landing(iteration, index)
        for p in slices:
            self._expect_reply(landing, iteration, index, p)
            self.ctx.ps_links[p.shard].send(Message(MessageId(pb.PULL_REQUEST, key, p.slice, iteration)))

    def _target(self, landing: _Landing, index: int, p: Partition) -> torch.Tensor:
        """The flat slice of the live tensor (or of ``into``) that partition ``p``'s values land in."""
        target = self.ctx.tensors[index] if landing.into is None else landing.into
        return target.detach().view(-1)[p.offset:p.offset + p.length]

    def _expect_reply(self, landing: _Landing, iteration: int, index: int, p: Partition) -> None:
        """Name the reply's destination before asking for it: the transport copies its chunks into place."""
        shard, target = self.ctx.ps_names.get(p.shard), self._target(landing, index, p)
        if shard is None or target.device.type != "cpu":  # staged whole and copied (no names; a GPU tensor)
            return
        arrived = self.ctx.inbox.expect_into(shard, MessageId(pb.PARAMS, p.key, p.slice, iteration),
                                             TensorSink(target, reduce=False))
        arrived.add_done_callback(lambda f: self._landed(landing, iteration, index, f.exception()))

    def _on_params(self, msg: Received) -> None:
        """Values that came whole (unasked, or to a context that named no destination): copied into place."""
        index = self._index[msg.mid.key]
        p = self._by_key[msg.mid.key][msg.mid.slice]
        landing = self._landing(msg.mid.iteration, index)
        self._target(landing, index, p).copy_(msg.tensor)
        self._landed(landing, msg.mid.iteration, index)

    def _landed(self, landing: _Landing, iteration: int, index: int, error: BaseException | None = None) -> None:
        """One slice is in place (or failed to arrive: the landing fails with the reason)."""
        if error is not None:
            with self._lock:
                self._landings.pop((iteration, index), None)
            if not landing.done.done():
                landing.done.set_exception(error)
            return
        with self._lock:
            landing.remaining -= 1
            complete = landing.remaining == 0
            if complete:
                del self._landings[(iteration, index)]
        if complete:
            if landing.into is None and landing.fresh:
                self.ctx.mark_fresh(index)
            landing.done.set_result(None)


class PsStrategy(Strategy):
    """What every PS-based strategy shares: a :class:`PsClient`, rank 0 seeding the shards, and
    push-as-soon-as-ready. Subclasses choose the server mode, the placement (``make_plan``) and
    whether a NOTIFY triggers a pull (``pull_on_notify``)."""

    needs_ps = True
    sim_model = ParameterServer()  # push; the plan's server_mode decides notify + pull or broadcast
    Plan = ServerPlan
    pull_on_notify: ClassVar[bool] = False

    @classmethod
    def kvstore_plan(cls, params: list[ParamInfo], ps_shards: int, seed: int, max_ahead: int = 1,
                     **extra) -> ServerPlan:
        """MXNet KVStore placement (P3 §4.1), shards serving arrivals in order."""
        parts = kvstore_partitions([(p.name, p.numel) for p in params], ps_shards, seed=seed)
        return cls.Plan(partitions=tuple(parts), server_mode=cls.server_mode, serve_order="arrival",
                        max_ahead=max_ahead, **extra)

    @classmethod
    def make_plan(cls, params: list[ParamInfo], *, ps_shards, workers, seed, options):
        return cls.kvstore_plan(params, ps_shards, seed)

    @classmethod
    def max_payload_bytes(cls, plan, params, *, batch_size, options, element_bytes=4):
        """Pushes, initial values and parameter replies each carry one (key, slice) partition."""
        return max(p.length for p in plan.partitions) * element_bytes

    def __init__(self, ctx: WorkerContext):
        super().__init__(ctx)
        self.client = PsClient(ctx, partitions_from_plan(ctx.plan), pull_on_notify=self.pull_on_notify)

    def setup(self):
        if self.ctx.rank == 0:
            self.client.push_initial()

    def on_gradient(self, iteration, index, grad):
        self.client.push(iteration, index, grad)


Protocol = Literal["kvstore", "push-then-pull"]


class PsOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    protocol: Protocol = Field("kvstore", description=(
        "kvstore: MXNet KVStore (P3 §4.1): push each gradient as backward produces it, pull a layer once "
        "all its slices are updated and notified, pushes and pulls overlapping; push-then-pull: Stanza's PS "
        "(§5.2, eq. 6): push every gradient after backward, wait until they have left, then pull every "
        "tensor, the next forward waiting for all of them"))


def _sim_client(options: PsOptions) -> str:
    """The simulator's client for the run's protocol (:class:`ParameterServer` ``choose_client``)."""
    return "push-then-pull" if options.protocol == "push-then-pull" else "push"


@register
class ParameterServerBaseline(PsStrategy):
    name = "ps"
    Options = PsOptions
    server_mode = "notify-pull"
    sim_model = ParameterServer(choose_client=_sim_client)
    closed_form = "eq6"  # Stanza's model of this baseline (§7.1, eq. 6-7)

    @classmethod
    def paper_label(cls, overrides, lr):
        return f"SSGD (`{cls.name}`)"  # SSD-SGD's name for synchronous PS SGD (§4)
    checkpointable = True   # the optimizer state lives on the shards (Shard.state_dict)
    pull_on_notify = True

    @classmethod
    def make_plan(cls, params, *, ps_shards, workers, seed, options: PsOptions):
        plan = cls.kvstore_plan(params, ps_shards, seed)
        if options.protocol == "push-then-pull":  # the shards stay silent; the workers pull (Stanza §5.2)
            plan = plan.model_copy(update={"server_mode": "pull"})
        return plan

    def __init__(self, ctx: WorkerContext):
        self.blocking = ctx.options.protocol == "push-then-pull"
        self.pull_on_notify = not self.blocking
        super().__init__(ctx)
        self._held: list[tuple[int, torch.Tensor]] = []  # push-then-pull: this iteration's gradients

    def on_gradient(self, iteration, index, grad):
        if self.blocking:
            self._held.append((index, grad))
        else:
            self.client.push(iteration, index, grad)

    def on_backward_end(self, iteration):
        """push-then-pull (Stanza §5.2): push all, wait until every slice has left, pull all, wait until every
        tensor has landed, then open every gate. Blocks the communication thread, as Stanza's ``pull`` does."""
        if not self.blocking:
            return
        held, self._held = self._held, []
        pushed = [f for index, grad in held for f in self.client.push(iteration, index, grad)]
        for f in pushed:
            f.result()
        pulls = [self.client.pull(iteration, info.index, fresh=False) for info in self.ctx.params]
        for f in pulls:
            f.result()
        for info in self.ctx.params:
            self.ctx.mark_fresh(info.index)
