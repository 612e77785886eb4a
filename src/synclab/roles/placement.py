"""Where a node runs, as ``summary.json`` records it under ``placement``.

A node cannot see everything about its own placement from inside: in a container
its hostname is the container's, and which machine and which image it runs on is
known only to whatever started it. So the starter says it in two variables, and
the node reports them when it registers (``RegisterRequest.placement``):

- ``SYNCLAB_NODE_HOST``: the machine (Docker engine, Swarm node) the node runs on;
- ``SYNCLAB_NODE_IMAGE``: the image, as ``reference@id`` (tag and content digest).

Without them the host is the node's own hostname: right for processes and
network namespaces, which share the launcher's machine.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

HOST_ENV = "SYNCLAB_NODE_HOST"
IMAGE_ENV = "SYNCLAB_NODE_IMAGE"


def node_placement(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``host``, ``hostname`` (the container's own, in a container), ``pid`` and, when given, ``image``."""
    hostname = socket.gethostname()
    where = {"host": environ.get(HOST_ENV) or hostname, "hostname": hostname, "pid": str(os.getpid())}
    if environ.get(IMAGE_ENV):
        where["image"] = environ[IMAGE_ENV]
    return where
