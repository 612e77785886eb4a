"""``synclab load``: Locust, headless, against a PS shard or the coordinator, and what it measured.

Locust runs in its own process (it monkey-patches the standard library for
gevent; the target's threads must not be), started with the target's address and
token in its environment. The target, unless ``address`` names an existing one,
runs in this process, so its memory can be sampled while it is loaded and its
store checked once the users have stopped (``--stop-timeout`` lets each finish the
push it has begun, so nothing is left half-acknowledged).

Outputs in ``out``: ``load.csv`` (one row per request type), ``load.json``
(the same, the target's memory and the store check), ``load.png`` (requests/s,
failures/s and latency over time; the target's memory), and Locust's own
``locust_*.csv`` and ``locust_final.json``.

Only the truth: every output of an earlier run in ``out`` is removed before
Locust starts, so nothing stale can be read as this run's; each report names
its run (``run``: id, start time, target address); an ``--address`` that does
not answer within :data:`REACH_TIMEOUT_S` is an error before any load; and
Locust's exit code counts: it exits :data:`LOCUST_FAILED_REQUESTS` when
requests failed, which is a problem unless every failure is the started
target's designed back-pressure (``RESOURCE_EXHAUSTED`` past ``max_streams``),
and any other non-zero code is a problem too.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from synclab.fileio import write_atomic
from synclab.load.targets import TARGETS, CoordinatorTarget, RssSampler, ShardTarget

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
CSV_COLUMNS = ["run_id", "target", "name", "users", "duration_s", "requests", "failures", "requests_per_s", "mbytes_per_s",
               "p50_ms", "p99_ms", "max_ms"]


LOCUST_FAILED_REQUESTS = 3   # Locust's exit code when requests failed (--exit-code-on-error)
REACH_TIMEOUT_S = 5.0        # how long an --address target has to answer before any load
BACK_PRESSURE = "RESOURCE_EXHAUSTED"
# what a run writes in ``out``, all removed before the next one starts
OUTPUTS = ("load.csv", "load.json", "load.png", "locust.log", "locust_final.json", "locust_stats.csv",
           "locust_stats_history.csv", "locust_failures.csv", "locust_exceptions.csv")


class LoadError(RuntimeError):
    """Locust could not run, the target could not be reached, or the target was damaged by the load."""


@dataclass
class LoadSettings:
    target: str = "ps"
    users: int = 8
    duration_s: float = 60.0
    spawn_rate: float = 100.0
    address: str | None = None      # an existing target; None: start one here
    token: str | None = None
    keys: int = 8
    floats: int = 1 << 18           # per pushed tensor: 1 MiB of fp32
    max_streams: int = 64           # the target's concurrent-RPC limit (past it: RESOURCE_EXHAUSTED)
    queue_bytes: int = 64 << 20     # the shard's send queue per stream (transport.queue_bytes)
    chunk_bytes: int = 1 << 20
    stop_timeout_s: float = 10.0

    def __post_init__(self):
        if self.target not in TARGETS:
            raise ValueError(f"unknown load target {self.target!r}; choose one of {TARGETS}")
        for name in ("users", "keys", "floats", "max_streams", "queue_bytes", "chunk_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.duration_s <= 0 or self.spawn_rate <= 0:
            raise ValueError(f"duration and spawn rate must be positive, got {self.duration_s}, {self.spawn_rate}")
        if self.address is not None and not self.token:
            raise ValueError("an existing target (--address) needs its job token (--token or SYNCLAB_TOKEN)")


@dataclass
class LoadResult:
    settings: dict
    rows: list[dict]
    target_memory: dict | None = None     # bytes: baseline, peak, bound (a target started here)
    check: dict | None = None             # the store after the run (a target started here)
    problems: list[str] = field(default_factory=list)
    run: dict = field(default_factory=dict)   # which run this is: id, start time (UTC), target address
    locust_exit_code: int | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def percentile(response_times: dict, q: float) -> float:
    """The q-quantile (0..1) of Locust's response-time histogram (ms -> count), as Locust rounds it."""
    items = sorted((float(k), int(v)) for k, v in response_times.items())
    total = sum(v for _, v in items)
    if not total:
        return float("nan")
    need, seen = q * total, 0
    for ms, n in items:
        seen += n
        if seen >= need:
            return ms
    return items[-1][0]


