"""Every integration test module runs under the host-wide emulation lock (:mod:`synclab.hostlock`).

The lock is the one ``flock /tmp/synclab-emu.lock`` takes: while a module of this suite runs its clusters,
namespaces or containers, no other emulation, benchmark or test run on the host shares the cores, and the
other way round. Taken per module, so a long suite lets others in between modules; a no-op when the suite
itself runs under ``flock``. The ``synclab`` commands the tests start see the lock held by an ancestor and
do not wait for it.
"""

from __future__ import annotations

import pytest

from synclab import hostlock


@pytest.fixture(scope="module", autouse=True)
def _host_emulation_lock():
    with hostlock.hold(say=lambda msg: print(f"\n{msg}", flush=True)):
        yield
