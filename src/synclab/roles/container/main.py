"""The entrypoint's dispatch: which stage or mode an ``entrypoint.py ARGS...`` call runs."""

from __future__ import annotations

import os
import signal

from synclab.roles.container import host
from synclab.roles.container.host import log


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
            # The exit code is decided: a stop that arrives while the interpreter shuts down (its
            # signal handlers are reset to the default there) must not turn it into 143.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
            return code
        cmd = prepare(argv[0], script)
    except (SettingsError, TlsError) as e:
        log(f"error: {e}")
        return 2
    except (OSError, RuntimeError) as e:  # synclab.netem's ShapingError is a RuntimeError
        log(f"error: cannot shape the link: {e}")
        return 1
    os.execvp(cmd[0], cmd)

