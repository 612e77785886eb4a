"""Container entrypoint: validate the environment, shape eth0, then run one SyncLab role.

    entrypoint.py coordinator | worker | ps     run that role (configured by SYNCLAB_* variables)
    entrypoint.py healthcheck                   exit 0 when this node's /metrics answers
    entrypoint.py --help                        this text and every SYNCLAB_* variable
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

The variables are read once into :class:`synclab.config.settings.ContainerSettings`
(defaults, ranges, help); a bad one stops the container at once with a message
naming it, so it shows in ``docker compose logs``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: the healthcheck runs every few seconds on the stdlib alone
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


# -- reading the environment ---------------------------------------------------------------------
def read_settings() -> ContainerSettings:
    """Every SYNCLAB_* variable, validated (:class:`~synclab.config.settings.SettingsError` names a bad one)."""
    from synclab.config.settings import ContainerSettings

    return ContainerSettings.from_env(os.environ)


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
    from synclab.config.settings import SettingsError
    from synclab.netem.profile import ProfileError, load_profile, resolve_for_role

    try:
        return resolve_for_role(load_profile(name), role)
    except ProfileError as e:
        raise SettingsError(f"SYNCLAB_PROFILE={name!r}: {e}") from None


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


def shape(settings: ContainerSettings, role: str) -> dict:
    """Shape ``settings.shape_device`` from the profile; the outcome goes to the log and STATE_DIR/shaping.json.

    The job's network plan (backend, what the transport emulates) reaches the
    roles through the spec the coordinator hands out (``resolve_job_spec``); this
    only refuses what nobody could emulate (loss without netem).
    """
    from synclab.config.settings import SettingsError

    device, profile_name = settings.shape_device, settings.profile
    outcome: dict = {"role": role, "device": device, "profile": profile_name, "kernel": []}
    if profile_name is None:
        outcome.update(backend="none", reason="SYNCLAB_PROFILE=none", left_to_app=[])
    else:
        profile = load_link_profile(profile_name, role)
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
            applied, available = apply_in_container(device, profile)
            outcome.update(backend=applied.backend, left_to_app=sorted(applied.left_to_app), kernel=sorted(available),
                           reason=applied.choice.reason, summary=applied.summary(), offloads=applied.offloads,
                           ifb_device=applied.ifb_dev, commands=[" ".join(c) for c in applied.commands])
        if "loss" in outcome["left_to_app"]:
            raise SettingsError(f"SYNCLAB_PROFILE={profile_name!r}: loss needs tc netem in the kernel (and "
                                f"NET_ADMIN); the transport cannot drop packets under TCP ({outcome['reason']})")
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    SHAPING_FILE.write_text(json.dumps(outcome, indent=2, default=str) + "\n")
    log(f"link: backend {outcome['backend']} on {device}"
        + (f", profile {profile_name}" if profile_name else "")
        + (f": {outcome['summary']}" if outcome.get("summary") else f" ({outcome['reason']})"))
    return outcome


# -- the roles -----------------------------------------------------------------------------------
def new_run_dir(runs: Path, strategy: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    run_dir = runs / f"{stamp}-{strategy}"
    n = 1
    while run_dir.exists():
        n += 1
        run_dir = runs / f"{stamp}-{strategy}-{n}"
    run_dir.mkdir(parents=True)
    return run_dir


def resolve_job_spec(settings: ContainerSettings, outcome: dict) -> None:
    """Stage one of the coordinator: the job as ``synclab run`` resolves it (SYNCLAB_SPEC, then the
    overrides, then the network plan), written to JOB_SPEC_FILE. SYNCLAB_PROFILE is the job's
    profile (every container shapes from it), and the plan is the coordinator's own shaping
    outcome: all containers share one kernel."""
    import yaml

    from synclab.config import SpecError
    from synclab.config.settings import SettingsError
    from synclab.roles.job import resolve_job

    kernel = outcome["backend"] in ("netem", "htb", "tbf")
    link = [("network.rate", None), ("network.delay", None), ("network.profile", outcome["profile"]),
            ("network.isolation", "netns" if kernel else "none")]
    try:
        job = resolve_job(settings.spec, settings.spec_overrides() + link,
                          kernel_available=frozenset(outcome["kernel"]), netns_unavailable=None)
    except SpecError as e:  # before any node waits for it
        raise SettingsError(f"{e} (the job of SYNCLAB_SPEC, its overrides and "
                            f"SYNCLAB_PROFILE={outcome['profile'] or 'none'})") from None
    spec = job.spec
    if spec.run.dilation != 1:
        raise SettingsError(f"run.dilation={spec.run.dilation:g}: containers shape eth0 from SYNCLAB_PROFILE "
                            f"before the job is known, undilated; run dilated experiments with the local launcher "
                            f"(synclab run)")
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    JOB_SPEC_FILE.write_text(yaml.safe_dump(spec.to_dict(), sort_keys=False))
    log(f"job: strategy {spec.strategy.name}, model {spec.model.name}, {spec.n_workers} worker(s), "
        f"{spec.n_ps} PS shard(s), {spec.run.iterations} iterations; links: {job.network.describe()}")
    for note in job.notes:
        log(f"note: {note}")


def coordinator_job(settings: ContainerSettings, outcome: dict):
    """A callable that prepares one job's run directory and returns its command line."""
    import yaml

    spec_text = JOB_SPEC_FILE.read_text()
    strategy = yaml.safe_load(spec_text)["strategy"]["name"]
    runs, port = settings.runs_dir, settings.listen_port

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
                "--listen", f"0.0.0.0:{port}", "--metrics-port", str(settings.metrics_port)]

    return next_job


