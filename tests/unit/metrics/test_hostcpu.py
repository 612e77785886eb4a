"""The host's CPU over a run's measured window, from two readings of /proc/stat."""

import os

import pytest

from synclab.metrics import hostcpu

TICK = os.sysconf("SC_CLK_TCK")


def stat(user, system, idle, iowait=0, steal=0, ctxt=1000, cores=2):
    user, system, idle, iowait, steal = (round(v) for v in (user, system, idle, iowait, steal))
    per_core = "".join(f"cpu{i} 1 0 1 1 0 0 0 0 0 0\n" for i in range(cores))
    # user nice system idle iowait irq softirq steal guest guest_nice (guest is inside user already)
    return (f"cpu  {user} 0 {system} {idle} {iowait} 0 0 {steal} {user} 0\n{per_core}"
            f"intr 5 1 2\nctxt {ctxt}\nbtime 1\nprocesses 9\n")


def test_busy_fraction_counts_every_non_idle_tick_once():
    a = hostcpu.parse(stat(100, 50, 850), at=10.0)
    # over 2 s of 2 cores (4 s = 4 * TICK ticks): 1.5 s user, 0.5 s system, 1 s idle, 1 s iowait
    b = hostcpu.parse(stat(100 + 1.5 * TICK, 50 + 0.5 * TICK, 850 + TICK, iowait=TICK, ctxt=1000 + 6000),
                      at=12.0)
    w = hostcpu.between(a, b)
    assert w["busy_fraction"] == pytest.approx(0.5) and w["cores"] == 2 and w["seconds"] == 2.0
    assert w["context_switches_per_s"] == 3000.0 and w["saturated"] is False


def test_steal_counts_as_busy_and_a_full_host_is_saturated():
    a = hostcpu.parse(stat(0, 0, 0), at=0.0)
    b = hostcpu.parse(stat(3 * TICK, 0, 0.2 * TICK, steal=0.8 * TICK), at=2.0)
    w = hostcpu.between(a, b)
    assert w["busy_fraction"] == pytest.approx(0.95) and w["saturated"] is True


def test_no_window_without_two_samples_or_time_between():
    a = hostcpu.parse(stat(1, 1, 1), at=1.0)
    assert hostcpu.between(None, a) is None and hostcpu.between(a, None) is None
    assert hostcpu.between(a, a) is None


def test_a_stat_without_cpu_or_ctxt_lines_is_an_error_that_names_the_file():
    with pytest.raises(ValueError, match="/proc/stat"):
        hostcpu.parse("intr 1\n", at=0.0)


def test_an_unreadable_stat_file_gives_no_sample(tmp_path):
    assert hostcpu.sample(str(tmp_path / "absent")) is None
    bad = tmp_path / "stat"
    bad.write_text("garbage\n")
    assert hostcpu.sample(str(bad)) is None


def test_this_host_reads():
    s = hostcpu.sample()
    if s is None:
        pytest.skip("no /proc/stat here")
    assert s.cores == os.cpu_count() and s.busy_s > 0 and s.total_s > s.busy_s and s.ctxt > 0
