"""status.json is written in every case, also when tearing the cluster down raises."""

import json
import subprocess
import sys
from dataclasses import dataclass

import pytest

from synclab.roles.launcher import supervise


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    log_path: str = "-"


class Cluster:
    def __init__(self, run_dir, teardown_error=None):
        self.run_dir = run_dir
        self.children = [Child("coordinator", subprocess.Popen([sys.executable, "-c", "pass"]))]
        self.children[0].proc.wait()
        self.teardown_error = teardown_error

    def status(self):
        return None

    def stop_job(self, reason):
        pass

    def terminate(self):
        if self.teardown_error is not None:
            raise self.teardown_error

    def exit_codes(self):
        return {c.name: c.proc.poll() for c in self.children}


def test_status_json_is_written_when_teardown_raises(tmp_path):
    cluster = Cluster(tmp_path, RuntimeError("ip netns del: device busy"))
    with pytest.raises(RuntimeError, match="device busy"):
        supervise(cluster, poll_s=0.01)
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["status"] == "ok" and status["exit_codes"] == {"coordinator": 0}
    assert status["teardown_error"] == "RuntimeError: ip netns del: device busy"


def test_status_json_without_teardown_trouble(tmp_path):
    assert supervise(Cluster(tmp_path), poll_s=0.01)["status"] == "ok"
    assert "teardown_error" not in json.loads((tmp_path / "status.json").read_text())
