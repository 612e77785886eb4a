"""This container as the entrypoint sees it: its state files, its address, its capabilities, its log.

Standard library only at import time: the healthcheck (:mod:`.health`) runs every
few seconds and must not load pydantic or torch. The state paths are read as
attributes of this module when used, so a test can point them elsewhere.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from synclab.config.settings import ContainerSettings

ROLES = ("coordinator", "worker", "ps")
STATE_DIR = Path("/run/synclab")
SHAPING_FILE = STATE_DIR / "shaping.json"
JOB_SPEC_FILE = STATE_DIR / "job-spec.yaml"
JOB_STARTED_FILE = STATE_DIR / "job-started"  # touched as each job starts (healthcheck grace)
HEALTH_FILE = STATE_DIR / "health.json"  # the validated metrics port and grace, for the healthcheck
CAP_NET_ADMIN = 12
RUN_AS = "synclab"
AS_USER = "--as-user"  # internal: the second stage, already shaped and unprivileged


def log(msg: str) -> None:
    print(f"entrypoint: {msg}", file=sys.stderr, flush=True)


def read_settings() -> ContainerSettings:
    """Every SYNCLAB_* variable, validated (:class:`~synclab.config.settings.SettingsError` names a bad one)."""
    from synclab.config.settings import ContainerSettings

    return ContainerSettings.from_env(os.environ)


def interface_ipv4(device: str) -> str | None:
    """The first IPv4 address of ``device`` (what peers in the compose network dial)."""
    try:
        out = subprocess.run(["ip", "-j", "-4", "addr", "show", "dev", device], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for link in json.loads(out or "[]"):
        for a in link.get("addr_info", []):
            if a.get("family") == "inet":
                return a["local"]
    return None


def advertise_address(device: str) -> str:
    addr = interface_ipv4(device)
    if addr is None:  # no such interface: fall back to what the hostname resolves to
        addr = socket.gethostbyname(socket.gethostname())
    ipaddress.ip_address(addr)
    return addr


def has_cap(which: str, cap: int = CAP_NET_ADMIN) -> bool:
    """Whether ``cap`` is in this process's ``which`` set (CapBnd: the container was given it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{which}:"):
            return bool(int(line.split()[1], 16) >> cap & 1)
    return False


def as_user(uid: int | str, gid: int | str, groups: str, cmd: list[str]) -> list[str]:
    """``cmd`` run by setpriv as ``uid:gid`` (``groups``: ``--init-groups`` or ``--clear-groups``), keeping
    NET_ADMIN as an ambient capability when the container has it, so the role can reshape its link live."""
    caps = ["--inh-caps=+net_admin", "--ambient-caps=+net_admin"] if has_cap("CapBnd") else []
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", groups, *caps, "--", *cmd]


def private_tls_copy(uid: int, gid: int, state_dir: Path | None = None) -> Path | None:
    """``$SYNCLAB_TLS_DIR`` is a read-only mount whose key only its owner may read: copy the files where
    the unprivileged second stage can, key mode 0600, and point ``SYNCLAB_TLS_DIR`` there."""
    from synclab.wire.tls import ENV, FILES, TlsFiles

    source = os.environ.get(ENV)
    if not source:
        return None
    TlsFiles.load(source)  # names what is missing
    target = (STATE_DIR if state_dir is None else state_dir) / "tls"
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chown(target, uid, gid)
    for name in FILES.values():
        shutil.copyfile(Path(source) / name, target / name)
        os.chmod(target / name, 0o600)
        os.chown(target / name, uid, gid)
    os.environ[ENV] = str(target)
    return target


def read_record(path: Path) -> dict | None:
    """A JSON or YAML record of the run directory; None when it is missing or half written."""
    import yaml

    try:
        return yaml.safe_load(path.read_text())  # JSON is YAML
    except (OSError, yaml.YAMLError):
        return None
