"""Stage one of a role's container (root): check the variables, shape eth0, resolve the coordinator's job.

It starts as root only to shape: tc is enough for the root qdisc, but the ifb
device that carries ingress shaping needs ``ip link add``, and iproute2's ``ip``
drops file capabilities for non-root callers. Then the entrypoint runs again as
the unprivileged ``synclab`` user, keeping NET_ADMIN as an *ambient* capability
(only when the container has it), so the role can reshape its link live
(:mod:`.supervise` is that second stage).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from synclab.roles.container import host
from synclab.roles.container.host import as_user, log, private_tls_copy, read_settings
from synclab.roles.container.jobs import STATUS_FILE, new_run_dir, point_latest, write_status

if TYPE_CHECKING:
    from synclab.config.settings import ContainerSettings


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
        if not host.has_cap("CapEff"):
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
    host.STATE_DIR.mkdir(parents=True, exist_ok=True)
    host.SHAPING_FILE.write_text(json.dumps(outcome, indent=2, default=str) + "\n")
    log(f"link: backend {outcome['backend']} on {device}"
        + (f", profile {profile_name}" if profile_name else "")
        + (f": {outcome['summary']}" if outcome.get("summary") else f" ({outcome['reason']})"))
    return outcome


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
            user = pwd.getpwnam(host.RUN_AS)
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
                          kernel_available=frozenset(outcome["kernel"]), netns_unavailable=None,
                          auto_dilation=False)  # eth0 is shaped already, undilated (below)
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
    host.STATE_DIR.mkdir(parents=True, exist_ok=True)
    host.JOB_SPEC_FILE.write_text(yaml.safe_dump(spec.to_dict(), sort_keys=False))
    log(f"job: strategy {spec.strategy.name}, model {spec.model.name}, {spec.n_workers} worker(s), "
        f"{spec.n_ps} PS shard(s), {spec.run.iterations} iterations; links: {job.network.describe()}")
    for note in job.notes:
        log(f"note: {note}")
    if job.dilation.dilation != spec.run.dilation:
        log(f"note: this job runs at D = {spec.run.dilation:g}, not at the D = {job.dilation.dilation:g} the "
            f"dilation rule picks ({job.dilation.reason}): containers shape eth0 before the job is known. The "
            f"summary's host_cpu says whether the host bounded the figures; `synclab run` runs it dilated")


def prepare(role: str, script: str) -> list[str]:
    """Stage one (root): check every variable, shape the link, return the command of stage two (``script``,
    the entrypoint, run again as the unprivileged user)."""
    from synclab.config.settings import SettingsError

    settings = read_settings()
    host.STATE_DIR.mkdir(parents=True, exist_ok=True)
    host.HEALTH_FILE.write_text(json.dumps({"metrics_port": settings.metrics_port, "grace_s": settings.health_grace_s}))
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
    stage_two = [sys.executable, script, host.AS_USER, role]
    if os.geteuid() != 0:
        return stage_two
    import pwd

    user = pwd.getpwnam(host.RUN_AS)
    os.chown(host.STATE_DIR, user.pw_uid, user.pw_gid)  # stage two marks job starts there
    private_tls_copy(user.pw_uid, user.pw_gid)
    return as_user(host.RUN_AS, host.RUN_AS, "--init-groups", stage_two)
