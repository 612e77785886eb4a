"""Does communication overlap compute in one worker process, or does the GIL serialize them?

Side by side, in one run on this machine:
  A. compute alone:        forward+backward of the model on the main thread (torch threads = 1)
  B. communication alone:  a transport thread pushes one model's worth of gradient bytes per
                           iteration over a real gRPC stream to a sink in another process
  C. both at once:         A on the main thread while B runs on the communication thread,
                           exactly as a worker runs them

Ideal overlap gives C = max(A, B); none gives C = A + B. Printed: per-iteration times,
overlap efficiency = (A + B − C) / min(A, B) (1 = perfect, 0 = serialized), and the
slowdown of compute while communication runs (GIL and CPU contention together).

    python benchmarks/overlap.py [--model smallcnn] [--batch 32] [--iterations 20] [--rate 0] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import threading
import time

import torch


def _sink(port_q: mp.Queue, stop: mp.Event) -> None:
    from synclab.transport.node import NodeTransport

    t = NodeTransport("sink", "bench", on_message=lambda m: None)
    port_q.put(t.serve("127.0.0.1", 0, peer=True))
    stop.wait()
    t.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smallcnn")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=5, help="iterations per phase per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rate", type=float, default=0.0, help="app-shaped link rate in bit/s (0 = unshaped)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from synclab.data import make_dataset
    from synclab.models import build_model, model_input_spec
    from synclab.transport.node import NodeTransport
    from synclab.transport.shaper import LinkShaper
    from synclab.wire import pb
    from synclab.wire.frames import Message, MessageId

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = build_model(args.model)
    data = make_dataset("synthetic", model_input_spec(args.model), seed=0)
    grads = [torch.randn(p.shape) for p in model.parameters()]
    n = args.iterations

    ctx = mp.get_context("spawn")
    port_q, stop = ctx.Queue(), ctx.Event()
    sink = ctx.Process(target=_sink, args=(port_q, stop), daemon=True)
    sink.start()
    port = port_q.get(timeout=60)
    node = NodeTransport("bench", "bench", on_message=lambda m: None,
                         shaper=LinkShaper(rate_bps=args.rate or None))
    link = node.connect("sink", f"127.0.0.1:{port}", "peer")

    def compute(i):
        x, y = data.batch(i, 0, 1, args.batch)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        model.zero_grad(set_to_none=True)

    def communicate(i):
        futures = [link.send(Message(MessageId(pb.COLLECTIVE, f"g{k}", 0, i), g)) for k, g in enumerate(grads)]
        for f in futures:
            f.result()

    for i in range(3):  # warm-up both paths
        compute(i)
        communicate(i)

    def phase_a():
        t0 = time.perf_counter()
        for i in range(n):
            compute(i)
        return (time.perf_counter() - t0) / n

    def phase_b():
        t0 = time.perf_counter()
        for i in range(n):
            communicate(i)
        return (time.perf_counter() - t0) / n

    def phase_c():
        th = threading.Thread(target=lambda: [communicate(1000 + i) for i in range(n)])
        t0 = time.perf_counter()
        th.start()
        for i in range(n):
            compute(i)
        during = (time.perf_counter() - t0) / n
        th.join()
        return (time.perf_counter() - t0) / n, during

    # Interleave the phases over several rounds and take medians, so load from
    # other processes on a shared machine hits all three alike.
    samples = {"a": [], "b": [], "c": [], "during": []}
    for _ in range(args.rounds):
        samples["a"].append(phase_a())
        samples["b"].append(phase_b())
        c_, d_ = phase_c()
        samples["c"].append(c_)
        samples["during"].append(d_)
    a, b, c, compute_during = (statistics.median(samples[k]) for k in ("a", "b", "c", "during"))

    node.close()
    stop.set()
    sink.join(10)
    nbytes = sum(g.numel() * 4 for g in grads)
    result = {
        "model": args.model, "batch": args.batch, "iterations": n, "rounds": args.rounds, "bytes_per_iteration": nbytes,
        "rate_bps": args.rate or None,
        "compute_alone_s": a, "comm_alone_s": b, "both_s": c,
        "ideal_both_s": max(a, b), "serial_both_s": a + b,
        "overlap_efficiency": (a + b - c) / min(a, b),
        "compute_slowdown": compute_during / a,
        "comm_goodput_alone_bps": nbytes * 8 / b,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"compute/communication overlap in one worker process ({args.model}, batch {args.batch})")
    t.add_column("measure")
    t.add_column("value", justify="right")
    t.add_row("A compute alone / iteration", f"{a * 1e3:.1f} ms")
    t.add_row("B communication alone / iteration", f"{b * 1e3:.1f} ms ({nbytes / 1e6:.1f} MB, "
                                                     f"{nbytes * 8 / b / 1e9:.2f} Gbit/s)")
    t.add_row("C both at once / iteration", f"{c * 1e3:.1f} ms")
    t.add_row("ideal max(A,B) / serial A+B", f"{max(a, b) * 1e3:.1f} / {(a + b) * 1e3:.1f} ms")
    t.add_row("overlap efficiency (A+B−C)/min(A,B)", f"{result['overlap_efficiency']:.2f}")
    t.add_row("compute slowdown while communicating", f"{result['compute_slowdown']:.2f}×")
    Console().print(t)


if __name__ == "__main__":
    main()
