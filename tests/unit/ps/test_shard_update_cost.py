"""``compute.ps_update: profile``: a shard's update holds its stated time (already x dilation) before anyone
hears of it, one update at a time; ``host`` holds nothing. The role's hold is the profile's update time per
value x compute.scale x run.dilation."""

import threading
import time

import pytest
import torch

from synclab.config import load_spec
from synclab.plans.sharding import Partition
from synclab.ps.shard import Shard
from synclab.roles.ps import update_hold
from synclab.wire import pb
from synclab.wire.frames import MessageId, Received

PARTS = [Partition("w", 0, 0, 4, 0), Partition("b", 0, 0, 2, 0)]


def shard(hold, mode="notify-pull"):
    sent = []
    s = Shard(0, PARTS, ["worker0", "worker1"], lr=0.1, momentum=0.0, weight_decay=0.0,
              send=lambda w, m: sent.append((time.perf_counter(), w, m)), mode=mode, update_hold_s=hold)
    for p in PARTS:
        s.handle(Received(MessageId(pb.PARAMS, p.key, 0, 0), "worker0", 0, torch.ones(p.length)))
    return s, sent


def push(s, key, sender, n):
    s.handle(Received(MessageId(pb.GRADIENT, key, 0, 1), sender, 0, torch.ones(n)))


def test_an_update_holds_its_time_before_the_notifications():
    s, sent = shard(lambda p: 0.05 * p.length)  # w: 0.2 s
    push(s, "w", "worker0", 4)
    t0 = time.perf_counter()
    push(s, "w", "worker1", 4)
    assert time.perf_counter() - t0 >= 0.2
    assert [m.mid.kind for _, _, m in sent] == [pb.NOTIFY, pb.NOTIFY] and all(t - t0 >= 0.2 for t, _, _ in sent)


def test_updates_of_two_partitions_are_held_one_after_the_other():
    s, sent = shard(lambda p: 0.1, mode="pull")
    push(s, "w", "worker0", 4)
    push(s, "b", "worker0", 2)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=push, args=(s, k, "worker1", n)) for k, n in (("w", 4), ("b", 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.perf_counter() - t0 >= 0.2  # one server: 0.1 s each, not overlapping
    assert s.version("w") == s.version("b") == 1


def test_without_a_hold_an_update_is_the_arithmetic_alone():
    s, _ = shard(None)
    push(s, "w", "worker0", 4)
    t0 = time.perf_counter()
    push(s, "w", "worker1", 4)
    assert time.perf_counter() - t0 < 0.1


def test_the_role_holds_the_profile_share_scaled_and_dilated():
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    base = ["compute.mode=replay", "compute.profile=profiles/smallcnn-b32-cpu.json", "compute.scale=0.5",
            "run.dilation=8", "strategy.name=ps"]
    spec = load_spec(root / "examples" / "quickstart.yaml", base)
    assert update_hold(spec) is None  # host: the default
    spec = load_spec(root / "examples" / "quickstart.yaml", [*base, "compute.ps_update=profile"])
    prof = spec.compute.model_profile()
    hold = update_hold(spec)
    p = Partition("features.0.weight", 0, 0, 1000, 0)
    assert hold(p) == pytest.approx(prof.update_seconds / prof.params * 1000 * 0.5 * 8)
    with pytest.raises(ValueError, match="compute.mode: replay"):
        load_spec(root / "examples" / "quickstart.yaml", ["compute.ps_update=profile"])
