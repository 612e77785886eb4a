"""Who may ask a shard what, and when (synclab.ps.shard module doc): every refusal leaves the store as it was."""

import pytest
import torch

from synclab.plans.sharding import Partition
from synclab.ps.shard import NotAWorker, NotInitialized, PushRejected, Shard
from synclab.wire import pb
from synclab.wire.frames import MessageId, Received, refusal_status


def make(mode="notify-pull", max_ahead=1, seed=True):
    sent = []
    s = Shard(0, [Partition("w", 0, 0, 2, 0)], ["worker0", "worker1"], lr=0.1, momentum=0.0, weight_decay=0.0,
              send=lambda w, m: sent.append((w, m)), mode=mode, max_ahead=max_ahead)
    if seed:
        s.handle(Received(MessageId(pb.PARAMS, "w", 0, 0), "worker0", 0, torch.ones(2)))
    return s, sent


def msg(kind, sender, it=1, value=None):
    return Received(MessageId(kind, "w", 0, it), sender, 0, value)


def state(s):
    return s.value("w"), s.version("w")


def same(a, b):
    return torch.equal(a[0], b[0]) and a[1] == b[1]


@pytest.mark.parametrize("kind", [pb.PARAMS, pb.GRADIENT, pb.PULL_REQUEST, pb.NOTIFY])
def test_a_node_that_is_not_a_worker_is_refused_with_permission_denied(kind):
    s, sent = make()
    before = state(s)
    with pytest.raises(NotAWorker, match="'intruder', which is not a worker") as e:
        s.handle(msg(kind, "intruder", value=torch.zeros(2)))
    assert refusal_status(e.value) == "PERMISSION_DENIED"
    assert same(state(s), before) and sent == []


def test_params_after_training_began_are_refused_and_change_nothing():
    s, _ = make()
    s.handle(msg(pb.GRADIENT, "worker0", 1, torch.ones(2)))
    before = state(s)
    with pytest.raises(PushRejected, match="initial values after training has begun"):
        s.handle(msg(pb.PARAMS, "worker0", 0, torch.full((2,), 7.0)))
    assert same(state(s), before)


def test_a_restart_may_reseed_what_it_loaded_until_the_first_push():
    s, _ = make()
    s.handle(msg(pb.GRADIENT, "worker0", 1, torch.ones(2)))
    s.handle(msg(pb.GRADIENT, "worker1", 1, torch.ones(2)))
    saved = s.state_dict()
    r, _ = make(seed=False)
    r.load_state_dict(saved)
    r.expect_reseed()
    assert not r.initialized.is_set()  # the shard waits for the re-seed before the "ready" barrier
    r.handle(msg(pb.PARAMS, "worker0", 0, torch.full((2,), 3.0)))  # rank 0 re-seeds after resuming
    assert r.initialized.is_set()
    assert torch.equal(r.value("w"), torch.full((2,), 3.0)) and r.version("w") == 1


@pytest.mark.parametrize("mode,max_ahead", [("notify-pull", 1), ("pull", 3), ("async", 1)])
def test_a_pull_beyond_max_ahead_is_refused_and_never_waits(mode, max_ahead):
    s, sent = make(mode, max_ahead)
    with pytest.raises(PushRejected, match=f"more than {max_ahead} from"):
        s.handle(msg(pb.PULL_REQUEST, "worker0", max_ahead + 1))
    with pytest.raises(PushRejected, match=f"more than {max_ahead} from"):
        s.handle(msg(pb.PULL_REQUEST, "worker0", 10**9))
    s.handle(msg(pb.PULL_REQUEST, "worker0", max_ahead))  # the edge of the window is an honest pull
    s.handle(msg(pb.GRADIENT, "worker0", 1, torch.ones(2)))
    s.handle(msg(pb.GRADIENT, "worker1", 1, torch.ones(2)))
    if max_ahead == 1:  # the pull in the window was answered, so the shard can settle
        assert s.wait_settled(1, timeout=1)


def test_an_async_push_far_ahead_of_the_workers_last_is_refused():
    s, _ = make("async")
    before = state(s)
    with pytest.raises(PushRejected, match="more than 1 past its last push"):
        s.handle(msg(pb.GRADIENT, "worker0", 5, torch.ones(2)))
    assert same(state(s), before)


def test_unknown_frame_kinds_are_refused_by_name_or_number():
    s, _ = make()
    with pytest.raises(PushRejected, match="does not accept NOTIFY frames"):
        s.handle(msg(pb.NOTIFY, "worker0"))
    with pytest.raises(PushRejected, match="unknown kind 99"):
        s.handle(msg(99, "worker0"))


def test_calls_before_the_values_arrive_are_unavailable():
    s, _ = make(seed=False)
    for m in (msg(pb.PULL_REQUEST, "worker0", 1), msg(pb.GRADIENT, "worker0", 1, torch.ones(2))):
        with pytest.raises(NotInitialized) as e:
            s.handle(m)
        assert refusal_status(e.value) == "UNAVAILABLE"
    with pytest.raises(NotInitialized):
        list(s.pull_frames("w", 0, "ps0", 1 << 20, caller="worker0"))
    with pytest.raises(NotAWorker):
        list(s.pull_frames("w", 0, "ps0", 1 << 20, caller="intruder"))
