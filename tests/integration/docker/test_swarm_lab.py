"""A Swarm of three hosts on one machine (scripts/docker/swarm-lab.sh): three Docker-in-Docker hosts join
one swarm over a real VXLAN overlay, the stack runs the coordinator and Prometheus on host 1, the workers
on host 2 and the PS shards on host 3; the job ends with its records, the workers' and shards' traffic
crossed the overlay between the hosts, every task shaped its overlay link, and Prometheus scraped every
node on every host. The lab is torn down afterwards, and nothing it made is left.

The test skips (fails under SYNCLAB_REQUIRE_DOCKER=1) only where the engine cannot run an engine inside a
container; the hosts do not need --privileged itself (see swarm-lab.sh).
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

LAB = str(Path(__file__).resolve().parents[3] / "scripts" / "docker" / "swarm-lab.sh")
DOCKER = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else (shutil.which("docker") or "docker")
WORKERS, SHARDS, ITERATIONS = 2, 2, 20
NODES = {"coordinator", *(f"worker{i}" for i in range(WORKERS)), *(f"ps{i}" for i in range(SHARDS))}
# What `up` says when the engine cannot run dockerd in a container at all.
CANNOT_NEST = ("OCI runtime create failed", "did not start")


def sh(*cmd: str, env: dict | None = None, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert not check or r.returncode == 0, f"`{' '.join(cmd)}` exited {r.returncode}: {r.stderr[-2000:]}"
    return r


class Lab:
    """What `swarm-lab.sh run` wrote to its output directory, and the lab's Prometheus."""


    def __init__(self, out: Path, prefix: str):
        self.out, self.prefix = out, prefix
        self.host = {n: f"{prefix}-host{n}" for n in (1, 2, 3)}

    def json(self, name: str):
        return json.loads((self.out / name).read_text())

    def tasks(self) -> list[dict]:
        return [json.loads(line) for line in (self.out / "tasks.json").read_text().splitlines() if line.strip()]

    def logs(self) -> str:
        return "\n".join(p.read_text() for p in sorted((self.out / "logs").glob("*.log")))

    def query_range(self, expr: str) -> list[dict]:
        lab = self.json("lab.json")
        params = urllib.parse.urlencode({"query": expr, "start": lab["start"], "end": lab["end"] + 5, "step": "1s"})
        with urllib.request.urlopen(f"{lab['prometheus']}/api/v1/query_range?{params}", timeout=30) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]


def _leftovers(label: str) -> dict[str, list[str]]:
    return {kind: sh(DOCKER, *cmd, "-q", "--filter", f"label={label}").stdout.split()
            for kind, cmd in (("containers", ("ps", "-a")), ("volumes", ("volume", "ls")),
                              ("networks", ("network", "ls")))}


@pytest.fixture(scope="module")
def lab(images, docker_unavailable, tmp_path_factory):
    prefix = f"synclab-labtest{os.getpid()}"
    env = {**os.environ, "LAB_PREFIX": prefix, "LOCAL_BASE": "1", "PROFILE": "1gbit", "STRATEGY": "ps",
           "MODEL": "smallcnn", "WORKERS": str(WORKERS), "SHARDS": str(SHARDS), "ITERATIONS": str(ITERATIONS),
           # The job lasts a few seconds; its workers and shards keep /metrics up 5 s after it, so Prometheus
           # (1 s scrapes, DNS discovery refreshed every second) scrapes every node at least once even when a
           # task's name resolves late (CI, stop 42: worker0 had no sample in the job's window).
           "SPEC_SET": "run.warmup=2 run.linger_s=5"}
    out = tmp_path_factory.mktemp("swarm-lab")
    label = f"io.synclab.swarm-lab={prefix}"
    try:
        t0 = time.monotonic()
        up = sh(LAB, "up", env=env, timeout=600, check=False)
        if up.returncode != 0 and any(s in up.stderr for s in CANNOT_NEST):
            docker_unavailable(f"this engine cannot run the lab's Docker-in-Docker hosts:\n{up.stderr[-2000:]}")
        assert up.returncode == 0, f"swarm-lab.sh up exited {up.returncode}:\n{up.stderr[-4000:]}"
        t_up = time.monotonic() - t0
        run = sh(LAB, "run", str(out), env=env, timeout=700, check=False)
        t_run = time.monotonic() - t0 - t_up
        lab = Lab(out, prefix)
        lab.run = run
        print(f"swarm lab: up {t_up:.0f} s, run {t_run:.0f} s\n{up.stderr}{run.stderr}")
        yield lab
    finally:
        t0 = time.monotonic()
        down = sh(LAB, "down", env=env, timeout=300, check=False)
        print(f"swarm lab: down {time.monotonic() - t0:.0f} s")
    assert down.returncode == 0, down.stderr
    assert _leftovers(label) == {"containers": [], "volumes": [], "networks": []}