def node_job(role: str, settings: ContainerSettings):
    coordinator, port, timeout = settings.coordinator, settings.port, settings.connect_timeout_s
    advertise = advertise_address(settings.shape_device)
    index_flag = "--rank" if role == "worker" else "--shard"
    cmd = ["synclab", role, index_flag, "-1", "--coordinator", coordinator, "--host", "0.0.0.0",
           "--advertise", advertise, "--port", str(port), "--metrics-port", str(settings.metrics_port),
           "--connect-timeout", str(timeout)]
    log(f"{role} at {advertise}:{port}, coordinator {coordinator}")
    return lambda: cmd


def prepare(role: str) -> list[str]:
    """Stage one (root): check every variable, shape the link, return the command of stage two."""
    settings = read_settings()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    HEALTH_FILE.write_text(json.dumps({"metrics_port": settings.metrics_port, "grace_s": settings.health_grace_s}))
    outcome = shape(settings, role)
    if role == "coordinator":
        resolve_job_spec(settings, outcome)  # a bad spec stops here, before any node waits for it
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
    settings = read_settings()
    outcome = json.loads(SHAPING_FILE.read_text())
    next_job = coordinator_job(settings, outcome) if role == "coordinator" else node_job(role, settings)
    verbose = ["-v"] if settings.verbose else []
    env = dict(os.environ)
    if settings.repeat == 1:
        cmd = next_job() + verbose
        JOB_STARTED_FILE.touch()
        os.execvpe(cmd[0], cmd, env)
    return supervise(next_job, verbose, env, settings.repeat, role)


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
    replaces unhealthy containers (Swarm) must not kill nodes waiting for the coordinator.
    Port and grace are what stage one validated (HEALTH_FILE), read without importing pydantic."""
    try:
        health = json.loads(HEALTH_FILE.read_text())
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
        if time.time() - JOB_STARTED_FILE.stat().st_mtime < health["grace_s"]:
            return 0
    except OSError:
        pass
    print(problem, file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    if not argv:
        argv = ["coordinator"]
    if argv[0] == "healthcheck":
        return healthcheck()
    if argv[0] in ("-h", "--help"):
        from synclab.config.settings import ContainerSettings

        print(f"{__doc__}\nVariables:\n{ContainerSettings.variables_help()}")
        return 0
    stage_two = argv[0] == AS_USER
    if stage_two:
        argv = argv[1:]
    if argv[0] not in ROLES:
        os.execvp(argv[0], argv)
    if len(argv) > 1:
        log(f"error: {argv[0]} takes no arguments here (got {' '.join(argv[1:])}); "
            f"configure it with SYNCLAB_* variables or run `synclab {argv[0]} ...` directly")
        return 2
    from synclab.config.settings import SettingsError

    try:
        if stage_two:
            return run_role(argv[0])
        cmd = prepare(argv[0])
    except SettingsError as e:
        log(f"error: {e}")
        return 2
    except (OSError, RuntimeError) as e:  # synclab.netem's ShapingError is a RuntimeError
        log(f"error: cannot shape the link: {e}")
        return 1
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
