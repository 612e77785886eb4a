"""``entrypoint.py healthcheck``: is this node alive? Standard library only (it runs every few seconds)."""

from __future__ import annotations

import json
import sys
import time
import urllib.request

from synclab.roles.container import host


def healthcheck() -> int:
    """Healthy when /metrics answers, or while a job is starting or ending (a node serves metrics
    only once it has registered, a supervised node restarts between jobs, and a one-shot node
    waits for the coordinator after its job): an orchestrator that replaces unhealthy containers
    (Swarm) must not kill nodes waiting for the coordinator.
    Port and grace are what stage one validated (HEALTH_FILE), read without importing pydantic."""
    try:
        health = json.loads(host.HEALTH_FILE.read_text())
    except (OSError, ValueError) as e:
        print(f"no role has started in this container ({e})", file=sys.stderr)
        return 1
    port = health["metrics_port"]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            if r.status == 200:
                return 0
    except OSError as e:
        problem = f"metrics endpoint on port {port} does not answer: {e}"
    else:
        problem = f"metrics endpoint on port {port} answered {r.status}"
    try:
        if time.time() - host.JOB_STARTED_FILE.stat().st_mtime < health["grace_s"]:
            return 0
    except OSError:
        pass
    print(problem, file=sys.stderr)
    return 1
