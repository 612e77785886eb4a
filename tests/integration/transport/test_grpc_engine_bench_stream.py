"""benchmarks/grpc_engine_bench.py: one tiny stream per engine between a receiver and a
sender process over loopback."""

from __future__ import annotations

import pytest

from support.scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/grpc_engine_bench.py")


@pytest.mark.parametrize("engine", ["socket", "sync", "aio", "aio-handoff"])
def test_a_tiny_stream_arrives_whole(bench, engine):
    row = bench.run_pair(engine, 64 << 10, 5, 1, [], [], "127.0.0.1")
    assert row["messages"] == 5 and row["rounds"] == 1
    assert row["gbps"] > 0 and row["tx_cpu_s_per_gb"] >= 0 and row["rx_cpu_s_per_gb"] >= 0
    assert isinstance(row["rx_threads_s_per_gb"], dict) and isinstance(row["tx_threads_s_per_gb"], dict)
