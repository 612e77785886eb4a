"""Container entrypoint: validate the environment, shape eth0, then run one SyncLab role.

    entrypoint.py coordinator | worker | ps     run that role (configured by SYNCLAB_* variables)
    entrypoint.py healthcheck                   exit 0 when this node's /metrics answers
    entrypoint.py CMD [ARGS...]                 run any other command (``synclab shape ...``, ``bash``)

It starts as root only to shape: tc is enough for the root qdisc, but the ifb
device that carries ingress shaping needs ``ip link add``, and iproute2's ``ip``
drops file capabilities for non-root callers. Then it re-executes itself as the
unprivileged ``synclab`` user, keeping NET_ADMIN as an *ambient* capability (only
when the container has it), so the role can reshape its link live and nothing else
runs as root (``docker compose exec`` is root, for debugging).

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
SHAPING_FILE = STATE_DIR / "shaping.json"
JOB_SPEC_FILE = STATE_DIR / "job-spec.yaml"
JOB_STARTED_FILE = STATE_DIR / "job-started"  # touched as each job starts (healthcheck grace)
CAP_NET_ADMIN = 12
RUN_AS = "synclab"
AS_USER = "--as-user"  # internal: the second stage, already shaped and unprivileged

VARIABLES = {
    "SYNCLAB_TOKEN": "the shared job token of the cluster",
    "SYNCLAB_PROFILE": "link profile: a name in netem/profiles, a YAML path, or 'none'; "
                       "the coordinator makes it the job's network.profile",
    "SYNCLAB_SHAPE_DEVICE": "interface to shape (default eth0)",
    "SYNCLAB_METRICS_PORT": "Prometheus /metrics port (default 9100)",
    "SYNCLAB_REPEAT": "jobs to run before the container exits; 0 = forever (default 1)",
    "SYNCLAB_VERBOSE": "1 for debug logs",
    "SYNCLAB_HEALTH_GRACE": "seconds a starting job counts as healthy before /metrics answers (default 120)",
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
def has_cap(which: str, cap: int = CAP_NET_ADMIN) -> bool:
    """Whether ``cap`` is in this process's ``which`` set (CapBnd: the container was given it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{which}:"):
            return bool(int(line.split()[1], 16) >> cap & 1)
    return False


def load_link_profile(name: str, role: str):
    from synclab.netem.profile import ProfileError, load_profile, resolve_for_role

    try:
        return resolve_for_role(load_profile(name), role)
    except ProfileError as e:
        raise EnvError(f"SYNCLAB_PROFILE={name!r}: {e}") from None


def apply_in_container(device: str, profile):
    """``tc.apply`` on this container's own interface, learning the kernel's qdiscs by trying them;
    returns what was applied and the kernel features that worked.

    netem's probe builds a throwaway network namespace, which a container cannot
    (that needs CAP_SYS_ADMIN); here a backend whose command the kernel refuses is
    dropped and the next choice tried (e.g. netem -> tbf, leaving delay to the app).
    The ifb device is named as in a netns node, so live reshaping finds it.
    """
    from synclab.netem import tc
    from synclab.netem.netns import NODE_IFB

    available = set(tc.KERNEL_FEATURES)
    while True:
        choice = tc.choose_backend(profile, frozenset(available), privileged=True)
        try:
            return tc.apply(device, profile, choice=choice, ifb_dev=NODE_IFB, privileged=True), frozenset(available)
        except tc.TcError as e:
            missing = {f for f in available if f in e.cmd or (f == "ifb" and "mirred" in e.cmd)}
            if not missing:
                raise
            log(f"the kernel refused {' '.join(e.cmd)} ({e.stderr}); without {', '.join(sorted(missing))}")
            available -= missing


