"""TEMPORARY shim."""
import statistics


def compute_summary(rows, warmup=0):
    its = {}
    for r in rows:
        if r["iteration"] > warmup:
            its.setdefault(r["iteration"], []).append(r)
    times = [max(x["iteration_s"] for x in v) for v in its.values()]
    samples = [sum(x["samples"] for x in v) for v in its.values()]
    mean = statistics.mean(times)
    return {"throughput_samples_per_s": sum(samples) / sum(times), "iteration_seconds": {"mean": mean, "p50": statistics.median(times), "p99": max(times)},
            "compute_seconds_mean": statistics.mean(x["compute_s"] for v in its.values() for x in v),
            "comm_wait_seconds_mean": statistics.mean(x["comm_wait_s"] for v in its.values() for x in v)}
