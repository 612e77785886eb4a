"""The emulator host's measured ring goodput as a simulator input (session 14, issue 14)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from synclab.cli import app
from synclab.config import load_spec, parse_override
from synclab.sim.network import HostCpu
from synclab.sim.run import PAYLOAD_SHARE, parse_ring_goodput, ring_goodput_for, simulate

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "examples" / "quickstart.yaml"
SETS = ["compute.mode=replay", "run.iterations=4", "run.warmup=1", "compute.scale=0.01", "network.rate=1gbit",
        "strategy.name=synceasgd", "cluster.workers=4", "cluster.ps_shards=0", "model.name=resnet50"]


def test_a_table_from_pairs_or_allreduce_csvs(tmp_path):
    assert parse_ring_goodput("8:0.84, 2:1") == {8: 0.84, 2: 1.0}
    assert parse_ring_goodput("8:0.8,8:0.9") == {8: pytest.approx(0.85)}  # repeated: the mean
    csv = tmp_path / "allreduce.csv"
    csv.write_text("link,ranks,ring_bound_s,gloo_s,synclab_s\nx,8,10.0,11.0,12.5\nx,16,10.0,11.0,8.0\n")
    t = parse_ring_goodput(f"{csv},2:0.99")
    assert t[8] == pytest.approx(10.0 / 12.5 / PAYLOAD_SHARE) and t[16] == 1.0 and t[2] == 0.99  # capped at 1
    for bad, why in (("8", "RANKS:SHARE"), ("8:x", "RANKS:SHARE"), ("1:0.5", "ranks must be >= 2"),
                     ("8:1.5", r"in \(0, 1\]"), ("8:0", r"in \(0, 1\]"), (",", "no entries"),
                     (str(tmp_path / "nosuch.csv"), "cannot read")):
        with pytest.raises(ValueError, match=why):
            parse_ring_goodput(bad)
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not an allreduce.csv"):
        parse_ring_goodput(str(tmp_path / "other.csv"))


def test_the_largest_measured_ring_not_above_the_world_applies():
    t = {2: 0.99, 8: 0.84, 16: 0.9}
    assert [ring_goodput_for(t, n) for n in (1, 2, 4, 8, 12, 16, 64)] == [1.0, 0.99, 0.99, 0.84, 0.84, 0.9, 0.9]
    assert ring_goodput_for(None, 8) == 1.0
    with pytest.raises(ValueError, match="ring goodput"):
        HostCpu(2, 2e-9, ring_goodput=0.0)


def test_a_lower_goodput_slows_the_ring_and_only_the_ring():
    spec = load_spec(QUICKSTART, [parse_override(s) for s in SETS])
    base = simulate(spec, host_cores=2)
    slow = simulate(spec, host_cores=2, ring_goodput={4: 0.5})
    other = simulate(spec, host_cores=2, ring_goodput={8: 0.5})  # measured for larger rings only: no change
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
