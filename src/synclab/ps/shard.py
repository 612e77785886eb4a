"""A parameter-server shard: key-value store, aggregation, optimizer, and what it tells the workers.

The shard owns the (key, slice) partitions the plan assigns it and runs SGD
with momentum and weight decay on them. What happens around the update is set
by one :class:`ServerMode`, chosen by name in :data:`SERVER_MODES`:

- ``notify-pull``: pushes are aggregated per (key, slice, iteration) until
  every worker has contributed; the mean gradient is applied and every worker
  gets a NOTIFY, then pulls (MXNet KVStore, P3 §4.1).
- ``broadcast``: the same aggregation; the fresh values go to every worker at
  once, unasked (P3 §4.2).
- ``pull``: the same aggregation, and silence; a worker pulls when it wants the
  values (SSD-SGD §3.4–3.5: the servers run SSGD unchanged, workers pull only
  every k iterations).
- ``async``: every push is applied on its own as soon as it arrives, no
  aggregation across workers (asynchronous SGD, as MXNet's ``dist_async``).

In the synchronous modes a push is summed into its round as its chunks arrive
(:meth:`Shard.claim_sink`, given to the transport as its ``sinks``): the shard
holds one sum per (key, slice, iteration), not one staged copy per worker
still sending (measured in ``docs/validation/s25-ps-streaming``). Its
completion still goes through the serve queue, so P3's priority order
decides which complete round is updated and answered first. A push that
arrived before anyone could claim it, or one that will be refused, is staged
whole and handled as before.

In the synchronous modes a pull for iteration t is answered once the update of
iteration t has been applied (a pull that arrives earlier waits, as a KVServer
answers a pull only after the pushes before it); in ``async`` mode a pull gets
the latest values at once. Every push is validated before anything is touched,
so a refused push leaves the store unchanged.

Who may ask what, and when (anything else is refused with the reason, the store
untouched; the transport ends the sender's stream with the refusal's status):

- PARAMS (initial values) only from a worker of the job, and for a partition only
  while no update has touched it since this shard started: before training, or
  while a restarted job's rank 0 re-seeds what the shard loaded from its
  checkpoint (:meth:`Shard.seed` is the in-process way, for a shard's owner).
- GRADIENT only from a worker, for an iteration in the window
  (version, version + max_ahead] (async: past the worker's last push, at most
  max_ahead on).
- PULL_REQUEST only from a worker, for an iteration within max_ahead of the
  version (synchronous modes; async: of the worker's last push). A worker pulls
  the iteration it has just pushed, and at most max_ahead of its pushes can have
  been applied before its pull is read, so no honest pull falls outside; one
  further ahead would wait for an update that never comes and keep
  :meth:`Shard.settled` false, hanging the job.
- any other frame kind: refused.

``max_ahead`` is the plan's (:class:`synclab.plans.schema.ServerPlan`): 1 for the
lockstep strategies, k + 1 for SSD-SGD's k-step delay.
"""

from __future__ import annotations

import threading
import time
import weakref
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

import torch

from synclab.plans.sharding import Partition
from synclab.ps.optimizer import sgd_momentum_
from synclab.transport.inbox import TensorSink
from synclab.wire import pb
from synclab.wire.frames import Message, MessageId, NotPermitted, NotReady, Received

SendFn = Callable[[str, Message], None]


@dataclass(frozen=True, slots=True)
class ServerMode:
    """How a shard treats pushes and pulls."""

    synchronous: bool        # aggregate all workers' pushes of an iteration, then update once
    announce: int | None     # frame kind sent to every worker after an update (None: stay silent)


SERVER_MODES: dict[str, ServerMode] = {
    "notify-pull": ServerMode(synchronous=True, announce=pb.NOTIFY),
    "broadcast": ServerMode(synchronous=True, announce=pb.PARAMS),
    "pull": ServerMode(synchronous=True, announce=None),
    "async": ServerMode(synchronous=False, announce=None),
}


class PushRejected(ValueError):
    """A push that does not fit the store (unknown key, wrong size, dtype, duplicate...)."""


class NotAWorker(PushRejected, NotPermitted):
    """A frame from a node that is not a worker of this job."""


class NotInitialized(PushRejected, NotReady):
    """A push or pull for a partition whose initial values have not arrived yet."""


