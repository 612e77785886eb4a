"""Re-judging a checked-in record from its points.csv with this checkout's judge, without running anything."""

import json
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from synclab.reproduce.doc import collect, render
from synclab.reproduce.rejudge import records_from_csv, rejudge
from synclab.reproduce.runner import run_target
from synclab.reproduce.schema import load_target

TARGET = {
    "id": "fake-gain", "paper": "P", "figure": "Fig. 1", "title": "t", "compares": "c", "setting": "s",
    "engine": "simulate", "spec": "nowhere.yaml",
    "quick": {"axes": {"cluster.workers": [4], "strategy.name": ["a", "b"]}, "estimate_s": 1},
    "full": {"axes": {"cluster.workers": [4], "strategy.name": ["a", "b"]}, "estimate_s": 1},
    "plot": {"layout": "lines", "x": "cluster.workers", "y": "throughput", "series": "strategy.name"},
    "claims": [
        {"id": "b-gain", "quote": "b is 61 % faster", "source": "§1", "paper_value": 1.61, "kind": "ratio",
         "num": {"where": {"strategy.name": "b"}, "metric": "throughput"},
         "den": {"where": {"strategy.name": "a"}, "metric": "throughput"},
         "judge": {"within": 0.1, "same_side_of_one": True}},
        {"id": "a-value", "quote": "a does 4", "source": "§2", "paper_value": 4.0,
         "value": {"where": {"strategy.name": "a"}, "metric": "throughput"}},
    ],
}


def _target(tmp_path: Path, data=TARGET):
    d = tmp_path / "targets"
    d.mkdir(exist_ok=True)
    (d / "fake-gain.yaml").write_text(yaml.safe_dump(data))
    return load_target(d / "fake-gain.yaml")


def _runner(target, root, point, run_dir, log):
    return {"metrics": {"throughput": 4.16 if point.values["strategy.name"] == "b" else 4.0}, "extra": {}}


def test_records_come_back_from_the_csv(tmp_path):
    out = tmp_path / "rec"
    run_target(_target(tmp_path), tmp_path, out, quick=False, run_point=_runner, console=Console(quiet=True))
    recs = records_from_csv(out, ["cluster.workers", "strategy.name"])
    assert [r["values"]["strategy.name"] for r in recs] == ["a", "b"]
    assert float(recs[1]["metrics"]["throughput"]) == pytest.approx(4.16) and "host_seconds" not in recs[1]["metrics"]


def test_a_rejudge_rewrites_the_verdict_and_keeps_what_changed(tmp_path):
    out = tmp_path / "rec"
    run_target(_target(tmp_path), tmp_path, out, quick=False, run_point=_runner, console=Console(quiet=True))
    # as an older, more generous judge left it: the 4 % gain called partly
    v = json.loads((out / "verdict.json").read_text())
    v["claims"][0]["verdict"], v["verdict"] = "partly", "partly"
    (out / "verdict.json").write_text(json.dumps(v))
    data = json.loads(json.dumps(TARGET))
    data["claims"][1]["role"] = "calibration"
    new = rejudge(_target(tmp_path, data), out)
    assert new["claims"][0]["verdict"] == "not"            # 4 % is under a third of 61 %
    assert [c["id"] for c in new["calibration_checks"]] == ["a-value"]
    assert new["verdict"] == "not" and json.loads((out / "verdict.json").read_text())["verdict"] == "not"
    r = new["rejudged"]
    assert r["verdict_before"] == "partly" and r["counts_before"]["claims"]["partly"] == 1
    moved = {c["id"]: c for c in r["changes"]}
    assert moved["b-gain"]["before"] == "partly" and moved["b-gain"]["after"] == "not"
    assert "under a third" in moved["b-gain"]["why"]
    assert moved["a-value"]["role"] == "calibration" and "calibration check" in moved["a-value"]["why"]
    # a second re-judge that moves nothing keeps the record of the first
    again = rejudge(_target(tmp_path, data), out)
    assert again["rejudged"] == r
    doc = tmp_path / "docs" / "results" / "reproduction.md"
    text = render(collect([out]), doc)
    assert "**What changed at the re-judge**" in text and "| `b-gain` | partly | **not** |" in text
    assert "before the last re-judge **1 / 1 / 0 / 0 / 0** of 2; now **0 / 0 / 1 / 0 / 0** of 1" in text


def test_a_record_of_another_target_is_refused(tmp_path):
    out = tmp_path / "rec"
    run_target(_target(tmp_path), tmp_path, out, quick=False, run_point=_runner, console=Console(quiet=True))
    other = json.loads(json.dumps(TARGET))
    other["id"] = "other"
    d = tmp_path / "o"
    d.mkdir()
    (d / "other.yaml").write_text(yaml.safe_dump(other))
    with pytest.raises(ValueError, match="not 'other'"):
        rejudge(load_target(d / "other.yaml"), out)


def test_the_cli_rejudges_a_checked_in_record_and_writes_the_doc(tmp_path, monkeypatch):
    import shutil

    from typer.testing import CliRunner

    from synclab.cli import app

    repo = Path(__file__).resolve().parents[3]
    (tmp_path / "pyproject.toml").write_text("")
    shutil.copytree(repo / "docs" / "reproduction" / "mgwfbp-fig4-full", tmp_path / "docs" / "reproduction" /
                    "mgwfbp-fig4-full")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["reproduce", "mgwfbp-fig4", "--rejudge"])
    assert r.exit_code == 0, r.output
    v = json.loads((tmp_path / "docs" / "reproduction" / "mgwfbp-fig4-full" / "verdict.json").read_text())
    assert {c["id"] for c in v["calibration_checks"]} == {"b-10gbit-vs-cluster2", "ring-b-1gbit", "ring-b-10gbit"}
    a = {c["id"]: c for c in v["claims"]}["a-10gbit-vs-cluster2"]
    assert a["paper_value_compared"] == pytest.approx(9.08e-4 * 3 / 15)  # Table 2's ring a at N = 4
    assert "mgwfbp-fig4" in (tmp_path / "docs" / "results" / "reproduction.md").read_text()
    assert CliRunner().invoke(app, ["reproduce", "nope", "--rejudge"]).exit_code == 2
    assert CliRunner().invoke(app, ["reproduce", "p3-fig12-resnet50", "--rejudge"]).exit_code == 2  # no record

