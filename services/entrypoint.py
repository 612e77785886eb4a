"""Container entrypoint: validate the environment, shape eth0, then run one SyncLab role.

    entrypoint.py coordinator | worker | ps     run that role (configured by SYNCLAB_* variables)
    entrypoint.py healthcheck                   exit 0 when this node's /metrics answers
    entrypoint.py CMD [ARGS...]                 run any other command (``synclab shape ...``, ``bash``)

tini is PID 1 and forwards SIGTERM here. With ``SYNCLAB_REPEAT=1`` this process
*becomes* the role (exec), so the signal reaches it directly; otherwise it stays
as a small supervisor that reruns the job (a new run directory each time) and
passes SIGTERM/SIGINT on to the running role before leaving.

A bad variable stops the container at once with a message naming it, so it
shows in ``docker compose logs``. Every variable is listed in ``VARIABLES``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROLES = ("coordinator", "worker", "ps")
STATE_DIR = Path("/run/synclab")
CAP_NET_ADMIN = 12

VARIABLES = {
    "SYNCLAB_TOKEN": "shared job token (required)",
    "SYNCLAB_PROFILE": "link profile: a name in netem/profiles, a path to a profile YAML, or 'none'",
    "SYNCLAB_SHAPE_DEVICE": "interface to shape (default eth0)",
    "SYNCLAB_METRICS_PORT": "Prometheus /metrics port (default 9100)",
    "SYNCLAB_REPEAT": "jobs to run before the container exits; 0 = forever (default 1)",
    "SYNCLAB_VERBOSE": "1 for debug logs",
    "SYNCLAB_SPEC": "coordinator: base spec YAML (default /opt/synclab/specs/compose.yaml)",
    "SYNCLAB_STRATEGY": "coordinator: strategy.name override",
    "SYNCLAB_MODEL": "coordinator: model.name override",
    "SYNCLAB_WORKERS": "coordinator: cluster.workers override",
    "SYNCLAB_PS_SHARDS": "coordinator: cluster.ps_shards override",
    "SYNCLAB_ITERATIONS": "coordinator: run.iterations override",
    "SYNCLAB_SET": "coordinator: more overrides, 'dotted.key=value' separated by spaces",
    "SYNCLAB_RUNS_DIR": "coordinator: where run directories go (default /runs, a volume)",
    "SYNCLAB_LISTEN_PORT": "coordinator: gRPC port (default 50051)",
    "SYNCLAB_COORDINATOR": "worker/ps: coordinator host:port (default coordinator:50051)",
    "SYNCLAB_PORT": "worker/ps: gRPC port of this node (default 50060)",
    "SYNCLAB_CONNECT_TIMEOUT": "worker/ps: seconds to reach the coordinator (default 60)",
}


class EnvError(ValueError):
    """A bad environment value; the message names the variable."""


def log(msg: str) -> None:
    print(f"entrypoint: {msg}", file=sys.stderr, flush=True)


# -- reading the environment ---------------------------------------------------------------------
def env_str(name: str, default: str | None = None, *, required: bool = False) -> str | None:
    value = os.environ.get(name, "").strip()
    if not value:
        if required:
            raise EnvError(f"{name} is required ({VARIABLES.get(name, '')})")
        return default
    return value


def env_int(name: str, default: int, lo: int, hi: int) -> int:
    raw = env_str(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not an integer") from None
    if not lo <= value <= hi:
        raise EnvError(f"{name}={value} is out of range [{lo}, {hi}]")
    return value


def env_bool(name: str) -> bool:
    raw = (env_str(name, "0") or "0").lower()
    if raw not in ("0", "1", "true", "false", "yes", "no"):
        raise EnvError(f"{name}={raw!r} must be 0 or 1")
    return raw in ("1", "true", "yes")


def host_port(name: str, default: str) -> str:
    value = env_str(name, default)
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise EnvError(f"{name}={value!r} must be host:port")
    return value


@dataclass(frozen=True)
class Common:
    token: str
    profile: str | None
    device: str
    metrics_port: int
    repeat: int
    verbose: bool


def read_common() -> Common:
    profile = env_str("SYNCLAB_PROFILE", "none")
    return Common(token=env_str("SYNCLAB_TOKEN", required=True),
                  profile=None if profile.lower() in ("none", "off", "0") else profile,
                  device=env_str("SYNCLAB_SHAPE_DEVICE", "eth0"),
                  metrics_port=env_int("SYNCLAB_METRICS_PORT", 9100, 1, 65535),
                  repeat=env_int("SYNCLAB_REPEAT", 1, 0, 1_000_000),
                  verbose=env_bool("SYNCLAB_VERBOSE"))


# -- the node's own address ----------------------------------------------------------------------
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


# -- shaping -------------------------------------------------------------------------------------
def has_net_admin() -> bool:
    """Whether NET_ADMIN is in this container's bounding set (``cap_add: [NET_ADMIN]``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapBnd:"):
            return bool(int(line.split()[1], 16) >> CAP_NET_ADMIN & 1)
    return False