def test_job_finishes_with_its_records(lab):
    assert lab.run.returncode == 0, f"{lab.run.stderr[-3000:]}\n{lab.logs()[-6000:]}"
    summary = lab.json("records/summary.json")
    assert summary["status"] == "ok" and summary["workers"] == WORKERS and summary["ps_shards"] == SHARDS
    rows = (lab.out / "records" / "iterations.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + ITERATIONS * WORKERS, f"{len(rows) - 1} iteration rows"
    # Each host's runs volume holds the traces of the nodes it ran.
    run_dir = Path(os.readlink(lab.out / "hosts" / lab.host[1] / "latest"))
    for n, nodes in ((2, [f"worker{i}" for i in range(WORKERS)]), (3, [f"ps{i}" for i in range(SHARDS)])):
        traces = lab.out / "hosts" / lab.host[n] / run_dir.name
        assert {f"traffic-{node}.csv" for node in nodes} <= {p.name for p in traces.iterdir()}, sorted(traces.iterdir())


def test_workers_and_shards_ran_on_different_hosts(lab):
    where = {t["Name"].split(".")[0].split("_", 1)[1]: set() for t in lab.tasks()}
    for t in lab.tasks():
        where[t["Name"].split(".")[0].split("_", 1)[1]].add(t["Node"])
    assert where == {"coordinator": {lab.host[1]}, "prometheus": {lab.host[1]}, "worker": {lab.host[2]},
                     "ps": {lab.host[3]}}, where
    # Every node records where it ran (summary.json `placement`, from SYNCLAB_NODE_HOST/IMAGE).
    placement = lab.json("records/summary.json")["placement"]
    assert set(placement) == NODES, placement
    assert {node: p["host"] for node, p in placement.items()} == {
        node: lab.host[1 if node == "coordinator" else 2 if node.startswith("worker") else 3] for node in NODES}
    ref, image_id = next(iter(lab.json("lab.json")["images"].items()))
    assert all(p.get("image") == f"{ref}@{image_id}" for p in placement.values()), placement


def test_traffic_crossed_the_overlay_between_hosts(lab):
    hosts = lab.json("lab.json")["hosts"]
    # The workers' host and the shards' host exchanged the job's gradients and parameters as VXLAN
    # packets on the lab bridge; the coordinator's host saw little of it.
    worker_host, ps_host = hosts[lab.host[2]], hosts[lab.host[3]]
    assert worker_host["underlay_tx_bytes"] > 20e6 and ps_host["underlay_rx_bytes"] > 20e6, hosts
    assert hosts[lab.host[1]]["underlay_rx_bytes"] < worker_host["underlay_tx_bytes"] / 10, hosts
    # Every task shaped its eth0, which is its overlay interface: the addresses nodes advertise are
    # in the overlay's subnet.
    shaped = [line for line in lab.logs().splitlines() if "entrypoint: link: backend" in line]
    assert len(shaped) == len(NODES) and all(" on eth0" in line for line in shaped), shaped
    assert all(("backend tbf" in line or "backend htb" in line or "backend netem" in line) for line in shaped), shaped
    subnet = ipaddress.ip_network(sh(DOCKER, "exec", lab.host[1], "docker", "network", "inspect", "synclab_cluster",
                                     "-f", "{{(index .IPAM.Config 0).Subnet}}").stdout.strip())
    addresses = {node: e["address"].rsplit(":", 1)[0] for node, e in lab.json("records/endpoints.json").items()}
    assert addresses and all(ipaddress.ip_address(a) in subnet for a in addresses.values()), (subnet, addresses)


def test_prometheus_scraped_every_node_on_every_host(lab):
    series = lab.query_range('max by (node) (synclab_link_rate_bits_per_second{direction="egress"})')
    assert {s["metric"]["node"] for s in series} == NODES, series
    tx = lab.query_range('max by (node) (synclab_interface_transmit_bytes_total{node=~"worker.*|ps.*",interface="eth0"})')
    sent = {s["metric"]["node"]: max(float(v[1]) for v in s["values"]) for s in tx}
    assert set(sent) == NODES - {"coordinator"} and all(b > 10e6 for b in sent.values()), sent
