"""The random sample of ``synclab validate --random N --seed S`` (:mod:`synclab.validate.random_points`): drawn
by the seed alone, within its bounds, each point run at the D its own run picks."""

from __future__ import annotations

import pytest

from synclab.config import load_spec, parse_override
from synclab.config.dilation import choose_dilation
from synclab.resources import spec_path
from synclab.strategies import registry
from synclab.units import parse_duration_s, parse_rate_bps
from synclab.validate import random_points as rp


def test_the_same_seed_draws_the_same_points_and_another_seed_others():
    a, b = rp.draw_points(12, 7), rp.draw_points(12, 7)
    assert a == b
    assert rp.draw_points(12, 8).points != a.points
    # a shorter sample of the same seed is the longer one's beginning: a sample can grow and keep its records
    assert rp.draw_points(5, 7).points == a.points[:5]


def test_every_point_is_within_the_bounds():
    draw = rp.draw_points(60, 3, max_workers=6, max_point_s=150)
    names = rp.strategies()
    assert "local" not in names and all(registry.get(n).sim_model is not None for n in names)
    for p in draw.points:
        assert p.strategy in names and p.model in rp.MODELS
        assert 2 <= p.workers <= 6
        if registry.get(p.strategy).needs_ps:
            assert 1 <= p.shards <= min(p.workers, rp.MAX_SHARDS)
        else:
            assert p.shards == 0
        assert 1000 <= p.rate_mbit <= 10_000 and p.rate_mbit % 100 == 0
        assert 0 <= p.delay_us <= 1000 and p.delay_us % 10 == 0
        assert rp.SCALE[0] <= p.scale <= rp.SCALE[1]
        assert p.estimated_s <= 150
    assert [p.index for p in draw.points] == list(range(1, 61))
    assert draw.bounds["workers"] == [2, 6] and draw.bounds["max_point_s"] == 150
    # the draw spreads over its ranges rather than sitting in one corner
    assert len({p.strategy for p in draw.points}) >= len(names) // 2
    assert len({p.workers for p in draw.points}) >= 4


def test_a_tighter_budget_redraws_more_and_keeps_every_point_under_it():
    loose, tight = rp.draw_points(20, 1, max_point_s=1000), rp.draw_points(20, 1, max_point_s=60)
    assert tight.redrawn > loose.redrawn
    assert max(p.estimated_s for p in tight.points) <= 60


def test_a_points_overrides_make_the_spec_whose_own_rule_picks_the_drawn_dilation():
    for p in rp.draw_points(10, 2).points:
        sets = p.overrides()
        assert not any(s.startswith("run.dilation=") for s in sets)  # the run chooses
        spec = load_spec(spec_path("quickstart"), [parse_override(s) for s in sets])
        assert spec.strategy.name == p.strategy and spec.n_workers == p.workers and spec.n_ps == p.shards
        assert spec.network.link_profile().rate_bps == parse_rate_bps(p.rate)
        assert spec.network.link_profile().delay_s == pytest.approx(parse_duration_s(f"{p.delay_us}us"))
        assert spec.compute.mode == "replay" and spec.compute.scale == p.scale
        choice = choose_dilation(spec)
        assert (choice.source, choice.dilation) == ("rule", p.dilation)


def test_the_estimate_grows_with_bytes_and_dilation_and_the_busiest_link_is_a_shards():
    cost = rp.ModelCost(batch=32, grad_bytes=100_000_000, compute_s=10.0)
    assert rp.busiest_link_bytes(100, 8, 2) == 400 and rp.busiest_link_bytes(100, 2, 4) == 100
    assert rp.busiest_link_bytes(100, 4, 0) == 150  # ring: 2(N-1)/N M
    base = rp.estimate_host_s(cost, 4, 0, 1e9, 0.01, 4)
    assert base == pytest.approx(rp.STARTUP_S + 8 * 4 * (0.1 + 8 * 150e6 / 1e9))
    assert rp.estimate_host_s(cost, 4, 0, 1e9, 0.01, 8) > base > rp.estimate_host_s(cost, 4, 0, 2e9, 0.01, 4)


@pytest.mark.parametrize("kwargs, what", [({"n": 0}, "at least 1"), ({"max_workers": 1}, "max workers"),
                                          ({"max_point_s": 10}, "budget")])
def test_bad_bounds_are_refused_naming_them(kwargs, what):
    args = {"n": 3, "seed": 0} | kwargs
    with pytest.raises(ValueError, match=what):
        rp.draw_points(args.pop("n"), args.pop("seed"), **args)


def test_counts():
    rows = [{"ratio": 1.05}, {"ratio": 0.85}, {"ratio": 1.3}, {"error": "x"}]
    assert rp.counts(rows) == {"points": 4, "compared": 3, "within_10": 1, "beyond_20": 1, "failed": 1}


