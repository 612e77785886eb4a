"""``synclab run`` with ``network.isolation: docker``: every node of the job is a container.

The containers are started through the Docker Engine API (the ``docker`` SDK) on a bridge network
made for the job; each shapes its own ``eth0`` as the compose containers do (NET_ADMIN, the image's
entrypoint, ``net.ipv4.tcp_notsent_lowat``) and runs the same ``synclab ROLE ...`` command line as
a netns node, with the run directory (``--out``) bind-mounted at its own path, so the records land
exactly where and as the other isolations write them. :class:`DockerCluster` has the interface
:func:`synclab.roles.launcher.supervise` uses (a container is seen through :class:`ContainerProcess`,
the part of ``subprocess.Popen`` it needs), so sweeps and ``synclab reproduce`` get it too.

Everything made for a job carries the label ``io.synclab.job=<id>`` and is removed in
:meth:`DockerCluster.terminate` (``supervise`` calls it in ``finally``, the CLI when a start fails).
A launcher killed with SIGKILL cannot: ``synclab cleanup --docker`` removes what such a job left
(the label ``io.synclab.launcher=host:pid`` tells whether its launcher still runs).

Run directory ownership: nodes run unprivileged. A run directory owned by a user other than root is
written by that user's uid inside the containers; one owned by root (``synclab run`` as root) is
handed to the image's ``synclab`` user for the run and back to root afterwards.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from synclab.roles import placement
from synclab.roles.image_source import SOURCE_LABEL, source_digest
from synclab.roles.launcher import Child, LocalCluster, node_args

JOB_LABEL = "io.synclab.job"
NODE_LABEL = "io.synclab.node"
LAUNCHER_LABEL = "io.synclab.launcher"   # host:pid of the `synclab run` that owns the job
DEFAULT_IMAGE = "synclab:latest"
IMAGE_ENV = "SYNCLAB_IMAGE"
LAUNCH_LABEL = "io.synclab.launch"   # the image's entrypoint has the `launch` mode
REBUILD_ENV = "SYNCLAB_IMAGE_REBUILD"  # "never": use the image even when its source label differs
UID_LABEL = "io.synclab.uid"
IMAGE_UID = 10001                    # services/Dockerfile's SYNCLAB_UID, when the image does not say
COORDINATOR_PORT = 50051
# Paths of the image a bind-mounted run directory must not hide.
RESERVED = ("/opt/venv", "/opt/synclab", "/run/synclab", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64",
            "/proc", "/sys", "/dev")
# compose refuses to read its file without these; building an image does not use them.
COMPOSE_SECRETS = ("SYNCLAB_TOKEN", "GRAFANA_ADMIN_PASSWORD")
REPO = Path(__file__).resolve().parents[3]   # a source checkout: scripts/docker/build.sh builds the images


class DockerUnavailable(RuntimeError):
    """No SDK, no daemon, no permission, or no image to run; the message says which and what to do."""


# -- pure pieces ---------------------------------------------------------------------------------
def node_addresses(subnet: str, gateway: str | None, names: list[str]) -> dict[str, str]:
    """Static addresses for ``names`` in the job network's ``subnet``, skipping its gateway."""
    net = ipaddress.ip_network(subnet)
    free = (str(a) for a in net.hosts() if str(a) != gateway)
    try:
        return {n: next(free) for n in names}
    except StopIteration:
        raise DockerUnavailable(f"the job network's subnet {subnet} has too few addresses for "
                                f"{len(names)} nodes") from None


def exit_status(code: int) -> int:
    """A container's exit code in ``Popen.returncode`` terms: 128 + N (tini: the node was killed by
    signal N, or the container was) becomes -N, as a killed local process reports it."""
    return -(code - 128) if 128 < code < 128 + 65 else code


def node_user(owner_uid: int, owner_gid: int) -> str | None:
    """``UID:GID`` the nodes run as so that they can write a run directory owned by ``owner``; None
    for root's: then the image's own unprivileged user (the directory is lent to it for the run)."""
    return None if owner_uid == 0 else f"{owner_uid}:{owner_gid}"


