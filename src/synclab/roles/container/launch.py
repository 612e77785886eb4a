"""One node of a job that ``synclab run`` launched with ``network.isolation: docker``.

``entrypoint.py launch ROLE NODE OPTIONS -- synclab ROLE ARGS...``: shape eth0 as
the launcher planned it, record the outcome in the bind-mounted run directory,
then run the node's own command line as an unprivileged user. No supervisor
stays: the launcher on the host watches, restarts and removes the containers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from synclab.roles.container import host
from synclab.roles.container.host import as_user, log, private_tls_copy

LAUNCH = "launch"


def parse_launch(argv: list[str]):
    """``launch ROLE NODE --spec PATH --kernel F,... --record PATH [--user UID:GID] -- CMD...``."""
    import argparse

    if "--" not in argv:
        raise ValueError("launch: the node's command follows `--`")
    cut = argv.index("--")

    class Parser(argparse.ArgumentParser):
        def error(self, message):  # an error to report and exit 2 with, not a SystemExit from a library
            raise ValueError(f"launch: {message}")

    p = Parser(prog="entrypoint.py launch", exit_on_error=False)
    p.add_argument("role", choices=host.ROLES)
    p.add_argument("node")
    p.add_argument("--spec", type=Path, required=True, help="the job's resolved spec (in the bind-mounted run dir)")
    p.add_argument("--kernel", default="", help="kernel shaping features the launcher found, comma-separated")
    p.add_argument("--record", type=Path, required=True, help="where this node's shaping outcome goes")
    p.add_argument("--user", default=None, help="UID:GID to run the node as (default: the image's synclab user)")
    try:
        args = p.parse_args(argv[:cut])
    except argparse.ArgumentError as e:
        raise ValueError(f"launch: {e}") from None
    cmd = argv[cut + 1:]
    if not cmd:
        raise ValueError("launch: no command after `--`")
    return args, cmd


def shape_from_spec(spec, role: str, kernel: frozenset[str]) -> dict:
    """Shape this container's link as the launcher planned it (the job's resolved spec: backend,
    profile inline, dilation), choosing the backend as the launcher did from the same features."""
    from synclab.netem import tc
    from synclab.netem.netns import NODE_IFB
    from synclab.netem.profile import human
    from synclab.roles.network import node_profile

    device = spec.network.interface
    profile = node_profile(spec, role)
    outcome: dict = {"role": role, "device": device, "planned_backend": spec.network.backend}
    if profile is None or spec.network.backend not in tc.KERNEL_BACKENDS:
        outcome.update(backend=spec.network.backend, left_to_app=list(spec.network.app_shaping),
                       reason="no kernel shaping planned for this job")
        return outcome
    choice = tc.choose_backend(profile, kernel, True)
    applied = tc.apply(device, profile, choice=choice, ifb_dev=NODE_IFB, privileged=True)
    if applied.backend != spec.network.backend:
        raise RuntimeError(f"{device}: the launcher planned backend {spec.network.backend}, this container "
                           f"applied {applied.backend}")
    outcome.update(backend=applied.backend, link=human(profile), left_to_app=sorted(applied.left_to_app),
                   reason=applied.choice.reason, summary=applied.summary(),
                   commands=[" ".join(c) for c in applied.commands])
    return outcome


def launch(argv: list[str]) -> list[str]:
    """Stage one of a node that ``synclab run`` launched in a container (root): shape eth0 from the
    job's resolved spec, record the outcome in the run directory, and return the command that runs
    the node's own ``synclab`` command line as an unprivileged user (keeping NET_ADMIN for live
    reshaping). No supervisor stays: the launcher on the host watches, restarts and removes the
    containers, and the run directory is the one it bind-mounted (``--out``)."""
    from synclab.config import load_spec

    args, cmd = parse_launch(argv)
    spec = load_spec(args.spec)
    outcome = {"node": args.node, **shape_from_spec(spec, args.role, frozenset(filter(None, args.kernel.split(","))))}
    if args.user:
        uid, gid = (int(x) for x in args.user.split(":"))
        home = "/tmp"  # a host user the image does not know has no home here
    else:
        import pwd

        user = pwd.getpwnam(host.RUN_AS)
        uid, gid, home = user.pw_uid, user.pw_gid, user.pw_dir
    args.record.write_text(json.dumps(outcome, indent=2, default=str) + "\n")
    os.chown(args.record, uid, gid)
    log(f"{args.node}: link backend {outcome['backend']} on {outcome['device']}"
        + (f": {outcome['summary']}" if outcome.get("summary") else f" ({outcome['reason']})"))
    host.STATE_DIR.mkdir(parents=True, exist_ok=True)
    os.chown(host.STATE_DIR, uid, gid)
    private_tls_copy(uid, gid)
    if os.geteuid() != 0:
        return cmd
    os.environ["HOME"] = home  # setpriv keeps root's
    return as_user(uid, gid, "--clear-groups" if args.user else "--init-groups", cmd)
