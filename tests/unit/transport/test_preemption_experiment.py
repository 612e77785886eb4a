"""benchmarks/priority_preemption.py's cases: what each mode queues where, and the warm-up (issue 12 item 5)."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from support.scripts import load_script


@pytest.fixture(scope="module")
def exp():
    return load_script("benchmarks/priority_preemption.py")


class FakeLink:
    def __init__(self):
        self.sent = []

    def send(self, msg):
        self.sent.append((msg.mid.key, msg.priority, msg.nbytes))
        f = Future()
        f.set_result(None)
        return f


def _links():
    return {"a": FakeLink(), "b": FakeLink()}


@pytest.mark.parametrize("mode, on_a, on_b", [
    ("one", [("big", 9, 8000), ("urgent", 0, 400)], []),
    ("two", [("urgent", 0, 400)], [("big", 9, 8000)]),
    ("alone", [("urgent", 0, 400)], []),
])
def test_each_mode_queues_the_bulk_where_it_says(exp, mode, on_a, on_b):
    links = _links()
    exp._send(links, mode, 1e9, 8000, 400, 1024)
    assert links["a"].sent == on_a and links["b"].sent == on_b


def test_warm_sends_to_every_peer_and_none_when_zero(exp):
    links = _links()
    exp._warm(links, 0)
    assert links["a"].sent == [] and links["b"].sent == []
    exp._warm(links, 4000)
    assert links["a"].sent == links["b"].sent == [("warm", 5, 4000)]
