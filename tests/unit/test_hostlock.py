"""The host lock's reading of /proc/locks and of this process's ancestry (no lock is taken here)."""

from __future__ import annotations

import os

from synclab import hostlock


def _line(n: int, pid: int, path, kind: str = "FLOCK", waiter: bool = False) -> str:
    st = path.stat()
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    return f"{n}: {'-> ' if waiter else ''}{kind}  ADVISORY  WRITE {pid} {dev} 0 EOF"


def test_holders_are_the_flock_lines_of_this_file_only(tmp_path):
    lock, other = tmp_path / "emu.lock", tmp_path / "other.lock"
    lock.touch()
    other.touch()
    text = "\n".join([_line(1, 101, lock), _line(1, 999, lock, waiter=True), _line(2, 202, other),
                      _line(3, 303, lock, kind="POSIX"), "4: OFDLCK ADVISORY  READ -1 00:06:3 0 EOF", "garbage"])
    assert hostlock.holders(lock, text) == {101}
    assert hostlock.holders(other, text) == {202}


def test_a_missing_lock_file_has_no_holders(tmp_path):
    assert hostlock.holders(tmp_path / "absent.lock", "1: FLOCK  ADVISORY  WRITE 1 00:00:1 0 EOF") == set()


def test_ancestry_starts_at_this_process_and_reaches_the_parent():
    chain = hostlock._ancestors(os.getpid())
    assert chain[0] == os.getpid()
    if os.getppid() > 1:
        assert chain[1] == os.getppid()


def test_the_lock_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("SYNCLAB_EMU_LOCK", raising=False)
    assert str(hostlock.lock_path()) == hostlock.DEFAULT_LOCK
    monkeypatch.setenv("SYNCLAB_EMU_LOCK", str(tmp_path / "x.lock"))
    assert hostlock.lock_path() == tmp_path / "x.lock"
