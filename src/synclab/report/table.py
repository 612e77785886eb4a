"""The run summary as a rich table (``synclab report``)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from synclab.report.records import RunRecords, natural_key

MISSING = "—"


def fmt_bytes(n: float) -> str:
    """Decimal units, like the papers' MB and Gbit."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


def _ms(s: Any) -> str:
    return MISSING if s is None else f"{s * 1e3:.1f} ms"


def _num(x: Any, spec: str) -> str:
    return MISSING if x is None else format(x, spec)


def iterations_text(summary: dict[str, Any]) -> str:
    """The run's iterations and what the figures leave out: the strategy's calibration (its iteration numbers
    and what it was for) where it had any, and the warm-up; the figures are over the rest, the steady state."""
    g = summary.get
    text = f"{g('iterations', MISSING)}"
    phases, calibration = g("phases"), g("calibration") or {}
    if phases is None:  # recorded before phases: warm-up was all that was left out
        return text + (f" ({g('warmup')} warm-up)" if g("warmup") is not None else "")
    parts = []
    if phases.get("calibration"):
        its = calibration.get("iterations") or []
        span = f"{its[0]}-{its[-1]}" if len(its) > 1 else "".join(map(str, its))
        parts.append(f"{phases['calibration']} calibration, iterations {span}: {calibration.get('what', '?')}")
    warmup = g("warmup") or 0
    if warmup:
        inside = warmup - phases.get("warmup", 0)
        parts.append(f"{warmup} warm-up" + (f", {inside} of them within the calibration" if inside > 0 else ""))
    n = g("measured_iterations", MISSING)
    parts.append(f"figures over {n} steady-state" if g("figures_cover", "steady") == "steady"
                 else f"figures over {n} calibration iterations: no steady-state iteration")
    return f"{text} ({'; '.join(parts)})"


def summary_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) pairs of a summary; a key the summary lacks shows as a dash."""
    g = summary.get
    it = g("iteration_seconds") or {}
    rate = g("link_rate_bps")
    rows = [
        ("status", str(g("status", MISSING))),
        ("strategy", str(g("strategy", MISSING))),
        ("model", f"{g('model', MISSING)}" + (f" (batch {g('batch_size')}/worker)" if g("batch_size") else "")),
        ("cluster", f"{g('workers', MISSING)} worker(s), {g('ps_shards', MISSING)} PS shard(s)"),
        ("network", f"{g('network_backend', MISSING)}, " + (f"{rate / 1e9:g} Gbit/s" if rate else "unshaped")),
        ("iterations", iterations_text(summary)),
        ("throughput", MISSING if g("throughput_samples_per_s") is None
         else f"{g('throughput_samples_per_s'):.1f} samples/s"),
        ("iteration time", f"mean {_ms(it.get('mean'))}, p50 {_ms(it.get('p50'))}, p99 {_ms(it.get('p99'))}"),
        ("compute / non-overlapped comm",
         f"{_ms(g('compute_seconds_mean'))} / {_ms(g('comm_wait_seconds_mean'))} per iteration"),
    ]
    if "communication_hidden" in summary:
        hidden = g("communication_hidden")
        rows.append(("communication hidden",
                     "n/a (no communication)" if hidden is None else
                     f"{hidden * 100:.0f}% of {_ms(g('communicating_seconds_mean'))} on the wire per iteration "
                     "(wire time during which forward, backward or the optimizer step ran ÷ wire time)"))
    rows.append(("loss", f"{_num(g('initial_loss'), '.4f')} → {_num(g('final_loss'), '.4f')}"))
    if "final_test_accuracy" in summary:  # run.eval_every
        rows.append(("test accuracy", f"{g('final_test_accuracy') * 100:.2f}% after iteration "
                                      f"{g('final_eval_iteration')} (best {g('best_test_accuracy') * 100:.2f}% at "
                                      f"{g('best_eval_iteration')}; {g('test_samples')} held-out samples)"))
    rows.extend(per_worker_rows(g("per_worker") or {}))
    sent = g("bytes_sent") or {}
    rows.append(("bytes sent", ", ".join(f"{n} {fmt_bytes(sent[n])}" for n in sorted(sent, key=natural_key))
                 or MISSING))
    return rows


def per_worker_rows(per_worker: dict) -> list[tuple[str, str]]:
    """One row per worker when some worker waited for another (summary.json ``per_worker``): how long it
    computed, how long it waited, and for whom."""
    if not any(k != "communication" for w in per_worker.values() for k in w.get("waited_for", {})):
        return []
    rows = []
    for name, w in per_worker.items():
        whom = sorted(w["waited_for"].items(), key=lambda kv: -kv[1])
        detail = ", ".join(f"{s:.2f} s for {k}" for k, s in whom if s >= 0.005)
        slowest = f"; slowest in {w['slowest_iterations']} iteration(s)" if w.get("slowest_iterations") else ""
        rows.append((f"{name}", f"computed {w['compute_s']:.2f} s, waited {w['wait_s']:.2f} s"
                     + (f" ({detail})" if detail else "") + slowest))
    return rows


def summary_table(run: RunRecords) -> Table:
    table = Table(title=f"SyncLab run {run.run_dir.name}", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    for key, value in summary_rows(run.summary):
        table.add_row(key, value)
    return table
