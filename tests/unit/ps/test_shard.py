import pytest
import torch

from synclab.plans.sharding import Partition, kvstore_partitions
from synclab.ps.optimizer import sgd_momentum_
from synclab.ps.shard import PushRejected, Shard
from synclab.wire import pb
from synclab.wire.frames import MessageId, Received


def make_shard(mode="notify-pull"):
    sent = []
    parts = [Partition("w", 0, 0, 4, 0), Partition("b", 0, 0, 2, 0), Partition("other", 0, 0, 3, 1)]
    s = Shard(0, parts, ["worker0", "worker1"], lr=0.1, momentum=0.9, weight_decay=0.01,
              send=lambda w, m: sent.append((w, m)), mode=mode)
    for key, n in (("w", 4), ("b", 2)):
        s.handle(Received(MessageId(pb.PARAMS, key, 0, 0), "worker0", 0, torch.ones(n)))
    return s, sent


def push(s, key, sender, it, tensor):
    s.handle(Received(MessageId(pb.GRADIENT, key, 0, it), sender, 0, tensor))


def test_aggregates_all_workers_then_updates_and_notifies():
    s, sent = make_shard()
    assert s.initialized.is_set()
    push(s, "w", "worker0", 1, torch.full((4,), 1.0))
    assert sent == [] and s.version("w") == 0
    push(s, "w", "worker1", 1, torch.full((4,), 3.0))
    expected = torch.ones(4)
    sgd_momentum_(expected, torch.full((4,), 2.0), None, lr=0.1, momentum=0.9, weight_decay=0.01)
    assert torch.equal(s.value("w"), expected) and s.version("w") == 1
    assert [(w, m.mid.kind, m.tensor) for w, m in sent] == [("worker0", pb.NOTIFY, None), ("worker1", pb.NOTIFY, None)]
    s.handle(Received(MessageId(pb.PULL_REQUEST, "w", 0, 1), "worker1", 0, None))
    assert sent[-1][0] == "worker1" and torch.equal(sent[-1][1].tensor, expected)


def test_broadcast_mode_sends_values():
    s, sent = make_shard("broadcast")
    push(s, "b", "worker0", 1, torch.zeros(2))
    push(s, "b", "worker1", 1, torch.zeros(2))
    assert all(m.mid.kind == pb.PARAMS and m.tensor is not None for _, m in sent)


@pytest.mark.parametrize("key,tensor,sender,it,match", [
    ("w", torch.ones(5), "worker0", 1, "shape"),
    ("w", torch.ones(4, dtype=torch.float64), "worker0", 1, "dtype"),
    ("w", torch.ones(2, 2), "worker0", 1, "shape"),
    ("nope", torch.ones(4), "worker0", 1, "does not hold"),
    ("other", torch.ones(3), "worker0", 1, "does not hold"),
    ("w", torch.ones(4), "stranger", 1, "not a worker"),
    ("w", torch.ones(4), "worker0", 2, "iteration"),
])
def test_bad_push_is_refused_and_state_unchanged(key, tensor, sender, it, match):
    s, sent = make_shard()
    push(s, "w", "worker1", 1, torch.full((4,), 5.0))  # a half-aggregated key
    before = s.value("w")
    with pytest.raises(PushRejected, match=match):
        push(s, key, sender, it, tensor)
    assert torch.equal(s.value("w"), before) and s.version("w") == 0 and sent == []
    push(s, "w", "worker0", 1, torch.full((4,), 1.0))  # aggregation still completes correctly
    expected = torch.ones(4)
    sgd_momentum_(expected, torch.full((4,), 3.0), None, lr=0.1, momentum=0.9, weight_decay=0.01)
    assert torch.equal(s.value("w"), expected)


def test_duplicate_push_refused():
    s, _ = make_shard()
    push(s, "w", "worker0", 1, torch.ones(4))
    with pytest.raises(PushRejected, match="twice"):
        push(s, "w", "worker0", 1, torch.ones(4))


def test_sgd_matches_torch_optim():
    torch.manual_seed(0)
    w = torch.randn(10)
    ref = torch.nn.Parameter(w.clone())
    opt = torch.optim.SGD([ref], lr=0.05, momentum=0.9, weight_decay=1e-3)
    buf = None
    for _ in range(5):
        g = torch.randn(10)
        ref.grad = g.clone()
        opt.step()
        buf = sgd_momentum_(w, g, buf, lr=0.05, momentum=0.9, weight_decay=1e-3)
    assert torch.allclose(w, ref.detach(), atol=1e-7)


def test_kvstore_placement():
    parts = kvstore_partitions([("big", 2_000_001), ("small", 10), ("small2", 1_000_000)], 3, seed=1)
    big = [p for p in parts if p.key == "big"]
    assert [p.length for p in big] == [666_667, 666_667, 666_667] and [p.shard for p in big] == [0, 1, 2]
    assert sum(p.length for p in big) == 2_000_001 and big[1].offset == 666_667
    assert len([p for p in parts if p.key == "small2"]) == 1  # threshold is "above 10^6"
    assert parts == kvstore_partitions([("big", 2_000_001), ("small", 10), ("small2", 1_000_000)], 3, seed=1)
    with pytest.raises(ValueError):
        kvstore_partitions([("x", 1)], 0)


def test_replies_of_one_version_share_one_copy_that_the_next_update_leaves_alone():
    s, sent = make_shard("pull")
    for it in (1, 2):
        push(s, "w", "worker0", it, torch.full((4,), 1.0))
        push(s, "w", "worker1", it, torch.full((4,), 3.0))
        for w in ("worker0", "worker1"):  # the two workers pull this version at different times
            s.handle(Received(MessageId(pb.PULL_REQUEST, "w", 0, it), w, 0, None))
    first, second = [m.tensor for _, m in sent[:2]], [m.tensor for _, m in sent[2:]]
    assert first[0] is first[1] and second[0] is second[1] and first[0] is not second[0]
    expected = torch.ones(4)
    momentum = sgd_momentum_(expected, torch.full((4,), 2.0), None, lr=0.1, momentum=0.9, weight_decay=0.01)
    assert torch.equal(first[0], expected)  # the update of iteration 2 wrote the values, not the copy sent
    sgd_momentum_(expected, torch.full((4,), 2.0), momentum, lr=0.1, momentum=0.9, weight_decay=0.01)
    assert torch.equal(second[0], expected) and torch.equal(s.value("w"), expected)


def test_a_snapshot_is_freed_once_no_reply_holds_it():
    import gc

    s, sent = make_shard("pull")
    push(s, "w", "worker0", 1, torch.full((4,), 1.0))
    push(s, "w", "worker1", 1, torch.full((4,), 3.0))
    s.handle(Received(MessageId(pb.PULL_REQUEST, "w", 0, 1), "worker0", 0, None))
    held = sent.pop()[1].tensor
    s.handle(Received(MessageId(pb.PULL_REQUEST, "w", 0, 1), "worker1", 0, None))
    assert sent.pop()[1].tensor is held  # still on its way to worker0: shared
    del held
    gc.collect()
    assert s._entries[("w", 0)].snapshot[1]() is None  # no reply holds it: gone
    s.handle(Received(MessageId(pb.PULL_REQUEST, "w", 0, 1), "worker0", 0, None))
    assert torch.equal(sent[-1][1].tensor, s.value("w"))  # a fresh copy of the same values
    assert s._entries[("w", 0)].snapshot[1]() is sent[-1][1].tensor
