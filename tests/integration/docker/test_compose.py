"""The container cluster for real: images built without a registry, `docker compose up` of a small
shaped cluster, run records on the volume, every dashboard panel fed by the live Prometheus,
the wire respecting the link rate, and `docker compose down -v` leaving nothing behind.

Grafana itself is not started (no registry here to pull it from): its dashboards are checked
query by query against Prometheus instead, which is what Grafana would ask, and drawn from those
answers by `synclab dashboards render`.

Docker is set up by scripts/docker/setup.sh (root). Without root or a usable engine the test
is skipped with the reason, unless SYNCLAB_REQUIRE_DOCKER=1 (CI) turns that into a failure.
"""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import pytest

from synclab.dashboards.promql import expand, load_queries

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

DASHBOARDS = Path(__file__).resolve().parents[3] / "grafana" / "dashboards"

WORKERS, SHARDS, ITERATIONS = 2, 2, 30
PROFILE, PROFILE_RATE_BPS = "1gbit", 1_000_000_000
NODE_SERVICES = ("coordinator", "worker", "ps")
KERNEL_BACKENDS = ("netem", "htb", "tbf")
# Prometheus' 1 s rate over two scrapes carries the scrape-timing jitter (a few ms of 1 s)
# and tbf's burst (4 ms of the rate): 5 % above the configured rate is a violation.
RATE_TOLERANCE = 1.05


class Timings(dict):
    def phase(self, name: str):
        timings = self

        class _Phase:
            def __enter__(self):
                self.t0 = time.monotonic()

            def __exit__(self, *exc):
                timings[name] = round(time.monotonic() - self.t0, 1)

        return _Phase()


@pytest.fixture(scope="module")
def cluster(images, compose_project):
    """One job of a small shaped cluster, run to completion."""
    timings = Timings(build_images=images)
    c = compose_project("compose", PROFILE=PROFILE, WORKERS=str(WORKERS), SHARDS=str(SHARDS),
                ITERATIONS=str(ITERATIONS),
                # /metrics stays up 5 s after the short job: Prometheus samples every node (as test_swarm*).
                SPEC_SET="run.warmup=2 run.linger_s=5")
    try:
        with timings.phase("up"):
            c.compose("up", "-d", "coordinator", "worker", "ps", "prometheus", timeout=300)
        t_start = time.time()
        with timings.phase("job"):
            waited = c.compose("wait", "coordinator", timeout=900, check=False)
        # Nodes leave right after the coordinator; wait for every node container to stop.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(x["State"] == "running" for s in ("worker", "ps")
                                                 for x in c.containers(s)):
            time.sleep(0.5)
        t_end = time.time()
        c.logs = c.compose("logs", "--no-color", "coordinator", "worker", "ps", check=False).stdout
        c.coordinator_exit = waited
        c.window = (t_start, t_end)
        c.timings = timings
        yield c
    finally:
        with timings.phase("down"):
            c.compose("down", "-v", "--remove-orphans", "--timeout", "10", check=False, timeout=300)
        print(f"\ndocker compose test timings (s): {json.dumps(timings)}")


def test_job_finishes_with_run_records(cluster):
    assert cluster.coordinator_exit.returncode == 0, (
        f"coordinator did not finish cleanly: {cluster.coordinator_exit.stdout}{cluster.coordinator_exit.stderr}\n"
        f"{cluster.logs[-6000:]}")
    states = {x["Name"]: (x["State"], x.get("ExitCode")) for s in NODE_SERVICES for x in cluster.containers(s)}
    assert len(states) == 1 + WORKERS + SHARDS, states
    assert all(state == "exited" and code == 0 for state, code in states.values()), states
    summary = json.loads(cluster.read_run_file("summary.json"))
    assert summary["status"] == "ok" and summary["strategy"] == "ps"
    assert summary["workers"] == WORKERS and summary["ps_shards"] == SHARDS
    rows = cluster.read_run_file("iterations.csv").strip().splitlines()
    assert len(rows) == 1 + ITERATIONS * WORKERS, f"{len(rows) - 1} iteration rows"
    shaping = json.loads(cluster.read_run_file("shaping-coordinator.json"))
    assert shaping["backend"] in KERNEL_BACKENDS and shaping["rate_bps"] == PROFILE_RATE_BPS