def test_the_validation_page_shows_a_random_sample_beside_the_grid_with_its_counts(tmp_path):
    import json

    from synclab.validate import doc as vdoc

    draw = rp.draw_points(3, 5)
    rows = []
    for p, (emu, sim) in zip(draw.points, [(1.0, 1.05), (2.0, 2.5), (1.0, None)]):
        row = p.coords() | {"estimated_s": p.estimated_s, "emulated_s": emu, "emu_host_busy": 0.5}
        if sim is None:
            row["error"] = "run failed: boom"
        else:
            row |= {"simulated_s": sim, "ratio": sim / emu}
        rows.append(row)
    d = tmp_path / "docs" / "validation"
    (d / "a-grid").mkdir(parents=True)
    (d / "a-grid" / "sim-vs-emu.json").write_text(json.dumps({"command": "synclab validate grid", "rows": [
        {"strategy": "wfbp", "rate": "1gbit", "workers": 2, "model": "resnet50", "emulated_s": 1, "simulated_s": 1,
         "ratio": 1.0}]}))
    (d / "z-random").mkdir()
    (d / "z-random" / "sim-vs-emu.json").write_text(json.dumps({
        "command": "synclab validate --random 3 --seed 5", "code": "abc", "written": "now",
        "random": {"n": 3, "seed": 5, "redrawn": draw.redrawn, "bounds": draw.bounds}, "rows": rows}))
    text = vdoc.render(tmp_path)
    assert "| [`z-random`](#z-random) | 1 of 2 | — |" in text
    assert "**1 of 2 points within ±10 %, 1 beyond ±20 %** (1 of 3 drawn not compared)" in text
    assert text.index("## `z-random`") < text.index("## `a-grid`")  # the random sample comes first
    p0 = draw.points[0]
    assert (f"| 1 | `{p0.strategy}` | {p0.workers} | {p0.shards or '—'} | {p0.rate_mbit / 1e3:g} Gbit/s | "
            f"{p0.delay_us} µs |") in text
    assert "| **1.050** | 50 % |" in text and "| 1.250 | 50 % |" in text and "| run failed: boom | 50 % |" in text


def test_a_miss_is_simulated_again_with_each_emulator_artifact_and_the_page_shows_it(tmp_path, monkeypatch):
    from synclab.validate import doc as vdoc
    from synclab.validate import grid as vgrid

    draw = rp.draw_points(2, 5)
    rows = [p.coords() | {"emulated_s": 1.0, "simulated_s": s, "ratio": s, "dilation": 8}
            for p, s in zip(draw.points, (1.02, 1.5))]
    asked = []

    def fake_summary(out, cmd, redo=False):  # what `synclab simulate` was asked, and a summary per variant
        asked.append(cmd)
        return {"variant": out.name}

    means = {"explain-startup_over_d": 1.01, "explain-host": 0.97, "explain-host_no_bucket": 1.2}
    monkeypatch.setattr(vgrid, "_summary", fake_summary)
    monkeypatch.setattr(vgrid, "iteration_mean", lambda run, summary: (means[summary["variant"]], "slowest"))
    got = rp.explain(tmp_path / "spec.yaml", draw, tmp_path, rows)
    assert [g["name"] for g in got] == [draw.points[1].name]  # only the point beyond ±10 %
    assert got[0]["startup_over_d_ratio"] == 1.01 and got[0]["host_no_bucket_ratio"] == 1.2
    startup = asked[0][asked[0].index("--startup") + 1]
    assert float(startup) == pytest.approx(0.000972 / 8)
    assert "--host-cpu" in asked[1] and "run.dilation=8" in asked[1] and "--no-tbf-bucket" in asked[2]
    assert all(f"strategy.name={draw.points[1].strategy}" in c for c in asked)

    path = tmp_path / "explain.csv"
    path.write_text("index,name,strategy,dilation,ratio,startup_over_d_ratio,host_ratio,host_no_bucket_ratio,error\n"
                    f"2,{got[0]['name']},{got[0]['strategy']},8,1.5,1.01,0.97,1.2,\n")
    text = "\n".join(vdoc.explain_section(path))
    assert f"| 2 | `{got[0]['strategy']}` | 8 | 1.500 | **1.010** | **0.970** | 1.200 |" in text


def test_a_pinned_strategy_list_draws_the_same_points_whatever_joined_the_registry_since():
    names = [n for n in rp.strategies() if n != "wfbp"]  # as if wfbp had joined after the sample was drawn
    a = rp.draw_points(8, 1, names=names)
    assert a.points == rp.draw_points(8, 1, names=list(reversed(names))).points
    assert all(p.strategy != "wfbp" for p in a.points) and a.bounds["strategies"] == sorted(names)
    with pytest.raises(ValueError, match="local"):
        rp.draw_points(2, 1, names=["local", "ps"])