def check_run_dir(run_dir: Path) -> None:
    """A run directory is mounted at its own path in every container: refuse one that would hide the image."""
    p = run_dir.resolve()
    if p == Path("/") or any(p == Path(r) or Path(r) in p.parents for r in RESERVED):
        raise DockerUnavailable(f"run directory {p}: mounted at the same path in the containers it would hide "
                                f"the image's {next((r for r in RESERVED if p.is_relative_to(r)), '/')}; "
                                f"choose --out elsewhere (e.g. runs/NAME)")


def launch_command(role: str, node: str, *, spec_path: Path, run_dir: Path, kernel: frozenset[str],
                   user: str | None, synclab_args: list[str]) -> list[str]:
    """The container's command: the entrypoint's ``launch`` mode (shape eth0, drop to ``user``) and the
    node's own ``synclab`` command line."""
    return ["launch", role, node, "--spec", str(spec_path), "--kernel", ",".join(sorted(kernel)),
            "--record", str(run_dir / f"shaping-{node}.json"), *(["--user", user] if user else []),
            "--", "synclab", *synclab_args]


def container_request(*, job: str, name: str, role: str, image: str, command: list[str], run_dir: Path,
                      network: str, address: str, environment: dict[str, str],
                      notsent_lowat: int | None, launcher: str = "") -> dict:
    """What the Engine API is asked for one node: ``create`` (container settings), ``host`` (its host
    config) and ``endpoint`` (its address on the job network). Plain data, so it can be read and tested."""
    rd = str(run_dir.resolve())
    host = {"cap_add": ["NET_ADMIN"], "binds": {rd: {"bind": rd, "mode": "rw"}},
            # the image declares /runs a volume; a tmpfs there leaves no anonymous volume behind
            "tmpfs": {"/runs": ""} if rd != "/runs" else {},
            "sysctls": {"net.ipv4.tcp_notsent_lowat": str(notsent_lowat)} if notsent_lowat else {}}
    create = {"image": image, "command": command, "name": f"{job}-{name}", "hostname": name,
              "labels": {JOB_LABEL: job, NODE_LABEL: name, "io.synclab.role": role, LAUNCHER_LABEL: launcher},
              "environment": environment,
              "healthcheck": {"test": ["NONE"]}}   # the image's check suits compose; here the launcher watches
    return {"create": create, "host": host, "endpoint": {network: {"ipv4_address": address}}}


def job_resources(items: list[tuple[str, dict[str, str]]], job: str | None = None, *, force: bool = False,
                  launcher_alive=None) -> list[str]:
    """Of ``(id, labels)`` pairs, the ids of what SyncLab docker jobs left: ``job``'s alone when named;
    otherwise every job whose launcher is gone (``launcher_alive(label)`` says; default: a process of
    that pid runs on this host), or every job with ``force``."""
    alive = launcher_alive or launcher_running
    out = []
    for i, labels in items:
        labels = labels or {}
        if JOB_LABEL not in labels:
            continue
        if job is not None:
            if labels[JOB_LABEL] == job:
                out.append(i)
        elif force or not alive(labels.get(LAUNCHER_LABEL, "")):
            out.append(i)
    return out


def launcher_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def launcher_running(label: str) -> bool:
    """Whether the ``host:pid`` launcher still runs; one on another host counts as running (unknown here)."""
    host, _, pid = label.rpartition(":")
    if host != socket.gethostname():
        return bool(host)
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # someone else's process
        return True
    return True


# -- the Engine ----------------------------------------------------------------------------------
def engine(timeout: float | None = 60):
    """A client of the local Docker Engine, or :class:`DockerUnavailable` saying why not."""
    try:
        import docker
        import docker.errors
    except ImportError:
        raise DockerUnavailable("network.isolation docker needs the Docker SDK for Python: "
                                "pip install docker") from None
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except docker.errors.DockerException as e:
        text = str(e)
        hint = ("permission denied: run as root or as a member of the docker group" if "ermission" in text
                else "is dockerd running? (scripts/docker/setup.sh installs and starts it as root)")
        raise DockerUnavailable(f"cannot reach the Docker daemon ({text}); {hint}") from None
    return client


def stale_reason(labels: dict[str, str], want: str | None, environ) -> str | None:
    """Why an image with ``labels`` cannot run this checkout's nodes (None: it can). ``want`` is the
    checkout's source digest (None when SyncLab is installed without one: any launch-capable image
    does)."""
    if not labels.get(LAUNCH_LABEL):
        return "predates network.isolation docker"
    have = labels.get(SOURCE_LABEL) or "none"
    if want is None or have == want or environ.get(REBUILD_ENV) == "never":
        return None
    return (f"was built from other source than this checkout ({SOURCE_LABEL} {have}, checkout {want}; "
            f"{REBUILD_ENV}=never keeps it)")


