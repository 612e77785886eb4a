"""Container entrypoint: validate the environment, shape eth0, then run one SyncLab role.

    entrypoint.py coordinator | worker | ps     run that role (configured by SYNCLAB_* variables)
    entrypoint.py healthcheck                   exit 0 when this node's /metrics answers
    entrypoint.py --help                        this text and every SYNCLAB_* variable
    entrypoint.py launch ROLE NODE OPTIONS -- synclab ROLE ARGS...
                                                one node of a job that ``synclab run`` launched with
                                                ``network.isolation: docker`` (see :func:`launch`)
    entrypoint.py CMD [ARGS...]                 run any other command (``synclab shape ...``, ``bash``)

It starts as root only to shape: tc is enough for the root qdisc, but the ifb
device that carries ingress shaping needs ``ip link add``, and iproute2's ``ip``
drops file capabilities for non-root callers. Then it re-executes itself as the
unprivileged ``synclab`` user, keeping NET_ADMIN as an *ambient* capability (only
when the container has it), so the role can reshape its link live and nothing else
runs as root (``docker compose exec`` is root, for debugging).

tini is PID 1 and forwards SIGTERM here. This process stays as a small supervisor
of the role: it runs ``SYNCLAB_REPEAT`` jobs (0: forever, a new run directory each
time), passes SIGTERM/SIGINT on to the running role, and for the coordinator writes
``status.json`` into the run directory after each job (ok / failed and why /
interrupted, like ``synclab run``). With ``SYNCLAB_REPEAT=1`` (one-shot) the
container exits with its job's exit code, and a worker or PS shard whose last job
has ended waits until the coordinator stops serving before it exits: under
``docker compose up --exit-code-from coordinator`` (which stops every container
as soon as one exits) the coordinator then finishes its records and decides the
exit code, not the first worker to leave.

With ``run.restart: on-failure`` in the job's spec a failed job is restarted here,
not by the container runtime: the coordinator's supervisor starts the next attempt
in the same run directory from the last consistent checkpoint
(``run.resume_from``, up to ``run.max_restarts`` times), and a worker or PS shard
whose role failed runs it again and joins that attempt. The container never exits
in between, which is what ``--exit-code-from`` needs (compose stops everything
when any container exits, whatever its restart policy), and the run directory
stays known to the one process that owns it. A coordinator container that starts
again (a Swarm task replaced, ``docker compose start``) takes up the job ``runs/latest``
names when that job has the same spec, asks for restarts and has no outcome yet.

The variables are read once into :class:`synclab.config.settings.ContainerSettings`
(defaults, ranges, help); a bad one stops the container at once with a message
naming it, so it shows in ``docker compose logs``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

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
    from synclab.linkprofile import ProfileError, resolve_for_role
    from synclab.netem.profile import load_profile

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
    from synclab.netem.profile import human

    device, profile_name = settings.shape_device, settings.profile
    outcome: dict = {"role": role, "device": device, "profile": profile_name, "kernel": []}
    if profile_name is None:
        outcome.update(backend="none", reason="SYNCLAB_PROFILE=none", left_to_app=[])
    else:
        profile = load_link_profile(profile_name, role)
        outcome.update(link=human(profile), rate_bps=profile.rate_bps, direction=profile.direction)
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
STATUS_FILE = "status.json"
# What status.json says when a stop signal ended a job; under `up --exit-code-from` the usual cause is
# another container that exited first.
STOPPED = ("stopped by {signal} before the job ended (docker compose stop or down, or "
           "--abort-on-container-exit after another container exited)")


class Job(NamedTuple):
    """One run of a role: its command line and, for the coordinator, the run directory it fills
    (and the restarts it already had, when a restarted container takes up an unfinished job)."""

    cmd: list[str]
    run_dir: Path | None = None
    restarts: tuple[dict, ...] = ()
    start_after_s: float = 0.0  # wait before starting it (see nodes_lost_coordinator_s)


def new_run_dir(runs: Path, strategy: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    run_dir = runs / f"{stamp}-{strategy}"
    n = 1
    while run_dir.exists():
        n += 1
        run_dir = runs / f"{stamp}-{strategy}-{n}"
    run_dir.mkdir(parents=True)
    return run_dir


def point_latest(runs: Path, run_dir: Path) -> None:
    """Make ``runs/latest`` name ``run_dir`` (replaced atomically)."""
    latest, tmp = runs / "latest", runs / ".latest.tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.name)
    tmp.replace(latest)


def exit_code(returncode: int) -> int:
    """A child's return code as a shell and Docker report it: killed by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def job_status(returncode: int, run_dir: Path, interrupted_by: str | None = None) -> dict:
    """The ``status.json`` record of one coordinator job, in the launcher's terms (``synclab run``).

    ``ok`` when the coordinator exited 0; ``failed`` with the coordinator's own reason when it
    failed the job (``failure.json``: a node that died, stopped heartbeats, ...) or else with its
    exit code; ``interrupted`` when ``interrupted_by`` (a signal this container passed on to the
    coordinator) ended the job first. The launcher's ``exit_codes`` holds every process of the
    job; a container sees only its own, the coordinator's.
    """
    code = exit_code(returncode)
    failure = None
    try:
        failure = json.loads((run_dir / "failure.json").read_text())
    except (OSError, ValueError):
        pass
    if code == 0:
        status = {"status": "ok", "reason": ""}
    elif failure is not None:
        status = {"status": "failed", "reason": failure.get("reason", ""), "nodes_done": failure.get("nodes_done", [])}
    elif interrupted_by:
        status = {"status": "interrupted", "reason": STOPPED.format(signal=interrupted_by)}
    else:
        status = {"status": "failed", "reason": f"coordinator exited with code {code} "
                                                f"(its log: docker compose logs coordinator)"}
    status["exit_codes"] = {"coordinator": code}
    return status


