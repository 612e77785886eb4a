"""A hostile client that holds the job token, on real gRPC and on the tcp engine.

Two parts. (1) A shard served by a real :class:`NodeTransport` is sent what an honest worker never sends
(unknown kinds, pulls far ahead, PARAMS once training began, frames before the values exist, a stranger's
frames, a second stream under a worker's name): each is refused with its status and reason, the store is as it
was, and the honest worker's rounds still complete. (2) A running ``ps`` job is attacked from outside the
cluster while it trains (coordinator calls, shard and worker streams, the cold-start Pull): every request is
refused, the job ends ok, and its parameters are bit-identical to an undisturbed run of the same spec.

Every refused request is appended to ``$SYNCLAB_HOSTILE_LOG`` (when set) as ``engine<TAB>request<TAB>code<TAB>
reason`` lines: the list the trust issue's closing note asks for.
"""

import json
import os
import socket
import time

import grpc
import pytest
import torch

from support.cluster import FAST, run_spec
from synclab.plans.sharding import Partition
from synclab.ps.serve_queue import InlineServe
from synclab.ps.shard import Shard
from synclab.transport.node import NodeTransport
from synclab.wire import pb, rpc, tcp
from synclab.wire.channels import open_channel, open_stream
from synclab.wire.frames import Message, MessageId, chunk_frames

pytestmark = pytest.mark.slow

TOKEN = "hostile-test-token"
WORKERS = ["worker0", "worker1"]
N = 4


def record(engine: str, request: str, code: str, reason: str) -> None:
    path = os.environ.get("SYNCLAB_HOSTILE_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{engine}\t{request}\t{code}\t{reason.splitlines()[0][:300]}\n")


# -- (1) a shard on a real transport --------------------------------------------------------------------------
class ServedShard:
    def __init__(self, engine: str, seed: bool = True):
        self.shard = Shard(0, [Partition("w", 0, 0, N, 0)], WORKERS, lr=0.1, momentum=0.0, weight_decay=0.0,
                           send=lambda w, m: self.transport.reverse_link(w, 5.0).send(m), mode="pull")
        serve = InlineServe(self.shard.handle)
        self.transport = NodeTransport("ps0", TOKEN, on_message=serve.put, engine=engine, connect_timeout_s=5.0)
        self.port = self.transport.serve("127.0.0.1", 0, ps=True, pull_handler=self._pull)
        self.transport.set_peers(WORKERS)
        self.engine = engine
        if seed:
            self.shard.seed("w", 0, torch.ones(N))

    def _pull(self, request, context):
        yield from self.shard.pull_frames(request.key, request.slice, "ps0", 1 << 20)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port if self.engine == 'grpc' else self.transport.tcp_port}"

    def close(self):
        self.transport.close(grace_s=1.0)


def attempt(srv: ServedShard, name: str, msg: Message, what: str) -> tuple[str, str]:
    """Open a stream as ``name``, send ``msg``, and return how the shard ended it: (status, reason)."""
    errors = []
    client = NodeTransport(name, TOKEN, on_message=lambda m: None, on_error=lambda p, e: errors.append(e),
                           engine=srv.engine, connect_timeout_s=5.0)
    try:
        try:
            link = client.connect("ps0", srv.address, "ps")
        except tcp.HelloRefused as e:  # tcp engine: a refused hello names the status first
            code, reason = _tcp_status(str(e))
            record(srv.engine, what, code, reason)
            return code, reason
        link.send(msg)
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            time.sleep(0.02)
        assert errors, f"{what}: the shard did not refuse it"
    finally:
        client.close(grace_s=0.5)
    err = errors[0]
    if isinstance(err, grpc.RpcError):
        code, reason = err.code().name, err.details()
    else:
        code, reason = _tcp_status(str(err))
    record(srv.engine, what, code, reason)
    return code, reason


