"""The sweep runner with a fake point runner: files written, done points kept on a second run,
verdicts judged from the points, and docs/results/reproduction.md generated from the verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from synclab.reproduce.doc import collect, gather, record_dir, render
from synclab.reproduce.runner import portable, read_points_csv, run_target
from synclab.reproduce.schema import load_target
from synclab.reproduce.verdict import NOT_RUN, PARTLY, REPRODUCED

TARGET = {
    "id": "fake-fig", "paper": "Paper", "figure": "Fig. 1", "title": "a toy", "compares": "x vs y",
    "setting": "none", "engine": "simulate", "spec": "nowhere.yaml",
    "quick": {"axes": {"cluster.workers": [2, 4], "strategy.name": ["a", "b"]}, "estimate_s": 1},
    "full": {"axes": {"cluster.workers": [2, 4, 8], "strategy.name": ["a", "b"]}, "estimate_s": 2},
    "plot": {"layout": "lines", "x": "cluster.workers", "y": "throughput", "series": "strategy.name",
             "paper_points": [{"series": "b", "x": 4, "y": 9.0, "source": "text"}]},
    "claims": [
        {"id": "b-over-a", "quote": "b is twice a", "source": "§1", "paper_value": 2.0, "kind": "ratio",
         "num": {"where": {"cluster.workers": 4, "strategy.name": "b"}, "metric": "throughput"},
         "den": {"where": {"cluster.workers": 4, "strategy.name": "a"}, "metric": "throughput"}},
        {"id": "a-at-4", "quote": "a does 5", "source": "§2", "paper_value": 5.0,
         "value": {"where": {"cluster.workers": 4, "strategy.name": "a"}, "metric": "throughput"},
         "judge": {"within": 0.1, "partly_factor": 2}},
        {"id": "a-at-8", "quote": "a does 9", "source": "§3", "paper_value": 9.0,
         "value": {"where": {"cluster.workers": 8, "strategy.name": "a"}, "metric": "throughput"}},
    ],
}


def _target(tmp_path: Path):
    d = tmp_path / "experiments" / "reproduce"
    d.mkdir(parents=True)
    path = d / "fake-fig.yaml"
    path.write_text(yaml.safe_dump(TARGET))
    return load_target(path)


class FakeRunner:
    def __init__(self):
        self.calls = []

    def __call__(self, target, root, point, run_dir, log):
        self.calls.append(point.id)
        w, s = point.values["cluster.workers"], point.values["strategy.name"]
        return {"metrics": {"throughput": float(w) * (2.0 if s == "b" else 1.0)}, "extra": {}}


def test_writes_files_and_judges(tmp_path):
    t, fake = _target(tmp_path), FakeRunner()
    out = tmp_path / "out"
    v = run_target(t, tmp_path, out, quick=True, run_point=fake, console=Console(quiet=True))
    assert len(fake.calls) == 4
    assert {p.name for p in out.iterdir()} >= {"points.csv", "fake-fig.png", "verdict.json", "points"}
    rows = read_points_csv(out / "points.csv")
    assert [r["throughput"] for r in rows] == ["2.0", "4.0", "4.0", "8.0"]
    by_id = {c["id"]: c for c in v["claims"]}
    assert by_id["b-over-a"]["verdict"] == REPRODUCED and by_id["b-over-a"]["synclab_value"] == 2.0
    assert by_id["a-at-4"]["verdict"] == PARTLY  # 4 vs 5: -20 %, within the factor 2
    assert by_id["a-at-8"]["verdict"] == NOT_RUN  # 8 workers are only in the full form
    assert v["verdict"] == PARTLY
    assert json.loads((out / "verdict.json").read_text())["form"] == "quick"


def test_a_limited_run_takes_the_first_points_and_leaves_the_rest_not_run(tmp_path):
    t, fake = _target(tmp_path), FakeRunner()
    v = run_target(t, tmp_path, tmp_path / "out", quick=True, run_point=fake, console=Console(quiet=True), limit=2)
    assert len(fake.calls) == 2 and v["points"] == 2
    assert len(read_points_csv(tmp_path / "out" / "points.csv")) == 2
    assert any(c["verdict"] == NOT_RUN for c in v["claims"])


def test_second_run_keeps_done_points(tmp_path):
    t = _target(tmp_path)
    out = tmp_path / "out"
    run_target(t, tmp_path, out, quick=True, run_point=FakeRunner(), console=Console(quiet=True))
    (out / "points" / "workers=4_name=b" / "record.json").unlink()  # as if interrupted before this point
    again = FakeRunner()
    v = run_target(t, tmp_path, out, quick=True, run_point=again, console=Console(quiet=True))
    assert again.calls == ["workers=4_name=b"]
    assert v["points_reused"] == 3 and len(read_points_csv(out / "points.csv")) == 4


def test_changed_overrides_rerun_the_point(tmp_path):
    t = _target(tmp_path)
    out = tmp_path / "out"
    run_target(t, tmp_path, out, quick=True, run_point=FakeRunner(), console=Console(quiet=True))
    again = FakeRunner()
    run_target(t, tmp_path, out, quick=True, extra=["run.iterations=9"], run_point=again, console=Console(quiet=True))
    assert len(again.calls) == 4


def test_a_point_done_in_another_checkout_is_kept(tmp_path):
    t = _target(tmp_path)
    out = tmp_path / "out"
    here = ["compute.profile=/work/main/profiles/gpu-h100/alexnet-b32-cuda.json"]
    run_target(t, tmp_path, out, quick=True, extra=here, run_point=FakeRunner(), console=Console(quiet=True))
    # The same profile in a worktree: the points are done; another profile is another point.
    there, again = ["compute.profile=/tmp/wt/profiles/gpu-h100/alexnet-b32-cuda.json"], FakeRunner()
    run_target(t, tmp_path, out, quick=True, extra=there, run_point=again, console=Console(quiet=True))
    assert again.calls == []
    other = ["compute.profile=/tmp/wt/profiles/gpu-h100/alexnet-b64-cuda.json"]
    run_target(t, tmp_path, out, quick=True, extra=other, run_point=again, console=Console(quiet=True))
    assert len(again.calls) == 4


def test_overrides_read_the_same_in_every_checkout():
    assert portable("compute.profile=/a/b/profiles/gpu-h100/x.json") == "compute.profile=profiles/gpu-h100/x.json"
    assert portable("compute.profile=/a/profiles/b/profiles/x.json") == "compute.profile=profiles/x.json"
    for o in ("compute.profile=profiles/x.json", "compute.profile=/opt/x.json", "run.iterations=9", "model.name"):
        assert portable(o) == o


def test_failed_point_is_reported_and_others_run(tmp_path):
    t = _target(tmp_path)

    def flaky(target, root, point, run_dir, log):
        if point.id == "workers=2_name=a":
            raise RuntimeError("boom")
        return FakeRunner()(target, root, point, run_dir, log)

    v = run_target(t, tmp_path, tmp_path / "out", quick=True, run_point=flaky, console=Console(quiet=True))
    assert v["verdict"] == "failed" and v["failures"] == ["workers=2_name=a: boom"]
    assert len(read_points_csv(tmp_path / "out" / "points.csv")) == 3


def test_doc_from_verdicts(tmp_path):
    t = _target(tmp_path)
    out = tmp_path / "out"
    run_target(t, tmp_path, out, quick=True, run_point=FakeRunner(), console=Console(quiet=True))
    doc = tmp_path / "docs" / "results" / "reproduction.md"
    text = render(collect([out, tmp_path / "missing"]), doc, missing=["other-target"])
    assert doc.read_text() == text
    assert "Quick-form results" in text
    assert "| [`fake-fig`]" in text and "| quick | 1 / 1 / 0 / 0 / 1 | — | **partly** |" in text
    assert "| b-over-a: “b is twice a” | §1 | 2 | 2 | **reproduced** |" in text
    assert "`other-target`" in text
    assert "![fake-fig](../../out/fake-fig.png)" in text  # linked where it is, relative to the page


def _rewrite(out: Path, **changes) -> None:
    v = json.loads((out / "verdict.json").read_text())
    (out / "verdict.json").write_text(json.dumps({**v, **changes}))


def test_doc_record_is_checked_in_and_survives_the_runs(tmp_path):
    """--doc archives a run into docs/reproduction/<target>-<form>/ and builds the doc (docs/results/) from there,
    so a clone
    without runs/ (a fresh machine) regenerates the same doc; a newer complete run replaces the record, a
    smoke run (--points, --max-dilation) never does, and a full form beats a quick one."""
    t = _target(tmp_path)
    doc, records = tmp_path / "docs" / "results" / "reproduction.md", tmp_path / "docs" / "reproduction"
    quick, full = tmp_path / "runs" / "q", tmp_path / "runs" / "f"
    run_target(t, tmp_path, quick, quick=True, run_point=FakeRunner(), console=Console(quiet=True))
    _rewrite(quick, written="2026-01-01 00:00:00")
    runs = {"full": full, "quick": quick}
    d = gather("fake-fig", runs, records)
    assert d == record_dir(records, "fake-fig", "quick") and d.is_relative_to(tmp_path / "docs" / "reproduction")
    assert {p.name for p in d.iterdir()} == {"verdict.json", "points.csv", "fake-fig.png"}
    text = render(collect([d]), doc)
    assert "![fake-fig](../reproduction/fake-fig-quick/fake-fig.png)" in text

    import shutil
    shutil.rmtree(tmp_path / "runs")  # a fresh clone: the record alone
    assert gather("fake-fig", runs, records) == d and render(collect([d]), doc) == text

    run_target(t, tmp_path, quick, quick=True, run_point=FakeRunner(), console=Console(quiet=True),
               limit=1)  # a newer smoke run
    assert gather("fake-fig", runs, records) == d
    assert json.loads((d / "verdict.json").read_text())["written"] == "2026-01-01 00:00:00"
    _rewrite(quick, limit=None, points=4)  # the same run, complete and newer
    assert gather("fake-fig", runs, records) == d
    assert json.loads((d / "verdict.json").read_text())["written"] > "2026-01-01 00:00:00"

    run_target(t, tmp_path, full, quick=False, run_point=FakeRunner(), console=Console(quiet=True))
    assert gather("fake-fig", runs, records) == record_dir(records, "fake-fig", "full")
    assert gather("other", {"full": tmp_path / "x", "quick": tmp_path / "y"}, records) is None


def test_label_axis_passes_only_its_when_overrides(tmp_path):
    from synclab.reproduce.points import expand

    data = json.loads(json.dumps(TARGET))
    data["quick"]["axes"] = {"delay_steps": [5, 0]}
    data["when"] = [{"where": {"delay_steps": 5}, "set": ["strategy.name=ssdsgd", "strategy.k=5"]},
                    {"where": {"delay_steps": 0}, "set": ["strategy.name=ps"]}]
    d = tmp_path / "experiments" / "reproduce"
    d.mkdir(parents=True)
    (d / "fake-fig.yaml").write_text(yaml.safe_dump(data))
    points = expand(load_target(d / "fake-fig.yaml"), tmp_path, True, None)
    assert [p.values for p in points] == [{"delay_steps": 5}, {"delay_steps": 0}]
    assert points[0].overrides == ["strategy.name=ssdsgd", "strategy.k=5"]
    assert points[1].overrides == ["strategy.name=ps"]
    assert points[0].id == "delay_steps=5"


def test_an_emulated_point_keeps_its_records_but_not_the_final_parameters(tmp_path, monkeypatch):
    import subprocess
    import types

    from synclab.reproduce import points as points_mod

    def fake_run(cmd, **kw):  # what `synclab run` leaves in --out
        out = Path(cmd[cmd.index("--out") + 1])
        (out / "summary.json").write_text(json.dumps({"iteration_seconds": {"mean": 0.5}, "workers": 2,
                                                      "compute_seconds_mean": 0.1}))
        (out / "params.pt").write_bytes(b"\0" * 1024)
        return types.SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    target = types.SimpleNamespace(spec="examples/quickstart.yaml", paper="P3")
    point = points_mod.Point(0, {"strategy.name": "ps"}, ["strategy.name=ps"], engine="emulate")
    result = points_mod.run_emulated(target, tmp_path, point, tmp_path, print)
    assert result["metrics"]["iteration_s"] == 0.5
    assert (tmp_path / "summary.json").exists() and not (tmp_path / "params.pt").exists()


def _emulated_target(tmp_path: Path):
    """The toy target with emulated points (no dilation rule: no spec is loaded)."""
    d = tmp_path / "experiments" / "reproduce"
    d.mkdir(parents=True)
    path = d / "fake-fig.yaml"
    path.write_text(yaml.safe_dump({**TARGET, "engine": "emulate", "dilation": "none"}))
    return load_target(path)


class DriftingRunner(FakeRunner):
    """Each call of a point measures b's throughput differently: 1.6x, 2.4x, 2.0x a's (so b-over-a is 2.0 on
    the mean, 'not' within ±10 % in two of the three repeats alone)."""

    def __call__(self, target, root, point, run_dir, log):
        self.calls.append(point.id)
        w, s = point.values["cluster.workers"], point.values["strategy.name"]
        k = self.calls.count(point.id)
        return {"metrics": {"throughput": float(w) * ((1.6, 2.4, 2.0)[k - 1] if s == "b" else 1.0)}, "extra": {}}


def test_repeated_points_are_averaged_and_every_claim_judged_per_repeat(tmp_path):
    t, fake = _emulated_target(tmp_path), DriftingRunner()
    t.claims[0].judge.within = 0.1
    out = tmp_path / "out"
    v = run_target(t, tmp_path, out, quick=True, run_point=fake, console=Console(quiet=True), repeats=3)
    assert len(fake.calls) == 12 and v["repeats"] == 3
    assert (out / "points" / "workers=4_name=b.r3" / "record.json").exists()
    rows = {r["point"]: r for r in read_points_csv(out / "points.csv")}
    assert float(rows["workers=4_name=b"]["throughput"]) == pytest.approx(8.0)  # mean of 6.4, 9.6, 8.0
    assert rows["workers=4_name=b"]["repeats"] == "3"
    assert len(read_points_csv(out / "repeats.csv")) == 12
    claim = {c["id"]: c for c in v["claims"]}["b-over-a"]
    assert claim["verdict"] == REPRODUCED and claim["synclab_value"] == pytest.approx(2.0)
    assert claim["repeats"]["values"] == pytest.approx([1.6, 2.4, 2.0])
    # the repeats' spread (2.4 - 1.6) / 2.0 is the claim's noise margin, so each repeat's gain (0.6, 1.4, 1.0)
    # is within it of the paper's 1.0: every repeat agrees
    assert claim["margin"] == pytest.approx(0.4)
    assert claim["repeats"]["agree"] == 3 and "3 of 3 give this verdict alone" in claim["why"]
    doc = tmp_path / "docs" / "results" / "reproduction.md"
    text = render(collect([out]), doc)
    assert "| 2 (1.6–2.4) | **reproduced** (3/3 repeats) |" in text


def test_repeats_measured_before_are_kept_and_counted(tmp_path):
    t = _emulated_target(tmp_path)
    out = tmp_path / "out"
    run_target(t, tmp_path, out, quick=True, run_point=DriftingRunner(), console=Console(quiet=True), repeats=2)
    again = DriftingRunner()
    v = run_target(t, tmp_path, out, quick=True, run_point=again, console=Console(quiet=True))
    assert again.calls == [] and v["repeats"] == 2 and v["points_reused"] == 4
    more = DriftingRunner()
    v = run_target(t, tmp_path, out, quick=True, run_point=more, console=Console(quiet=True), repeats=3)
    assert sorted(more.calls) == sorted(["workers=2_name=a", "workers=2_name=b", "workers=4_name=a",
                                         "workers=4_name=b"]) and v["repeats"] == 3


def test_a_claim_whose_points_ran_once_gets_no_repeats_beside_repeated_ones(tmp_path):
    t, fake = _emulated_target(tmp_path), DriftingRunner()
    out = tmp_path / "out"
    run_target(t, tmp_path, out, quick=False, run_point=fake, console=Console(quiet=True))
    # The first four points (2 and 4 workers) again; the 8-worker ones stay at one run.
    run_target(t, tmp_path, out, quick=False, run_point=fake, console=Console(quiet=True), limit=4, repeats=2)
    v = run_target(t, tmp_path, out, quick=False, run_point=fake, console=Console(quiet=True))
    assert len(fake.calls) == 6 + 4
    by_id = {c["id"]: c for c in v["claims"]}
    assert v["repeats"] == 2 and by_id["b-over-a"]["repeats"]["values"] == pytest.approx([1.6, 2.4])
    assert by_id["a-at-8"]["synclab_value"] == pytest.approx(8.0)
    assert "repeats" not in by_id["a-at-8"] and "repeats" not in by_id["a-at-8"]["why"]


def test_simulated_points_run_once_whatever_the_repeats(tmp_path):
    t, fake = _target(tmp_path), FakeRunner()
    v = run_target(t, tmp_path, tmp_path / "out", quick=True, run_point=fake, console=Console(quiet=True), repeats=3)
    assert len(fake.calls) == 4 and v["repeats"] == 1
    assert not (tmp_path / "out" / "repeats.csv").exists()
    assert "repeats" not in read_points_csv(tmp_path / "out" / "points.csv")[0]


def test_every_point_keeps_the_host_load_it_ended_with(tmp_path):
    t = _emulated_target(tmp_path)
    out = tmp_path / "out"
    run_target(t, tmp_path, out, quick=True, run_point=DriftingRunner(), console=Console(quiet=True), repeats=2)
    records = [json.loads(p.read_text()) for p in (out / "points").glob("*/record.json")]
    assert len(records) == 8 and all(isinstance(r["host_load"], float) and r["host_load"] >= 0 for r in records)
    rows = read_points_csv(out / "points.csv")
    assert all(float(r["host_load"]) >= 0 for r in rows)
    doc = tmp_path / "docs" / "results" / "reproduction.md"
    assert "| host s | load |" in render(collect([out]), doc)
    for p in (out / "points").glob("*/record.json"):  # records from before the load was kept: no column
        r = json.loads(p.read_text())
        r.pop("host_load")
        p.write_text(json.dumps(r))
    run_target(t, tmp_path, out, quick=True, run_point=DriftingRunner(), console=Console(quiet=True))
    assert "host_load" not in read_points_csv(out / "points.csv")[0]
    assert "| host s |" in render(collect([out]), doc) and "| load |" not in render(collect([out]), doc)


class BusyHostRunner(DriftingRunner):
    """As an emulated point's runner reports it: how busy the host's cores were, 0.5 then 0.9 on a repeat."""

    def __call__(self, target, root, point, run_dir, log):
        result = super().__call__(target, root, point, run_dir, log)
        return {**result, "host_busy": (0.5, 0.9)[self.calls.count(point.id) - 1]}


def test_every_point_keeps_how_busy_the_host_was_at_its_worst_repeat(tmp_path):
    t = _emulated_target(tmp_path)
    out = tmp_path / "out"
    run_target(t, tmp_path, out, quick=True, run_point=BusyHostRunner(), console=Console(quiet=True), repeats=2)
    rows = read_points_csv(out / "points.csv")
    assert len(rows) == 4 and all(float(r["host_busy"]) == 0.9 for r in rows)
    doc = tmp_path / "docs" / "results" / "reproduction.md"
    text = render(collect([out]), doc)
    assert "| host s | load | busy |" in text and "| 90% |" in text
    assert "busy: the share of the host's cores busy over an emulated point's measured iterations" in text


def test_calibration_checks_are_judged_apart_and_not_counted(tmp_path):
    data = json.loads(json.dumps(TARGET))
    data["claims"][1]["role"] = "calibration"  # a-at-4: 4 vs 5, partly
    d = tmp_path / "experiments" / "reproduce"
    d.mkdir(parents=True)
    (d / "fake-fig.yaml").write_text(yaml.safe_dump(data))
    t = load_target(d / "fake-fig.yaml")
    out = tmp_path / "out"
    v = run_target(t, tmp_path, out, quick=True, run_point=FakeRunner(), console=Console(quiet=True))
    assert [c["id"] for c in v["claims"]] == ["b-over-a", "a-at-8"]
    assert [c["id"] for c in v["calibration_checks"]] == ["a-at-4"]
    assert v["calibration_checks"][0]["verdict"] == PARTLY
    assert v["verdict"] == REPRODUCED  # the partly check does not hold the target at partly
    doc = tmp_path / "docs" / "results" / "reproduction.md"
    text = render(collect([out]), doc)
    assert "| quick | 1 / 0 / 0 / 0 / 1 | 0 / 1 / 0 / 0 / 0 | **reproduced** |" in text
    assert "Calibration checks" in text and "| check | source |" in text


def test_a_target_of_calibration_checks_only_says_so():
    from synclab.reproduce.verdict import verdict_of

    assert verdict_of([], [{"verdict": PARTLY}]) == "calibration: partly"
    assert verdict_of([{"verdict": REPRODUCED}], [{"verdict": "not"}]) == REPRODUCED
