"""synclab.fileio: files written whole or not at all, and bad input files named with their problem."""

import os

import pytest

import synclab.fileio as fileio
from synclab.fileio import InputFileError, read_text, write_atomic, write_group


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "summary.json"
    target.write_text("old")

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        write_atomic(target, "new")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_write_atomic_sets_the_mode_asked_for(tmp_path):
    p = write_atomic(tmp_path / "control.json", "{}", mode=0o600)
    assert p.read_text() == "{}" and (p.stat().st_mode & 0o777) == 0o600


def test_a_group_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    files = {tmp_path / n: n for n in ("a", "b", "c")}
    (tmp_path / "a").write_text("old a")
    real, calls = fileio._write_temp, []

    def fail_third(path, data, mode):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(path, data, mode)

    monkeypatch.setattr(fileio, "_write_temp", fail_third)
    with pytest.raises(OSError):
        write_group(files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"] and (tmp_path / "a").read_text() == "old a"
    monkeypatch.setattr(fileio, "_write_temp", real)
    write_group(files, modes={tmp_path / "c": 0o600})
    assert [(tmp_path / n).read_text() for n in "abc"] == ["a", "b", "c"]
    assert (tmp_path / "c").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("make,words", [
    (lambda p: p.write_bytes(b"ok\xff\xfe"), "is not UTF-8 text (byte 2"),
    (lambda p: p.mkdir(), "is a folder, not a file"),
    (lambda p: None, "does not exist"),
    (lambda p: open(p, "wb").truncate(fileio.MAX_INPUT_BYTES + 1), "bytes; more than"),
])
def test_reading_a_bad_file_names_it_and_the_problem(tmp_path, make, words):
    p = tmp_path / "spec.yaml"
    make(p)
    with pytest.raises(InputFileError) as e:
        read_text(p, "spec file")
    assert str(p) in str(e.value) and words in str(e.value) and str(e.value).startswith("spec file")
