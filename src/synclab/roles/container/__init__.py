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

The code lives in this package, one concern per module: :mod:`.host` (this
container: state files, address, capabilities), :mod:`.bootstrap` (stage one:
variables, shaping, the job spec), :mod:`.jobs` (what one job of a role is, its
records and restarts), :mod:`.supervise` (stage two: running jobs),
:mod:`.launch` (a node of ``network.isolation: docker``), :mod:`.health` and
:mod:`.main`; ``services/entrypoint.py`` only calls :func:`.main.main`. The
restart policy is :mod:`synclab.roles.restart`, shared with ``synclab run``.

The variables are read once into :class:`synclab.config.settings.ContainerSettings`
(defaults, ranges, help); a bad one stops the container at once with a message
naming it, so it shows in ``docker compose logs``.
"""
