"""Skips for the netns tests (root, iproute2, tbf/htb) and a goodput table printed at the end of the run.

A missing prerequisite goes through :func:`support.netns.unavailable`: a skip, or a
failure under ``SYNCLAB_REQUIRE_NETNS=1``.
"""

import os
import shutil

import pytest

from support.netns import unavailable
from synclab.netem import tc

GOODPUT_ROWS: list[dict] = []


def _why_not() -> str | None:
    if not tc.has_net_admin():
        return f"netns tests need root with CAP_NET_ADMIN (uid {os.geteuid()}, capability missing or not root)"
    missing = [t for t in ("ip", "tc") if shutil.which(t) is None]
    if missing:
        return f"netns tests need iproute2 ({', '.join(missing)} not found)"
    return None


@pytest.fixture(scope="session")
def kernel_backends() -> frozenset[str]:
    why = _why_not()
    if why:
        unavailable(why)
    found = tc.detect_backends()
    if not {"tbf", "htb"} & found:
        unavailable(f"the kernel offers neither tbf nor htb (found: {sorted(found)})")
    return found


@pytest.fixture
def goodput_report():
    return GOODPUT_ROWS


def pytest_terminal_summary(terminalreporter):
    if not GOODPUT_ROWS:
        return
    terminalreporter.section("netem goodput (receiver side, 2 s bulk TCP)")
    for r in GOODPUT_ROWS:
        terminalreporter.write_line(
            f"{r['what']:<34} configured {r['rate_bps'] / 1e6:7.1f} Mbit/s  {r['tool']:<6} "
            f"{r['goodput_bps'] / 1e6:7.1f} Mbit/s  ratio {r['goodput_bps'] / r['rate_bps']:.3f}"
            + (f"  retransmits {r['retransmits']}" if r.get("retransmits") is not None else ""))