def _tcp_status(text: str) -> tuple[str, str]:
    for code in ("INVALID_ARGUMENT", "UNAVAILABLE", "PERMISSION_DENIED", "ALREADY_EXISTS"):
        if f"{code}: " in text:
            return code, text.split(f"{code}: ", 1)[1]
    return "UNKNOWN", text


def grad(it: int, value: float = 1.0) -> Message:
    return Message(MessageId(pb.GRADIENT, "w", 0, it), torch.full((N,), value))


ENGINES = ["grpc", "tcp"]


def honest_round(srv: ServedShard, it: int) -> None:
    """Both workers push iteration ``it`` on their own streams; the shard applies it."""
    honest = {w: NodeTransport(w, TOKEN, on_message=lambda m: None, engine=srv.engine, connect_timeout_s=5.0)
              for w in WORKERS}
    try:
        for w, t in honest.items():
            t.connect("ps0", srv.address, "ps").send(grad(it)).result(5)
        assert srv.shard.wait_settled(it, timeout=10)
    finally:
        for t in honest.values():
            t.close(grace_s=1.0)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_shard_refuses_what_no_honest_worker_sends_and_stays_as_it_was(engine):
    srv = ServedShard(engine)
    try:
        honest_round(srv, 1)  # training has begun
        before = srv.shard.value("w"), srv.shard.version("w")

        cases = [  # (who, what, expected status, words of the reason)
            ("intruder", grad(2), "PERMISSION_DENIED", "not a node of this job"),
            ("worker0", Message(MessageId(pb.NOTIFY, "w", 0, 2)), "INVALID_ARGUMENT", "does not accept NOTIFY"),
            ("worker0", Message(MessageId(pb.ACTIVATION, "w", 0, 2), torch.ones(N)), "INVALID_ARGUMENT",
             "does not accept ACTIVATION"),
            ("worker0", Message(MessageId(pb.PULL_REQUEST, "w", 0, 1000)), "INVALID_ARGUMENT", "more than 1 from"),
            ("worker0", Message(MessageId(pb.PARAMS, "w", 0, 0), torch.full((N,), 9.0)), "INVALID_ARGUMENT",
             "after training has begun"),
            ("worker0", grad(50), "INVALID_ARGUMENT", "push for iteration 50"),
            ("worker0", Message(MessageId(pb.GRADIENT, "nokey", 0, 2), torch.ones(N)), "INVALID_ARGUMENT",
             "does not hold 'nokey'"),
            ("worker0", Message(MessageId(pb.GRADIENT, "w", 0, 2), torch.ones(N + 1)), "INVALID_ARGUMENT",
             "shape"),
        ]
        for who, msg, code, words in cases:
            what = f"{who}: {pb.FrameKind.Name(msg.mid.kind)} {msg.mid.key!r} iteration {msg.mid.iteration}"
            got, reason = attempt(srv, who, msg, f"shard stream, {what}")
            assert (got, words in reason) == (code, True), (what, got, reason)
            assert torch.equal(srv.shard.value("w"), before[0]) and srv.shard.version("w") == before[1], what

        honest_round(srv, 2)  # the honest workers carry on as if nothing happened
        ref = Shard(0, [Partition("w", 0, 0, N, 0)], WORKERS, lr=0.1, momentum=0.0, weight_decay=0.0,
                    send=lambda w, m: None, mode="pull")
        ref.seed("w", 0, torch.ones(N))
        from synclab.wire.frames import Received
        for it in (1, 2):
            for w in WORKERS:
                ref.handle(Received(MessageId(pb.GRADIENT, "w", 0, it), w, 0, torch.ones(N)))
        assert torch.equal(srv.shard.value("w"), ref.value("w"))
    finally:
        srv.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_frames_before_the_values_exist_are_unavailable(engine):
    srv = ServedShard(engine, seed=False)
    try:
        code, reason = attempt(srv, "worker1", grad(1), "shard stream, worker1: GRADIENT before initial values")
        assert code == "UNAVAILABLE" and "before it was initialized" in reason
        assert not srv.shard.initialized.is_set()
    finally:
        srv.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_second_stream_under_a_connected_workers_name_is_refused(engine):
    srv = ServedShard(engine)
    try:
        real = NodeTransport("worker0", TOKEN, on_message=lambda m: None, engine=engine, connect_timeout_s=5.0)
        real.connect("ps0", srv.address, "ps")
        time.sleep(0.3)  # the shard has accepted it
        code, reason = attempt(srv, "worker0", grad(1), "shard stream, a second 'worker0' while the first is open")
        assert code == "ALREADY_EXISTS" and "already has an open stream" in reason
        real.close(grace_s=1.0)
    finally:
        srv.close()


