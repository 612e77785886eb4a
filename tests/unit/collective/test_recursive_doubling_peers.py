"""Recursive doubling (Stanza §4.1.2) without a network: whom each rank talks to, and who may take part.

The allreduce itself, over real gRPC streams, is tested in tests/integration/collective."""

import pytest
import torch

from synclab.collective.recursive_doubling import recursive_doubling_allreduce_, recursive_doubling_peers
from synclab.collective.schedules import recursive_doubling_schedule
from synclab.transport.inbox import Inbox


@pytest.mark.parametrize("n", range(1, 18))
def test_peers_are_exactly_the_schedules_destinations(n):
    sends = {pos: set() for pos in range(n)}
    for step in recursive_doubling_schedule(n):
        for t in step.transfers:
            sends[t.src].add(t.dst)
    assert {pos: recursive_doubling_peers(pos, n) for pos in range(n)} == sends


def test_rank_outside_the_group_is_refused():
    with pytest.raises(ValueError):
        recursive_doubling_allreduce_(torch.zeros(3), group=[0, 1], rank=2, key="g", iteration=1, links={},
                                      inbox=Inbox(), names={})
