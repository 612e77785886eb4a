"""The chaos tests need what the netns tests need: root with CAP_NET_ADMIN and iproute2 (a skip, or a failure
under SYNCLAB_REQUIRE_NETNS=1, through support.netns.unavailable)."""

import os
import shutil

import pytest

from support.netns import unavailable
from synclab.netem import tc


@pytest.fixture(scope="session")
def netns_ready() -> None:
    if not tc.has_net_admin():
        unavailable(f"chaos tests need root with CAP_NET_ADMIN (uid {os.geteuid()})")
    missing = [t for t in ("ip", "tc", "mount") if shutil.which(t) is None]
    if missing:
        unavailable(f"chaos tests need {', '.join(missing)}")