@dataclass
class _Round:
    """One iteration's pushes of one (key, slice), summed."""

    total: torch.Tensor
    pushed_by: set = field(default_factory=set)   # workers whose whole push is in ``total``
    streaming: set = field(default_factory=set)   # workers whose push is being added chunk by chunk
    lock: threading.Lock = field(default_factory=threading.Lock)  # one add into ``total`` at a time


class _PushSink(TensorSink):
    """One worker's push, added into its round's sum chunk by chunk (under the round's lock) as it arrives;
    the finished push then goes on to the serve queue (``deliver``) to be counted."""

    __slots__ = ("lock", "wrote")
    deliver = True

    def __init__(self, r: _Round):
        super().__init__(r.total, reduce=True)
        self.lock, self.wrote = r.lock, False

    def write(self, offset: int, payload) -> None:
        with self.lock:
            super().write(offset, payload)
        self.wrote = True


@dataclass
class _Entry:
    part: Partition
    value: torch.Tensor | None = None
    momentum: torch.Tensor | None = None
    version: int = 0                      # synchronous: last iteration applied; async: pushes applied
    rounds: dict[int, _Round] = field(default_factory=dict)     # iteration -> pushes so far (synchronous)
    last_push: dict[str, int] = field(default_factory=dict)     # worker -> last iteration pushed (async)
    waiting_pulls: list[tuple[str, int]] = field(default_factory=list)  # (worker, iteration) not yet answerable
    snapshot: tuple[int, weakref.ref] | None = None  # (version, the copy of value its replies send)
    touched: bool = False   # an update has been applied or begun since this shard started: no more PARAMS
    reseed: bool = False    # restored from a checkpoint; rank 0's re-seed is still to come (expect_reseed)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Shard:
    """One shard's store. ``max_ahead``: how many iterations past the last applied one a push may be for.

    In lockstep strategies (``ps``, ``p3``) a worker cannot push iteration t+1 before
    it has iteration t's values, so 1; SSD-SGD workers run up to k+1 ahead.
    """

    def __init__(self, index: int, partitions: list[Partition], workers: list[str], *, lr: float, momentum: float,
                 weight_decay: float, send: SendFn, mode: str = "notify-pull", max_ahead: int = 1,
                 on_aggregated: Callable[[float], None] | None = None,
                 update_hold_s: Callable[[Partition], float] | None = None):
        if mode not in SERVER_MODES:
            raise ValueError(f"unknown PS server mode {mode!r}; choose one of {tuple(SERVER_MODES)}")
        if max_ahead < 1:
            raise ValueError(f"max_ahead must be >= 1, got {max_ahead}")
        self.index, self.workers, self.mode = index, list(workers), mode
        self.rules = SERVER_MODES[mode]
        self.max_ahead = max_ahead
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self._send = send
        self._on_aggregated = on_aggregated
        # Host seconds an update of a partition takes at least (a stated cost already multiplied by the
        # dilation, so it lasts the same emulated time at any D): held after the arithmetic, before anyone
        # hears of the update, one update at a time (the shard's one server). None: the arithmetic alone.
        self._hold = update_hold_s
        self._server = threading.Lock()
        self._entries = {(p.key, p.slice): _Entry(p) for p in partitions if p.shard == index}
        self._uninitialized = len(self._entries)
        self._init_lock = threading.Lock()
        self.initialized = threading.Event()
        self._progress = threading.Condition()
        if not self._entries:
            self.initialized.set()

    # -- queries -------------------------------------------------------------------
    def value(self, key: str, slice_: int = 0) -> torch.Tensor:
        return self._entry(key, slice_).value.clone()

    def version(self, key: str, slice_: int = 0) -> int:
        return self._entry(key, slice_).version

    def keys(self) -> list[tuple[str, int]]:
        return sorted(self._entries)

    def settled(self, iterations: int) -> bool:
        """Every worker's pushes of ``iterations`` iterations applied and every pull answered."""
        done = iterations if self.rules.synchronous else iterations * len(self.workers)
        return all(e.version >= done and not e.waiting_pulls for e in self._entries.values())

    def wait_settled(self, iterations: int, timeout: float | None = None) -> bool:
        """Block until :meth:`settled`; pushes may still be on the wire when the workers finish."""
        with self._progress:
            return self._progress.wait_for(lambda: self.settled(iterations), timeout=timeout)

    def state_dict(self) -> dict:
        """Values, momentum buffers and versions of every partition (at a checkpoint: nothing in flight)."""
        out = {}
        for (key, slice_), e in self._entries.items():
            with e.lock:
                if e.rounds or e.waiting_pulls:
                    raise RuntimeError(f"shard {self.index}: {key!r} slice {slice_} has updates in flight")
                out[(key, slice_)] = {"value": None if e.value is None else e.value.clone(),
                                      "momentum": None if e.momentum is None else e.momentum.clone(),
                                      "version": e.version, "last_push": dict(e.last_push)}
        return out

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` (a restart); the partitions must be the same ones."""
        if set(state) != set(self._entries):
            raise ValueError(f"shard {self.index}: the checkpoint holds other partitions than the plan gives")
        for k, s in state.items():
            e = self._entries[k]
            with e.lock:
                e.value, e.momentum, e.version = s["value"], s["momentum"], s["version"]
                e.last_push, e.snapshot = dict(s["last_push"]), None
        with self._init_lock:
            self._uninitialized = sum(e.value is None for e in self._entries.values())
            if self._uninitialized == 0:
                self.initialized.set()

    def expect_reseed(self) -> None:
        """After :meth:`load_state_dict`: :attr:`initialized` again waits for every partition's PARAMS (the
        restarted job's rank 0 re-seeds them before the ``ready`` barrier), so no worker's push can reach a
        partition before its re-seed does, and a re-seed is never refused as late."""
        with self._init_lock:
            for e in self._entries.values():
                e.reseed = True
            self._uninitialized = len(self._entries)
            if self._entries:
                self.initialized.clear()

    def _entry(self, key: str, slice_: int) -> _Entry:
        try:
            return self._entries[(key, slice_)]
        except KeyError:
            raise PushRejected(f"shard {self.index} does not hold {key!r} slice {slice_}") from None

    # -- messages ------------------------------------------------------------------
    def claim_sink(self, sender: str, mid: MessageId) -> tuple[TensorSink, Future] | None:
        """The transport, at the first chunk of a message: for a push in a synchronous mode, a sink that adds
        it into its round's sum as it arrives. None for anything else, including a push that would be refused:
        that one is staged whole and :meth:`handle` refuses it, naming the reason, once it is in."""
        e = self._entries.get((mid.key, mid.slice))
        if mid.kind != pb.GRADIENT or not self.rules.synchronous or sender not in self.workers or e is None:
            return None
        with e.lock:
            if e.value is None:
                return None
            try:
                self._admit(e, sender, mid)
            except PushRejected:
                return None
            r = e.rounds.get(mid.iteration)
            if r is None:
                r = e.rounds[mid.iteration] = _Round(torch.zeros(e.part.length))
            r.streaming.add(sender)
            e.touched = True
        sink, done = _PushSink(r), Future()
        done.add_done_callback(lambda f: self._stream_ended(e, mid.iteration, r, sender, sink, f))
        return sink, done

    def _stream_ended(self, e: _Entry, it: int, r: _Round, sender: str, sink: _PushSink, f: Future) -> None:
        """A streamed push that failed before its first byte was added (a wrong size or dtype) gives its claim
        back. One that failed midway stays claimed: its round cannot complete, so no update ever applies a
        partial sum (the stream, and so the job, has failed with the reason)."""
        if f.cancelled() or f.exception() is None or sink.wrote:
            return
        with e.lock:
            r.streaming.discard(sender)
            if not r.streaming and not r.pushed_by and e.rounds.get(it) is r:
                del e.rounds[it]

    def handle(self, msg: Received) -> None:
        """Apply one complete message; :class:`PushRejected` (naming the reason) for anything refused."""
        kind = msg.mid.kind
        if msg.sender not in self.workers:
            name = pb.FrameKind.Name(kind) if kind in pb.FrameKind.values() else f"kind {kind}"
            raise NotAWorker(f"a {name} frame from {msg.sender!r}, which is not a worker of this job")
        if kind == pb.GRADIENT:
            self._push(msg)
        elif kind == pb.PULL_REQUEST:
            self._pull(msg.sender, msg.mid.key, msg.mid.slice, msg.mid.iteration)
        elif kind == pb.PARAMS:
            self._init(msg)
        else:
            name = pb.FrameKind.Name(kind) if kind in pb.FrameKind.values() else f"unknown kind {kind}"
            raise PushRejected(f"a PS shard does not accept {name} frames")

    def _check(self, e: _Entry, msg: Received) -> torch.Tensor:
        t = msg.tensor
        if t is None:
            raise PushRejected(f"{msg.mid.key!r}: no payload")
        if t.dtype != torch.float32:
            raise PushRejected(f"{msg.mid.key!r} slice {msg.mid.slice}: dtype {t.dtype}, expected torch.float32")
        if t.dim() != 1 or t.numel() != e.part.length:
            raise PushRejected(f"{msg.mid.key!r} slice {msg.mid.slice}: shape {tuple(t.shape)}, "
                               f"expected ({e.part.length},)")
        return t

    def _init(self, msg: Received) -> None:
        """Initial values from a worker (rank 0 seeds, and re-seeds on a restart); refused once training has
        touched the partition."""
        self.seed(msg.mid.key, msg.mid.slice, self._check(self._entry(msg.mid.key, msg.mid.slice), msg))

    def seed(self, key: str, slice_: int, values: torch.Tensor) -> None:
        """Set a partition's initial values (the owner of an in-process shard, or :meth:`handle` for PARAMS)."""
        e = self._entry(key, slice_)
        with e.lock:
            if e.touched or e.rounds or e.waiting_pulls:
                raise PushRejected(f"{key!r} slice {slice_}: initial values after training has begun "
                                   f"(version {e.version})")
            first = e.value is None or e.reseed
            e.value, e.snapshot, e.reseed = values.detach().clone(), None, False
        if first:
            with self._init_lock:
                self._uninitialized -= 1
                if self._uninitialized == 0:
                    self.initialized.set()

    def _push(self, msg: Received) -> None:
        """A complete push: staged whole (``tensor`` set), or summed as it streamed in (``tensor`` None)."""
        e = self._entry(msg.mid.key, msg.mid.slice)
        t = None if msg.tensor is None and self.rules.synchronous else self._check(e, msg)
        if msg.sender not in self.workers:
            raise NotAWorker(f"push from {msg.sender!r}, which is not a worker of this job")
        with e.lock:
            t0 = time.perf_counter()
            if e.value is None:
                raise NotInitialized(f"{msg.mid.key!r} slice {msg.mid.slice} pushed before it was initialized")
            if self.rules.synchronous:
                applied = self._aggregate(e, msg, t)
            else:
                applied = self._apply_at_once(e, msg, t)
            e.touched = True
            if not applied:
                return
            if self._hold is not None:  # under the entry's lock: a pull of this partition waits for it too
                rest = len(applied) * self._hold(e.part) - (time.perf_counter() - t0)  # less the arithmetic
                with self._server:
                    time.sleep(max(0.0, rest))
            fresh = self._snapshot(e) if self.rules.announce == pb.PARAMS else None
            answers = self._answerable_pulls(e)
        if self._on_aggregated is not None:
            self._on_aggregated(time.perf_counter() - t0)
        if self.rules.announce is not None:
            for version in applied:
                mid = MessageId(self.rules.announce, e.part.key, e.part.slice, version)
                for w in self.workers:
                    self._send(w, Message(mid, fresh, e.part.priority))
        self._answer(e, answers)

    def _admit(self, e: _Entry, sender: str, mid: MessageId) -> None:
        """Refuse a push for an iteration outside the window, or a second one from ``sender`` (lock held)."""
        it = mid.iteration
        if not e.version < it <= e.version + self.max_ahead:
            expected = (f"expected {e.version + 1}" if self.max_ahead == 1
                        else f"expected {e.version + 1}..{e.version + self.max_ahead}")
            raise PushRejected(f"{mid.key!r} slice {mid.slice}: push for iteration {it}, {expected}")
        r = e.rounds.get(it)
        if r is not None and (sender in r.pushed_by or sender in r.streaming):
            raise PushRejected(f"{sender} pushed {mid.key!r} slice {mid.slice} twice in iteration {it}")

    def _aggregate(self, e: _Entry, msg: Received, t: torch.Tensor | None) -> list[int]:
        """Count a push in its iteration's round (``t``: add it; None: its chunks were added as they came);
        apply every round that is complete, in order (lock held)."""
        it = msg.mid.iteration
        r = e.rounds.get(it)
        if t is None:
            if r is None or msg.sender not in r.streaming:
                raise PushRejected(f"{msg.mid.key!r}: no payload")
            r.streaming.discard(msg.sender)
        else:
            self._admit(e, msg.sender, msg.mid)
            if r is None:
                r = e.rounds[it] = _Round(t.clone())
            else:
                with r.lock:
                    r.total.add_(t)
        r.pushed_by.add(msg.sender)
        applied = []
        while (r := e.rounds.get(e.version + 1)) is not None and len(r.pushed_by) == len(self.workers):
            del e.rounds[e.version + 1]
            e.momentum = sgd_momentum_(e.value, r.total.div_(len(self.workers)), e.momentum, lr=self.lr,
                                       momentum=self.momentum, weight_decay=self.weight_decay)
            e.version += 1
            applied.append(e.version)
        return applied

    def _apply_at_once(self, e: _Entry, msg: Received, t: torch.Tensor) -> list[int]:
        """ASGD: this worker's gradient alone moves the weights (lock held); lr is not divided by the workers."""
        it = msg.mid.iteration
        last = e.last_push.get(msg.sender, 0)
        if it <= last:
            raise PushRejected(f"{msg.sender} pushed {msg.mid.key!r} slice {msg.mid.slice} for iteration {it} "
                               f"after iteration {last}")
        if it > last + self.max_ahead:
            raise PushRejected(f"{msg.sender} pushed {msg.mid.key!r} slice {msg.mid.slice} for iteration {it}, "
                               f"more than {self.max_ahead} past its last push ({last})")
        e.last_push[msg.sender] = it
        e.momentum = sgd_momentum_(e.value, t, e.momentum, lr=self.lr, momentum=self.momentum,
                                   weight_decay=self.weight_decay)
        e.version += 1
        return [e.version]

    def _pull(self, worker: str, key: str, slice_: int, iteration: int) -> None:
        e = self._entry(key, slice_)
        with e.lock:
            if e.value is None:
                raise NotInitialized(f"{key!r} slice {slice_} pulled before it was initialized")
            base = e.version if self.rules.synchronous else e.last_push.get(worker, 0)
            if abs(iteration - base) > self.max_ahead:
                what = "the applied version" if self.rules.synchronous else f"{worker}'s last push"
                raise PushRejected(f"{key!r} slice {slice_}: pull for iteration {iteration}, more than "
                                   f"{self.max_ahead} from {what} ({base})")
            e.waiting_pulls.append((worker, iteration))
            answers = self._answerable_pulls(e)
        self._answer(e, answers)

    def _answerable_pulls(self, e: _Entry) -> list[tuple[str, int, torch.Tensor]]:
        """Pulls whose iteration has been applied (all of them in async mode), with the values to send (lock held)."""
        if not e.waiting_pulls:
            return []
        ready = [(w, it) for w, it in e.waiting_pulls if not self.rules.synchronous or it <= e.version]
        if not ready:
            return []
        e.waiting_pulls = [p for p in e.waiting_pulls if p not in ready]
        value = self._snapshot(e)
        return [(w, it, value) for w, it in ready]

    @staticmethod
    def _snapshot(e: _Entry) -> torch.Tensor:
        """A copy of the values at this version, shared by every reply that sends them while any of them is
        still on its way (lock held). Workers that pull one version at different times used to get a copy
        each, all held while their shaped links drained them. The shard holds the copy weakly, so it is
        freed once its last reply is sent, and never writes it."""
        if e.snapshot is not None and e.snapshot[0] == e.version and (copy := e.snapshot[1]()) is not None:
            return copy
        copy = e.value.clone()
        e.snapshot = (e.version, weakref.ref(copy))
        return copy

    def _answer(self, e: _Entry, answers: list[tuple[str, int, torch.Tensor]]) -> None:
        """Send pull replies (labelled with the iteration asked for), then wake :meth:`wait_settled`."""
        for worker, iteration, value in answers:
            self._send(worker, Message(MessageId(pb.PARAMS, e.part.key, e.part.slice, iteration), value,
                                       e.part.priority))
        with self._progress:
            self._progress.notify_all()

    def pull_frames(self, key: str, slice_: int, sender: str, chunk_bytes: int, caller: str | None = None):
        """Frames answering the unary cold-start Pull RPC (``sender``: this shard's name on the frames;
        ``caller``: who asked, which must be a worker of the job when given)."""
        from synclab.wire.frames import chunk_frames

        if caller is not None and caller not in self.workers:
            raise NotAWorker(f"a Pull from {caller!r}, which is not a worker of this job")
        e = self._entry(key, slice_)
        with e.lock:
            value, version = (None if e.value is None else e.value.clone()), e.version
        if value is None:
            raise NotInitialized(f"{key!r} slice {slice_} is not initialized yet")
        return chunk_frames(Message(MessageId(pb.PARAMS, key, slice_, version), value), sender, chunk_bytes)
