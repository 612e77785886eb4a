"""Every point and verdict name the code they ran: ``git describe`` of a real repository, dirty or not."""

from __future__ import annotations

import json

from rich.console import Console

from synclab.reproduce.runner import run_target
from unit.reproduce.test_runner import FakeRunner, _target  # the runner's fake target and point runner


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