# -- (2) a running job attacked from outside ------------------------------------------------------------------
JOB = [*FAST, "strategy.name=ps", "cluster.workers=2", "cluster.ps_shards=2", "run.iterations=400",
       "run.check_params=true"]


def _wait_training(out, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (out / "control.json").exists() and (out / "endpoints.json").exists():
            ctl = json.loads((out / "control.json").read_text())
            stub = rpc.CoordinatorStub(open_channel(ctl["coordinator"], ctl["token"], "observer", tls=None))
            try:
                st = stub.Status(pb.StatusRequest(), timeout=2)
                if st.iterations_done >= 2:
                    return ctl, stub
            except grpc.RpcError:
                pass
        time.sleep(0.1)
    raise AssertionError("the job never started training")


def _call(engine, what, fn, *args, **kw):
    try:
        r = fn(*args, **kw)
        if hasattr(r, "__iter__") and not isinstance(r, (bytes, str)):
            list(r)
    except grpc.RpcError as e:
        record(engine, what, e.code().name, e.details())
        return e.code().name, e.details()
    raise AssertionError(f"{what}: accepted")


def _hostile_stream(engine, address_grpc, address_tcp, token, name, service, frames, what):
    """Open a data-plane stream as ``name`` and send ``frames``; the refusal (status, reason)."""
    if engine == "grpc":
        ch = open_channel(address_grpc, token, name, tls=None)
        try:
            return _call(engine, what, open_stream(ch, service), iter(frames), timeout=10)
        finally:
            ch.close()
    host, port = address_tcp.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        tcp.hello(sock, token, name, service)
        try:
            tcp.read_reply(sock)
        except tcp.HelloRefused as e:
            code, reason = _tcp_status(str(e))
            record(engine, what, code, reason)
            return code, reason
        for f in frames:
            tcp.send_frame(sock, f)
        reader = tcp.FrameReader(sock, 1 << 21)
        try:
            list(reader)
        except tcp.StreamAborted as e:
            code, reason = _tcp_status(str(e))
            record(engine, what, code, reason)
            return code, reason
    raise AssertionError(f"{what}: accepted")


def _listening(token: str) -> dict[int, list[tuple[str, int]]]:
    """Every listening TCP socket (address, port) of the job's processes (those started with its token), by
    pid: gRPC, tcp engine, /metrics. Read from each process's own /proc/PID/net/tcp (a netns node's sockets
    are in its namespace) and kept where the socket is one of the process's own file descriptors."""
    import ipaddress
    import struct

    mark = f"SYNCLAB_TOKEN={token}".encode()
    out: dict[int, list[tuple[str, int]]] = {}
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
            inodes = {os.readlink(f"/proc/{d}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{d}/fd")
                      if os.readlink(f"/proc/{d}/fd/{fd}").startswith("socket:[")}
            for table, width in (("tcp", 4), ("tcp6", 16)):
                with open(f"/proc/{d}/net/{table}") as f:
                    for line in f.readlines()[1:]:
                        cols = line.split()
                        if cols[3] != "0A" or cols[9] not in inodes:  # 0A: LISTEN
                            continue
                        hexip, hexport = cols[1].split(":")
                        raw = bytes.fromhex(hexip)
                        raw = b"".join(struct.pack("<I", *struct.unpack(">I", raw[k:k + 4])) for k in
                                       range(0, width, 4))
                        addr = ipaddress.ip_address(raw)
                        ip = str(getattr(addr, "ipv4_mapped", None) or addr)  # gRPC's v6 socket for a v4 address
                        out.setdefault(int(d), []).append((ip, int(hexport, 16)))
        except OSError:
            continue
    return out


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory):
    out = tmp_path_factory.mktemp("undisturbed") / "run"
    r = run_spec(out, *JOB)
    assert r.returncode == 0, r.stderr
    return torch.load(out / "params.pt")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_running_job_refuses_a_hostile_client_and_trains_as_if_alone(tmp_path, engine, undisturbed):
    import subprocess
    import sys

    from support.cluster import QUICKSTART, REPO

    out = tmp_path / "run"
    args = [sys.executable, "-m", "synclab", "run", str(QUICKSTART), "--out", str(out), "--no-report"]
    for o in (*JOB, f"transport.engine={engine}"):
        args += ["--set", o]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ctl, stub = _wait_training(out)
        token = ctl["token"]
        nodes = {n.name: n for n in stub.GetCluster(pb.ClusterRequest(node="observer"), timeout=5).nodes}
        caps = {name: next((c.split("=", 1)[1] for c in n.capabilities if c.startswith("tcp-data-port=")), None)
                for name, n in nodes.items()}
        # bind only where needed: every listener of the job's processes (gRPC, tcp engine, /metrics) on a node's
        # own address (loopback, or its namespace's address under netns isolation), none on a wildcard
        own = {ctl["coordinator"].rsplit(":", 1)[0], *(n.address.rsplit(":", 1)[0] for n in nodes.values())}
        listening = _listening(token)
        assert len(listening) >= 1 + len(nodes), listening  # the coordinator and every node found
        assert all(ip in own | {"127.0.0.1", "::1"} for socks in listening.values() for ip, _ in socks), \
            (own, listening)

        def tcp_addr(name):
            return f"{nodes[name].address.rsplit(':', 1)[0]}:{caps[name]}" if caps[name] else ""

        def frame(kind, key, it, sender, payload=None):
            msg = Message(MessageId(kind, key, 0, it), payload)
            return list(chunk_frames(msg, sender, 1 << 20))

        results = []
        co = lambda what, fn, req, code: results.append((what, code, _call(engine, what, fn, req, timeout=5)))  # noqa
        co("coordinator Barrier 'end' as unregistered 'intruder'", stub.Barrier,
           pb.BarrierRequest(name="end", node="intruder", participants=4), "PERMISSION_DENIED")
        co("coordinator Barrier 'end' as 'worker0' without its session, for 1 participant", stub.Barrier,
           pb.BarrierRequest(name="end", node="worker0", participants=1), "PERMISSION_DENIED")
        co("coordinator PublishPlan as 'intruder'", stub.PublishPlan,
           pb.PublishPlanRequest(node="intruder", plan_json="{}"), "PERMISSION_DENIED")
        co("coordinator PublishPlan as 'worker0' without its session, another plan", stub.PublishPlan,
           pb.PublishPlanRequest(node="worker0", plan_json="{}"), "PERMISSION_DENIED")
        co("coordinator ReportIteration as 'intruder'", stub.ReportIteration,
           pb.IterationReport(node="intruder", rank=0, iteration=1), "PERMISSION_DENIED")
        co("coordinator ReportIteration as 'worker0' without its session, rank 1", stub.ReportIteration,
           pb.IterationReport(node="worker0", rank=1, iteration=1), "PERMISSION_DENIED")
        co("coordinator ReportIteration as 'worker0' with a guessed session, iteration 10^9", stub.ReportIteration,
           pb.IterationReport(node="worker0", rank=0, iteration=10**9, session="0" * 32), "PERMISSION_DENIED")
        # in a node's name: keep it alive, end it, or fail the job. Each accepted would show: a Done(ok=false)
        # fails the job, a Done(ok=true) ends the node's part early
        co("coordinator Heartbeat as 'worker0' without its session", stub.Heartbeat,
           pb.HeartbeatRequest(node="worker0", iteration=1), "PERMISSION_DENIED")
        co("coordinator Heartbeat as 'ps1' with a guessed session", stub.Heartbeat,
           pb.HeartbeatRequest(node="ps1", iteration=1, session="f" * 32), "PERMISSION_DENIED")
        co("coordinator Done(ok=false) as 'worker1' without its session", stub.Done,
           pb.DoneRequest(node="worker1", ok=False, message="spoofed failure"), "PERMISSION_DENIED")
        co("coordinator Done(ok=true) as 'ps0' with a guessed session", stub.Done,
           pb.DoneRequest(node="ps0", ok=True, session="0" * 32), "PERMISSION_DENIED")
        co("coordinator Done(ok=false) as unregistered 'worker7'", stub.Done,
           pb.DoneRequest(node="worker7", ok=False, message="spoofed failure"), "PERMISSION_DENIED")

        ps0_grpc, ps0_tcp = nodes["ps0"].address, tcp_addr("ps0")
        w1_grpc, w1_tcp = nodes["worker1"].address, tcp_addr("worker1")
        streams = [
            ("ps0 stream as 'intruder': PARAMS", ps0_grpc, ps0_tcp, "intruder", "ps",
             frame(pb.PARAMS, "fc1.weight", 0, "intruder", torch.zeros(4)), "PERMISSION_DENIED"),
            ("ps0 stream as 'intruder': PULL_REQUEST iteration 10^6", ps0_grpc, ps0_tcp, "intruder", "ps",
             frame(pb.PULL_REQUEST, "fc1.weight", 10**6, "intruder"), "PERMISSION_DENIED"),
            ("ps0 stream as 'worker0' (already connected): GRADIENT", ps0_grpc, ps0_tcp, "worker0", "ps",
             frame(pb.GRADIENT, "fc1.weight", 3, "worker0", torch.zeros(4)), "ALREADY_EXISTS"),
            ("worker1 peer stream as 'intruder': COLLECTIVE", w1_grpc, w1_tcp, "intruder", "peer",
             frame(pb.COLLECTIVE, "x", 3, "intruder", torch.zeros(4)), "PERMISSION_DENIED"),
        ]
        for what, ga, ta, name, service, frames, code in streams:
            results.append((what, code, _hostile_stream(engine, ga, ta, token, name, service, frames, what)))
        if engine == "grpc":  # the unary cold-start Pull is served by the gRPC server on either engine
            ch = open_channel(ps0_grpc, token, "intruder", tls=None)
            pull = ch.unary_stream("/synclab.v1.ParameterServer/Pull",
                                   request_serializer=pb.PullRequest.SerializeToString)
            results.append(("ps0 Pull RPC as 'intruder'", "PERMISSION_DENIED",
                            _call(engine, "ps0 Pull RPC as 'intruder'", pull,
                                  pb.PullRequest(key="fc1.weight", slice=0), timeout=5)))
            ch.close()
        for what, want, (code, reason) in results:
            assert code == want, (what, code, reason)
            assert reason, what
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    got = torch.load(out / "params.pt")
    assert got.keys() == undisturbed.keys()
    for k in got:
        assert torch.equal(got[k], undisturbed[k]), k
    status = json.loads((out / "status.json").read_text())
    assert status["status"] == "ok", status