def write_status(run_dir: Path, status: dict) -> None:
    tmp = run_dir / f".{STATUS_FILE}.tmp"
    tmp.write_text(json.dumps(status, indent=2) + "\n")
    tmp.replace(run_dir / STATUS_FILE)
    log(f"job {status['status']}" + (f": {status['reason']}" if status["reason"] else "")
        + f" ({run_dir / STATUS_FILE})")


# -- restarting a failed job from its last checkpoint ---------------------------------------------
RESTARTING = "restarting"  # status.json between two attempts of a job; ok / failed / interrupted are final
RESTART_SPEC = "spec-restart.yaml"


def restart_due(run: dict, restarts_so_far: int) -> bool:
    """Whether a failed attempt of a job whose spec has this ``run`` section is restarted."""
    return run.get("restart") == "on-failure" and restarts_so_far < run.get("max_restarts", 0)


def resume_spec(spec: dict, resume_from: int) -> dict:
    """The job's spec for an attempt that resumes from checkpoint ``resume_from`` (0: from the start)."""
    return {**spec, "run": {**spec["run"], "resume_from": resume_from}}


def rejoin_due(spec: dict | None, status: dict | None) -> bool:
    """Whether a worker or PS shard whose role failed should run it again to join the job's next
    attempt: the job restarts on failure, and its coordinator has not recorded a final outcome."""
    if not spec or spec.get("run", {}).get("restart") != "on-failure":
        return False
    return status is None or status.get("status") == RESTARTING


def read_record(path: Path) -> dict | None:
    """A JSON or YAML record of the run directory; None when it is missing or half written."""
    import yaml

    try:
        return yaml.safe_load(path.read_text())  # JSON is YAML
    except (OSError, yaml.YAMLError):
        return None


def coordinator_cmd(spec_path: Path, run_dir: Path, settings: ContainerSettings) -> list[str]:
    listen_host = advertise_address(settings.shape_device)  # the cluster interface only, not every one
    return ["synclab", "coordinator", "--spec", str(spec_path), "--run-dir", str(run_dir),
            "--listen", f"{listen_host}:{settings.listen_port}", "--metrics-port", str(settings.metrics_port)]


def nodes_lost_coordinator_s(run: dict) -> float:
    """How long after a coordinator died without a word every node of its attempt has given it up: a
    node stops after 5 heartbeats in a row fail (``CoordinatorClient.start_heartbeat``), plus margin.
    The next attempt listens at the same address only then, so no process of the dead attempt
    heartbeats it or tells it that it failed."""
    return 5 * run.get("heartbeat_s", 1.0) + 2.0


