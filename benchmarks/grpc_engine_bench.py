"""One gRPC data-plane stream, sync grpcio against grpc.aio: time and CPU per GB of each process (issue 12).

SyncLab's data plane is sync grpcio: a client call consumes the link's frame generator on grpc's own
request-consumer thread, and the server's handler runs in a thread pool and iterates the requests (CHANGELOG.md, "The
data plane beside gloo": after the 4 MiB frames, about two thirds of the ring's CPU per GB is gRPC's threads
and their hand-offs). This benchmark asks whether ``grpc.aio`` (one asyncio loop per process, no consumer or
pool threads) moves the same bytes for less CPU or in less time, before any of SyncLab is rewritten for it.

Two processes, a sender and a receiver (in two network namespaces on a bridge when the host allows it, else
over loopback), and one client stream per round carrying ``--mib`` MiB in messages of ``--sizes`` bytes (raw
bytes, identity serializers, SyncLab's channel and server options for that frame size —
``synclab.wire.channels.channel_options``/``server_options``: message limits, whole-chunk HTTP/2 frames at
4 MiB, keepalive). Engines:

* ``sync``: grpcio as SyncLab drives it: ``channel.stream_stream(...)(iterator)`` (grpc's thread consumes the
  iterator), the server handler iterating the requests on a ``ThreadPoolExecutor`` thread;
* ``aio``: ``grpc.aio`` on both ends: the sender ``await call.write(m)`` per message, the receiver's
  ``async for`` in the handler;
* ``sync-handoff`` / ``aio-handoff``: the same, but every message is produced on another thread and handed over
  per message, as SyncLab's strategy threads hand chunks to the link (sync: a ``queue.Queue`` read by the
  request iterator; aio: ``loop.call_soon_threadsafe`` into an ``asyncio.Queue``, with a credit semaphore of 8
  messages as back-pressure). This is what a data plane on aio would pay per chunk;
* ``socket``: the floor, a plain TCP socket: ``sendall`` of the same bytes, ``recv_into`` one buffer.

The receiver touches nothing it receives (no decode, no add): only the engines' own costs are measured. Each
round is a new stream on the same channel; round 0 is a warm-up; the table gives the median of the others.
CPU is ``getrusage(RUSAGE_SELF)`` user+system of each process (every thread) over the round: the sender from
its first write to the receiver's answer, the receiver from the call's arrival to its last message.

    python benchmarks/grpc_engine_bench.py [--mib 1024] [--sizes 4194304,1048576]
        [--engines socket,sync,aio,sync-handoff,aio-handoff] [--repeats 3] [--cycles 1] [--loopback] [--out runs/grpc-engine]

Writes ``engines.json`` to ``--out`` when given. Result on the 2-core VM (2026-11-26): aio saves neither CPU nor
time (CHANGELOG.md, "The data plane beside gloo", "grpc.aio instead of sync grpcio, measured").
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ENGINES = ("socket", "sync", "aio", "sync-handoff", "aio-handoff")
METHOD = "/bench.Engine/Stream"
PORT = 29710
CREDITS = 8  # messages a producer thread may be ahead of the aio loop (the handoff engines' back-pressure)


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def threads_now():
    from synclab.metrics.threadcpu import thread_cpu

    return thread_cpu()


def fold_threads(per_name: dict[str, float]) -> dict[str, float]:
    """Thread names without their numbers (``Thread-6 (_run)`` -> ``Thread (_run)``; gRPC core's own threads,
    ``native:event_engine``, as they are), CPU seconds summed per folded name."""
    out: dict[str, float] = {}
    for name, sec in per_name.items():
        key = re.sub(r"-\d+(_\d+)?", "", name)
        out[key] = out.get(key, 0.0) + sec
    return out


def threads_since(before, after=None) -> dict[str, float]:
    """CPU seconds per (folded) thread name between two ``threads_now()`` snapshots (after: now)."""
    from synclab.metrics.threadcpu import cpu_between

    return fold_threads(cpu_between(before, threads_now() if after is None else after))


def roles_per_gb(rounds: list[dict], key: str, nbytes: int) -> dict[str, float]:
    """Mean CPU s/GB per thread role over ``rounds`` (each with ``key``: role -> seconds in that round)."""
    total: dict[str, float] = {}
    for r in rounds:
        for role, sec in r.get(key, {}).items():
            total[role] = total.get(role, 0.0) + sec
    gb = nbytes / 1e9 * len(rounds)
    return {role: sec / gb for role, sec in sorted(total.items(), key=lambda kv: -kv[1])}


def parse_sizes(text: str) -> list[int]:
    """``"4194304,1m,4MiB"`` -> bytes; K/M suffixes are binary (KiB/MiB)."""
    out = []
    for part in text.split(","):
        p = part.strip().lower().removesuffix("ib").removesuffix("b")
        if not p:
            continue
        mult = {"k": 1 << 10, "m": 1 << 20}.get(p[-1], 1)
        digits = p[:-1] if mult > 1 else p
        if not digits.isdigit() or int(digits) <= 0:
            raise ValueError(f"not a message size: {part!r} (bytes, or a number with K or M)")
        out.append(int(digits) * mult)
    if not out:
        raise ValueError("no message sizes given")
    return out


def parse_engines(text: str) -> list[str]:
    names = [e.strip() for e in text.split(",") if e.strip()]
    bad = [e for e in names if e not in ENGINES]
    if bad or not names:
        raise ValueError(f"unknown engine(s) {bad or text!r}; choose from {', '.join(ENGINES)}")
    return names


def messages_for(mib: int, size: int) -> int:
    """Messages of ``size`` bytes in a stream of ``mib`` MiB (at least one)."""
    return max(1, (mib << 20) // size)


def summarize(rounds: list[dict], nbytes: int) -> dict:
    """Median over measured rounds (each ``{"seconds", "tx_cpu_s", "rx_cpu_s"}``) of Gbit/s and CPU s per GB.

    Every figure is a median of its own (not all from the same round): the rounds' noise is per figure."""
    if not rounds:
        raise ValueError("no measured rounds")
    gb = nbytes / 1e9
    secs = [r["seconds"] for r in rounds]
    return {
        "seconds": statistics.median(secs),
        "gbps": statistics.median(nbytes * 8 / 1e9 / s for s in secs),
        "tx_cpu_s_per_gb": statistics.median(r["tx_cpu_s"] / gb for r in rounds),
        "rx_cpu_s_per_gb": statistics.median(r["rx_cpu_s"] / gb for r in rounds),
        "cpu_s_per_gb": statistics.median((r["tx_cpu_s"] + r["rx_cpu_s"]) / gb for r in rounds),
        "rounds": len(rounds),
    }


