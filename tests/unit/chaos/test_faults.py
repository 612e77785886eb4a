"""Parsing --fault, naming the node a role means in a job, and the cell verdict's rules."""

import json

import pytest

from synclab.chaos.cell import names_the_fault, verdict
from synclab.chaos.faults import Fault, FaultError, parse_fault, resolve_node


@pytest.mark.parametrize("text, fault", [
    ("kill:ps", Fault("kill", "ps")),
    ("kill:worker0", Fault("kill", "worker0")),
    ("drop:worker:3", Fault("drop", "worker", 3.0)),
    ("flap:ps", Fault("flap", "ps", 1.0, 3)),
    ("flap:ps:0.5:2", Fault("flap", "ps", 0.5, 2)),
    ("disk-full", Fault("disk-full", seconds=5.0)),
    ("disk-full:2", Fault("disk-full", seconds=2.0)),
])
def test_parse(text, fault):
    assert parse_fault(text) == fault


@pytest.mark.parametrize("text", ["kill", "kill:", "drop:worker", "drop:worker:x", "drop:worker:0", "flap:ps:0",
                                  "disk-full:-1", "reboot:ps", "flap:ps:1:0"])
def test_bad_faults_are_refused_with_the_forms(text):
    with pytest.raises(FaultError, match="--fault"):
        parse_fault(text)


def test_labels_round_trip():
    for text in ("kill:fc", "drop:ps:2", "flap:worker", "flap:worker:12:1", "disk-full"):
        assert parse_fault(text).label == text


def test_roles_resolve_per_job(tmp_path):
    nodes = ["coordinator", "worker0", "worker1", "worker2"]
    assert resolve_node("ps", nodes, tmp_path) is None
    assert resolve_node("fc", nodes, tmp_path) is None
    assert resolve_node("worker", nodes, tmp_path) == "worker2"
    (tmp_path / "plan.json").write_text(json.dumps({"roles": {"worker0": "conv", "worker1": "conv",
                                                              "worker2": "fc"}}))
    assert resolve_node("fc", nodes, tmp_path) == "worker2"
    assert resolve_node("worker", nodes, tmp_path) == "worker1"
    assert resolve_node("ps", [*nodes, "ps0"], tmp_path) == "ps0"
    assert resolve_node("worker7", nodes, tmp_path) is None


def _record(**kw):
    base = {"fault": "kill:ps", "node": "ps0", "not_applicable": False, "hung": False, "status": "failed",
            "reason": "ps0 exited with code -9", "restarts": [], "left_behind": {"processes": [], "netns": []},
            "injection_error": "", "fault_started": 100.0, "fault_ended": 100.0, "end_after_fault_s": 8.0,
            "heartbeat_timeout_s": 5.0}
    return {**base, **kw}


def _status(run_dir, status="failed"):
    (run_dir / "status.json").write_text(json.dumps({"status": status, "reason": "ps0 exited with code -9"}))


def test_a_named_failure_in_time_is_clean(tmp_path):
    _status(tmp_path)
    assert verdict(_record(), tmp_path, tmp_path) == "failed-clean"


def test_a_failure_without_status_json_is_a_violation(tmp_path):
    assert "status.json says 'missing or unreadable'" in verdict(_record(), tmp_path, tmp_path)
    (tmp_path / "status.json").write_text("")
    assert "status.json says 'missing or unreadable'" in verdict(_record(), tmp_path, tmp_path)


def test_a_failure_naming_someone_else_is_a_violation(tmp_path):
    _status(tmp_path)
    assert verdict(_record(reason="worker1 exited with code 1"), tmp_path, tmp_path).startswith("VIOLATION")


def test_a_late_failure_is_a_violation(tmp_path):
    _status(tmp_path)
    assert "beyond the heartbeat" in verdict(_record(end_after_fault_s=60.0), tmp_path, tmp_path)


def test_leftovers_and_hangs_are_violations(tmp_path):
    assert "left behind" in verdict(_record(left_behind={"processes": [123], "netns": []}), tmp_path, tmp_path)
    assert "hung" in verdict(_record(hung=True), tmp_path, tmp_path)


def test_disk_full_is_named_by_the_errno():
    assert names_the_fault(_record(fault="disk-full", node="disk", reason="OSError: [Errno 28] No space left"))
    assert not names_the_fault(_record(fault="disk-full", node="disk", reason="worker0 exited with code 1"))


def test_a_flap_with_its_own_period_or_times_has_its_own_label():
    assert parse_fault("flap:worker:1:3").label == "flap:worker"  # the defaults written out
    assert parse_fault("flap:worker:12:1").label != parse_fault("flap:worker:12:2").label != "flap:worker"