def resumed_attempt(run_dir: Path, spec: dict, settings: ContainerSettings, restarts_so_far: int) -> tuple[Job, int]:
    """The next attempt of the job in ``run_dir``, from its last consistent checkpoint."""
    import yaml

    from synclab.roles import checkpoint

    # failure.json: the coordinator failed the attempt itself and told every node to stop. Without it
    # the coordinator died, and its nodes notice only when their heartbeats have failed for a while.
    told = (run_dir / "failure.json").exists()
    resume = checkpoint.latest(run_dir)
    spec_path = run_dir / RESTART_SPEC
    spec_path.write_text(yaml.safe_dump(resume_spec(spec, resume), sort_keys=False))
    (run_dir / "failure.json").unlink(missing_ok=True)  # the next attempt's records are its own
    log(f"restarting the job in {run_dir} from checkpoint {resume} "
        f"(restart {restarts_so_far + 1} of {spec['run']['max_restarts']})")
    wait_s = 0.0 if told else nodes_lost_coordinator_s(spec["run"])
    return Job(coordinator_cmd(spec_path, run_dir, settings), run_dir, start_after_s=wait_s), resume


def coordinator_restart(settings: ContainerSettings):
    """A callable ``restart(job, restarts_so_far)`` that prepares the next attempt of a failed job in
    its own run directory, resuming from ``checkpoint.latest`` (``(Job, resume_from)``), or returns
    None when the spec does not ask for another one."""

    def restart(job: Job, restarts_so_far: int):
        spec = read_record(job.run_dir / "spec.yaml")
        if not spec or not restart_due(spec.get("run", {}), restarts_so_far):
            return None
        return resumed_attempt(job.run_dir, spec, settings, restarts_so_far)

    return restart


def unfinished_run(runs: Path, spec_text: str) -> tuple[Path, list[dict]] | None:
    """The job ``runs/latest`` names, with its restarts so far, when a coordinator container that
    starts again should take it up instead of starting a new one: the same resolved spec, with
    ``run.restart: on-failure`` and a restart left, no summary, and no final status (the previous
    container died before it could write one: killed, or its host went down)."""
    latest = runs / "latest"
    if not latest.is_symlink():
        return None
    run_dir = runs / os.readlink(latest)
    try:
        if (run_dir / "spec.yaml").read_text() != spec_text or (run_dir / "summary.json").exists():
            return None
    except OSError:
        return None
    status = read_record(run_dir / STATUS_FILE)
    if status is not None and status.get("status") != RESTARTING:
        return None
    restarts = list((status or {}).get("restarts", []))
    spec = read_record(run_dir / "spec.yaml") or {}
    return (run_dir, restarts) if restart_due(spec.get("run", {}), len(restarts)) else None


def node_rejoin(settings: ContainerSettings):
    """A callable ``rejoin(stopping)`` for a worker or PS shard whose role failed: True when it should
    run the role again because the job restarts (read from ``runs/latest``, which the coordinator
    points at the job) and the coordinator serves, now or within SYNCLAB_CONNECT_TIMEOUT."""
    latest = settings.runs_dir / "latest"

    def rejoin(stopping: threading.Event) -> bool:
        if not rejoin_due(read_record(latest / "spec.yaml"), read_record(latest / STATUS_FILE)):
            return False
        deadline = time.monotonic() + settings.connect_timeout_s
        while not coordinator_serving(settings.coordinator):
            if time.monotonic() > deadline or stopping.wait(0.5):
                return False
        return True

    return rejoin


def job_has_ended(job: Job | None) -> bool:
    """Whether a coordinator job has written its final records and is only closing down."""
    return job is not None and job.run_dir is not None and any(
        (job.run_dir / name).exists() for name in ("summary.json", "failure.json"))