def shape(common: Common, role: str) -> dict:
    """Shape ``common.device`` from the profile; the outcome goes to the log and STATE_DIR/shaping.json.

    The job's network plan (backend, what the transport emulates) reaches the
    roles through the spec the coordinator hands out (``resolve_job_spec``); this
    only refuses what nobody could emulate (loss without netem).
    """
    outcome: dict = {"role": role, "device": common.device, "profile": common.profile, "kernel": []}
    if common.profile is None:
        outcome.update(backend="none", reason="SYNCLAB_PROFILE=none", left_to_app=[])
    else:
        profile = load_link_profile(common.profile, role)
        outcome.update(link=profile.human(), rate_bps=profile.rate_bps, direction=profile.direction)
        if not has_cap("CapEff"):
            asked = {"rate": profile.rate_bps, "delay": profile.delay_s, "jitter": profile.jitter_s,
                     "loss": profile.loss_pct}
            outcome.update(backend="app" if profile.shapes_anything else "none",
                           left_to_app=[k for k, v in asked.items() if v],
                           reason="NET_ADMIN capability missing (cap_add: [NET_ADMIN]): "
                                  "falling back to the app backend, the transport paces its own sends")
            log(f"warning: {outcome['reason']}")
        else:
            applied, available = apply_in_container(common.device, profile)
            outcome.update(backend=applied.backend, left_to_app=sorted(applied.left_to_app), kernel=sorted(available),
                           reason=applied.choice.reason, summary=applied.summary(), offloads=applied.offloads,
                           ifb_device=applied.ifb_dev, commands=[" ".join(c) for c in applied.commands])
        if "loss" in outcome["left_to_app"]:
            raise EnvError(f"SYNCLAB_PROFILE={common.profile!r}: loss needs tc netem in the kernel (and NET_ADMIN); "
                           f"the transport cannot drop packets under TCP ({outcome['reason']})")
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    SHAPING_FILE.write_text(json.dumps(outcome, indent=2, default=str) + "\n")
    log(f"link: backend {outcome['backend']} on {common.device}"
        + (f", profile {common.profile}" if common.profile else "")
        + (f": {outcome['summary']}" if outcome.get("summary") else f" ({outcome['reason']})"))
    return outcome


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


def resolve_job_spec(outcome: dict) -> None:
    """Stage one of the coordinator: SYNCLAB_SPEC + overrides + the network plan, validated, written
    to JOB_SPEC_FILE. SYNCLAB_PROFILE is the job's profile (every container shapes from it), and
    the plan is the coordinator's own shaping outcome: all containers share one kernel."""
    import yaml

    from synclab.config import SpecError
    from synclab.compute.resolve import resolve_compute
    from synclab.roles.network import apply_to_spec, resolve_network

    profile = "null" if outcome["profile"] is None else json.dumps(outcome["profile"])  # a YAML scalar
    link = ["network.rate=null", "network.delay=null", f"network.profile={profile}"]
    kernel = outcome["backend"] in ("netem", "htb", "tbf")
    link.append(f"network.isolation={'netns' if kernel else 'none'}")
    spec = coordinator_spec(coordinator_overrides() + link)
    try:
        plan = resolve_network(spec, kernel_available=frozenset(outcome["kernel"]), netns_unavailable=None)
    except SpecError as e:
        raise EnvError(f"SYNCLAB_PROFILE={outcome['profile']!r}: {e}") from None
    spec = apply_to_spec(spec, plan)
    if spec.run.dilation != 1:
        raise EnvError(f"run.dilation={spec.run.dilation:g}: containers shape eth0 from SYNCLAB_PROFILE before the "
                       f"job is known, undilated; run dilated experiments with the local launcher (synclab run)")
    try:
        spec, compute_notes = resolve_compute(spec)
    except SpecError as e:
        raise EnvError(f"SYNCLAB_SPEC: {e}") from None
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    JOB_SPEC_FILE.write_text(yaml.safe_dump(spec.to_dict(), sort_keys=False))
    log(f"job: strategy {spec.strategy.name}, model {spec.model.name}, {spec.n_workers} worker(s), "
        f"{spec.n_ps} PS shard(s), {spec.run.iterations} iterations; links: {plan.describe()}")
    for note in plan.notes + compute_notes:
        log(f"note: {note}")


