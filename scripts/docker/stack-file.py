#!/usr/bin/env python3
"""Turn ``docker compose config --format json`` into a file ``docker stack deploy`` accepts.

    docker compose -f docker-compose.yml -f docker-compose.swarm.yml config --format json \\
        coordinator worker ps prometheus | scripts/docker/stack-file.py | \\
        docker stack deploy --resolve-image never -c - synclab

`docker compose config` does what the stack loader cannot: it reads .env, interpolates
(``${SYNCLAB_TOKEN:?...}``), merges the override and checks the result. But it writes the
Compose Specification, while ``docker stack deploy`` (CLI 20.10 to 28) validates against
the older file format 3, which refuses the top-level ``name``, long-form ``depends_on``, a
quoted published port, ``bind.create_host_path`` and ``build.secrets``, and (CLI 20.10)
a file without ``version``. This drops or rewrites exactly those; nothing else changes.
What Swarm itself needs (overlay network, dnsrr, restart policy) is in
docker-compose.swarm.yml, not here. Standard library only: the output is JSON, which
is YAML.
"""

from __future__ import annotations

import json
import sys

# Ignored or refused by `docker stack deploy`: images are built before (scripts/docker/build.sh),
# order comes from the nodes' connect timeout, restarts from deploy.restart_policy.
SERVICE_KEYS_DROPPED = ("build", "depends_on", "restart")


def stack_file(config: dict) -> dict:
    out = {"version": "3.9"}
    for key, value in config.items():
        if key in ("name", "secrets"):  # the project name is the stack's; secrets: only the build's CA bundle
            continue
        out[key] = value
    for service in out.get("services", {}).values():
        for key in SERVICE_KEYS_DROPPED:
            service.pop(key, None)
        for key in [k for k, v in service.items() if v is None]:
            del service[key]
        for port in service.get("ports", []):
            if isinstance(port.get("published"), str):
                port["published"] = int(port["published"])
        for volume in service.get("volumes", []):
            volume.get("bind", {}).pop("create_host_path", None)
            if volume.get("bind") == {}:
                del volume["bind"]
    # compose names them <project>_<key>; left out, the stack names them <stack>_<key>.
    for section in ("networks", "volumes"):
        for item in (out.get(section) or {}).values():
            if isinstance(item, dict):
                item.pop("name", None)
    return out


def main() -> int:
    try:
        config = json.load(sys.stdin)
    except json.JSONDecodeError as e:
        print(f"stack-file.py: stdin is not `docker compose config --format json` output: {e}", file=sys.stderr)
        return 2
    json.dump(stack_file(config), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