def saving(base: dict, new: dict, key: str) -> float:
    """The fraction ``new`` saves against ``base`` on ``key`` (seconds or CPU per GB; > 0 is better)."""
    return 1.0 - new[key] / base[key]


# -- the engines' receivers --------------------------------------------------------------------------------------
def _options(size: int, server: bool):
    from synclab.wire.channels import channel_options, server_options

    return (server_options if server else channel_options)(size)


def _ack(cpu: float, count: int, nbytes: int, threads0) -> bytes:
    return json.dumps({"rx_cpu_s": cpu, "count": count, "bytes": nbytes,
                       "rx_threads": threads_since(threads0)}).encode()


def receive_sync(port: int, size: int, rounds: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    done = threading.Semaphore(0)

    def stream(requests, context):
        c0, th0, count, nbytes = cpu_s(), threads_now(), 0, 0
        for m in requests:
            count += 1
            nbytes += len(m)
        ack = _ack(cpu_s() - c0, count, nbytes, th0)
        done.release()  # before the yield: the sender may cancel the call once it has read the answer
        yield ack

    server = grpc.server(ThreadPoolExecutor(max_workers=4), options=_options(size, True))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Engine", {
        "Stream": grpc.stream_stream_rpc_method_handler(stream)}),))
    server.add_insecure_port(f"0.0.0.0:{port}")
    server.start()
    print("ready", flush=True)
    for _ in range(rounds):
        done.acquire()
    server.stop(1).wait()


