"""The emulator host's measured ring goodput as a simulator input (2026-11-26, issue 14)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from synclab.cli import app
from synclab.config import load_spec, parse_override
from synclab.sim.goodput import PAYLOAD_SHARE, parse_ring_goodput, ring_goodput_for
from synclab.sim.host import HostCpu
from synclab.sim.run import goodput_at, simulate

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "examples" / "quickstart.yaml"
SETS = ["compute.mode=replay", "run.iterations=4", "run.warmup=1", "compute.scale=0.01", "network.rate=1gbit",
        "strategy.name=synceasgd", "cluster.workers=4", "cluster.ps_shards=0", "model.name=resnet50"]


def test_a_table_from_pairs_or_allreduce_csvs(tmp_path):
    assert parse_ring_goodput("8:0.84, 2:1") == {8: [(0, 0.84)], 2: [(0, 1.0)]}
    assert parse_ring_goodput("8:0.8,8:0.9") == {8: [(0, pytest.approx(0.85))]}  # repeated: the mean
    assert parse_ring_goodput("16:1048576:0.79,16:150562:0.61") == {16: [(150562, 0.61), (1048576, 0.79)]}
    csv = tmp_path / "allreduce.csv"
    csv.write_text("link,ranks,mbytes,ring_bound_s,gloo_s,synclab_s\nx,8,100.0,10.0,11.0,12.5\n"
                   "x,16,100.0,10.0,11.0,8.0\n")
    t = parse_ring_goodput(f"{csv},2:0.99")
    assert t[8] == [(12_500_000, pytest.approx(10.0 / 12.5 / PAYLOAD_SHARE))]  # segment: 100 MB / 8 ranks
    assert t[16] == [(6_250_000, 1.0)] and t[2] == [(0, 0.99)]  # capped at 1
    for bad, why in (("8", "RANKS:SHARE"), ("8:x", "RANKS:SHARE"), ("8:1:2:0.5", "RANKS:SHARE"),
                     ("1:0.5", "ranks must be >= 2"), ("8:0:0.5", "segment must be >= 1"),
                     ("8:1.5", r"in \(0, 1\]"), ("8:0", r"in \(0, 1\]"), (",", "no entries"),
                     ("8:0.9,8:1000:0.8", "with and without a segment size"),
                     (str(tmp_path / "nosuch.csv"), "cannot read")):
        with pytest.raises(ValueError, match=why):
            parse_ring_goodput(bad)
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not an allreduce.csv"):
        parse_ring_goodput(str(tmp_path / "other.csv"))


def test_the_largest_measured_ring_not_above_the_world_applies():
    t = {2: [(0, 0.99)], 8: [(0, 0.84)], 16: [(0, 0.9)]}
    assert [ring_goodput_for(t, n) for n in (1, 2, 4, 8, 12, 16, 64)] == [
        [], [(0, 0.99)], [(0, 0.99)], [(0, 0.84)], [(0, 0.84)], [(0, 0.9)], [(0, 0.9)]]
    assert ring_goodput_for(None, 8) == []
    with pytest.raises(ValueError, match="ring goodput"):
        HostCpu(2, 2e-9, ring_goodput=0.0)
    with pytest.raises(ValueError, match="ring goodput"):
        HostCpu(2, 2e-9, ring_goodput=[(1000, 0.5), (2000, 1.2)])


def test_the_share_follows_the_segment_size_log_linearly():
    points = [(100_000, 0.6), (1_000_000, 0.8), (10_000_000, 0.9)]
    assert goodput_at(points, 1_000) == 0.6 and goodput_at(points, 50_000_000) == 0.9  # the nearest outside
    assert goodput_at(points, 1_000_000) == pytest.approx(0.8)
    assert goodput_at(points, 316_228) == pytest.approx(0.7, abs=1e-4)  # halfway in log(size)
    assert goodput_at([(0, 0.7)], 123) == 0.7 and goodput_at([], 123) == 1.0
    assert HostCpu(2, 2e-9, ring_goodput=points).ring_share(3_162_278) == pytest.approx(0.85, abs=1e-4)


def test_a_lower_goodput_slows_the_ring_and_only_the_ring():
    spec = load_spec(QUICKSTART, [parse_override(s) for s in SETS])
    base = simulate(spec, host_cores=2)
    slow = simulate(spec, host_cores=2, ring_goodput={4: [(0, 0.5)]})
    other = simulate(spec, host_cores=2, ring_goodput={8: [(0, 0.5)]})  # measured for larger rings only: no change
    t = lambda r: sum(row["iteration_s"] for row in r.rows)  # noqa: E731
    assert t(slow) > 1.3 * t(base)
    assert t(other) == pytest.approx(t(base))
    assert slow.host_cpu["ring_goodput"] == 0.5
    assert slow.bytes_sent == base.bytes_sent  # the bytes counted are the real ones


def test_the_cli_needs_host_cpu_and_names_a_bad_table():
    args = ["simulate", str(QUICKSTART), *(x for s in SETS for x in ("--set", s))]
    r = CliRunner().invoke(app, [*args, "--ring-goodput", "4:0.9"])
    assert r.exit_code != 0 and "need --host-cpu" in r.output
    r = CliRunner().invoke(app, [*args, "--host-cpu", "2", "--ring-goodput", "4:2"])
    assert r.exit_code != 0 and "--ring-goodput" in r.output


def test_a_segment_size_dependent_goodput_slows_small_segments_more():
    """ResNet-50's merged all-reduce at 4 ranks: 25.6 M floats, segments of ~25.6 MB. Measured points that give
    large segments the full goodput leave it as it was; the same shares the other way round slow it."""
    spec = load_spec(QUICKSTART, [parse_override(s) for s in SETS])
    base = simulate(spec, host_cores=2)
    big_fast = simulate(spec, host_cores=2, ring_goodput={4: [(100_000, 0.5), (10_000_000, 1.0)]})
    big_slow = simulate(spec, host_cores=2, ring_goodput={4: [(100_000, 1.0), (10_000_000, 0.5)]})
    t = lambda r: sum(row["iteration_s"] for row in r.rows)  # noqa: E731
    assert t(big_fast) == pytest.approx(t(base), rel=0.02)
    assert t(big_slow) > 1.3 * t(base)
    assert big_slow.host_cpu["ring_goodput"] == [[100_000, 1.0], [10_000_000, 0.5]]


def test_the_ring_alone_is_calibrated_against_its_own_simulation(tmp_path):
    """simulate_ring times one all-reduce as the benchmark does; calibrate_ring_goodput finds the share that makes
    it take a measured time, and keeps 1 where the model is already slower than the measurement."""
    from synclab.netem.profile import load_profile
    from synclab.sim.run import calibrate_ring_goodput, simulate_ring

    link = load_profile(REPO / "benchmarks" / "links" / "e62500kbit.yaml")
    base = simulate_ring(16, 602249, link)
    wire = 2 * 15 / 16 * 602249 * 4 * 8 / 62.5e6 / PAYLOAD_SHARE  # the ring's bytes on one link, at the payload rate
    # the shaper's bucket (96 KiB at the host rate) passes a step's first bytes free: a little under the wire time
    assert 0.95 * wire < base < 1.3 * wire
    share, unshared, simulated = calibrate_ring_goodput(16, 602249, link, measured_s=1.5 * base)
    assert unshared == base and 0.5 < share < 0.7
    assert simulate_ring(16, 602249, link, goodput=share) == simulated == pytest.approx(1.5 * base, rel=0.01)
    assert calibrate_ring_goodput(16, 602249, link, measured_s=0.5 * base)[0] == 1.0


def test_a_calibrated_table_is_read_as_it_was_written(tmp_path):
    path = tmp_path / "ring-goodput.csv"
    path.write_text("ranks,segment_bytes,share,mbytes\n16,150562,0.623,2.4\n16,1048576,0.796,16.8\n"
                    "8,301000,0.871,2.4\n")
    assert parse_ring_goodput(str(path)) == {16: [(150562, 0.623), (1048576, 0.796)], 8: [(301000, 0.871)]}
    path.write_text("ranks,segment_bytes,share\n16,x,0.5\n")
    with pytest.raises(ValueError, match="bad row"):
        parse_ring_goodput(str(path))


def test_the_calibration_writes_the_table_the_simulator_reads(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # a record's old experiments/links/ path is found under benchmarks/links/
    measured = tmp_path / "allreduce.csv"
    measured.write_text("link,backend,ranks,mbytes,ring_bound_s,gloo_s,synclab_s\n"
                        "experiments/links/e125mbit.yaml,tbf,8,2.408996,0.2698,0.2875,0.3309\n")
    out = tmp_path / "ring-goodput.csv"
    r = CliRunner().invoke(app, ["calibrate", "ring-goodput", str(measured), "--out", str(out)])
    assert r.exit_code == 0, r.output
    table = parse_ring_goodput(str(out))
    assert list(table) == [8] and table[8][0][0] == 301124 and 0.8 < table[8][0][1] < 0.95
