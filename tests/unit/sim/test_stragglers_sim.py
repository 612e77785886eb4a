"""Slow workers in the simulator: a lockstep strategy runs at the straggler's pace, ASGD's other workers
do not wait for it; a mirrored ring keeps each rank's own compute; the spec validates the keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from synclab.config import SpecError, load_spec
from synclab.sim.records import summary_of
from synclab.sim.run import simulate

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
BASE = ["compute.mode=replay", "run.iterations=6", "run.warmup=1", "model.name=resnet50", "compute.scale=0.05",
        "cluster.workers=3", "cluster.ps_shards=3", "network.rate=100gbit"]


def _summary(*overrides):
    return summary_of(simulate(load_spec(QUICKSTART, [*BASE, *overrides])))


@pytest.mark.parametrize("strategy", ["ps", "wfbp"])
def test_lockstep_runs_at_the_stragglers_pace(strategy):
    base = _summary(f"strategy.name={strategy}")
    slow = _summary(f"strategy.name={strategy}", "cluster.slowdown=[1, 1, 3]")
    pw = slow["per_worker"]
    # every iteration waits for worker2's extra compute, (3 - 1) x a nominal worker's compute, less what of it
    # overlaps the straggler's own communication (its backward sends as it goes)
    extra = 2 * pw["worker0"]["compute_s"] / slow["measured_iterations"]
    assert 0.8 * extra <= slow["iteration_seconds"]["mean"] - base["iteration_seconds"]["mean"] <= 1.02 * extra
    assert pw["worker2"]["compute_s"] == pytest.approx(3 * pw["worker0"]["compute_s"], rel=0.02)
    assert pw["worker0"]["waited_for"]["worker2"] == pytest.approx(2 * pw["worker0"]["compute_s"], rel=0.1)
    assert pw["worker2"]["slowest_iterations"] == slow["measured_iterations"]


def test_asgd_loses_only_the_stragglers_share():
    base = _summary("strategy.name=asgd")
    slow = _summary("strategy.name=asgd", "cluster.slowdown=[1, 1, 3]")
    # two workers at full rate and one at a third: about (2 + 1/3) / 3 of the throughput
    ratio = slow["throughput_samples_per_s"] / base["throughput_samples_per_s"]
    assert ratio == pytest.approx(7 / 9, rel=0.1)
    assert "worker2" not in slow["per_worker"]["worker0"]["waited_for"]


def test_random_stragglers_are_seeded():
    a = _summary("strategy.name=ps", "cluster.straggler.probability=0.3", "cluster.straggler.factor=4")
    b = _summary("strategy.name=ps", "cluster.straggler.probability=0.3", "cluster.straggler.factor=4")
    c = _summary("strategy.name=ps")
    assert a["iteration_seconds"] == b["iteration_seconds"]
    assert a["iteration_seconds"]["mean"] > 1.3 * c["iteration_seconds"]["mean"]


@pytest.mark.parametrize("override, words", [("cluster.slowdown=[1, 1, 1, 2]", "4 factors for 3 workers"),
                                             ("cluster.slowdown=[1, 0]", "in (0, 100]"),
                                             ("cluster.straggler.probability=2", "cluster.straggler.probability"),
                                             ("cluster.straggler.nope=1", "cluster.straggler.nope")])
def test_bad_straggler_keys_are_refused(override, words):
    with pytest.raises(SpecError, match=words.replace("(", r"\(").replace("]", r"\]").replace("[", r"\[")):
        load_spec(QUICKSTART, [*BASE, override])