def test_every_container_shaped_its_link(cluster):
    """Each node's entrypoint applied the profile in the kernel (logged), and the node reports it."""
    shaped = [line for line in cluster.logs.splitlines() if "entrypoint: link: backend" in line]
    assert len(shaped) == 1 + WORKERS + SHARDS, "\n".join(shaped) or cluster.logs[-4000:]
    for line in shaped:
        backend = line.split("entrypoint: link: backend", 1)[1].split()[0]
        assert backend in KERNEL_BACKENDS and f"profile {PROFILE}" in line, line
    start, end = cluster.window
    reported = cluster.query_range("max by (node, backend) (synclab_network_backend_info)", start, end)
    backends = {s["metric"]["node"]: s["metric"]["backend"] for s in reported}
    assert len([n for n in backends if n.startswith(("worker", "ps"))]) == WORKERS + SHARDS, backends
    assert all(b in KERNEL_BACKENDS for n, b in backends.items() if n.startswith(("worker", "ps"))), backends


def _nodes(cluster) -> list[str]:
    start, end = cluster.window
    series = cluster.query_range("max by (node) (synclab_interface_transmit_bytes_total)", start, end)
    return sorted(s["metric"]["node"] for s in series)


def test_every_dashboard_panel_has_data(cluster):
    """Each PromQL of each panel, expanded the way Grafana would (all roles and nodes; a repeated
    panel once per node), returns at least one sample over the job."""
    start, end = cluster.window
    nodes = _nodes(cluster)
    assert {f"worker{i}" for i in range(WORKERS)} | {f"ps{i}" for i in range(SHARDS)} <= set(nodes), nodes
    empty = []
    queries = load_queries(DASHBOARDS)
    assert queries, f"no dashboards in {DASHBOARDS}"
    for q in queries:
        values = [n for n in nodes if n.startswith(("worker", "ps"))] if q.repeat == "node" else [".*"]
        for value in values:
            expr = expand(q.expr, {"role": ".*", "node": value, "window": "10s"})
            result = cluster.query_range(expr, start, end)
            if not any(v[1] not in ("NaN", "+Inf", "-Inf") for s in result for v in s["values"]):
                empty.append(f"{q.dashboard} / {q.panel} / {q.ref_id}: {expr}")
    assert not empty, "panels without data:\n" + "\n".join(empty)


def test_dashboards_render_from_the_live_prometheus(cluster, tmp_path):
    """`synclab dashboards render` draws every dashboard from the live Prometheus (Grafana cannot run
    here): one PNG per dashboard, the series beside it, every panel with data (--require-data)."""
    from typer.testing import CliRunner

    from synclab.cli import app

    start, end = cluster.window
    # Tables are instant queries at the end of the range, as in Grafana; the nodes are gone once the
    # job is over, so the range ends at their last scrape.
    scraped = cluster.query_range("count(synclab_network_backend_info)", start, end)
    assert scraped, "no node was scraped during the job"
    last = max(float(t) for s in scraped for t, _ in s["values"])
    r = CliRunner().invoke(app, ["dashboards", "render", str(DASHBOARDS), "--out", str(tmp_path),
                                 "--prometheus", f"http://127.0.0.1:{cluster.prometheus_port}",
                                 "--from", f"{start:.3f}", "--to", f"{last:.3f}", "--require-data",
                                 "--caption", f"docker compose test: ps, {PROFILE}, {WORKERS} workers, {SHARDS} shards"])
    assert r.exit_code == 0, r.output
    for board in sorted(DASHBOARDS.glob("*.json")):
        png = tmp_path / f"{board.stem}.png"
        assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", r.output
        doc = json.loads((tmp_path / f"{board.stem}.json").read_text())
        assert doc["no_data"] == [] and all(p["has_data"] for p in doc["panels"]), board.name
    net = json.loads((tmp_path / "synclab-network.json").read_text())
    per_node = [p["title"] for p in net["panels"] if p["title"].startswith("tx / rx")]
    assert {f"tx / rx — worker{i}" for i in range(WORKERS)} <= set(per_node), per_node