def record_refused_job(settings: ContainerSettings, reason: str) -> Path:
    """A run directory for a job that could not start (its spec does not resolve), whose status.json
    says why: ``runs/latest`` then describes the last attempt, not an older job that succeeded."""
    runs = settings.runs_dir
    run_dir = new_run_dir(runs, settings.strategy or "job")
    write_status(run_dir, {"status": "failed", "reason": reason, "exit_codes": {"coordinator": 2}})
    point_latest(runs, run_dir)
    if os.geteuid() == 0:  # stage one is root; the unprivileged jobs that follow share the volume
        import pwd

        try:
            user = pwd.getpwnam(RUN_AS)
        except KeyError:  # not the image (a test on a host without the user)
            return run_dir
        for path in (run_dir, run_dir / STATUS_FILE, runs / "latest"):
            os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
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
    if spec.cluster.colocate_ps:
        raise SettingsError("cluster.colocate_ps: compose and Swarm start every shard in a container of its own, "
                            "with a link of its own; run co-located shards with the local launcher (synclab run "
                            "with network.isolation netns)")
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
    """A callable that prepares one job's run directory and returns the :class:`Job`."""
    import yaml

    spec_text = JOB_SPEC_FILE.read_text()
    strategy = yaml.safe_load(spec_text)["strategy"]["name"]
    runs = settings.runs_dir
    # A job this container (or the task it replaces) left unfinished is taken up first.
    unfinished = [unfinished_run(runs, spec_text)]

    def next_job() -> Job:
        if unfinished and (found := unfinished.pop()) is not None:
            run_dir, restarts = found
            job, resume = resumed_attempt(run_dir, yaml.safe_load(spec_text), settings, len(restarts))
            restarts.append({"reason": "the coordinator's container started again before the job had an outcome",
                             "exit_code": None, "resumed_from": resume, "at": time.time()})
            write_status(run_dir, {"status": RESTARTING, "reason": restarts[-1]["reason"],
                                   "exit_codes": {}, "restarts": restarts})
            return job._replace(restarts=tuple(restarts))
        run_dir = new_run_dir(runs, strategy)
        spec_path = run_dir / "spec.yaml"
        spec_path.write_text(spec_text)
        (run_dir / "shaping-coordinator.json").write_text(json.dumps(outcome, indent=2) + "\n")
        point_latest(runs, run_dir)
        log(f"job {run_dir}")
        return Job(coordinator_cmd(spec_path, run_dir, settings), run_dir)

    return next_job


def node_job(role: str, settings: ContainerSettings):
    coordinator, port, timeout = settings.coordinator, settings.port, settings.connect_timeout_s
    advertise = advertise_address(settings.shape_device)
    index_flag = "--rank" if role == "worker" else "--shard"
    cmd = ["synclab", role, index_flag, "-1", "--coordinator", coordinator, "--host", advertise,
           "--advertise", advertise, "--port", str(port), "--metrics-port", str(settings.metrics_port),
           "--connect-timeout", str(timeout)]
    log(f"{role} at {advertise}:{port}, coordinator {coordinator}")
    return lambda: Job(cmd)


