"""Every integration test module runs under the host-wide emulation lock (:mod:`synclab.hostlock`).

The lock is the one ``flock /tmp/synclab-emu.lock`` takes: while a module of this suite runs its clusters,
namespaces or containers, no other emulation, benchmark or test run on the host shares the cores, and the
other way round. It is taken before a module's first test starts (so the wait never counts against a test's
timeout) and given back after its last test's teardown, so a long suite lets others in between modules; a
no-op when the suite itself runs under ``flock``. The ``synclab`` commands the tests start see the lock held
by an ancestor and do not wait for it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from synclab import hostlock

HERE = Path(__file__).resolve().parent
_held: list[contextlib.ExitStack] = []  # the lock while a module of this directory runs


def _here(item) -> bool:
    return item is not None and Path(item.path).resolve().is_relative_to(HERE)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    # config.hook calls this for every item of the session: only this directory's modules take the lock
    if _here(item) and not _held:
        stack = contextlib.ExitStack()
        stack.enter_context(hostlock.hold(say=lambda msg: print(f"\n{msg}", flush=True)))
        _held.append(stack)
    yield
    if _held and (not _here(nextitem) or Path(nextitem.path) != Path(item.path)):
        _held.pop().close()  # after the module's last teardown (pytest tears module fixtures down before nextitem's)