# -- (3) names spoofed before their nodes register, on a coordinator served over real gRPC ----------------------
def test_a_name_is_trusted_only_after_its_node_registered_and_only_with_its_session(tmp_path, caplog):
    """A token holder speaks first as ``worker0`` (heartbeat, done, barrier, report), before worker0 has
    registered, then after, without its session: every call is refused with PERMISSION_DENIED and leaves the
    job as it was; the real worker0 registers, beats, passes the barrier and ends its part as if alone."""
    from synclab.config import parse_spec
    from synclab.roles.client import CoordinatorClient
    from synclab.roles.coordinator import CoordinatorService, JobState
    from synclab.wire.channels import bind, make_server

    job = JobState(spec=parse_spec({}), run_dir=tmp_path, job_id="spoof", network_backend="none",
                   link_rate_bps=None, expected={pb.WORKER: 1, pb.PS: 1})
    svc = CoordinatorService(job)
    server = make_server(TOKEN, max_workers=16)
    rpc.add_CoordinatorServicer_to_server(svc, server)
    port = bind(server, "127.0.0.1:0", tls=None)
    server.start()
    address = f"127.0.0.1:{port}"
    hostile = open_channel(address, TOKEN, "worker0", tls=None)
    stub = rpc.CoordinatorStub(hostile)
    clients = []

    def spoof(when, session=""):
        calls = [
            ("Heartbeat", stub.Heartbeat, pb.HeartbeatRequest(node="worker0", iteration=5, session=session)),
            ("Done(ok=false)", stub.Done, pb.DoneRequest(node="worker0", ok=False, message="spoof",
                                                         session=session)),
            ("Done(ok=true)", stub.Done, pb.DoneRequest(node="worker0", ok=True, session=session)),
            ("Barrier 'start'", stub.Barrier, pb.BarrierRequest(name="start", node="worker0", participants=2,
                                                                session=session)),
            ("ReportIteration", stub.ReportIteration, pb.IterationReport(node="worker0", rank=0, iteration=1,
                                                                         session=session)),
            ("PublishPlan", stub.PublishPlan, pb.PublishPlanRequest(node="worker0", plan_json="{}",
                                                                    session=session)),
        ]
        for name, fn, req in calls:
            what = f"coordinator {name} as 'worker0' {when}"
            code, reason = _call("grpc", what, fn, req, timeout=5)
            assert code == "PERMISSION_DENIED" and "worker0" in reason, (what, code, reason)
        assert job.state != "failed" and not job.failure and "worker0" not in job.done
        assert not job.reports and job.plan_json is None and not job.barriers.get("start")

    try:
        spoof("before it registered")
        assert "worker0" not in job.heartbeats  # the watch never waits for a name nobody registered

        ps0 = CoordinatorClient(address, TOKEN, "ps0")
        clients.append(ps0)
        ps0.register("ps", 0, "127.0.0.1:1", "")
        spoof("before it registered, ps0 registered")
        worker0 = CoordinatorClient(address, TOKEN, "worker0")
        clients.append(worker0)
        worker0.register("worker", 0, "127.0.0.1:2", "")
        assert worker0.session and worker0.session != ps0.session
        svc.job.heartbeats["worker0"] = 0.0
        spoof("after it registered, without its session")
        spoof("after it registered, with ps0's session", session=ps0.session)
        assert job.heartbeats["worker0"] == 0.0  # no spoofed heartbeat kept it alive
        refusals = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused ")]
        assert len(refusals) == 4 * 6 and all("from worker0 at ipv4:127.0.0.1:" in m for m in refusals), refusals

        # the real nodes carry on: a beat, the start barrier, a report, their ends; the job is theirs alone
        stopped = []
        worker0.start_heartbeat(0.05, stopped.append)
        deadline = time.monotonic() + 5
        while job.heartbeats["worker0"] == 0.0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert job.heartbeats["worker0"] > 0.0 and not stopped
        import threading
        t = threading.Thread(target=ps0.barrier, args=("start", 2), kwargs={"timeout": 10})
        t.start()
        worker0.barrier("start", 2, timeout=10)
        t.join()
        worker0.publish_plan("{}")
        worker0.report(pb.IterationReport(node="worker0", rank=0, iteration=0))
        worker0.flush_reports()
        assert [r.iteration for r in job.reports] == [0] and job.plan_json == "{}"
        worker0.done(True)
        ps0.done(True)
        assert svc.all_done() and job.state == "running" and not job.failure
    finally:
        for c in clients:
            c.close()
        hostile.close()
        server.stop(0)