def resolve_profile(profile: str) -> Path:
    path = Path(profile)
    if not path.suffix:
        path = Path(os.environ.get("SYNCLAB_PROFILES_DIR", "/opt/synclab/netem/profiles")) / f"{profile}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise EnvError(f"SYNCLAB_PROFILE={profile!r}: no profile {path} (known: {', '.join(known) or 'none'})")
    return path


def shape(common: Common, role: str) -> dict:
    """Shape ``common.device`` from the profile; returns what was done (also written to STATE_DIR).

    HOOK(netem): the kernel part is ``synclab.netem``'s; this function only chooses
    between it and the ``app`` fallback and records the outcome for the role.
    """
    outcome = {"profile": common.profile, "device": common.device, "role": role}
    if common.profile is None:
        outcome.update(backend="none", reason="SYNCLAB_PROFILE=none")
    else:
        path = resolve_profile(common.profile)
        outcome["profile_path"] = str(path)
        if not has_net_admin():
            outcome.update(backend="app", reason="NET_ADMIN capability missing (add cap_add: [NET_ADMIN]); "
                                                 "the transport paces its own sends instead")
            log(f"warning: {outcome['reason']}")
        else:
            outcome.update(kernel_shape(path, common.device, role))
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    (STATE_DIR / "shaping.json").write_text(json.dumps(outcome, indent=2) + "\n")
    log(f"link: backend {outcome['backend']} on {common.device}"
        + (f", profile {common.profile}" if common.profile else "")
        + (f" ({outcome['reason']})" if outcome.get("reason") else ""))
    return outcome


def kernel_shape(path: Path, device: str, role: str) -> dict:
    try:
        from synclab.netem import apply_profile_file  # HOOK(netem): the shaper's public entry point
    except ImportError:
        return {"backend": "app", "reason": "synclab.netem has no kernel shaper in this build"}
    return apply_profile_file(path, device, role=role)


def role_environment(outcome: dict) -> dict[str, str]:
    """What the role learns about its link (it reports the backend and exports the rate)."""
    env = dict(os.environ)
    env["SYNCLAB_SHAPING_FILE"] = str(STATE_DIR / "shaping.json")
    env["SYNCLAB_NETWORK_BACKEND"] = outcome["backend"]
    return env


# -- the roles -----------------------------------------------------------------------------------
def coordinator_overrides() -> list[str]:
    sets = []
    for var, key, kind in (("SYNCLAB_STRATEGY", "strategy.name", str), ("SYNCLAB_MODEL", "model.name", str),
                           ("SYNCLAB_WORKERS", "cluster.workers", int), ("SYNCLAB_PS_SHARDS", "cluster.ps_shards", int),
                           ("SYNCLAB_ITERATIONS", "run.iterations", int)):
        if kind is int:
            if env_str(var) is not None:
                sets.append(f"{key}={env_int(var, 0, 0, 10_000_000)}")
        else:
            value = env_str(var)
            if value is not None:
                if not re.fullmatch(r"[A-Za-z0-9_.-]+", value):
                    raise EnvError(f"{var}={value!r} is not a plain name")
                sets.append(f"{key}={value}")
    for item in (env_str("SYNCLAB_SET", "") or "").split():
        if "=" not in item:
            raise EnvError(f"SYNCLAB_SET: {item!r} must look like dotted.key=value")
        sets.append(item)
    return sets


def coordinator_spec(overrides: list[str]):
    """The job spec: SYNCLAB_SPEC plus the overrides, validated before any node waits for it."""
    from synclab.config import SpecError, load_spec

    path = Path(env_str("SYNCLAB_SPEC", "/opt/synclab/specs/compose.yaml"))
    try:
        return load_spec(path, overrides)
    except SpecError as e:
        where = "SYNCLAB_SPEC" if not path.is_file() else f"spec {path} with {' '.join(overrides) or 'no overrides'}"
        raise EnvError(f"{where}: {e}") from None


