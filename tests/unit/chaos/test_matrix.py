"""The matrix YAML (the packaged one and bad ones), cell selection, and the page rendered from records."""

import json

import pytest

from synclab.chaos.doc import RECORDS, page_text, write_records
from synclab.chaos.faults import Fault
from synclab.chaos.matrix import MatrixError, load_matrix, selected


def test_the_packaged_matrix_has_every_family_and_fault_kind():
    m = load_matrix()
    assert set(m.families) == {"ring", "PS", "Stanza", "SSD-SGD"}
    assert {f.kind for f in m.faults} == {"kill", "drop", "flap", "disk-full"}
    assert {f.target for f in m.faults if f.kind == "kill"} == {"coordinator", "ps", "worker", "fc"}
    assert {f.target for f in m.faults if f.kind == "drop"} == {"coordinator", "ps", "worker"}
    assert len({f.label for f in m.faults}) == len(m.faults)  # one record name per fault
    for settings in m.families.values():  # the strategy of a family is data, in its settings
        assert sum(s.startswith("strategy.name=") for s in settings) == 1


@pytest.mark.parametrize("text, match", [("families: {}\n", "families"), ("- a\n", "families"),
                                         ("families: {a: {settings: 3}}\nfaults: [kill:ps]\n", "settings"),
                                         ("families: {a: {settings: []}}\nfaults: [boom]\n", "--fault"),
                                         ("families: {a: {settings: []}}\n", "no faults")])
def test_bad_matrices_name_the_file_and_the_problem(tmp_path, text, match):
    p = tmp_path / "m.yaml"
    p.write_text(text)
    with pytest.raises(MatrixError, match=match) as e:
        load_matrix(p)
    assert str(p) in str(e.value)


def test_a_binary_matrix_is_refused(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(MatrixError, match="cannot read"):
        load_matrix(p)


def test_given_faults_replace_the_matrix_faults():
    assert load_matrix(extra_faults=[Fault("kill", "ps")]).faults == [Fault("kill", "ps")]


def test_only_selects_by_family_fault_or_both():
    f = Fault("kill", "ps")
    assert selected("PS", f, [])
    assert selected("PS", f, ["PS"]) and selected("PS", f, ["kill:ps"]) and selected("PS", f, ["PS/kill:ps"])
    assert not selected("ring", f, ["PS/kill:ps"]) and not selected("PS", f, ["kill:worker"])


def _rec(family, fault, outcome, **kw):
    return {"family": family, "fault": fault, "strategy": family.lower(), "outcome": outcome, "status": "ok",
            "reason": "", "node": "ps0", "restarts": [{"reason": "ps0 exited with code -9: 2026-01-01 10:00:00,123 "
                                                       "INFO x (log: /tmp/a/ps0.log)", "resumed_from": 10, "at": 1.0}],
            "restart_after_fault_s": 2.5, "end_after_fault_s": 12.0, **kw}


def test_records_and_page(tmp_path):
    written = write_records([_rec("PS", "kill:ps", "recovered"), _rec("ring", "kill:ps", "n/a")], tmp_path)
    assert [p.name for p in written] == ["PS--kill-ps.json", "ring--kill-ps.json", "fault-matrix.md"]
    kept = json.loads((tmp_path / RECORDS / "PS--kill-ps.json").read_text())
    assert kept["restarts"] == [{"reason": "ps0 exited with code -9: INFO x", "resumed_from": 10}]
    text = page_text(tmp_path)
    assert "| fault | ring (`ring`) | PS (`ps`) |" in text  # the packaged matrix's order
    assert "| `kill:ps` | n/a | recovered: restart 2.5 s, done 12 s |" in text
    assert (tmp_path / "docs/results/fault-matrix.md").read_text() == text


def test_a_violation_stands_out(tmp_path):
    write_records([_rec("PS", "kill:ps", "VIOLATION: hung")], tmp_path)
    assert "**VIOLATION: hung**" in page_text(tmp_path)


@pytest.mark.parametrize("fault", ["kill:ps", "drop:ps:3", "flap:ps"])
def test_a_fault_on_a_shard_is_na_without_a_run_for_a_family_with_none(tmp_path, fault):
    from synclab.chaos.faults import parse_fault
    from synclab.chaos.matrix import _cell

    m = load_matrix()
    record = _cell(m, "ring", [*m.settings, *m.families["ring"]], parse_fault(fault), tmp_path, [], 10.0)
    assert record["outcome"] == "n/a" and not any(tmp_path.iterdir())