def _windowed_bps(trace_csv: str, column: str, window_s: float) -> list[float]:
    """Bits/s of a cumulative byte column of a traffic-<node>.csv over consecutive windows."""
    rows = list(csv.DictReader(io.StringIO(trace_csv)))
    points = [(float(r["t_s"]), int(r[column])) for r in rows if r.get(column) not in (None, "")]
    out, (t0, b0) = [], points[0]
    for t, b in points[1:]:
        if t - t0 >= window_s:
            out.append((b - b0) * 8 / (t - t0))
            t0, b0 = t, b
    return out


def test_worker_wire_tx_respects_link_rate(cluster):
    """A worker's wire-level transmit rate stays within the profile's rate: per second in Prometheus,
    and per 100 ms in the node's 10 ms traffic trace, where pushes must also come close to the rate
    (otherwise the ceiling would prove nothing)."""
    start, end = cluster.window
    expr = ('sum by (node) (rate(synclab_interface_transmit_bytes_total{node=~"worker.*", interface="eth0"}[2s]))'
            " * 8")
    series = cluster.query_range(expr, start, end)
    assert len(series) == WORKERS, series
    for s in series:
        peak = max(float(v[1]) for v in s["values"])
        assert peak <= RATE_TOLERANCE * PROFILE_RATE_BPS, (
            f"{s['metric']['node']} sent {peak / 1e9:.3f} Gbit/s over 1 s on a {PROFILE} link")
    for w in range(WORKERS):
        bps = _windowed_bps(cluster.read_run_file(f"traffic-worker{w}.csv"), "if_tx_bytes", 0.1)
        assert bps, f"traffic-worker{w}.csv has no wire-level samples"
        peak = max(bps)
        # tbf lets a burst of 4 ms of the rate through at once: +4 % of a 100 ms window.
        assert peak <= (RATE_TOLERANCE + 0.04) * PROFILE_RATE_BPS, (
            f"worker{w} sent {peak / 1e9:.3f} Gbit/s over 100 ms on a {PROFILE} link")
        print(f"worker{w}: peak wire tx {peak / 1e9:.3f} Gbit/s per 100 ms on a {PROFILE} link")
        # Unloaded, pushes reach 0.9-1.0x of the rate; half of it still shows the link, not the
        # CPU, was the limit (a 2-core CI machine shared with other jobs gets ~0.75x).
        assert peak >= 0.5 * PROFILE_RATE_BPS, (
            f"worker{w} never drove its link near the rate (peak {peak / 1e9:.3f} Gbit/s per 100 ms)")


def test_load_profile_runs_locust_in_the_image(cluster):
    """The `load` service's image carries Locust: a short headless `synclab load` of a shard of its own."""
    r = cluster.compose("--profile", "load", "run", "--rm", "--no-deps", "load", "sh", "-c",
                        "synclab load --target ps --users 2 --duration 5s --floats 16384 --out /tmp/load "
                        "&& echo LOAD-JSON && cat /tmp/load/load.json", timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads(r.stdout.split("LOAD-JSON", 1)[1])
    assert summary["ok"] and summary["check"]["pushes_applied"] == summary["check"]["pushes_acknowledged"] > 0


def test_down_leaves_nothing_behind(cluster):
    # Last test in the module: tear down here and check (the fixture's down is then a no-op).
    cluster.compose("down", "-v", "--remove-orphans", "--timeout", "10", timeout=300)
    assert cluster.project_leftovers() == {"containers": [], "volumes": [], "networks": []}