def new_run_dir(runs: Path, strategy: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    run_dir = runs / f"{stamp}-{strategy}"
    n = 1
    while run_dir.exists():
        n += 1
        run_dir = runs / f"{stamp}-{strategy}-{n}"
    run_dir.mkdir(parents=True)
    return run_dir


def coordinator_job(common: Common, outcome: dict):
    """A callable that prepares one job's run directory and returns its command line."""
    import yaml

    overrides = coordinator_overrides()
    spec = coordinator_spec(overrides)
    runs = Path(env_str("SYNCLAB_RUNS_DIR", "/runs"))
    port = env_int("SYNCLAB_LISTEN_PORT", 50051, 1, 65535)
    log(f"job: strategy {spec.strategy.name}, model {spec.model.name}, {spec.n_workers} worker(s), "
        f"{spec.n_ps} PS shard(s), {spec.run.iterations} iterations; runs in {runs}")

    def next_job() -> list[str]:
        run_dir = new_run_dir(runs, spec.strategy.name)
        spec_path = run_dir / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(spec.to_dict(), sort_keys=False))
        (run_dir / "shaping-coordinator.json").write_text(json.dumps(outcome, indent=2) + "\n")
        latest = runs / "latest"
        tmp = runs / ".latest.tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.name)
        tmp.replace(latest)
        return ["synclab", "coordinator", "--spec", str(spec_path), "--run-dir", str(run_dir),
                "--listen", f"0.0.0.0:{port}", "--metrics-port", str(common.metrics_port)]

    return next_job


def node_job(role: str, common: Common):
    coordinator = host_port("SYNCLAB_COORDINATOR", "coordinator:50051")
    port = env_int("SYNCLAB_PORT", 50060, 1, 65535)
    timeout = env_int("SYNCLAB_CONNECT_TIMEOUT", 60, 1, 86_400)
    advertise = advertise_address(common.device)
    index_flag = "--rank" if role == "worker" else "--shard"
    cmd = ["synclab", role, index_flag, "-1", "--coordinator", coordinator, "--host", "0.0.0.0",
           "--advertise", advertise, "--port", str(port), "--metrics-port", str(common.metrics_port),
           "--connect-timeout", str(timeout)]
    log(f"{role} at {advertise}:{port}, coordinator {coordinator}")
    return lambda: cmd


def run_role(role: str) -> int:
    common = read_common()
    outcome = shape(common, role)
    next_job = coordinator_job(common, outcome) if role == "coordinator" else node_job(role, common)
    verbose = ["-v"] if common.verbose else []
    env = role_environment(outcome)
    if common.repeat == 1:
        cmd = next_job() + verbose
        os.execvpe(cmd[0], cmd, env)
    return supervise(next_job, verbose, env, common.repeat, role)


def supervise(next_job, verbose: list[str], env: dict, repeat: int, role: str) -> int:
    """Rerun the role until ``repeat`` jobs succeeded (0: until stopped); forward SIGTERM/SIGINT."""
    child: subprocess.Popen | None = None
    stopping = threading.Event()

    def forward(signum, _frame):
        stopping.set()
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    done, failures_in_row, code = 0, 0, 0
    while not stopping.is_set() and (repeat == 0 or done < repeat):
        cmd = next_job() + verbose
        child = subprocess.Popen(cmd, env=env)
        code = child.wait()
        if stopping.is_set():
            break
        if code == 0:
            done, failures_in_row = done + 1, 0
            log(f"{role}: job {done} finished")
        else:
            # A node that restarts faster than the coordinator between jobs is refused
            # once; a failed job is rerun. Back off so a persistent fault stays readable.
            failures_in_row += 1
            delay = min(30.0, 0.5 * 2 ** min(failures_in_row, 6))
            log(f"{role}: exited with {code}; starting again in {delay:g} s")
            stopping.wait(delay)
    return 0 if stopping.is_set() else code


def healthcheck() -> int:
    port = os.environ.get("SYNCLAB_METRICS_PORT", "9100")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return 0 if r.status == 200 else 1
    except OSError as e:
        print(f"metrics endpoint on port {port} does not answer: {e}", file=sys.stderr)
        return 1


def main(argv: list[str]) -> int:
    if not argv:
        argv = ["coordinator"]
    if argv[0] == "healthcheck":
        return healthcheck()
    if argv[0] not in ROLES:
        os.execvp(argv[0], argv)
    if len(argv) > 1:
        log(f"error: {argv[0]} takes no arguments here (got {' '.join(argv[1:])}); "
            "configure it with SYNCLAB_* variables or run `synclab {argv[0]} ...` directly")
        return 2
    try:
        return run_role(argv[0])
    except EnvError as e:
        log(f"error: {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
