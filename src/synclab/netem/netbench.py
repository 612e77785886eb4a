"""``synclab netbench``: one bulk transfer over a shaped link, measured three ways in one run.

Two nodes (in two network namespaces on a bridge with ``netns`` isolation, or two
processes on loopback with ``none``), the link shaped per the profile, then:
SyncLab's own transport (a gRPC stream of 1 MiB chunks, as training uses it),
a plain TCP socket, and iperf3 when installed. Goodput is counted at the
receiver (payload bytes from the first to the last arrival). The round-trip time
is the median TCP connect time to the receiver (one SYN/SYN-ACK exchange).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from synclab.linkprofile import LinkProfile

MESSAGE_FLOATS = 1 << 20  # 4 MiB messages, cut into 1 MiB chunks by the transport
TOKEN = "netbench"


def _transport_sink() -> None:
    import torch  # noqa: F401  (frames are tensors)

    from synclab.transport.node import NodeTransport

    state = {"bytes": 0, "first": None, "last": None}
    done = threading.Event()

    def on_message(msg):
        now = time.perf_counter()
        if msg.mid.key == "end":
            done.set()
            return
        if state["first"] is None:
            state["first"] = now  # the first message is the clock's start: not counted
        else:
            state["bytes"] += msg.tensor.numel() * msg.tensor.element_size()
        state["last"] = now

    node = NodeTransport("sink", TOKEN, on_message=on_message)
    print(json.dumps({"port": node.serve("0.0.0.0", 0, peer=True)}), flush=True)
    done.wait()
    secs = (state["last"] or 0) - (state["first"] or 0)
    print(json.dumps({"bytes": state["bytes"], "seconds": secs,
                      "goodput_bps": state["bytes"] * 8 / secs if secs > 0 else 0.0}), flush=True)
    node.close()


def _transport_source(address: str, duration_s: float, rate_bps: float | None, delay_s: float) -> None:
    import torch

    from synclab.transport.node import NodeTransport
    from synclab.transport.shaper import LinkShaper
    from synclab.wire import pb
    from synclab.wire.frames import Message, MessageId

    node = NodeTransport("source", TOKEN, on_message=lambda m: None,
                         shaper=LinkShaper(rate_bps=rate_bps or None, delay_s=delay_s))
    link = node.connect("sink", address, "peer")
    payload = torch.zeros(MESSAGE_FLOATS)
    end = time.perf_counter() + duration_s
    i = 0
    while time.perf_counter() < end:
        link.send(Message(MessageId(pb.COLLECTIVE, "bulk", 0, i), payload))
        i += 1
    link.send(Message(MessageId(pb.COLLECTIVE, "end", 0, i))).result()
    node.close()


def transport_goodput(sink_prefix: Sequence[str], source_prefix: Sequence[str], sink_address: str, *,
                      duration_s: float, rate_bps: float | None = None, delay_s: float = 0.0,
                      timeout_s: float = 120.0) -> dict:
    py = [sys.executable, "-m", "synclab.netem.netbench"]
    sink = subprocess.Popen([*sink_prefix, *py, "sink"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = sink.stdout.readline()
        if not line:
            raise RuntimeError(f"transport sink did not start: {sink.stderr.read()}")
        port = json.loads(line)["port"]
        src = subprocess.run([*source_prefix, *py, "source", f"{sink_address}:{port}", "--duration", str(duration_s),
                              "--rate", str(rate_bps or 0), "--delay", str(delay_s)],
                             capture_output=True, text=True, timeout=timeout_s)
        if src.returncode != 0:
            raise RuntimeError(f"transport source failed: {src.stderr.strip()[-800:]}")
        out, err = sink.communicate(timeout=timeout_s)
        return json.loads(out.strip().splitlines()[-1])
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()


def rtt_s(prefix: Sequence[str], address: str, port: int, samples: int = 7) -> float:
    """Median TCP connect time from inside ``prefix`` to ``address:port``."""
    code = ("import socket,time,statistics,sys\n"
            "t=[]\n"
            f"for _ in range({samples}):\n"
            "    s=socket.socket(); t0=time.perf_counter()\n"
            f"    s.connect(({address!r},{port})); t.append(time.perf_counter()-t0); s.close()\n"
            "print(statistics.median(t))\n")
    out = subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"rtt probe failed: {out.stderr.strip()}")
    return float(out.stdout.strip())


def _echo_server() -> None:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", 0))
    srv.listen(64)
    print(json.dumps({"port": srv.getsockname()[1]}), flush=True)
    srv.settimeout(30)
    try:
        while True:
            conn, _ = srv.accept()
            conn.close()
    except OSError:
        pass


def run_netbench(profile: LinkProfile, isolation: str, *, duration_s: float = 3.0,
                 prefer: tuple[str, ...] | None = None) -> dict:
    """Measure one link; returns configured rate, goodputs, ratios, backend, RTT."""
    from synclab.netem import bench

    result: dict = {"profile": profile.name, "configured_rate_bps": profile.rate_bps, "isolation": isolation,
                    "duration_s": duration_s}
    if isolation == "netns":
        from synclab.netem.netns import NetnsCluster, Topology

        extra = {"prefer": prefer} if prefer else {}
        with NetnsCluster(Topology.star(["a", "b"], profile=profile), **extra) as c:
            applied = c.applied.get("a")
            left = sorted(applied.left_to_app) if applied else []
            result.update(backend=applied.backend if applied else "none", left_to_transport=left,
                          notes=c.notes)
            app_rate = profile.rate_bps if "rate" in left else None
            app_delay = profile.delay_s if "delay" in left else 0.0
            pa, pb_, addr = c.exec_prefix("a"), c.exec_prefix("b"), c.address("b")
            result["synclab"] = transport_goodput(pb_, pa, addr, duration_s=duration_s, rate_bps=app_rate,
                                                  delay_s=app_delay)
            result["tcp"] = bench.tcp_goodput(pb_, pa, addr, duration_s=duration_s).__dict__
            if bench.iperf3_available():
                result["iperf3"] = bench.iperf3_goodput(pb_, pa, addr, duration_s=duration_s).__dict__
            result["rtt_s"] = _rtt_between(pb_, pa, addr)
    else:
        result.update(backend="app" if profile.shapes_anything else "none", left_to_transport=[],
                      notes=["loopback: only SyncLab's transport is shaped (app backend); tcp/iperf3 are not"])
        result["synclab"] = transport_goodput([], [], "127.0.0.1", duration_s=duration_s,
                                              rate_bps=profile.rate_bps, delay_s=profile.delay_s)
        result["rtt_s"] = _rtt_between([], [], "127.0.0.1")
    rate = profile.rate_bps
    for tool in ("synclab", "tcp", "iperf3"):
        if tool in result and rate:
            result[tool]["ratio_to_rate"] = result[tool]["goodput_bps"] / rate
    if "iperf3" in result:
        result["synclab"]["ratio_to_iperf3"] = result["synclab"]["goodput_bps"] / result["iperf3"]["goodput_bps"]
    return result


def _rtt_between(server_prefix, client_prefix, address) -> float:
    srv = subprocess.Popen([*server_prefix, sys.executable, "-m", "synclab.netem.netbench", "echo"],
                           stdout=subprocess.PIPE, text=True)
    try:
        port = json.loads(srv.stdout.readline())["port"]
        return rtt_s(client_prefix, address, port)
    finally:
        srv.kill()
        srv.wait()


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m synclab.netem.netbench")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("sink")
    sub.add_parser("echo")
    s = sub.add_parser("source")
    s.add_argument("address")
    s.add_argument("--duration", type=float, default=3.0)
    s.add_argument("--rate", type=float, default=0.0)
    s.add_argument("--delay", type=float, default=0.0)
    a = ap.parse_args(argv)
    if a.cmd == "sink":
        _transport_sink()
    elif a.cmd == "echo":
        _echo_server()
    else:
        _transport_source(a.address, a.duration, a.rate or None, a.delay)


if __name__ == "__main__":
    main()
