"""A stand-in for Prometheus' HTTP API in process: the unit tests of the dashboard renderer."""

from __future__ import annotations

import pytest

NODES = ["worker10", "ps0", "worker2", "coordinator", "ps1"]


class FakePrometheus:
    """Answers every query with one series per node it names, except queries in ``empty``."""

    def __init__(self, empty: tuple[str, ...] = (), nodes=NODES):
        self.empty, self.nodes = empty, nodes
        self.ranges, self.instants, self.labels = [], [], []

    def query_range(self, expr, start, end, step_s):
        self.ranges.append((expr, start, end, step_s))
        if any(e in expr for e in self.empty):
            return []
        n = int((end - start) / step_s) + 1
        return [{"metric": {"node": "worker2", "direction": "egress", "kind": "gradient"},
                 "values": [[start + i * step_s, str(1e6 * i)] for i in range(n)]}]

    def query(self, expr, at):
        self.instants.append((expr, at))
        return [{"metric": {"node": n, "backend": "tbf"}, "value": [at, "1"]} for n in ("ps0", "worker2")]

    def label_values(self, label, match, start, end):
        self.labels.append((label, match))
        return list(self.nodes) if label == "node" else ["coordinator", "ps", "worker"]


@pytest.fixture
def fake_prometheus():
    """``fake_prometheus(empty=("fragment",))`` answers queries containing a fragment with no data."""
    return FakePrometheus
