"""The collector's passes a node records and the coordinator folds into the summary."""

from __future__ import annotations

import gc
import json

from synclab.metrics.gcpause import GcPauses, merge


def test_a_forced_full_collection_is_counted_and_timed_until_removed():
    pauses = GcPauses().install()
    try:
        gc.collect()
    finally:
        pauses.remove()
    got = pauses.as_dict()
    assert got["collections"][2] >= 1 and got["seconds"][2] > 0
    gc.collect()  # after remove: not counted
    assert pauses.as_dict() == got


def test_the_nodes_files_become_one_summary_field_and_are_removed(tmp_path):
    (tmp_path / "gc-worker0.json").write_text(json.dumps({"collections": [3, 1, 0], "seconds": [0.001, 0.002, 0.0]}))
    (tmp_path / "gc-ps0.json").write_text(json.dumps({"collections": [1, 0, 1], "seconds": [0.0005, 0.0, 0.05]}))
    got = merge(tmp_path)
    assert got == {"collections": [4, 1, 1], "seconds": [0.0015, 0.002, 0.05], "nodes": 2, "most_node": "ps0",
                   "most_node_seconds": 0.0505}
    assert not list(tmp_path.glob("gc-*.json"))
    assert merge(tmp_path) is None  # no node wrote one: no field