def summarize(entries: list[dict], settings: LoadSettings, duration_s: float, run_id: str = "") -> list[dict]:
    """``load.csv`` rows from Locust's final JSON stats."""
    rows = []
    for e in entries:
        n, fails = int(e["num_requests"]), int(e["num_failures"])
        rows.append({"run_id": run_id, "target": settings.target, "name": e["name"], "users": settings.users,
                     "duration_s": round(duration_s, 3), "requests": n - fails, "failures": fails,
                     "requests_per_s": (n - fails) / duration_s,
                     "mbytes_per_s": e["total_content_length"] / duration_s / 1e6,  # pushed + pulled
                     "p50_ms": percentile(e["response_times"], 0.50), "p99_ms": percentile(e["response_times"], 0.99),
                     "max_ms": float(e["max_response_time"] or 0.0)})
    return rows


def locust_command(settings: LoadSettings, out: Path, *, web: bool = False, web_host: str = "127.0.0.1",
                   web_port: int = 8089) -> list[str]:
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "-u", str(settings.users),
           "-r", str(settings.spawn_rate), "--stop-timeout", f"{max(1, round(settings.stop_timeout_s))}s",
           "--csv", str(out / "locust"), "--csv-full-history", "--json-file", str(out / "locust_final"),
           "--exit-code-on-error", str(LOCUST_FAILED_REQUESTS)]
    if web:
        return cmd + ["--web-host", web_host, "--web-port", str(web_port), "--autostart"]  # users start at once
    return cmd + ["--headless", "--only-summary", "--skip-log", "-t", f"{max(1, round(settings.duration_s))}s"]


