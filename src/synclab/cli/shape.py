"""``synclab shape``: change the links of a running job through its coordinator."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from synclab.cli._common import console, fail


def shape(profile: str = typer.Option(..., "--profile", help="Profile name or YAML file."),
          node: Optional[str] = typer.Option(None, "--node", help="Only this node (e.g. worker1)."),
          role: Optional[str] = typer.Option(None, "--role", help="Only this role (worker, ps)."),
          run_dir: Optional[Path] = typer.Option(None, "--run", help="Run directory of a local job (has control.json)."),
          coordinator_addr: Optional[str] = typer.Option(None, "--coordinator", envvar="SYNCLAB_COORDINATOR"),
          token: Optional[str] = typer.Option(None, "--token", envvar="SYNCLAB_TOKEN")):
    """Change the links of a running job (through its coordinator), e.g. `synclab shape --profile 4gbit`.

    Exits 0 once every targeted node applied the profile, 1 when one failed (or did not answer), 2 when the
    running backend cannot make the change (delay, jitter or loss without netem): then nothing was applied.
    """
    import json as _json

    from synclab.linkprofile import ProfileError
    from synclab.netem.profile import load_profile
    from synclab.wire import pb, rpc
    from synclab.wire.channels import open_channel

    if node and role:
        fail("give --node or --role, not both")
    try:
        p = load_profile(profile)
    except ProfileError as e:
        fail(str(e))
    if run_dir is not None:
        coordinator_addr, token, tls_dir = read_control(run_dir)
        if tls_dir:  # a job that made its own CA (transport.tls)
            os.environ.setdefault("SYNCLAB_TLS_DIR", tls_dir)
    if not coordinator_addr or not token:
        fail("say which job: --run DIR, or --coordinator host:port with SYNCLAB_TOKEN set")
    import grpc

    stub = rpc.CoordinatorStub(open_channel(coordinator_addr, token, "cli"))
    try:
        reply = stub.Control(pb.ControlCommand(kind="shape", target=node or role or "",
                                               args_json=_json.dumps({"profile": p.model_dump(mode="json")})),
                             timeout=120)  # the coordinator answers once the nodes applied it (or gave up)
    except grpc.RpcError as e:
        fail(f"could not reach the coordinator at {coordinator_addr}: {e.details()}", 1)
    if not reply.accepted:
        fail(reply.message, 2 if reply.unsupported else 1)
    console.print(reply.message)


def read_control(run_dir: Path) -> tuple[str, str, str]:
    """The coordinator address, job token and TLS folder a local job's ``control.json`` names (exit 2 if it
    cannot be used, naming the file and why)."""
    import json

    from synclab.fileio import InputFileError, read_text

    ctl = run_dir / "control.json"
    if not ctl.exists() and not ctl.is_symlink():
        fail(f"{ctl} is missing: is {run_dir} the directory of a running local job?")
    try:
        info = json.loads(read_text(ctl, "control file"))
    except InputFileError as e:
        fail(str(e))
    except ValueError as e:
        fail(f"control file {ctl} is not valid JSON ({e}); was it written by synclab run?")
    if not isinstance(info, dict) or not all(isinstance(info.get(k), str) and info[k] for k in ("coordinator", "token")):
        fail(f"control file {ctl} does not name a coordinator and a token; was it written by synclab run?")
    tls_dir = info.get("tls_dir") or ""
    return info["coordinator"], info["token"], tls_dir if isinstance(tls_dir, str) else ""
