"""DDP's bucket assignment (reverse order, first cap, a bucket closes once it holds its cap) and its plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from synclab.config import load_spec
from synclab.core import ParamInfo
from synclab.sim.run import simulate
from synclab.strategies.ddp import MIB, Ddp, DdpOptions, ddp_buckets

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"


def _params(numels):
    return [ParamInfo(index=i, name=f"t{i}", shape=(n,), numel=n, layer=i) for i, n in enumerate(numels)]


def test_first_bucket_is_small_and_a_bucket_closes_at_its_cap():
    # sizes in bytes, forward order; backward takes 5, 4, 3, 2, 1, 0
    sizes = [10, 30, 5, 20, 4, 3]
    plan = ddp_buckets(sizes, cap_bytes=25, first_cap_bytes=6)
    # first cap 6: 3 + 4 = 7 >= 6 closes; then cap 25: 20 + 5 = 25 closes; 30 closes alone; 10 is the rest
    assert plan.groups == ((5, 4), (3, 2), (1,), (0,))


def test_one_bucket_when_the_cap_exceeds_the_model():
    assert ddp_buckets([4, 4, 4], cap_bytes=1e9, first_cap_bytes=1e9).groups == ((2, 1, 0),)


def test_plan_records_buckets_and_their_bytes():
    # float32: 1 MiB = 262,144 params; the first bucket closes on the 300k-param tensor
    options = DdpOptions(bucket_cap_mb=2, first_bucket_mb=1)
    plan = Ddp.make_plan(_params([100_000, 400_000, 200_000, 300_000]), ps_shards=0, workers=2, seed=0,
                         options=options)
    assert plan.buckets == ((3,), (2, 1), (0,))
    assert plan.bucket_bytes == (1_200_000, 2_400_000, 400_000)
    assert Ddp.Plan.model_validate_json(plan.model_dump_json()) == plan
    assert 2 * MIB <= plan.bucket_bytes[1]


def test_misspelt_option_is_refused_by_name():
    with pytest.raises(ValidationError, match="bucket_cap"):
        DdpOptions(bucket_cap=4)


def test_simulated_bytes_follow_the_buckets():
    """Every bucket is one ring all-reduce: with the cap above the model the simulated job equals synceasgd's
    communication (one all-reduce), with a tiny cap it equals wfbp's (one per tensor)."""
    base = ["compute.mode=replay", "run.iterations=3", "run.warmup=1", "compute.scale=0.01"]
    one = simulate(load_spec(QUICKSTART, [*base, "strategy.name=ddp", "strategy.bucket_cap_mb=1000",
                                          "strategy.first_bucket_mb=1000"]))
    whole = simulate(load_spec(QUICKSTART, [*base, "strategy.name=synceasgd"]))
    tiny = simulate(load_spec(QUICKSTART, [*base, "strategy.name=ddp", "strategy.bucket_cap_mb=1e-9",
                                           "strategy.first_bucket_mb=1e-9"]))
    wfbp = simulate(load_spec(QUICKSTART, [*base, "strategy.name=wfbp"]))
    sent = lambda r: [(row["iteration"], row["bytes_sent"]) for row in r.rows]  # noqa: E731
    starts = lambda r: [e[:3] for e in r.events if e[3] == "send_start"]  # noqa: E731
    assert sent(one) == sent(whole) and sent(tiny) == sent(wfbp) and sent(one) != sent(tiny)
    assert starts(one) == starts(whole) and starts(tiny) == starts(wfbp)


def test_synclab_plan_strategy_prints_the_buckets(tmp_path):
    import json

    from typer.testing import CliRunner

    from synclab.cli import app

    profile = Path(__file__).resolve().parents[3] / "src" / "synclab" / "profiles" / "resnet50-b64-cpu.json"
    res = CliRunner().invoke(app, ["plan", "strategy", "ddp", "--profile", str(profile), "--set", "bucket_cap_mb=50"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.output)
    tensors = json.loads(profile.read_text())["tensors"]
    assert sorted(i for b in plan["buckets"] for i in b) == list(range(len(tensors)))
    assert all(b >= 50 * MIB for b in plan["bucket_bytes"][1:-1]) and plan["bucket_cap_mb"] == 50
    bad = CliRunner().invoke(app, ["plan", "strategy", "ddp", "--profile", str(profile), "--set", "bucket_cap=3"])
    assert bad.exit_code == 2 and "bucket_cap" in bad.output
