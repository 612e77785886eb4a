"""A parameter-server shard: key-value store, synchronous aggregation, optimizer, notify or broadcast.

The shard owns the (key, slice) partitions the plan assigns it. Pushes are
aggregated per (key, slice, iteration) until every worker has contributed; then
the mean gradient goes through SGD with momentum and weight decay, and the
workers are told: ``notify-pull`` sends a NOTIFY and answers the PULL_REQUEST
that follows (MXNet KVStore, P3 §4.1); ``broadcast`` sends the fresh values to
every worker at once (P3 §4.2). Every push is validated before anything is
touched, so a refused push leaves the store unchanged.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from synclab.plans.sharding import Partition
from synclab.ps.optimizer import sgd_momentum_
from synclab.wire import pb
from synclab.wire.frames import Message, MessageId, Received

SendFn = Callable[[str, Message], None]
SERVER_MODES = ("notify-pull", "broadcast")


class PushRejected(ValueError):
    """A push that does not fit the store (unknown key, wrong size, dtype, duplicate...)."""


@dataclass
class _Entry:
    part: Partition
    value: torch.Tensor | None = None
    momentum: torch.Tensor | None = None
    version: int = 0                      # last iteration applied
    pending: torch.Tensor | None = None   # sum of this iteration's pushes
    pushed_by: set = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Shard:
    def __init__(self, index: int, partitions: list[Partition], workers: list[str], *, lr: float, momentum: float,
                 weight_decay: float, send: SendFn, mode: str = "notify-pull",
                 on_aggregated: Callable[[float], None] | None = None):
        if mode not in SERVER_MODES:
            raise ValueError(f"unknown PS server mode {mode!r}; choose one of {SERVER_MODES}")
        self.index, self.workers, self.mode = index, list(workers), mode
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self._send = send
        self._on_aggregated = on_aggregated
        self._entries = {(p.key, p.slice): _Entry(p) for p in partitions if p.shard == index}
        self._uninitialized = len(self._entries)
        self._init_lock = threading.Lock()
        self.initialized = threading.Event()
        if not self._entries:
            self.initialized.set()

    # -- queries -------------------------------------------------------------------
    def value(self, key: str, slice_: int = 0) -> torch.Tensor:
        return self._entry(key, slice_).value.clone()

    def version(self, key: str, slice_: int = 0) -> int:
        return self._entry(key, slice_).version

    def keys(self) -> list[tuple[str, int]]:
        return sorted(self._entries)

    def _entry(self, key: str, slice_: int) -> _Entry:
        try:
            return self._entries[(key, slice_)]
        except KeyError:
            raise PushRejected(f"shard {self.index} does not hold {key!r} slice {slice_}") from None

    # -- messages ------------------------------------------------------------------
    def handle(self, msg: Received) -> None:
        kind = msg.mid.kind
        if kind == pb.GRADIENT:
            self._push(msg)
        elif kind == pb.PULL_REQUEST:
            self._pull(msg.sender, msg.mid.key, msg.mid.slice)
        elif kind == pb.PARAMS:
            self._init(msg)
        else:
            raise PushRejected(f"a PS shard does not accept {pb.FrameKind.Name(kind)} frames")

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
        e = self._entry(msg.mid.key, msg.mid.slice)
        t = self._check(e, msg)
        with e.lock:
            first = e.value is None
            e.value = t.clone()
        if first:
            with self._init_lock:
                self._uninitialized -= 1
                if self._uninitialized == 0:
                    self.initialized.set()

    def _push(self, msg: Received) -> None:
        e = self._entry(msg.mid.key, msg.mid.slice)
        t = self._check(e, msg)
        if msg.sender not in self.workers:
            raise PushRejected(f"push from {msg.sender!r}, which is not a worker of this job")
        with e.lock:
            if e.value is None:
                raise PushRejected(f"{msg.mid.key!r} slice {msg.mid.slice} pushed before it was initialized")
            if msg.mid.iteration != e.version + 1:
                raise PushRejected(f"{msg.mid.key!r} slice {msg.mid.slice}: push for iteration {msg.mid.iteration}, "
                                   f"expected {e.version + 1}")
            if msg.sender in e.pushed_by:
                raise PushRejected(f"{msg.sender} pushed {msg.mid.key!r} slice {msg.mid.slice} twice "
                                   f"in iteration {msg.mid.iteration}")
            if e.pending is None:
                e.pending = t.clone()
            else:
                e.pending.add_(t)
            e.pushed_by.add(msg.sender)
            if len(e.pushed_by) < len(self.workers):
                return
            t0 = time.perf_counter()
            grad = e.pending.div_(len(self.workers))
            e.momentum = sgd_momentum_(e.value, grad, e.momentum, lr=self.lr, momentum=self.momentum,
                                       weight_decay=self.weight_decay)
            e.version = msg.mid.iteration
            e.pending, e.pushed_by = None, set()
            fresh = e.value.clone() if self.mode == "broadcast" else None
        if self._on_aggregated is not None:
            self._on_aggregated(time.perf_counter() - t0)
        mid = MessageId(pb.PARAMS if fresh is not None else pb.NOTIFY, e.part.key, e.part.slice, e.version)
        for w in self.workers:
            self._send(w, Message(mid, fresh, e.part.priority))

    def _pull(self, worker: str, key: str, slice_: int) -> None:
        e = self._entry(key, slice_)
        with e.lock:
            if e.value is None:
                raise PushRejected(f"{key!r} slice {slice_} pulled before it was initialized")
            value, version = e.value.clone(), e.version
        self._send(worker, Message(MessageId(pb.PARAMS, key, slice_, version), value, e.part.priority))

    def pull_frames(self, key: str, slice_: int, sender: str, chunk_bytes: int):
        """Frames answering the unary cold-start Pull RPC."""
        from synclab.wire.frames import chunk_frames

        e = self._entry(key, slice_)
        with e.lock:
            value, version = (None if e.value is None else e.value.clone()), e.version
        if value is None:
            raise PushRejected(f"{key!r} slice {slice_} is not initialized yet")
        return chunk_frames(Message(MessageId(pb.PARAMS, key, slice_, version), value), sender, chunk_bytes)
