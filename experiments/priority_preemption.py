"""P3's preemption across destinations (issue 12 item 4), in one process over real gRPC on loopback.

A node sends a large low-priority message (priority 9) and, a moment later, a small urgent one (priority 0), with
the app backend's token bucket shaping the node's egress. ``same``: both go to one peer; ``split``: the large one
to peer B, the urgent one to peer A. P3 §4.2 has one consumer thread per worker take "the highest priority slice
from the queue" whatever its destination, so the urgent message should finish as soon in ``split`` as in ``same``:
after the chunk on the wire and its own transmission time.

    python experiments/priority_preemption.py [--rate 80mbit] [--big-mb 4] [--urgent-kb 200] [--chunk-kb 1024]
        [--repeats 3]

Prints, per case, the time from the urgent message being queued to its last byte arriving (median of
``--repeats``) beside its own transmission time at the rate.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import torch

from synclab.config.units import parse_rate_bps
from synclab.transport.node import NodeTransport
from synclab.transport.shaper import LinkShaper
from synclab.wire import pb
from synclab.wire.frames import Message, MessageId

TOKEN = "preemption"


def urgent_latency(split: bool, rate_bps: float, big_bytes: int, urgent_bytes: int, chunk_bytes: int) -> float:
    """Seconds from queueing the urgent message to its arrival at peer A."""
    arrived = threading.Event()
    arrival: dict[str, float] = {}

    def on_a(msg):
        if msg.mid.key == "urgent":
            arrival["t"] = time.perf_counter()
            arrived.set()

    a = NodeTransport("a", TOKEN, on_message=on_a, chunk_bytes=chunk_bytes)
    b = NodeTransport("b", TOKEN, on_message=lambda m: None, chunk_bytes=chunk_bytes)
    src = NodeTransport("src", TOKEN, on_message=lambda m: None, policy="priority", chunk_bytes=chunk_bytes,
                        shaper=LinkShaper(rate_bps=rate_bps))
    try:
        to_a = src.connect("a", f"127.0.0.1:{a.serve('127.0.0.1', 0, peer=True)}", "peer")
        to_b = src.connect("b", f"127.0.0.1:{b.serve('127.0.0.1', 0, peer=True)}", "peer") if split else to_a
        big = to_b.send(Message(MessageId(pb.COLLECTIVE, "big", 0, 1), torch.zeros(big_bytes // 4), 9))
        time.sleep(chunk_bytes * 8 / rate_bps * 1.5)  # the big message is on the wire
        queued = time.perf_counter()
        to_a.send(Message(MessageId(pb.COLLECTIVE, "urgent", 0, 1), torch.zeros(urgent_bytes // 4), 0))
        if not arrived.wait(60):
            raise RuntimeError("the urgent message never arrived")
        big.result(60)
        return arrival["t"] - queued
    finally:
        for n in (src, a, b):
            n.close(0.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", default="80mbit")
    ap.add_argument("--big-mb", type=float, default=4.0)
    ap.add_argument("--urgent-kb", type=float, default=200.0)
    ap.add_argument("--chunk-kb", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    rate = parse_rate_bps(a.rate)
    big, urgent, chunk = int(a.big_mb * 1e6), int(a.urgent_kb * 1e3), a.chunk_kb << 10
    own = urgent * 8 / rate
    print(f"{a.rate}: urgent {urgent / 1e3:.0f} kB (alone {own * 1e3:.0f} ms) queued behind {big / 1e6:.1f} MB "
          f"of priority 9, chunks of {chunk >> 10} KiB ({chunk * 8 / rate * 1e3:.0f} ms each)")
    for split in (False, True):
        times = [urgent_latency(split, rate, big, urgent, chunk) for _ in range(a.repeats)]
        med = statistics.median(times)
        print(f"  {'two peers' if split else 'one peer '}: urgent done after {med * 1e3:6.1f} ms "
              f"(= {med / own:.2f}x its own time; runs {', '.join(f'{t * 1e3:.0f}' for t in times)} ms)")


if __name__ == "__main__":
    main()
