"""Checkpoint files: atomic, committed only when complete, pruned to the newest two; the spec's rules."""

import pytest
import torch

from synclab.config import Spec
from synclab.roles import checkpoint


def test_save_load_round_trip_and_identity_check(tmp_path):
    checkpoint.save(tmp_path, 5, "worker0", {"tensors": [torch.arange(3.0)]})
    state = checkpoint.load(tmp_path, 5, "worker0")
    assert torch.equal(state["tensors"][0], torch.arange(3.0))
    (checkpoint.directory(tmp_path, 5) / "worker1.pt").write_bytes(
        (checkpoint.directory(tmp_path, 5) / "worker0.pt").read_bytes())
    with pytest.raises(ValueError, match="not 'worker1'"):
        checkpoint.load(tmp_path, 5, "worker1")
    with pytest.raises(FileNotFoundError, match="ps0"):
        checkpoint.load(tmp_path, 5, "ps0")
    assert not list(checkpoint.directory(tmp_path, 5).glob(".*.tmp"))


def test_commit_needs_every_node_and_keeps_the_newest_two(tmp_path):
    assert checkpoint.latest(tmp_path) == 0
    for n in (5, 10, 15):
        checkpoint.save(tmp_path, n, "worker0", {})
        with pytest.raises(FileNotFoundError, match="ps0"):
            checkpoint.commit(tmp_path, n, ["worker0", "ps0"])
        checkpoint.save(tmp_path, n, "ps0", {})
        checkpoint.commit(tmp_path, n, ["worker0", "ps0"])
        assert checkpoint.latest(tmp_path) == n
    assert sorted(p.name for p in (tmp_path / "checkpoint").iterdir() if p.is_dir()) == ["00000010", "00000015"]


def test_barrier_names():
    assert checkpoint.iteration_of_barrier(checkpoint.barrier_name(40)) == 40
    assert checkpoint.iteration_of_barrier("start") is None
    assert checkpoint.iteration_of_barrier("checkpoint-x") is None


def _spec(**run):
    return Spec.model_validate({"strategy": {"name": run.pop("strategy", "ps")}, "cluster": {"ps_shards": 1},
                                "run": {"iterations": 20, **run}})


def test_checkpoint_iterations_after_a_resume():
    assert _spec(checkpoint_every=5).run.checkpoints() == [5, 10, 15]
    assert _spec(checkpoint_every=5, resume_from=10).run.checkpoints() == [15]
    assert _spec().run.checkpoints() == []


@pytest.mark.parametrize("run, words", [
    ({"checkpoint_every": 5, "resume_from": 7}, "must be a checkpoint"),
    ({"resume_from": 5}, "must be a checkpoint"),
    ({"checkpoint_every": 5, "resume_from": 20}, "must be a checkpoint"),
    ({"checkpoint_every": 5, "strategy": "ssdsgd"}, "cannot checkpoint"),
    ({"restart": "always"}, "restart"),
])
def test_bad_checkpoint_settings_are_named(run, words):
    with pytest.raises(Exception, match=words):
        _spec(**run)