def ensure_image(client, tag: str, say=lambda msg: print(msg, file=sys.stderr)):
    """The image ``tag``, built with scripts/docker/build.sh when it is missing, predates the
    ``launch`` mode or was built from other source than this checkout (:func:`stale_reason`). The
    base image is what the build uses elsewhere: ``BASE_IMAGE`` from the environment or .env
    (default python:3.11-slim-bookworm; ``local/bookworm:base`` offline)."""
    import docker.errors

    want = source_digest(REPO) if (REPO / "src" / "synclab").is_dir() else None  # None: installed, no checkout
    try:
        image = client.images.get(tag)
        why = stale_reason(image.labels or {}, want, os.environ)
        if why is None:
            return image
    except docker.errors.ImageNotFound:
        why = "is missing"
    build = REPO / "scripts" / "docker" / "build.sh"
    if not build.is_file():
        raise DockerUnavailable(f"image {tag} {why}, and there is no source checkout to build it from "
                                f"({build}); build it there with scripts/docker/build.sh or set {IMAGE_ENV}")
    env = {**os.environ, IMAGE_ENV: tag, **{k: os.environ.get(k) or "unused-by-the-build" for k in COMPOSE_SECRETS}}
    if want is not None:
        env["SOURCE_DIGEST"] = want
    say(f"image {tag} {why}: building it (scripts/docker/build.sh coordinator, BASE_IMAGE="
        f"{env.get('BASE_IMAGE') or 'from .env or python:3.11-slim-bookworm'})")
    r = subprocess.run([str(build), "coordinator"], cwd=REPO, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise DockerUnavailable(f"building image {tag} failed (exit {r.returncode}):\n{(r.stdout + r.stderr)[-3000:]}")
    image = client.images.get(tag)
    if want is not None and (image.labels or {}).get(SOURCE_LABEL) != want:
        say(f"note: image {tag} was rebuilt but its {SOURCE_LABEL} label is not {want}: does docker-compose.yml "
            f"pass SOURCE_DIGEST? (it will be rebuilt again next time)")
    if not image.labels.get(LAUNCH_LABEL):
        raise DockerUnavailable(f"image {tag} was built but lacks the {LAUNCH_LABEL} label: is {IMAGE_ENV} "
                                f"the tag docker-compose.yml builds?")
    return image


class ContainerProcess:
    """A node's container seen through the part of ``subprocess.Popen`` that ``supervise`` uses."""

    def __init__(self, container, waiter_client):
        self.container = container
        self.pid = container.short_id
        self.returncode: int | None = None
        self._done = threading.Event()
        self._waiter = waiter_client   # no request timeout: wait() blocks for the whole job
        threading.Thread(target=self._wait, name=f"wait-{container.name}", daemon=True).start()

    def _wait(self) -> None:
        try:
            code = self._waiter.api.wait(self.container.id)["StatusCode"]
        except Exception:  # the container vanished (removed by someone): it is not running
            code = 137
        self.returncode = exit_status(code)
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.container.name, timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        import docker.errors

        try:
            self.container.kill(signal=int(sig))
        except docker.errors.APIError:  # not running any more
            pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


@dataclass
class DockerCluster(LocalCluster):
    """The nodes of one job as containers on a bridge network of their own (``network.isolation: docker``)."""

    isolation: str = "docker"
    image_tag: str = field(default_factory=lambda: os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE)
    job: str = field(default_factory=lambda: f"synclab-{secrets.token_hex(4)}")
    client: object | None = None
    network: object | None = None
    addresses: dict[str, str] = field(default_factory=dict)
    _lent_to: int | None = None          # uid the root-owned run directory is lent to during the run
    _image: object | None = None
    _containers: list = field(default_factory=list)   # every container made, started or not
    _log_threads: list[threading.Thread] = field(default_factory=list)

    # -- start ------------------------------------------------------------------------------------
    def start(self, spec_path: Path | None = None) -> str:
        # Starting can take minutes (an image build): SIGTERM then stops it like Ctrl-C, so the
        # half-made job is removed before the error goes up, instead of the process just ending.
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            return self._start(spec_path)
        except BaseException:
            self.terminate(grace_s=0)
            raise
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def _start(self, spec_path: Path | None) -> str:
        from synclab.netem import tc

        check_run_dir(self.run_dir)
        spec_path = (spec_path or self.run_dir / "spec.yaml").resolve()
        run_dir = self.run_dir.resolve()
        self.client = self.client or engine()
        self._waiter = engine(timeout=None)
        image = self._image = ensure_image(self.client, self.image_tag)
        st = run_dir.stat()
        user = node_user(st.st_uid, st.st_gid)
        if user is None:
            if os.geteuid() != 0:
                raise DockerUnavailable(f"run directory {run_dir} is owned by root: run as root, or choose "
                                        f"--out in a directory of yours")
            self._lend(run_dir, int(image.labels.get(UID_LABEL) or IMAGE_UID))
        kernel = tc.detect_backends()   # containers share this kernel; the plan was made from the same probe
        self.network = self._make_network()
        ipam = self.network.attrs["IPAM"]["Config"][0]
        names = self.node_names()
        self.addresses = node_addresses(ipam["Subnet"], ipam.get("Gateway"), [n for n, _ in names])
        coordinator = f"{self.addresses['coordinator']}:{COORDINATOR_PORT}"
        env = {"SYNCLAB_TOKEN": self.token, "PYTHONUNBUFFERED": "1", **self._tls_env(),
               placement.HOST_ENV: self.client.info().get("Name", ""),   # summary.json's placement
               placement.IMAGE_ENV: f"{self.image_tag}@{image.id}"}
        self._write_network_json()
        (run_dir / "logs").mkdir(exist_ok=True)
        for name, role in names:
            args = node_args(role, name, address=self.addresses[name], coordinator=coordinator,
                             spec_path=spec_path, run_dir=run_dir)
            req = container_request(
                job=self.job, name=name, role=role, image=image.id, run_dir=run_dir, network=self.job,
                address=self.addresses[name], environment=env,
                notsent_lowat=self.spec.network.tcp_notsent_lowat, launcher=launcher_label(),
                command=launch_command(role, name, spec_path=spec_path, run_dir=run_dir, kernel=kernel, user=user,
                                       synclab_args=args))
            self._run_container(name, req)
        self._write_control(coordinator, docker_job=self.job)
        return coordinator

    def _make_network(self):
        """The job's bridge, on a subnet the engine picked as free: static node addresses need a subnet
        given at creation, so the engine's own choice is read from a first network and given back."""
        import docker.types

        labels = {JOB_LABEL: self.job, LAUNCHER_LABEL: launcher_label()}
        probe = self.client.networks.create(self.job, driver="bridge", labels=labels)
        self.network = probe  # removed by terminate() if what follows fails
        probe.reload()
        pool = probe.attrs["IPAM"]["Config"][0]
        probe.remove()
        self.network = None
        ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=pool["Subnet"],
                                                                           gateway=pool.get("Gateway"))])
        self.network = self.client.networks.create(self.job, driver="bridge", labels=labels, ipam=ipam)
        self.network.reload()
        return self.network

    def _run_container(self, name: str, req: dict) -> None:
        api = self.client.api
        endpoints = {net: api.create_endpoint_config(**ep) for net, ep in req["endpoint"].items()}
        created = api.create_container(**req["create"], host_config=api.create_host_config(**req["host"]),
                                       networking_config=api.create_networking_config(endpoints))
        container = self.client.containers.get(created["Id"])
        self._containers.append(container)  # before it starts: a failure from here on still removes it
        log_path = self.run_dir / "logs" / f"{name}.log"
        container.start()
        self.children.append(Child(name, ContainerProcess(container, self._waiter), log_path))
        t = threading.Thread(target=_copy_logs, args=(self._waiter, container.id, log_path),
                             name=f"logs-{name}", daemon=True)
        t.start()
        self._log_threads.append(t)

    def _lend(self, run_dir: Path, uid: int) -> None:
        """Hand the root-owned run directory to the image's user for the run (:meth:`_give_back` undoes it)."""
        self._lent_to = uid
        _chown_tree(run_dir, uid, uid)

    def _write_network_json(self, shaping: dict[str, dict] | None = None) -> None:
        shaping, image = shaping or {}, self._image
        planned_app = list(self.spec.network.app_shaping)
        net = self.network.attrs["IPAM"]["Config"][0] if self.network is not None else {}
        (self.run_dir / "network.json").write_text(json.dumps({
            "isolation": "docker", "network": self.job, "subnet": net.get("Subnet"),
            "image": f"{self.image_tag}@{image.id}" if image is not None else None,
            "nodes": {n: {"address": a, "container": f"{self.job}-{n}",
                          "backend": shaping.get(n, {}).get("backend", self.spec.network.backend),
                          "left_to_transport": shaping.get(n, {}).get("left_to_app", planned_app)}
                      for n, a in self.addresses.items()},
            "notes": [] if shaping or not self.addresses else ["per-node backends as planned (no node reported yet)"],
        }, indent=2) + "\n")

    # -- stop -------------------------------------------------------------------------------------
    def terminate(self, grace_s: float = 5.0) -> None:
        """Stop every container (SIGTERM, SIGKILL after ``grace_s``), then remove the containers and the
        network of the job and give the run directory back; raises when something could not be removed."""
        problems: list[str] = []
        live = [c for c in self.children if c.proc.poll() is None]
        for c in live:
            c.proc.send_signal(signal.SIGTERM)
        for c in live:
            try:
                c.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                c.proc.kill()
        for c in self.children:
            try:
                c.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                problems.append(f"container {c.proc.container.name} did not stop")
        for t in self._log_threads:
            t.join(timeout=10)
        self._log_threads = []
        for container in self._containers:
            try:
                container.remove(force=True, v=True)
            except Exception as e:
                if type(e).__name__ != "NotFound":
                    problems.append(f"container {container.name}: {e}")
        self._containers = []
        if self.network is not None:
            self._record_shaping()
            try:
                self.network.remove()
            except Exception as e:
                if type(e).__name__ != "NotFound":
                    problems.append(f"network {self.job}: {e}")
            self.network = None
        if hasattr(self, "_channel"):
            self._channel.close()
        if self._lent_to is not None:
            _chown_tree(self.run_dir.resolve(), 0, 0)
            self._lent_to = None
        if problems:
            raise RuntimeError("could not remove everything of docker job " + self.job + ": " + "; ".join(problems)
                               + f" (remove it with `synclab cleanup --docker --job {self.job}`)")

    def _record_shaping(self) -> None:
        """network.json with what each node applied (its ``shaping-NODE.json``)."""
        shaping = {}
        for n in self.addresses:
            try:
                shaping[n] = json.loads((self.run_dir / f"shaping-{n}.json").read_text())
            except (OSError, ValueError):
                pass
        self._write_network_json(shaping)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _copy_logs(client, container_id: str, path: Path) -> None:
    """Follow a container's output into ``logs/<node>.log`` until it exits."""
    with path.open("ab") as out:
        try:
            for chunk in client.api.logs(container_id, stream=True, follow=True):
                out.write(chunk)
                out.flush()
        except Exception as e:  # the container was removed under us: say so in the log, the job's status says why
            out.write(f"\n[synclab: log stream ended: {e}]\n".encode())


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            os.chown(os.path.join(d, n), uid, gid, follow_symlinks=False)


def leftovers(client, job: str | None = None, *, force: bool = False) -> dict[str, list]:
    """Containers and networks of SyncLab docker jobs to clean up (:func:`job_resources` selects)."""
    containers = client.containers.list(all=True, filters={"label": JOB_LABEL})
    networks = client.networks.list(filters={"label": JOB_LABEL})
    keep_c = set(job_resources([(c.id, c.labels) for c in containers], job, force=force))
    keep_n = set(job_resources([(n.id, n.attrs.get("Labels") or {}) for n in networks], job, force=force))
    return {"containers": [c for c in containers if c.id in keep_c],
            "networks": [n for n in networks if n.id in keep_n]}


def clean(client, job: str | None = None, *, force: bool = False) -> list[str]:
    """Remove what :func:`leftovers` finds (containers first, with their anonymous volumes); returns names."""
    found = leftovers(client, job, force=force)
    removed = []
    for c in found["containers"]:
        c.remove(force=True, v=True)
        removed.append(f"container {c.name}")
    for n in found["networks"]:
        n.remove()
        removed.append(f"network {n.name}")
    return removed