def receive_aio(port: int, size: int, rounds: int) -> None:
    import asyncio

    import grpc

    async def main():
        left = [rounds]
        finished = asyncio.Event()

        async def stream(requests, context):
            c0, th0, count, nbytes = cpu_s(), threads_now(), 0, 0
            async for m in requests:
                count += 1
                nbytes += len(m)
            ack = _ack(cpu_s() - c0, count, nbytes, th0)
            left[0] -= 1
            if not left[0]:
                finished.set()
            yield ack

        server = grpc.aio.server(options=_options(size, True))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Engine", {
            "Stream": grpc.stream_stream_rpc_method_handler(stream)}),))
        server.add_insecure_port(f"0.0.0.0:{port}")
        await server.start()
        print("ready", flush=True)
        await finished.wait()
        await server.stop(1)

    asyncio.run(main())


def receive_socket(port: int, size: int, rounds: int, messages: int) -> None:
    srv = socket.create_server(("0.0.0.0", port))
    print("ready", flush=True)
    buf = bytearray(size)
    view = memoryview(buf)
    for _ in range(rounds):
        conn, _ = srv.accept()
        c0 = th0 = None
        left = messages * size
        while left:
            n = conn.recv_into(view[:min(size, left)])
            if c0 is None:
                c0, th0 = cpu_s(), threads_now()
            if not n:
                raise ConnectionError("the sender closed early")
            left -= n
        conn.sendall(_ack(cpu_s() - c0, messages, messages * size, th0))
        conn.close()
    srv.close()


# -- the engines' senders (one round each: returns seconds, sender CPU, the receiver's ack) --------------------
def _producer(messages: int, payload: bytes, put) -> threading.Thread:
    t = threading.Thread(target=lambda: [put(payload) for _ in range(messages)] and None, daemon=True)
    t.start()
    return t


def send_sync(address: str, size: int, messages: int, rounds: int, handoff: bool) -> list[dict]:
    import grpc

    payload = os.urandom(size)
    out = []
    with grpc.insecure_channel(address, options=_options(size, False)) as ch:
        grpc.channel_ready_future(ch).result(timeout=30)
        call = ch.stream_stream(METHOD)
        for _ in range(rounds):
            end: dict = {}
            if handoff:
                q: queue.Queue = queue.Queue(maxsize=CREDITS)

                def requests(q=q):
                    for _ in range(messages):
                        yield q.get()
                    end["threads"] = threads_now()  # grpc's consumer thread, before it ends with the call
            else:
                def requests():
                    for _ in range(messages):
                        yield payload
                    end["threads"] = threads_now()
            t0, c0, th0 = time.perf_counter(), cpu_s(), threads_now()
            if handoff:
                _producer(messages, payload, q.put)
            responses = call(requests())
            ack = json.loads(next(responses))
            for _ in responses:  # the stream's end
                pass
            out.append({"seconds": time.perf_counter() - t0, "tx_cpu_s": cpu_s() - c0,
                        "tx_threads": threads_since(th0, end["threads"]), **ack})
    return out


def send_aio(address: str, size: int, messages: int, rounds: int, handoff: bool) -> list[dict]:
    import asyncio

    import grpc

    payload = os.urandom(size)

    async def main():
        out = []
        loop = asyncio.get_running_loop()
        async with grpc.aio.insecure_channel(address, options=_options(size, False)) as ch:
            await asyncio.wait_for(ch.channel_ready(), 30)
            method = ch.stream_stream(METHOD)
            for _ in range(rounds):
                t0, c0, th0 = time.perf_counter(), cpu_s(), threads_now()
                call = method()
                if handoff:
                    q: asyncio.Queue = asyncio.Queue()
                    credits = threading.Semaphore(CREDITS)

                    def put(m, q=q, credits=credits):
                        credits.acquire()
                        loop.call_soon_threadsafe(q.put_nowait, m)
                    _producer(messages, payload, put)
                    for _ in range(messages):
                        m = await q.get()
                        credits.release()
                        await call.write(m)
                else:
                    for _ in range(messages):
                        await call.write(payload)
                await call.done_writing()
                ack = json.loads(await call.read())
                out.append({"seconds": time.perf_counter() - t0, "tx_cpu_s": cpu_s() - c0,
                            "tx_threads": threads_since(th0), **ack})
        return out

    return asyncio.run(main())


