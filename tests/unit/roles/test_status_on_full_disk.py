"""status.json outlives a transiently full disk: written again on ENOSPC until space comes back, up to a
limit; any other error, or a disk that stays full, is raised."""

import errno
import json

import pytest

from synclab.roles import launcher


def _flaky(monkeypatch, failures, err=errno.ENOSPC):
    calls = []
    real = launcher.write_atomic

    def write(path, data, **kw):
        calls.append(path)
        if len(calls) <= failures:
            raise OSError(err, "No space left on device")
        return real(path, data, **kw)

    monkeypatch.setattr(launcher, "write_atomic", write)
    monkeypatch.setattr(launcher.time, "sleep", lambda s: None)
    return calls


def test_written_once_space_returns(tmp_path, monkeypatch):
    calls = _flaky(monkeypatch, failures=3)
    launcher._write_status(tmp_path / "status.json", {"status": "failed", "reason": "disk full"})
    assert len(calls) == 4
    assert json.loads((tmp_path / "status.json").read_text())["reason"] == "disk full"


def test_other_errors_are_raised_at_once(tmp_path, monkeypatch):
    calls = _flaky(monkeypatch, failures=1, err=errno.EACCES)
    with pytest.raises(OSError):
        launcher._write_status(tmp_path / "status.json", {"status": "ok"})
    assert len(calls) == 1


def test_a_disk_that_stays_full_is_raised_after_the_patience(tmp_path, monkeypatch):
    _flaky(monkeypatch, failures=10**9)
    with pytest.raises(OSError):
        launcher._write_status(tmp_path / "status.json", {"status": "ok"}, patience_s=0.0)
