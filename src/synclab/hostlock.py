"""The host-wide emulation lock: one emulation, benchmark or cluster test on the host's cores at a time.

Emulated times are only as good as the cores behind them, so everything that runs a cluster on this host
takes an exclusive ``flock`` on one file (``/tmp/synclab-emu.lock``, or ``SYNCLAB_EMU_LOCK``), the same lock
that ``flock /tmp/synclab-emu.lock COMMAND`` takes from a shell. A process whose ancestor already holds it
(``flock LOCK make test``, a test module that holds it and runs ``synclab run``) goes on without taking it
again: a second ``flock`` on a new open file would wait for its own parent forever.

Holders are found in ``/proc/locks`` (the lock's device and inode, and the pid that took it); a process whose
ancestry cannot be read takes the lock as usual.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path

DEFAULT_LOCK = "/tmp/synclab-emu.lock"


def lock_path() -> Path:
    return Path(os.environ.get("SYNCLAB_EMU_LOCK") or DEFAULT_LOCK)


def _ancestors(pid: int) -> list[int]:
    """``pid`` and its ancestors, nearest first (as far as /proc lets us read)."""
    chain = []
    while pid > 1 and pid not in chain:
        chain.append(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        # the command name (field 2) may hold spaces and parentheses: fields after the last ")" are safe
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return chain


def holders(path: Path, locks_text: str | None = None) -> set[int]:
    """The pids holding an flock on ``path`` according to ``/proc/locks`` (``locks_text`` for tests)."""
    try:
        st = path.stat()
        text = locks_text if locks_text is not None else Path("/proc/locks").read_text()
    except OSError:
        return set()
    found = set()
    for line in text.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 00:2e:1234 0 EOF"; a waiter's line has "->" after the number
        if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            dev_ok = os.major(st.st_dev) == int(major, 16) and os.minor(st.st_dev) == int(minor, 16)
            if dev_ok and int(inode) == st.st_ino:
                found.add(int(fields[4]))
        except ValueError:
            continue
    return found


def held_here(path: Path | None = None) -> bool:
    """Whether this process or one of its ancestors holds the lock."""
    path = path or lock_path()
    return bool(holders(path) & set(_ancestors(os.getpid())))


@contextlib.contextmanager
def hold(path: Path | None = None, *, say=None) -> Iterator[bool]:
    """Hold the lock for the ``with`` block (waiting for it, and saying so once through ``say``).

    Yields True when this call took it, False when an ancestor already held it.
    """
    path = path or lock_path()
    if held_here(path):
        yield False
        return
    say = say or (lambda msg: print(msg, file=sys.stderr, flush=True))
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            others = sorted(holders(path))
            say(f"waiting for the host emulation lock {path} (held by pid {', '.join(map(str, others)) or '?'})")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)

