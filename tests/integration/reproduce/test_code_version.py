"""Every point and verdict name the code they ran: ``git describe`` of a real repository, dirty or not."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from rich.console import Console

from synclab.reproduce.runner import run_target
from synclab.reproduce.schema import load_target

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


def test_every_point_and_the_verdict_name_the_code_they_ran(tmp_path):
    import subprocess

    from synclab.reproduce.runner import code_version

    assert code_version(tmp_path).startswith("synclab ")  # not a checkout: the package version
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "f").write_text("x")
    subprocess.run(["git", "-C", str(tmp_path), "add", "f"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "m"],
                   check=True)
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert code_version(tmp_path) == head
    (tmp_path / "f").write_text("y")
    assert code_version(tmp_path) == head + "-dirty"
    t = _target(tmp_path)
    v = run_target(t, tmp_path, tmp_path / "out", quick=True, run_point=FakeRunner(), console=Console(quiet=True))
    assert v["code"] == [head + "-dirty"]
    point = json.loads(next((tmp_path / "out" / "points").glob("*/record.json")).read_text())
    assert point["code"] == head + "-dirty"
