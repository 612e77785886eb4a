"""Bad input and failures: clear messages, bounded time, no orphans, records say what happened."""

import json
import os
import signal
import subprocess
import sys
import time

import grpc
import pytest
import torch

from support.cluster import FAST, QUICKSTART, REPO, synclab

pytestmark = pytest.mark.slow


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def assert_no_orphans(out):
    status = json.loads((out / "status.json").read_text())
    assert status["pids"], status
    assert not [n for n, pid in status["pids"].items() if alive(pid)], status
    return status


@pytest.mark.parametrize("override,key", [
    ("cluster.workers=-2", "cluster.workers"),
    ("strategy.name=nonesuch", "strategy.name"),
    ("model.name=nonesuch", "model.name"),
    ("cluster.bogus=1", "cluster.bogus"),
    ("model.batch_size=lots", "model.batch_size"),
])
def test_invalid_spec_exits_2_before_any_process(tmp_path, override, key):
    out = tmp_path / "run"
    r = synclab("run", QUICKSTART, "--out", out, "--set", override, timeout=60)
    assert r.returncode == 2
    assert key in r.stderr
    assert not out.exists()  # nothing started, nothing written


def test_unreachable_coordinator_fails_fast():
    t0 = time.monotonic()
    r = synclab("worker", "--coordinator", "127.0.0.1:9", "--connect-timeout", "2", timeout=60,
                env=dict(os.environ, SYNCLAB_TOKEN="x"))
    assert r.returncode != 0
    assert "unreachable" in r.stderr and "127.0.0.1:9" in r.stderr
    assert time.monotonic() - t0 < 30


@pytest.fixture
def start_run():
    """Start `synclab run` in the background; whatever a test leaves running is stopped afterwards."""
    procs = []

    def start(out, *overrides):
        args = [sys.executable, "-m", "synclab", "run", str(QUICKSTART), "--out", str(out), "--no-report"]
        for o in overrides:
            args += ["--set", o]
        procs.append(subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        return procs[-1]

    yield start
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def _wait_for_iterations(out, n, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = out / "logs"
        if (out / "endpoints.json").exists() and logs.exists():
            import urllib.request
            eps = json.loads((out / "endpoints.json").read_text())
            try:
                text = urllib.request.urlopen(eps["worker1"]["metrics_url"], timeout=2).read().decode()
                for line in text.splitlines():
                    if line.startswith("synclab_samples_total{") and float(line.split()[-1]) >= n * 16:
                        return eps
            except OSError:
                pass
        time.sleep(0.2)
    raise AssertionError("the run never got going")


def _child_pid(parent: int, *words: str) -> int:
    """The pid of ``parent``'s child whose command line contains ``words`` in order."""
    for d in os.listdir("/proc"):
        if d.isdigit() and _is_child_of(int(d), parent):
            try:
                cmd = open(f"/proc/{d}/cmdline").read().split("\0")
            except OSError:
                continue
            if " ".join(words) in " ".join(cmd):
                return int(d)
    raise AssertionError(f"no child of {parent} runs {' '.join(words)}")


@pytest.mark.parametrize("engine", ["grpc", "tcp"])
def test_crashed_worker_tears_down_the_cluster(tmp_path, start_run, engine):
    proc = start_run(tmp_path, *FAST, "strategy.name=wfbp", "run.iterations=100000", f"transport.engine={engine}")
    _wait_for_iterations(tmp_path, 2)
    os.kill(_child_pid(proc.pid, "worker", "--rank", "1"), signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "worker1" in err
    status = assert_no_orphans(tmp_path)
    assert status["status"] == "failed" and "worker1" in status["reason"]
    assert status["exit_codes"]["worker1"] == -signal.SIGKILL


def _is_child_of(pid: int, parent: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().split(")")[-1].split()[1]) == parent
    except (FileNotFoundError, ValueError):
        return False


def test_ctrl_c_stops_everything(tmp_path, start_run):
    proc = start_run(tmp_path, *FAST, "strategy.name=ps", "run.iterations=100000")
    _wait_for_iterations(tmp_path, 2)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    status = assert_no_orphans(tmp_path)
    assert status["status"] == "interrupted"


def test_push_with_wrong_shape_is_refused_over_grpc():
    """A real PS shard behind a real gRPC server refuses a bad push and keeps its state."""
    from synclab.plans.sharding import Partition
    from synclab.ps.shard import Shard
    from synclab.transport.inbox import Inbox
    from synclab.transport.node import NodeTransport
    from synclab.wire import pb
    from synclab.wire.frames import Message, MessageId

    holder = {}
    server = NodeTransport("ps0", "tok", on_message=lambda m: holder["shard"].handle(m))
    holder["shard"] = Shard(0, [Partition("w", 0, 0, 8, 0)], ["worker0"], lr=0.1, momentum=0.0, weight_decay=0.0,
                            send=lambda w, m: server.reverse_link(w, 5).send(m))
    port = server.serve("127.0.0.1", 0, ps=True)
    errors, inbox = [], Inbox()
    client = NodeTransport("worker0", "tok", on_message=inbox.deliver, on_error=lambda p, e: errors.append(e))
    link = client.connect("ps0", f"127.0.0.1:{port}", "ps")
    link.send(Message(MessageId(pb.PARAMS, "w", 0, 0), torch.ones(8))).result(5)
    assert holder["shard"].initialized.wait(5)
    link.send(Message(MessageId(pb.GRADIENT, "w", 0, 1), torch.ones(9))).result(5)
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        time.sleep(0.05)
    assert errors and isinstance(errors[0], grpc.RpcError)
    assert errors[0].code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "shape (9,), expected (8,)" in errors[0].details()
    assert torch.equal(holder["shard"].value("w"), torch.ones(8)) and holder["shard"].version("w") == 0
    client.close()
    server.close()
