"""What every unit test runs under: one torch intra-op thread, and no processes or listening sockets.

One thread: workers train with one thread (``compute.threads`` defaults to 1), and on a shared two-core machine
OpenMP threads spin against other processes: a small GoogLeNet step costs 0.35 s of CPU with one thread and over
5 s with two under load.

No processes, no servers: ``tests/unit`` is the tier ``make check`` runs before every commit, so it must stay fast
and self-contained. While a unit test's setup, call or teardown runs, starting a process (``subprocess``,
``os.fork``/``posix_spawn``/``system``, ``multiprocessing``) or a server (a socket that listens, a gRPC server)
is refused and the test fails with a message saying to move it to ``tests/integration``. The refused call raises
:class:`UnitTierViolation`; the test fails even if the code under test catches that exception.
"""

from __future__ import annotations

import _posixsubprocess
import multiprocessing.process
import os
import platform
import socket
import subprocess
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import grpc.aio
import matplotlib.font_manager
import pytest
import torch

UNIT = Path(__file__).resolve().parent
REPO = UNIT.parents[1]


class UnitTierViolation(RuntimeError):
    """A unit test tried to start a process or a server."""


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _refusing(what: str, attempts: list[str]) -> Callable:
    def refuse(*args, **kwargs):
        attempts.append(what + _caller())
        raise UnitTierViolation(f"{what} in a unit test (see tests/unit/conftest.py)")

    return refuse


def _caller() -> str:
    """`` from FILE:LINE``: the innermost frame in this repository's code that led to the refused call."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        path = Path(frame.filename)
        if path.is_relative_to(REPO) and ".venv" not in path.parts and path != Path(__file__):
            return f" from {path.relative_to(REPO)}:{frame.lineno}"
    return ""


# (owner, attribute, what the attempt is called in the failure message)
_GUARDED = [
    (subprocess, "_fork_exec", "a process start (subprocess)"),  # bound at import in subprocess
    (_posixsubprocess, "fork_exec", "a process start (multiprocessing spawn)"),
    (os, "fork", "os.fork"),
    (os, "forkpty", "os.forkpty"),
    (os, "posix_spawn", "os.posix_spawn"),
    (os, "posix_spawnp", "os.posix_spawnp"),
    (os, "system", "os.system"),
    (multiprocessing.process.BaseProcess, "start", "multiprocessing Process.start"),
    (socket.socket, "listen", "a listening socket (a server)"),
    (grpc, "server", "a gRPC server"),
    (grpc.aio, "server", "a gRPC server (asyncio)"),
]

_lock = threading.Lock()

# platform.processor() runs `uname -p` once per process and caches the answer (the profiler records it); ask it
# here, outside any test, so the guard does not blame whichever test happens to ask first.
platform.processor()

# matplotlib builds its font list on first use and asks `fc-list` (a process) when none is cached, as on a fresh CI
# machine; build it here too.
matplotlib.font_manager.findfont("DejaVu Sans")


@contextmanager
def _no_processes_nor_servers() -> Iterator[list[str]]:
    """Swap each guarded call for one that records the attempt and raises; put them back afterwards."""
    attempts: list[str] = []
    saved = []
    with _lock:
        for owner, name, what in _GUARDED:
            if hasattr(owner, name):
                saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
                setattr(owner, name, _refusing(what, attempts))
    try:
        yield attempts
    finally:
        with _lock:
            for owner, name, original in reversed(saved):
                if original is _MISSING:  # inherited (socket.socket.listen comes from _socket.socket)
                    delattr(owner, name)
                else:
                    setattr(owner, name, original)


_MISSING = object()


def _guarded_phase(item: pytest.Item, phase: str):
    with _no_processes_nor_servers() as attempts:
        try:
            result = yield
        finally:
            if attempts:
                where = Path(item.path).resolve().relative_to(UNIT)
                pytest.fail(
                    f"{item.nodeid} ({phase}) tried {', '.join(sorted(set(attempts)))}. Unit tests must not start "
                    f"processes or servers: move this test to tests/integration/{where} (see CONTRIBUTING.md).",
                    pytrace=False,
                )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _guarded_phase(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _guarded_phase(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    return (yield from _guarded_phase(item, "teardown"))
