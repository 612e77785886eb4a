"""The entrypoint's dispatch: which stage or mode an ``entrypoint.py ARGS...`` call runs."""

from __future__ import annotations

import os
import signal

from synclab.roles.container import host
from synclab.roles.container.host import log


def ignore_stops() -> None:
    """Once the container's exit code is decided, a stop must not change it.

    Under ``docker compose up --exit-code-from coordinator`` every node is sent SIGTERM as the
    coordinator's container exits, which is about when a lingering node sees the job end and starts
    to exit itself. The interpreter's shutdown resets Python's signal handlers to the default, so a
    SIGTERM arriving then would end the process as 143. The signals are ignored, process-wide:
    blocking them (``pthread_sigmask``) holds for the calling thread only, and any other thread (one
    that torch or a gRPC library started) would take the signal and its default action.
    """
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)


def main(argv: list[str], script: str) -> int:
    """Run the entrypoint with ``argv``; ``script`` is the entrypoint file itself (stage two runs it again).

    Returns the exit code, or replaces this process (``exec``) with the next stage, the node's command
    or any other command given.
    """
    if not argv:
        argv = ["coordinator"]
    if argv[0] == "healthcheck":
        from synclab.roles.container.health import healthcheck

        return healthcheck()
    if argv[0] in ("-h", "--help"):
        import synclab.roles.container as package
        from synclab.config.settings import ContainerSettings

        print(f"{package.__doc__}\nVariables:\n{ContainerSettings.variables_help()}")
        return 0
    from synclab.roles.container.launch import LAUNCH

    if argv[0] == LAUNCH:
        from synclab.config import SpecError
        from synclab.roles.container.launch import launch

        try:
            cmd = launch(argv[1:])
        except (ValueError, SpecError) as e:
            log(f"error: {e}")
            return 2
        except (OSError, RuntimeError) as e:
            log(f"error: cannot shape the link: {e}")
            return 1
        os.execvp(cmd[0], cmd)
    stage_two = argv[0] == host.AS_USER
    if stage_two:
        argv = argv[1:]
    if argv[0] not in host.ROLES:
        os.execvp(argv[0], argv)
    if len(argv) > 1:
        log(f"error: {argv[0]} takes no arguments here (got {' '.join(argv[1:])}); "
            f"configure it with SYNCLAB_* variables or run `synclab {argv[0]} ...` directly")
        return 2
    from synclab.config.settings import SettingsError
    from synclab.roles.container.bootstrap import prepare
    from synclab.roles.container.supervise import run_role
    from synclab.wire.tls import TlsError

    try:
        if stage_two:
            code = run_role(argv[0])
            ignore_stops()
            return code
        cmd = prepare(argv[0], script)
    except (SettingsError, TlsError) as e:
        log(f"error: {e}")
        return 2
    except (OSError, RuntimeError) as e:  # synclab.netem's ShapingError is a RuntimeError
        log(f"error: cannot shape the link: {e}")
        return 1
    os.execvp(cmd[0], cmd)

