"""Server modes beyond the KVStore's notify-pull: silent synchronous pulls (SSD-SGD) and asynchronous pushes (ASGD)."""

import pytest
import torch

from synclab.plans.sharding import Partition
from synclab.ps.optimizer import sgd_momentum_
from synclab.ps.shard import PushRejected, Shard
from synclab.wire import pb
from synclab.wire.frames import MessageId, Received

LR, M, WD = 0.1, 0.9, 0.0


def make_shard(mode, max_ahead=1, workers=("worker0", "worker1")):
    sent = []
    s = Shard(0, [Partition("w", 0, 0, 2, 0, priority=3)], list(workers), lr=LR, momentum=M, weight_decay=WD,
              send=lambda w, m: sent.append((w, m)), mode=mode, max_ahead=max_ahead)
    s.handle(Received(MessageId(pb.PARAMS, "w", 0, 0), "worker0", 0, torch.ones(2)))
    return s, sent


def push(s, sender, it, value):
    s.handle(Received(MessageId(pb.GRADIENT, "w", 0, it), sender, 0, torch.full((2,), float(value))))


def pull(s, sender, it):
    s.handle(Received(MessageId(pb.PULL_REQUEST, "w", 0, it), sender, 0, None))


def sgd(steps):
    w, buf = torch.ones(2), None
    for g in steps:
        buf = sgd_momentum_(w, torch.full((2,), float(g)), buf, lr=LR, momentum=M, weight_decay=WD)
    return w


def test_pull_mode_updates_silently_and_answers_a_pull_once_its_iteration_is_applied():
    s, sent = make_shard("pull")
    push(s, "worker0", 1, 1.0)
    pull(s, "worker0", 1)            # asked before worker1 pushed: waits
    assert sent == [] and s.version("w") == 0
    push(s, "worker1", 1, 3.0)       # the update of iteration 1 answers it, and nobody is notified
    assert [(w, m.mid.kind, m.mid.iteration) for w, m in sent] == [("worker0", pb.PARAMS, 1)]
    assert torch.equal(sent[0][1].tensor, sgd([2.0])) and sent[0][1].priority == 3
    pull(s, "worker1", 1)            # already applied: answered at once
    assert sent[-1][0] == "worker1" and torch.equal(sent[-1][1].tensor, sgd([2.0]))


def test_pull_mode_accepts_pushes_up_to_max_ahead_and_applies_them_in_order():
    s, sent = make_shard("pull", max_ahead=3)
    push(s, "worker0", 1, 1.0)
    push(s, "worker0", 2, 2.0)
    push(s, "worker0", 3, 4.0)       # worker0 runs ahead: SSD-SGD workers do not wait between pulls
    with pytest.raises(PushRejected, match="iteration 4"):
        push(s, "worker0", 4, 1.0)
    pull(s, "worker0", 3)
    push(s, "worker1", 1, 1.0)
    push(s, "worker1", 2, 0.0)
    assert s.version("w") == 2 and sent == []
    push(s, "worker1", 3, 0.0)
    assert s.version("w") == 3
    assert torch.allclose(s.value("w"), sgd([1.0, 1.0, 2.0]))
    assert [(w, m.mid.iteration) for w, m in sent] == [("worker0", 3)]
    assert s.settled(3) and not s.settled(4)


def test_pull_mode_refuses_a_second_push_for_the_same_iteration():
    s, _ = make_shard("pull", max_ahead=2)
    push(s, "worker0", 2, 1.0)
    with pytest.raises(PushRejected, match="twice"):
        push(s, "worker0", 2, 1.0)


def test_async_mode_applies_every_push_alone_and_pulls_get_the_latest():
    s, sent = make_shard("async")
    push(s, "worker0", 1, 1.0)
    assert s.version("w") == 1 and torch.allclose(s.value("w"), sgd([1.0]))   # no waiting for worker1
    push(s, "worker0", 2, 2.0)
    pull(s, "worker0", 2)
    assert [(w, m.mid.kind, m.mid.iteration) for w, m in sent] == [("worker0", pb.PARAMS, 2)]
    assert torch.allclose(sent[0][1].tensor, sgd([1.0, 2.0]))
    push(s, "worker1", 1, 4.0)       # a slower worker's gradient is applied as it comes, to the latest weights
    assert torch.allclose(s.value("w"), sgd([1.0, 2.0, 4.0]))
    assert s.version("w") == 3 and not s.settled(2)   # 2 iterations x 2 workers = 4 pushes
    push(s, "worker1", 2, 0.0)
    assert s.settled(2)


def test_async_mode_refuses_replays():
    s, _ = make_shard("async")
    push(s, "worker0", 1, 1.0)
    with pytest.raises(PushRejected, match="after iteration 1"):
        push(s, "worker0", 1, 1.0)
    with pytest.raises(PushRejected, match="not a worker"):
        push(s, "stranger", 3, 1.0)


@pytest.mark.parametrize("mode", ["notify-pull", "broadcast", "pull"])
def test_synchronous_modes_keep_the_kvstore_update(mode):
    s, sent = make_shard(mode)
    push(s, "worker0", 1, 1.0)
    push(s, "worker1", 1, 3.0)
    assert torch.equal(s.value("w"), sgd([2.0]))
    announced = {"notify-pull": pb.NOTIFY, "broadcast": pb.PARAMS, "pull": None}[mode]
    assert [m.mid.kind for _, m in sent] == ([announced] * 2 if announced else [])


def test_unknown_mode_and_bad_window_refused():
    with pytest.raises(ValueError, match="server mode"):
        make_shard("gossip")
    with pytest.raises(ValueError, match="max_ahead"):
        make_shard("pull", max_ahead=0)