def send_socket(address: str, size: int, messages: int, rounds: int) -> list[dict]:
    host, port = address.rsplit(":", 1)
    payload = os.urandom(size)
    out = []
    for _ in range(rounds):
        for _ in range(100):  # the receiver's next accept may not be up yet
            try:
                s = socket.create_connection((host, int(port)))
                break
            except ConnectionRefusedError:
                time.sleep(0.05)
        else:
            raise ConnectionError(f"no receiver at {address}")
        t0, c0, th0 = time.perf_counter(), cpu_s(), threads_now()
        for _ in range(messages):
            s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        ack = b""
        while chunk := s.recv(4096):
            ack += chunk
        out.append({"seconds": time.perf_counter() - t0, "tx_cpu_s": cpu_s() - c0, "tx_threads": threads_since(th0),
                    **json.loads(ack)})
        s.close()
    return out


# -- orchestration ---------------------------------------------------------------------------------------------
def run_pair(engine: str, size: int, messages: int, repeats: int, rx_prefix: list[str], tx_prefix: list[str],
             address: str) -> dict:
    """Receiver then sender, each a fresh process; the summary of rounds 1..repeats (round 0 warms up)."""
    rounds = repeats + 1
    common = ["--engine", engine, "--size", str(size), "--messages", str(messages), "--rounds", str(rounds)]
    rx = subprocess.Popen([*rx_prefix, sys.executable, __file__, "receiver", "--port", str(PORT), *common],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = rx.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"{engine} receiver did not start: {line}{rx.stderr.read()[-1500:]}")
        tx = subprocess.run([*tx_prefix, sys.executable, __file__, "sender", "--address", f"{address}:{PORT}",
                             *common], capture_output=True, text=True, timeout=600)
        if tx.returncode != 0:
            raise RuntimeError(f"{engine} sender failed: {tx.stderr[-1500:]}")
        rx.wait(timeout=60)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    results = json.loads(tx.stdout.strip().splitlines()[-1])
    for r in results:
        if r["count"] != messages or r["bytes"] != messages * size:
            raise RuntimeError(f"{engine}: the receiver got {r['count']} messages, {r['bytes']} bytes")
    measured, nbytes = results[1:], messages * size
    return {"engine": engine, "size": size, "messages": messages, **summarize(measured, nbytes),
            "tx_threads_s_per_gb": roles_per_gb(measured, "tx_threads", nbytes),
            "rx_threads_s_per_gb": roles_per_gb(measured, "rx_threads", nbytes), "all": measured}


def pool(rows: list[dict]) -> dict:
    """One engine and size measured in several cycles (:func:`run_pair` rows): the summary of all their rounds."""
    if not rows:
        raise ValueError("nothing to pool")
    first = rows[0]
    if any((r["engine"], r["size"], r["messages"]) != (first["engine"], first["size"], first["messages"]) for r in rows):
        raise ValueError("pooling rows of different engines or sizes")
    rounds = [x for r in rows for x in r["all"]]
    nbytes = first["messages"] * first["size"]
    return {"engine": first["engine"], "size": first["size"], "messages": first["messages"],
            **summarize(rounds, nbytes), "tx_threads_s_per_gb": roles_per_gb(rounds, "tx_threads", nbytes),
            "rx_threads_s_per_gb": roles_per_gb(rounds, "rx_threads", nbytes), "all": rounds}


