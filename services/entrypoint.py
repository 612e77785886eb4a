"""Container entrypoint: validate the environment, shape eth0, then run one SyncLab role.

    entrypoint.py coordinator | worker | ps     run that role (configured by SYNCLAB_* variables)
    entrypoint.py healthcheck                   exit 0 when this node's /metrics answers
    entrypoint.py --help                        the whole story and every SYNCLAB_* variable
    entrypoint.py launch ROLE NODE OPTIONS -- synclab ROLE ARGS...
                                                one node of a job that ``synclab run`` launched with
                                                ``network.isolation: docker``
    entrypoint.py CMD [ARGS...]                 run any other command (``synclab shape ...``, ``bash``)

The image runs this file under tini (``services/Dockerfile``); the logic is the
package :mod:`synclab.roles.container` (bootstrap, supervise, launch, health),
so it is installed, imported and tested like the rest of SyncLab. Stage two runs
this same file again as the unprivileged user.
"""

import os
import sys

from synclab.roles.container.main import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], os.path.abspath(__file__)))