def run_load(settings: LoadSettings, out: Path, *, web: bool = False, web_host: str = "127.0.0.1",
             web_port: int = 8089, on_tick: Callable[[float, dict], None] | None = None) -> LoadResult:
    """Start the target (unless ``settings.address``), run Locust against it, write and return the results."""
    clear_outputs(out)  # first: a run that fails below leaves no earlier run's numbers to be taken for its own
    if settings.address is not None:
        check_reachable(settings.address)
    run = {"id": uuid.uuid4().hex[:12],
           "started_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    target = None
    if settings.address is None:
        if settings.target == "ps":
            target = ShardTarget(users=settings.users, keys=settings.keys, floats=settings.floats,
                                 token=settings.token, max_streams=settings.max_streams,
                                 chunk_bytes=settings.chunk_bytes, queue_bytes=settings.queue_bytes)
        else:
            target = CoordinatorTarget(users=settings.users, token=settings.token, max_rpcs=settings.max_streams)
    address = settings.address or target.address
    token = settings.token or target.token
    run["target"] = address
    rss = RssSampler() if target is not None else None
    env = dict(os.environ, SYNCLAB_LOAD_TARGET=settings.target, SYNCLAB_LOAD_ADDRESS=address, SYNCLAB_TOKEN=token,
               SYNCLAB_LOAD_KEYS=str(settings.keys), SYNCLAB_LOAD_FLOATS=str(settings.floats),
               SYNCLAB_LOAD_CHUNK_BYTES=str(settings.chunk_bytes))
    log_path = out / "locust.log"
    t0 = time.monotonic()
    stopped_here = False
    try:
        with open(log_path, "w") as log:
            proc = subprocess.Popen(locust_command(settings, out, web=web, web_host=web_host, web_port=web_port),
                                    env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                while proc.poll() is None:
                    time.sleep(0.5)
                    if on_tick is not None:
                        on_tick(time.monotonic() - t0, {"rss": rss.last if rss else None})
            except KeyboardInterrupt:  # --web: Ctrl-C ends the session; Locust writes its final stats
                stopped_here = True
                proc.terminate()
                proc.wait(timeout=settings.stop_timeout_s + 10)
        duration = time.monotonic() - t0
        final = out / "locust_final.json"
        if not final.exists():
            tail = log_path.read_text()[-2000:]
            raise LoadError(f"locust exited with {proc.returncode} and wrote no stats; its log ends:\n{tail}")
        entries = json.loads(final.read_text())
        wall = _measured_seconds(entries) or duration
        result = LoadResult(settings=asdict(settings), rows=summarize(entries, settings, wall, run["id"]), run=run,
                            locust_exit_code=proc.returncode)
        _check_exit(result, out, proc.returncode, stopped_here, back_pressure_expected=target is not None)
        if isinstance(target, ShardTarget):
            _check_shard(target, result)
        elif isinstance(target, CoordinatorTarget):
            _check_coordinator(target, result)
    finally:
        if rss is not None:
            rss.stop()
        if target is not None:
            target.close()
    if rss is not None:
        result.target_memory = {"baseline_bytes": rss.baseline, "peak_bytes": rss.peak,
                                "bound_bytes": _memory_bound(target, rss.baseline, settings)}
        if rss.peak > result.target_memory["bound_bytes"]:
            result.problems.append(f"the target's memory reached {rss.peak / 2**20:.0f} MiB, over its bound of "
                                   f"{result.target_memory['bound_bytes'] / 2**20:.0f} MiB")
    write_results(result, out, rss.samples if rss is not None else [])
    return result


def check_reachable(address: str, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """An existing target must accept a connection before any load is sent (:class:`LoadError` if not)."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"--address {address!r} is not host:port")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise LoadError(f"the target at {address} cannot be reached ({e}); nothing was loaded") from None


def clear_outputs(out: Path) -> None:
    """Make ``out`` and remove every output an earlier run left there."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder")
    out.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:
        (out / name).unlink(missing_ok=True)


def _check_exit(result: LoadResult, out: Path, code: int, stopped_here: bool, *, back_pressure_expected: bool) -> None:
    """Locust's exit code, honoured: failed requests are a problem unless each is the designed back-pressure."""
    if code == LOCUST_FAILED_REQUESTS:
        reasons = _failure_reasons(out / "locust_failures.csv")
        other = {r: n for r, n in reasons.items() if not (back_pressure_expected and BACK_PRESSURE in r)}
        if other or not reasons:
            listed = "; ".join(f"{n} x {r}" for r, n in list(other.items())[:3]) or "no reasons recorded"
            result.problems.append(f"Locust reports failed requests (exit {code}): {listed}")
    elif code != 0 and not stopped_here:  # a --web session the user ended: its code tells how it was stopped
        result.problems.append(f"Locust exited with code {code} (see locust.log)")
    if not any(r["requests"] for r in result.rows):
        result.problems.append("no request succeeded")


def _failure_reasons(path: Path) -> dict[str, int]:
    if not path.exists():
        return {}
    with open(path) as f:
        return {r["Error"]: int(r.get("Occurrences") or 0) for r in csv.DictReader(f)}


def _measured_seconds(entries: list[dict]) -> float:
    starts = [e["start_time"] for e in entries if e.get("start_time")]
    ends = [e["last_request_timestamp"] for e in entries if e.get("last_request_timestamp")]
    return max(ends) - min(starts) if starts and ends else 0.0


def _memory_bound(target, baseline: int, settings: LoadSettings) -> int:
    """What the target may hold past its baseline: per admitted stream, one peer's reassembly allowance
    (``MessageLimits.max_peer_bytes``) and a full send queue, plus 64 MiB for gRPC's buffers and the allocator."""
    if isinstance(target, ShardTarget):
        per_stream = target.limits.max_peer_bytes + settings.queue_bytes
        return baseline + min(settings.users, settings.max_streams) * per_stream + (64 << 20)
    return baseline + (256 << 20)  # the coordinator keeps every iteration report: ~100 B each


def _check_shard(target: ShardTarget, result: LoadResult) -> None:
    """Every acknowledged push applied once: values, versions and Locust's successes agree."""
    check = target.check()
    acked = sum(r["requests"] for r in result.rows if r["name"] == "push+pull")
    result.check = {"pushes_applied": check.total_applied, "pushes_acknowledged": acked,
                    "keys_mismatched": check.mismatched, "refused": target.refused[:20]}
    if check.mismatched:
        result.problems.append(f"values of {len(check.mismatched)} key(s) differ from the pushes applied: "
                               f"{check.mismatched[:5]}")
    if check.total_applied != acked:
        result.problems.append(f"the shard applied {check.total_applied} pushes but {acked} were acknowledged")
    if target.refused:
        result.problems.append(f"the shard refused {len(target.refused)} push(es): {target.refused[0]}")


def _check_coordinator(target: CoordinatorTarget, result: LoadResult) -> None:
    acked = sum(r["requests"] for r in result.rows if r["name"] == "ReportIteration")
    result.check = {"reports_kept": target.reports, "reports_acknowledged": acked}
    if target.reports != acked:
        result.problems.append(f"the coordinator kept {target.reports} iteration reports but {acked} were "
                               f"acknowledged")


def write_results(result: LoadResult, out: Path, rss_samples: list[tuple[float, int]]) -> None:
    with open(out / "load.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        w.writerows(result.rows)
    write_atomic(out / "load.json", json.dumps({**asdict(result), "ok": result.ok}, indent=2, default=str) + "\n")
    run = result.run
    plot_load(out / "locust_stats_history.csv", rss_samples, out / "load.png", title=f"synclab load: "
              f"{result.settings['target']} {run.get('target', '')}, {result.settings['users']} users — run "
              f"{run.get('id', '?')} at {run.get('started_at', '?')}")


def plot_load(history_csv: Path, rss_samples: list[tuple[float, int]], out_png: Path, *, title: str) -> Path:
    """Requests/s and failures/s, p50/p99 latency over time (Locust's history), and the target's memory."""
    from matplotlib.figure import Figure

    rows = []
    if history_csv.exists():
        with open(history_csv) as f:
            rows = [r for r in csv.DictReader(f) if r.get("Name") == "Aggregated"]
    starts = [float(rows[0]["Timestamp"])] if rows else []
    starts += [rss_samples[0][0]] if rss_samples else []
    t0 = min(starts, default=0.0)
    ts = [float(r["Timestamp"]) - t0 for r in rows]

    def col(name):
        return [float(r[name]) if r[name] not in ("", "N/A") else float("nan") for r in rows]

    fig = Figure(figsize=(9, 7.5), layout="constrained")
    ax1, ax2, ax3 = fig.subplots(3, 1, sharex=True)
    if rows:
        ax1.plot(ts, col("Requests/s"), label="requests/s")
        ax1.plot(ts, col("Failures/s"), label="failures/s", color="tab:red")
        ax2.plot(ts, col("50%"), label="p50")
        ax2.plot(ts, col("99%"), label="p99", color="tab:orange")
    ax1.set_ylabel("per second")
    ax1.legend(loc="upper left")
    ax2.set_ylabel("latency (ms)")
    ax2.legend(loc="upper left")
    if rss_samples:
        ax3.plot([t - t0 for t, _ in rss_samples], [b / 2**20 for _, b in rss_samples], color="tab:green")
    ax3.set_ylabel("target RSS (MiB)")
    ax3.set_xlabel("time (s)")
    fig.suptitle(title)
    fig.savefig(out_png, dpi=110)
    return out_png