def _role_main(args) -> None:
    if args.role == "receiver":
        if args.engine == "socket":
            receive_socket(args.port, args.size, args.rounds, args.messages)
        elif args.engine.startswith("aio"):
            receive_aio(args.port, args.size, args.rounds)
        else:
            receive_sync(args.port, args.size, args.rounds)
        return
    handoff = args.engine.endswith("-handoff")
    if args.engine == "socket":
        res = send_socket(args.address, args.size, args.messages, args.rounds)
    elif args.engine.startswith("aio"):
        res = send_aio(args.address, args.size, args.messages, args.rounds, handoff)
    else:
        res = send_sync(args.address, args.size, args.messages, args.rounds, handoff)
    print(json.dumps(res), flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("receiver", "sender"):
        p = argparse.ArgumentParser()
        p.add_argument("role")
        p.add_argument("--engine", required=True, choices=ENGINES)
        p.add_argument("--size", type=int, required=True)
        p.add_argument("--messages", type=int, required=True)
        p.add_argument("--rounds", type=int, required=True)
        p.add_argument("--port", type=int, default=PORT)
        p.add_argument("--address", default="")
        _role_main(p.parse_args())
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mib", type=int, default=1024, help="MiB per stream (default 1024: 256 messages of 4 MiB, "
                   "1024 of 1 MiB)")
    p.add_argument("--sizes", default="4194304,1048576", help="message sizes in bytes (K/M suffixes binary)")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--repeats", type=int, default=3, help="measured rounds per engine, after one warm-up")
    p.add_argument("--cycles", type=int, default=1,
                   help="run the engine list this many times in turn (sync, aio, ..., sync, aio, ...) and pool the "
                        "rounds: a host whose load drifts then weighs on every engine alike")
    p.add_argument("--loopback", action="store_true", help="one namespace, 127.0.0.1 (default: two namespaces)")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    try:
        sizes, engines = parse_sizes(args.sizes), parse_engines(args.engines)
    except ValueError as e:
        p.error(str(e))
    if args.mib < 1 or args.repeats < 1 or args.cycles < 1:
        p.error("--mib, --repeats and --cycles must be at least 1")

    cluster = None
    if not args.loopback:
        from synclab.netem.netns import NetnsCluster, Topology, netns_unavailable_reason

        reason = netns_unavailable_reason()
        if reason:
            print(f"no namespaces ({reason}); loopback instead", file=sys.stderr)
        else:
            cluster = NetnsCluster(Topology.star(["rx", "tx"])).up()
    try:
        if cluster is not None:
            rx_prefix, tx_prefix, address = cluster.exec_prefix("rx"), cluster.exec_prefix("tx"), cluster.address("rx")
        else:
            rx_prefix, tx_prefix, address = [], [], "127.0.0.1"
        where = "two namespaces, veth + bridge" if cluster is not None else "loopback"
        parts: dict[tuple[int, str], list[dict]] = {}
        for cycle in range(args.cycles):
            for size in sizes:
                for engine in engines:
                    row = run_pair(engine, size, messages_for(args.mib, size), args.repeats, rx_prefix, tx_prefix,
                                   address)
                    parts.setdefault((size, engine), []).append(row)
                    print(f"[{cycle + 1}/{args.cycles}] {engine:>12} {size >> 10:>6} KiB  {row['gbps']:6.2f} Gbit/s  "
                          f"{row['seconds']:.3f} s  CPU s/GB tx {row['tx_cpu_s_per_gb']:.3f} "
                          f"rx {row['rx_cpu_s_per_gb']:.3f} sum {row['cpu_s_per_gb']:.3f}", flush=True)
        rows = [pool(group) for group in parts.values()]
        print(f"\npooled: median of {args.cycles} x {args.repeats} rounds per engine")
        for row in rows:
            print(f"{row['engine']:>12} {row['size'] >> 10:>6} KiB  {row['gbps']:6.2f} Gbit/s  {row['seconds']:.3f} s  "
                  f"CPU s/GB tx {row['tx_cpu_s_per_gb']:.3f} rx {row['rx_cpu_s_per_gb']:.3f} "
                  f"sum {row['cpu_s_per_gb']:.3f}", flush=True)
            for side in ("tx", "rx"):
                print(f"{'':>14}{side} threads s/GB: " + ", ".join(
                    f"{k} {v:.3f}" for k, v in row[f"{side}_threads_s_per_gb"].items() if v >= 0.005), flush=True)
    finally:
        if cluster is not None:
            cluster.down()
    print(f"\n{where}; {args.mib} MiB per stream; median of {args.cycles} x {args.repeats} rounds after a warm-up each; "
          f"load average {os.getloadavg()[0]:.2f}")
    for size in sizes:
        by = {r["engine"]: r for r in rows if r["size"] == size}
        if "sync" in by and "aio" in by:
            s, a = by["sync"], by["aio"]
            print(f"{size >> 10} KiB: aio saves {saving(s, a, 'cpu_s_per_gb'):+.0%} CPU per GB and "
                  f"{saving(s, a, 'seconds'):+.0%} time against sync", end="")
            if "sync-handoff" in by and "aio-handoff" in by:
                sh, ah = by["sync-handoff"], by["aio-handoff"]
                print(f"; with a per-message hand-off {saving(sh, ah, 'cpu_s_per_gb'):+.0%} CPU, "
                      f"{saving(sh, ah, 'seconds'):+.0%} time", end="")
            print()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "engines.json").write_text(json.dumps({"where": where, "mib": args.mib, "cycles": args.cycles,
                                                           "repeats": args.repeats, "rows": rows,
                                                           "loadavg": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
