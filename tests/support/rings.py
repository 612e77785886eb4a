"""A ring all-reduce between real NodeTransports on loopback, one thread per rank (unit tests of the transports)."""

import threading

from synclab.collective.ring import ring_allreduce_
from synclab.transport.inbox import Inbox
from synclab.transport.node import NodeTransport
from synclab.transport.shaper import LinkShaper


def ring_over_transports(data, *, pieces: int, streamed: bool, slow_rank0: bool, engine: str = "grpc",
                         token: str = "t0ken"):
    """Every rank's result of all-reducing ``data`` (one tensor per rank) over 16 KiB chunks on ``engine``.

    ``slow_rank0`` paces rank 0's egress at 20 Mbit/s so its sends queue while the ring goes on; ``streamed``
    has the transports add or copy each chunk into place (``sinks=inbox``) instead of reassembling segments
    first. Each rank zeroes its tensor as soon as the ring returns, so a send still reading it would carry
    zeros; every inbox must end with nothing waiting and nothing held."""
    world = len(data)
    inboxes = [Inbox() for _ in range(world)]
    nodes = [NodeTransport(f"w{r}", token, on_message=inboxes[r].deliver, chunk_bytes=16 << 10, engine=engine,
                           shaper=LinkShaper(rate_bps=20e6) if slow_rank0 and r == 0 else None,
                           sinks=inboxes[r] if streamed else None)
             for r in range(world)]
    ports = [n.serve("127.0.0.1", 0, peer=True) for n in nodes]
    if engine == "tcp":
        ports = [n.tcp_port for n in nodes]
        assert all(ports) and len(set(ports)) == world
    links = [nodes[r].connect(f"w{(r + 1) % world}", f"127.0.0.1:{ports[(r + 1) % world]}", "peer")
             for r in range(world)]
    results = [None] * world

    def run(r):
        flat = ring_allreduce_(data[r].clone(), rank=r, world=world, key="g", iteration=1, to_next=links[r],
                               inbox=inboxes[r], prev_name=f"w{(r - 1) % world}", pieces=pieces)
        results[r] = flat.clone()
        flat.zero_()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    try:
        for r in range(world):
            assert not inboxes[r]._sinks and not inboxes[r]._early
    finally:
        for n in nodes:
            n.close()
    return results
