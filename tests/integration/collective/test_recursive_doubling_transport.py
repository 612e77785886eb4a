"""Recursive doubling (Stanza §4.1.2) over real gRPC streams: every rank ends with the sum, bit for bit."""

import threading

import pytest
import torch

from synclab.collective.recursive_doubling import recursive_doubling_allreduce_, recursive_doubling_peers
from synclab.transport.inbox import Inbox
from synclab.transport.node import NodeTransport

TOKEN = "t0ken"


def close_all(nodes) -> None:
    """Close concurrently (each close waits for its peers to end their streams); every message has arrived."""
    closers = [threading.Thread(target=n.close, args=(0.2,)) for n in nodes]
    for t in closers:
        t.start()
    for t in closers:
        t.join(30)


def run_group(group: list[int], data: dict[int, torch.Tensor], *, iterations: int = 1) -> dict[int, torch.Tensor]:
    """All-reduce ``data[r]`` over ``group``, one NodeTransport per rank opening only its schedule's streams."""
    names = {r: f"w{r}" for r in group}
    inboxes = {r: Inbox() for r in group}
    nodes = {r: NodeTransport(names[r], TOKEN, on_message=inboxes[r].deliver, chunk_bytes=16 << 10) for r in group}
    ports = {r: nodes[r].serve("127.0.0.1", 0, peer=True) for r in group}
    links = {r: {} for r in group}
    for pos, r in enumerate(group):
        for peer_pos in recursive_doubling_peers(pos, len(group)):
            peer = group[peer_pos]
            links[r][peer] = nodes[r].connect(names[peer], f"127.0.0.1:{ports[peer]}", "peer")
    results, errors = {}, []

    def run(r):
        try:
            flat = data[r].clone()
            for it in range(1, iterations + 1):  # the same buffer again: keys differ by iteration
                recursive_doubling_allreduce_(flat, group=group, rank=r, key="g", iteration=it, links=links[r],
                                              inbox=inboxes[r], names=names)
            results[r] = flat
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(r,)) for r in group]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        close_all(nodes.values())
    assert not errors, errors
    assert not any(t.is_alive() for t in threads), "all-reduce hung"
    return results


@pytest.mark.parametrize("n", range(1, 10))
def test_equals_the_sum_on_every_rank(n):
    group = list(range(n))
    gen = torch.Generator().manual_seed(n)
    data = {r: torch.randn(40_003, generator=gen) for r in group}  # several 16 KiB chunks
    expected = sum(data[r].double() for r in group)
    results = run_group(group, data)
    for r in group:
        assert torch.allclose(results[r].double(), expected, rtol=1e-5, atol=1e-5), r
        assert torch.equal(results[r], results[0])  # bit-identical on every rank


def test_group_of_arbitrary_ranks_and_repeated_iterations():
    # the FC workers of a run are ranks n_c..N-1; positions in the group, not ranks, follow the schedule
    group = [7, 3, 5]
    data = {r: torch.full((5,), float(r)) for r in group}
    results = run_group(group, data, iterations=2)
    for r in group:
        assert torch.equal(results[r], torch.full((5,), 15.0 * 3))  # 15, then 15 summed over 3 ranks