def coordinator_serving(address: str, timeout_s: float = 2.0) -> bool:
    """Whether something accepts TCP connections at ``host:port`` (the coordinator's job server)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def wait_for_job_end(address: str, stopping: threading.Event, poll_s: float = 0.5) -> None:
    """Block until the coordinator at ``address`` stops serving, or this container is stopped.

    The coordinator closes its server only after its records (summary.json or failure.json) are
    written. Nothing on the wire announces that to a node that has already left the job, so this
    asks the port: a refused (or unresolvable) address means the job has ended.
    """
    if not coordinator_serving(address):
        return
    log(f"waiting for the coordinator at {address} to end the job")
    while not stopping.wait(poll_s):
        if not coordinator_serving(address):
            return


def prepare(role: str) -> list[str]:
    """Stage one (root): check every variable, shape the link, return the command of stage two."""
    from synclab.config.settings import SettingsError

    settings = read_settings()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    HEALTH_FILE.write_text(json.dumps({"metrics_port": settings.metrics_port, "grace_s": settings.health_grace_s}))
    outcome = shape(settings, role)
    if role == "coordinator":
        try:
            resolve_job_spec(settings, outcome)  # a bad spec stops here, before any node waits for it
        except SettingsError as e:
            try:
                record_refused_job(settings, f"invalid job: {e}")
            except OSError as io_error:  # the volume is not writable: the log still names the bad spec
                log(f"cannot record the refused job in {settings.runs_dir}: {io_error}")
            raise
    stage_two = [sys.executable, os.path.abspath(__file__), AS_USER, role]
    if os.geteuid() != 0:
        return stage_two
    import pwd

    user = pwd.getpwnam(RUN_AS)
    os.chown(STATE_DIR, user.pw_uid, user.pw_gid)  # stage two marks job starts there
    private_tls_copy(user.pw_uid, user.pw_gid)
    caps = ["--inh-caps=+net_admin", "--ambient-caps=+net_admin"] if has_cap("CapBnd") else []
    return ["setpriv", f"--reuid={RUN_AS}", f"--regid={RUN_AS}", "--init-groups", *caps, "--", *stage_two]


def private_tls_copy(uid: int, gid: int, state_dir: Path = STATE_DIR) -> Path | None:
    """``$SYNCLAB_TLS_DIR`` is a read-only mount whose key only its owner may read: copy the files where
    the unprivileged second stage can, key mode 0600, and point ``SYNCLAB_TLS_DIR`` there."""
    from synclab.wire.tls import ENV, FILES, TlsFiles

    source = os.environ.get(ENV)
    if not source:
        return None
    TlsFiles.load(source)  # names what is missing
    target = state_dir / "tls"
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chown(target, uid, gid)
    for name in FILES.values():
        shutil.copyfile(Path(source) / name, target / name)
        os.chmod(target / name, 0o600)
        os.chown(target / name, uid, gid)
    os.environ[ENV] = str(target)
    return target


def run_role(role: str) -> int:
    """Stage two (unprivileged): run the role's jobs under :func:`supervise`."""
    settings = read_settings()
    outcome = json.loads(SHAPING_FILE.read_text())
    if role == "coordinator":
        next_job, linger, rejoin = coordinator_job(settings, outcome), None, None
        restart = coordinator_restart(settings)
    else:
        next_job, restart, rejoin = node_job(role, settings), None, node_rejoin(settings)

        def linger(stopping: threading.Event) -> None:
            wait_for_job_end(settings.coordinator, stopping)

    verbose = ["-v"] if settings.verbose else []
    return supervise(next_job, verbose, dict(os.environ), settings.repeat, role, linger=linger,
                     restart=restart, rejoin=rejoin)


def supervise(next_job, verbose: list[str], env: dict, repeat: int, role: str, *, linger=None, restart=None,
              rejoin=None) -> int:
    """Run the role's jobs and return the container's exit code.

    ``repeat`` 0 reruns jobs until the container is stopped (exit 0); N > 1 runs until N jobs
    succeeded, rerunning failed ones; 1 (one-shot) runs one job and exits with its code, 128 + N
    when signal N ended it. SIGTERM/SIGINT are passed on to the running role, except to a
    coordinator whose records are already written: it finishes, and its outcome stands. Each
    coordinator job gets status.json. ``linger(stopping)``, when given, runs after the last job
    (not with ``repeat`` 0) and blocks until the whole job has ended (a node waits for its
    coordinator).

    ``restart(job, restarts_so_far)`` (the coordinator) returns the next attempt of a failed job and
    the checkpoint it resumes from, or None; attempts are not jobs (``repeat`` counts jobs), and
    status.json says ``restarting`` between them and lists every restart in the end.
    ``rejoin(stopping)`` (a worker or PS shard) says whether a failed role should run again at once
    to join such an attempt, with any ``repeat``.
    """
    child: subprocess.Popen | None = None
    job: Job | None = None
    stopping = threading.Event()
    passed_on: list[str] = []  # the signal handed to the current job, if any

    def forward(signum, _frame):
        stopping.set()
        if child is not None and child.poll() is None and not job_has_ended(job):
            passed_on.append(signal.Signals(signum).name)
            child.send_signal(signum)

    def attempt() -> int:
        nonlocal child
        passed_on[:] = []
        if job.start_after_s:
            log(f"{role}: starting the next attempt in {job.start_after_s:g} s, once every node has "
                f"given up the last one")
            stopping.wait(job.start_after_s)
        JOB_STARTED_FILE.touch()
        child = subprocess.Popen(job.cmd + verbose, env=env)
        if stopping.is_set() and not passed_on:  # the stop came between two jobs
            forward(signal.SIGTERM, None)
        return child.wait()

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    done, failures_in_row, code = 0, 0, 0
    while not stopping.is_set() and (repeat == 0 or done < repeat):
        job = next_job()
        restarts = list(job.restarts)
        while True:
            returncode = attempt()
            code = exit_code(returncode)
            if job.run_dir is None:
                break
            status = job_status(returncode, job.run_dir, passed_on[0] if passed_on else None)
            again = restart(job, len(restarts)) if code and restart and not stopping.is_set() else None
            if again is None:
                write_status(job.run_dir, {**status, "restarts": restarts} if restarts else status)
                break
            job, resumed_from = again
            restarts.append({"reason": status["reason"], "exit_code": code, "resumed_from": resumed_from,
                             "at": time.time()})
            write_status(job.run_dir, {**status, "status": RESTARTING, "restarts": restarts})
        if stopping.is_set():
            break
        if code == 0:
            done, failures_in_row = done + 1, 0
            log(f"{role}: job {done} finished")
        elif rejoin is not None and rejoin(stopping):
            # The coordinator restarts the job: join its next attempt (a failed job is not a finished one).
            log(f"{role}: exited with {code}; the job restarts from its last checkpoint: joining it again")
            stopping.wait(1.0)  # a coordinator still closing the failed attempt refuses registrations
        elif repeat == 1:
            log(f"{role}: exited with {code}")
            break
        else:
            # A node that restarts faster than the coordinator between jobs is refused
            # once; a failed job is rerun. Back off so a persistent fault stays readable.
            failures_in_row += 1
            delay = min(30.0, 0.5 * 2 ** min(failures_in_row, 6))
            log(f"{role}: exited with {code}; starting again in {delay:g} s")
            stopping.wait(delay)
    if repeat == 0:
        return 0 if stopping.is_set() else code
    if linger is not None and not stopping.is_set():
        JOB_STARTED_FILE.touch()  # no /metrics while waiting: the health grace covers the wait (Swarm)
        linger(stopping)
    return code


