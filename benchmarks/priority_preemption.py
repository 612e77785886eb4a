"""P3's preemption: how long an urgent message waits behind bulk traffic (issue 12 items 4 and 5).

A node sends a large low-priority message (priority 9) and, once it is on the wire, a small urgent one
(priority 0). ``one peer``: both go to peer A; ``two peers``: the bulk to peer B, the urgent one to A. P3 §4.2 has
one consumer thread per worker take "the highest priority slice from the queue" whatever its destination, so the
urgent message should be done as soon with two peers as with one: after what is already committed to the wire
and its own transmission time. The figure is the time from queueing the urgent message to its last byte arriving,
beside its own transmission time at the rate, and beside ``alone``: the same urgent message sent with no bulk at
all (to a peer whose stream has carried nothing yet, like peer A with two peers). Where the sender's CPU rather
than the link bounds the rate (4 Gbit/s on a 2-core host), ``alone`` is the floor the other two can reach.
``--warm-kb N`` first sends N kB to each peer (then waits 50 ms), so the streams start as in a job's steady state
(TCP congestion window and HTTP/2 windows grown) rather than fresh.

``--isolation none``: one process, loopback, the app backend's token bucket shapes the sender (the transport's
priority order alone). ``--isolation netns``: sender and peers in network namespaces, the sender's egress shaped
by the kernel (tbf/htb); then bytes the transport already wrote into the socket are first in, first out, and the
socket buffer and qdisc queue delay the urgent message. ``--notsent-lowat BYTES`` sets the namespaces'
``net.ipv4.tcp_notsent_lowat`` (how many unsent bytes a socket may hold; the kernel default is unbounded).

    python benchmarks/priority_preemption.py [--isolation none|netns] [--rate 80mbit] [--big-mb 8]
        [--urgent-kb 1000] [--chunk-kb 64] [--repeats 3] [--notsent-lowat BYTES] [--warm-kb 0]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time

TOKEN = "preemption"


def _sink(name: str, chunk_bytes: int) -> None:
    """A peer: serve, print the port, then print the arrival time (CLOCK_MONOTONIC) of the urgent message."""
    from synclab.transport.node import NodeTransport

    arrived = threading.Event()

    def on_message(msg):
        if msg.mid.key == "urgent":
            print(json.dumps({"urgent_arrived": time.monotonic()}), flush=True)
            arrived.set()
        elif msg.mid.key == "big":
            print(json.dumps({"big_arrived": time.monotonic()}), flush=True)

    node = NodeTransport(name, TOKEN, on_message=on_message, chunk_bytes=chunk_bytes)
    print(json.dumps({"port": node.serve("0.0.0.0", 0, peer=True)}), flush=True)
    sys.stdin.readline()  # the driver closes stdin when the case is over
    node.close(0.5)


MODES = ("one", "two", "alone")  # one peer, two peers, no bulk


def _send(links: dict, mode: str, rate_bps: float, big_bytes: int, urgent_bytes: int, chunk_bytes: int) -> float:
    """Queue the bulk (none ``alone``), wait until it is on the wire, queue the urgent message; when it was queued."""
    import torch

    from synclab.wire import pb
    from synclab.wire.frames import Message, MessageId

    to_a = links["a"]
    to_b = links["b"] if mode == "two" else to_a
    if mode != "alone":
        to_b.send(Message(MessageId(pb.COLLECTIVE, "big", 0, 1), torch.zeros(big_bytes // 4), 9))
    time.sleep(max(0.05, chunk_bytes * 8 / rate_bps * 3))  # the bulk is flowing
    queued = time.monotonic()
    to_a.send(Message(MessageId(pb.COLLECTIVE, "urgent", 0, 1), torch.zeros(urgent_bytes // 4), 0))
    return queued


def _warm(links: dict, nbytes: int) -> None:
    """Send ``nbytes`` (priority 5) to every peer, wait until gRPC has taken them, then 50 ms for them to land."""
    import torch

    from synclab.wire import pb
    from synclab.wire.frames import Message, MessageId

    if nbytes <= 0:
        return
    futures = [link.send(Message(MessageId(pb.COLLECTIVE, "warm", 0, 1), torch.zeros(max(1, nbytes // 4)), 5))
               for link in links.values()]
    for f in futures:
        f.result()
    time.sleep(0.05)


def _source(addresses: dict[str, str], mode: str, rate_bps: float, app_shaping: bool, big_bytes: int,
            urgent_bytes: int, chunk_bytes: int, warm_bytes: int = 0) -> None:
    from synclab.transport.node import NodeTransport
    from synclab.transport.shaper import LinkShaper

    src = NodeTransport("src", TOKEN, on_message=lambda m: None, policy="priority", chunk_bytes=chunk_bytes,
                        shaper=LinkShaper(rate_bps=rate_bps) if app_shaping else None)
    links = {n: src.connect(n, addr, "peer") for n, addr in addresses.items()}
    _warm(links, warm_bytes)
    queued = _send(links, mode, rate_bps, big_bytes, urgent_bytes, chunk_bytes)
    print(json.dumps({"urgent_queued": queued}), flush=True)
    sys.stdin.readline()
    src.close(0.5)


def one_case(prefixes: dict[str, list[str]], addresses: dict[str, str], mode: str, a) -> float:
    """Run sinks and the source as processes (behind namespace prefixes or none); the urgent message's latency."""
    py = [sys.executable, __file__]
    common = ["--chunk-kb", str(a.chunk_kb)]
    sinks = {n: subprocess.Popen([*prefixes[n], *py, "sink", n, *common], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True) for n in ("a", "b")}
    procs = list(sinks.values())
    try:
        ports = {n: json.loads(p.stdout.readline())["port"] for n, p in sinks.items()}
        targets = ",".join(f"{n}={addresses[n]}:{ports[n]}" for n in ("a", "b"))
        src = subprocess.Popen([*prefixes["src"], *py, "source", targets, "--rate", a.rate, "--big-mb", str(a.big_mb),
                                "--urgent-kb", str(a.urgent_kb), *common, "--mode", mode, "--warm-kb", str(a.warm_kb),
                                *(["--app-shaping"] if a.isolation == "none" else [])],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(src)
        queued = json.loads(src.stdout.readline())["urgent_queued"]
        arrived = None
        big_sink = {"one": sinks["a"], "two": sinks["b"], "alone": None}[mode]
        for line in sinks["a"].stdout:
            rec = json.loads(line)
            if "urgent_arrived" in rec:
                arrived = rec["urgent_arrived"]
                break
        for line in big_sink.stdout if big_sink else ():  # let the bulk finish before the next case
            if "big_arrived" in line:
                break
        return arrived - queued
    finally:
        for p in procs:
            if p.poll() is None:
                p.stdin.close()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("role", nargs="?", choices=("sink", "source"), help=argparse.SUPPRESS)
    ap.add_argument("arg", nargs="?", help=argparse.SUPPRESS)
    ap.add_argument("--isolation", choices=("none", "netns"), default="none")
    ap.add_argument("--rate", default="80mbit")
    ap.add_argument("--big-mb", type=float, default=8.0)
    ap.add_argument("--urgent-kb", type=float, default=1000.0)
    ap.add_argument("--chunk-kb", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--notsent-lowat", type=int, default=None)
    ap.add_argument("--warm-kb", type=float, default=0.0)
    ap.add_argument("--mode", choices=MODES, default="one", help=argparse.SUPPRESS)
    ap.add_argument("--app-shaping", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()

    from synclab.units import parse_rate_bps

    rate = parse_rate_bps(a.rate)
    chunk, big, urgent = a.chunk_kb << 10, int(a.big_mb * 1e6), int(a.urgent_kb * 1e3)
    if a.role == "sink":
        _sink(a.arg, chunk)
        return
    if a.role == "source":
        addresses = dict(item.split("=", 1) for item in a.arg.split(","))
        _source(addresses, a.mode, rate, a.app_shaping, big, urgent, chunk, int(a.warm_kb * 1e3))
        return

    own = urgent * 8 / rate
    print(f"{a.rate} ({a.isolation}): urgent {urgent / 1e3:.0f} kB (alone {own * 1e3:.1f} ms) queued behind "
          f"{big / 1e6:.1f} MB of priority 9, chunks of {a.chunk_kb} KiB ({chunk * 8 / rate * 1e3:.1f} ms each)"
          + (f", tcp_notsent_lowat {a.notsent_lowat} B" if a.notsent_lowat is not None else "")
          + (f", streams warmed with {a.warm_kb:.0f} kB" if a.warm_kb > 0 else ""))

    def report(prefixes, addresses):
        for mode in MODES:
            times = [one_case(prefixes, addresses, mode, a) for _ in range(a.repeats)]
            med = statistics.median(times)
            label = {"one": "one peer", "two": "two peers", "alone": "alone"}[mode]
            print(f"  {label:9}: urgent done after {med * 1e3:7.1f} ms "
                  f"(= {med / own:5.2f}x its own time; runs {', '.join(f'{t * 1e3:.0f}' for t in times)} ms)")

    if a.isolation == "none":
        report({n: [] for n in ("src", "a", "b")}, {"a": "127.0.0.1", "b": "127.0.0.1"})
        return
    from synclab.linkprofile import LinkProfile
    from synclab.netem.netns import NetnsCluster, Topology

    shaped = LinkProfile(name=a.rate, rate=a.rate)
    with NetnsCluster(Topology.star(["src", "a", "b"], profiles={"src": shaped}),
                      notsent_lowat=a.notsent_lowat) as c:
        print(f"  sender's egress: {c.applied['src'].backend}")
        report({n: c.exec_prefix(n) for n in ("src", "a", "b")}, {n: c.address(n) for n in ("a", "b")})


if __name__ == "__main__":
    main()
