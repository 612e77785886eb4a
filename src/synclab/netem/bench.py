"""Bulk-transfer goodput between two places (namespaces, or this host): plain TCP sockets and iperf3.

Used by the netns tests and by ``synclab netbench`` to check that a shaped link
delivers its configured rate. The sink and source run as separate processes
(``python -m synclab.netem.bench sink|source``) behind an argv prefix such as
:meth:`NetnsCluster.exec_prefix`, so each end lives in its own namespace. The
sink reports goodput from the receiver's clock: bytes after the first read,
over the time from the first to the last read.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Goodput:
    """One transfer: payload bytes counted, over seconds, as bits/s; ``tool`` is 'tcp' or 'iperf3'."""

    tool: str
    bytes: int
    seconds: float
    goodput_bps: float
    retransmits: int | None = None
    cpu_seconds: float | None = None  # both ends' CPU (iperf3 reports its sender's and receiver's utilisation)

    def ratio(self, rate_bps: int | None) -> float | None:
        return None if not rate_bps else self.goodput_bps / rate_bps


def _sink(port: int) -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    print(json.dumps({"port": srv.getsockname()[1]}), flush=True)
    conn, _ = srv.accept()
    buf = bytearray(CHUNK_BYTES)
    view = memoryview(buf)
    n = conn.recv_into(view)
    t_first = t_last = time.perf_counter()
    counted = 0
    while True:
        n = conn.recv_into(view)
        if n == 0:
            break
        counted += n
        t_last = time.perf_counter()
    conn.close()
    srv.close()
    secs = t_last - t_first
    print(json.dumps({"bytes": counted, "seconds": secs, "goodput_bps": counted * 8 / secs if secs > 0 else 0.0}),
          flush=True)


def _source(address: str, port: int, duration_s: float) -> None:
    payload = memoryview(bytes(CHUNK_BYTES))
    with socket.create_connection((address, port), timeout=30) as s:
        s.settimeout(None)
        end = time.perf_counter() + duration_s
        sent = 0
        while time.perf_counter() < end:
            s.sendall(payload)
            sent += len(payload)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)  # wait for the sink to close: every byte has arrived
    print(json.dumps({"sent": sent}), flush=True)


def tcp_goodput(sink_prefix: Sequence[str], source_prefix: Sequence[str], sink_address: str, *,
                duration_s: float = 2.0, port: int = 0, timeout_s: float = 60.0) -> Goodput:
    """Move bytes for ``duration_s`` from a source (run under ``source_prefix``) to a sink at ``sink_address``."""
    py = [sys.executable, "-m", "synclab.netem.bench"]
    sink = subprocess.Popen([*sink_prefix, *py, "sink", "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        line = sink.stdout.readline()
        if not line:
            raise RuntimeError(f"bench sink did not start: {sink.stderr.read() if sink.stderr else ''}")
        bound = json.loads(line)["port"]
        src = subprocess.run([*source_prefix, *py, "source", sink_address, str(bound), "--duration", str(duration_s)],
                             capture_output=True, text=True, timeout=timeout_s)
        if src.returncode != 0:
            raise RuntimeError(f"bench source failed: {src.stderr.strip()}")
        out, err = sink.communicate(timeout=timeout_s)
        if sink.returncode != 0:
            raise RuntimeError(f"bench sink failed: {err.strip()}")
        r = json.loads(out.strip().splitlines()[-1])
        return Goodput("tcp", r["bytes"], r["seconds"], r["goodput_bps"])
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()


def iperf3_available() -> bool:
    return shutil.which("iperf3") is not None


def iperf3_goodput(server_prefix: Sequence[str], client_prefix: Sequence[str], server_address: str, *,
                   duration_s: float = 2.0, port: int = 5201, timeout_s: float = 60.0) -> Goodput:
    """iperf3's receiver-side goodput for one TCP stream from the client to the server."""
    server = subprocess.Popen([*server_prefix, "iperf3", "-s", "-1", "-p", str(port), "--forceflush"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        for line in server.stdout:
            if "listening" in line.lower():
                break
        else:
            raise RuntimeError(f"iperf3 server did not start: {server.stderr.read() if server.stderr else ''}")
        c = subprocess.run([*client_prefix, "iperf3", "-c", server_address, "-p", str(port), "-t", f"{duration_s:g}",
                            "-J"], capture_output=True, text=True, timeout=timeout_s)
        if c.returncode != 0:
            raise RuntimeError(f"iperf3 client failed: {c.stdout[-500:]} {c.stderr.strip()}")
        end = json.loads(c.stdout)["end"]
        recv, sent = end["sum_received"], end["sum_sent"]
        cpu = end.get("cpu_utilization_percent") or {}
        cpu_s = ((cpu["host_total"] + cpu["remote_total"]) / 100 * float(sent["seconds"])
                 if "host_total" in cpu and "remote_total" in cpu else None)
        return Goodput("iperf3", int(recv["bytes"]), float(recv["seconds"]), float(recv["bits_per_second"]),
                       retransmits=sent.get("retransmits"), cpu_seconds=cpu_s)
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m synclab.netem.bench")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sink")
    s.add_argument("--port", type=int, default=0)
    c = sub.add_parser("source")
    c.add_argument("address")
    c.add_argument("port", type=int)
    c.add_argument("--duration", type=float, default=2.0)
    args = ap.parse_args(argv)
    if args.cmd == "sink":
        _sink(args.port)
    else:
        _source(args.address, args.port, args.duration)


if __name__ == "__main__":
    main()
