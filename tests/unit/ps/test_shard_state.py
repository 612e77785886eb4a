"""A shard's checkpoint state: a round trip continues exactly as the original would; in-flight state refused."""

import pytest
import torch

from unit.ps.test_shard import make_shard, push


def _step(s, it):
    push(s, "w", "worker0", it, torch.full((4,), float(it)))
    push(s, "w", "worker1", it, torch.full((4,), 2.0 * it))
    push(s, "b", "worker0", it, torch.full((2,), 0.5))
    push(s, "b", "worker1", it, torch.full((2,), 1.5))


def test_restored_shard_continues_like_the_original():
    a, _ = make_shard()
    for it in (1, 2):
        _step(a, it)
    state = a.state_dict()
    b, _ = make_shard()
    b.load_state_dict(state)
    assert b.initialized.is_set() and b.version("w") == 2
    for s in (a, b):
        _step(s, 3)
    for key in ("w", "b"):
        assert torch.equal(a.value(key), b.value(key)) and b.version(key) == 3


def test_state_with_a_half_aggregated_round_is_refused():
    s, _ = make_shard()
    push(s, "w", "worker0", 1, torch.ones(4))
    with pytest.raises(RuntimeError, match="in flight"):
        s.state_dict()


def test_state_of_other_partitions_is_refused():
    s, _ = make_shard()
    state = s.state_dict()
    state.pop(("b", 0))
    fresh, _ = make_shard()
    with pytest.raises(ValueError, match="other partitions"):
        fresh.load_state_dict(state)