def coordinator_job(common: Common, outcome: dict):
    """A callable that prepares one job's run directory and returns its command line."""
    import yaml

    spec_text = JOB_SPEC_FILE.read_text()
    strategy = yaml.safe_load(spec_text)["strategy"]["name"]
    runs = Path(env_str("SYNCLAB_RUNS_DIR", "/runs"))
    port = env_int("SYNCLAB_LISTEN_PORT", 50051, 1, 65535)

    def next_job() -> list[str]:
        run_dir = new_run_dir(runs, strategy)
        spec_path = run_dir / "spec.yaml"
        spec_path.write_text(spec_text)
        (run_dir / "shaping-coordinator.json").write_text(json.dumps(outcome, indent=2) + "\n")
        latest, tmp = runs / "latest", runs / ".latest.tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.name)
        tmp.replace(latest)
        log(f"job {run_dir}")
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


def prepare(role: str) -> list[str]:
    """Stage one (root): check every variable, shape the link, return the command of stage two."""
    common = read_common()
    if role != "coordinator":
        host_port("SYNCLAB_COORDINATOR", "coordinator:50051")
    outcome = shape(common, role)
    if role == "coordinator":
        resolve_job_spec(outcome)  # a bad spec stops here, before any node waits for it
    stage_two = [sys.executable, os.path.abspath(__file__), AS_USER, role]
    if os.geteuid() != 0:
        return stage_two
    import pwd

    user = pwd.getpwnam(RUN_AS)
    os.chown(STATE_DIR, user.pw_uid, user.pw_gid)  # stage two marks job starts there
    caps = ["--inh-caps=+net_admin", "--ambient-caps=+net_admin"] if has_cap("CapBnd") else []
    return ["setpriv", f"--reuid={RUN_AS}", f"--regid={RUN_AS}", "--init-groups", *caps, "--", *stage_two]


def run_role(role: str) -> int:
    """Stage two (unprivileged): run the role once (exec) or supervise repeated jobs."""
    common = read_common()
    outcome = json.loads(SHAPING_FILE.read_text())
    next_job = coordinator_job(common, outcome) if role == "coordinator" else node_job(role, common)
    verbose = ["-v"] if common.verbose else []
    env = dict(os.environ)
    if common.repeat == 1:
        cmd = next_job() + verbose
        JOB_STARTED_FILE.touch()
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
        JOB_STARTED_FILE.touch()
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
    """Healthy when /metrics answers, or while a job is starting (a node serves metrics only once
    it has registered, and a supervised node restarts between jobs): an orchestrator that
    replaces unhealthy containers (Swarm) must not kill nodes waiting for the coordinator."""
    port = os.environ.get("SYNCLAB_METRICS_PORT", "9100")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            if r.status == 200:
                return 0
    except OSError as e:
        problem = f"metrics endpoint on port {port} does not answer: {e}"
    else:
        problem = f"metrics endpoint on port {port} answered {r.status}"
    try:
        grace = float(os.environ.get("SYNCLAB_HEALTH_GRACE", "120"))
        if time.time() - JOB_STARTED_FILE.stat().st_mtime < grace:
            return 0
    except (OSError, ValueError):
        pass
    print(problem, file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    if not argv:
        argv = ["coordinator"]
    if argv[0] == "healthcheck":
        return healthcheck()
    stage_two = argv[0] == AS_USER
    if stage_two:
        argv = argv[1:]
    if argv[0] not in ROLES:
        os.execvp(argv[0], argv)
    if len(argv) > 1:
        log(f"error: {argv[0]} takes no arguments here (got {' '.join(argv[1:])}); "
            f"configure it with SYNCLAB_* variables or run `synclab {argv[0]} ...` directly")
        return 2
    try:
        if stage_two:
            return run_role(argv[0])
        cmd = prepare(argv[0])
    except EnvError as e:
        log(f"error: {e}")
        return 2
    except (OSError, RuntimeError) as e:  # synclab.netem's ShapingError is a RuntimeError
        log(f"error: cannot shape the link: {e}")
        return 1
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