# -- one node of a job launched by `synclab run` (network.isolation: docker) ---------------------
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
    p.add_argument("role", choices=ROLES)
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
    from synclab.roles.network import node_profile
    from synclab.netem.profile import human

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

        user = pwd.getpwnam(RUN_AS)
        uid, gid, home = user.pw_uid, user.pw_gid, user.pw_dir
    args.record.write_text(json.dumps(outcome, indent=2, default=str) + "\n")
    os.chown(args.record, uid, gid)
    log(f"{args.node}: link backend {outcome['backend']} on {outcome['device']}"
        + (f": {outcome['summary']}" if outcome.get("summary") else f" ({outcome['reason']})"))
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    os.chown(STATE_DIR, uid, gid)
    private_tls_copy(uid, gid)
    if os.geteuid() != 0:
        return cmd
    caps = ["--inh-caps=+net_admin", "--ambient-caps=+net_admin"] if has_cap("CapBnd") else []
    groups = ["--init-groups"] if not args.user else ["--clear-groups"]
    os.environ["HOME"] = home  # setpriv keeps root's
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", *groups, *caps, "--", *cmd]


def healthcheck() -> int:
    """Healthy when /metrics answers, or while a job is starting or ending (a node serves metrics
    only once it has registered, a supervised node restarts between jobs, and a one-shot node
    waits for the coordinator after its job): an orchestrator that replaces unhealthy containers
    (Swarm) must not kill nodes waiting for the coordinator.
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
    if argv[0] == LAUNCH:
        from synclab.config import SpecError

        try:
            cmd = launch(argv[1:])
        except (ValueError, SpecError) as e:
            log(f"error: {e}")
            return 2
        except (OSError, RuntimeError) as e:
            log(f"error: cannot shape the link: {e}")
            return 1
        os.execvp(cmd[0], cmd)
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
    from synclab.wire.tls import TlsError

    try:
        if stage_two:
            code = run_role(argv[0])
            # The exit code is decided: a stop that arrives while the interpreter shuts down (its
            # signal handlers are reset to the default there) must not turn it into 143.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
            return code
        cmd = prepare(argv[0])
    except (SettingsError, TlsError) as e:
        log(f"error: {e}")
        return 2
    except (OSError, RuntimeError) as e:  # synclab.netem's ShapingError is a RuntimeError
        log(f"error: cannot shape the link: {e}")
        return 1
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
