"""benchmarks/grpc_engine_bench.py: its parsing and its summary (the stream over loopback is in tests/integration)."""

from __future__ import annotations

import pytest

from support.scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/grpc_engine_bench.py")


def test_sizes_parse_binary_suffixes(bench):
    assert bench.parse_sizes("4194304, 1m,4MiB,64k,2KB") == [4 << 20, 1 << 20, 4 << 20, 64 << 10, 2 << 10]


@pytest.mark.parametrize("bad", ["", "0", "-1", "4x", "m", "1.5m"])
def test_bad_sizes_are_refused(bench, bad):
    with pytest.raises(ValueError):
        bench.parse_sizes(bad)


def test_engines_parse_and_refuse_unknown(bench):
    assert bench.parse_engines("aio, sync") == ["aio", "sync"]
    with pytest.raises(ValueError, match="unknown engine"):
        bench.parse_engines("sync,uvloop")
    with pytest.raises(ValueError):
        bench.parse_engines(" , ")


def test_summary_is_per_figure_median(bench):
    gb = 1e9
    rounds = [{"seconds": 1.0, "tx_cpu_s": 0.5, "rx_cpu_s": 0.25},
              {"seconds": 2.0, "tx_cpu_s": 0.1, "rx_cpu_s": 0.25},
              {"seconds": 4.0, "tx_cpu_s": 0.3, "rx_cpu_s": 1.0}]
    s = bench.summarize(rounds, int(gb))
    assert s["seconds"] == 2.0
    assert s["gbps"] == pytest.approx(4.0)  # 8 Gbit in 2 s
    assert s["tx_cpu_s_per_gb"] == pytest.approx(0.3)
    assert s["rx_cpu_s_per_gb"] == pytest.approx(0.25)
    assert s["cpu_s_per_gb"] == pytest.approx(0.75)  # sums 0.75, 0.35, 1.3
    assert s["rounds"] == 3
    with pytest.raises(ValueError):
        bench.summarize([], 1)


def test_saving_sign(bench):
    assert bench.saving({"seconds": 2.0}, {"seconds": 1.5}, "seconds") == pytest.approx(0.25)
    assert bench.saving({"seconds": 2.0}, {"seconds": 3.0}, "seconds") == pytest.approx(-0.5)


def test_messages_keep_the_stream_size(bench):
    assert bench.messages_for(1024, 4 << 20) == 256
    assert bench.messages_for(1024, 1 << 20) == 1024
    assert bench.messages_for(1, 4 << 20) == 1


def test_roles_per_gb_is_the_mean_over_rounds(bench):
    rounds = [{"rx_threads": {"main": 0.2, "grpc core (event_engine)": 0.4}}, {"rx_threads": {"main": 0.4}}, {}]
    got = bench.roles_per_gb(rounds, "rx_threads", int(2e9))
    assert list(got) == ["main", "grpc core (event_engine)"]  # largest first
    assert got["main"] == pytest.approx(0.6 / 6) and got["grpc core (event_engine)"] == pytest.approx(0.4 / 6)


def test_thread_names_fold_without_numbers(bench):
    got = bench.fold_threads({"Thread-6 (_run)": 0.2, "Thread-12 (_run)": 0.1, "ThreadPoolExecutor-0_3": 0.5,
                              "native:event_engine": 0.4, "MainThread": 0.05})
    assert got == pytest.approx({"Thread (_run)": 0.3, "ThreadPoolExecutor": 0.5, "native:event_engine": 0.4,
                                 "MainThread": 0.05})


def test_pool_takes_the_median_of_every_round(bench):
    def row(secs):
        rounds = [{"seconds": x, "tx_cpu_s": x / 10, "rx_cpu_s": x / 5, "tx_threads": {"MainThread": x / 10}}
                  for x in secs]
        return {"engine": "aio", "size": 4, "messages": 250_000_000, "all": rounds}
    got = bench.pool([row([1.0, 5.0]), row([2.0])])  # 1 GB per round
    assert got["seconds"] == 2.0 and got["rounds"] == 3
    assert got["tx_threads_s_per_gb"]["MainThread"] == pytest.approx(0.8 / 3)
    with pytest.raises(ValueError, match="different"):
        bench.pool([row([1.0]), {**row([1.0]), "engine": "sync"}])
    with pytest.raises(ValueError):
        bench.pool([])
