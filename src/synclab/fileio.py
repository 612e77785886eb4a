"""Files SyncLab reads from a user and writes for another command: whole or not at all, errors that name the file.

A leaf module (layer 1: it imports nothing of SyncLab).

Writing. Another command reads what SyncLab writes (a checkpoint, ``control.json``,
TLS material, ``summary.json`` / ``status.json``, a generated document), so a
crash or a full disk midway must never leave half a file where the whole one was
expected. :func:`write_atomic` writes a temporary file in the same folder,
flushes it to disk (``fsync``) and renames it over the target (``os.replace``,
atomic on POSIX), then syncs the folder so the rename itself survives a crash.
:func:`write_group` does this for several files that must agree (a CA and the
certificate it signed): all are written to temporaries first and renamed only
once every one is complete, so a failure leaves the old set, or none, never a
mix. (Between the renames of a group a crash can still leave some new and some
old files; the renames are the last and shortest step.)

Reading. :func:`read_text` turns every way a user's file can be wrong — missing,
a folder, unreadable, too large, not UTF-8 — into one :class:`InputFileError`
(a ``ValueError``: the CLI's exit 2) that names the file and the problem.
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
from pathlib import Path
from typing import Mapping

MAX_INPUT_BYTES = 64 << 20  # a spec, profile or control file larger than this is a mistake, not an input


class InputFileError(ValueError):
    """A file given to SyncLab cannot be used; the message names the file and why."""


def read_bytes(path: str | os.PathLike, what: str = "file", max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a user's file, or :class:`InputFileError` naming it and the problem."""
    p = Path(path)
    try:
        if p.is_dir():
            raise InputFileError(f"{what} {p} is a folder, not a file")
        size = p.stat().st_size
        if size > max_bytes:
            raise InputFileError(f"{what} {p} is {size} bytes; more than {max_bytes} bytes is not a {what}")
        with open(p, "rb") as f:
            data = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise InputFileError(f"{what} {p} does not exist") from None
    except PermissionError:
        raise InputFileError(f"{what} {p} cannot be read: permission denied") from None
    except IsADirectoryError:
        raise InputFileError(f"{what} {p} is a folder, not a file") from None
    except OSError as e:
        raise InputFileError(f"{what} {p} cannot be read: {e.strerror or e}") from None
    if len(data) > max_bytes:  # a file that grows while read, or a device
        raise InputFileError(f"{what} {p} is larger than {max_bytes} bytes")
    return data


def read_text(path: str | os.PathLike, what: str = "file", max_bytes: int = MAX_INPUT_BYTES) -> str:
    """A user's text file as UTF-8, or :class:`InputFileError` naming it and the problem (position included)."""
    data = read_bytes(path, what, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputFileError(f"{what} {path} is not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r}); "
                             f"is it the right file?") from None


def read_yaml(path: str | os.PathLike, what: str = "YAML file", max_bytes: int = MAX_INPUT_BYTES):
    """The YAML document of ``path`` (None for an empty file); :class:`InputFileError` names the file when it
    cannot be read as text (:func:`read_text`) or is not valid YAML."""
    import yaml

    try:
        return yaml.safe_load(read_text(path, what, max_bytes))
    except yaml.YAMLError as e:
        raise InputFileError(f"{path}: not valid YAML: {e}") from None


def read_csv_rows(path: str | os.PathLike, what: str = "CSV file", required: tuple[str, ...] = (),
                  max_bytes: int = MAX_INPUT_BYTES) -> list[dict[str, str]]:
    """The rows of a user's CSV (a header line, then rows), or :class:`InputFileError` naming the file and
    the problem: unreadable, not UTF-8, not CSV, or without the ``required`` columns."""
    text = read_text(path, what, max_bytes)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        missing = [c for c in required if c not in (reader.fieldnames or ())]
        if missing:
            raise InputFileError(f"{what} {path}: missing column(s) {', '.join(missing)}")
        return list(reader)
    except csv.Error as e:
        raise InputFileError(f"{what} {path}: not a readable CSV ({e})") from None


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # a folder that cannot be opened for reading: the rename is still atomic, only not yet durable
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_temp(path: Path, data: bytes, mode: int | None) -> Path:
    """``data`` in a new temporary file beside ``path``, flushed to disk; its path."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def write_atomic(path: str | os.PathLike, data: bytes | str, *, mode: int | None = None) -> Path:
    """Replace ``path`` with ``data`` (str: UTF-8) all at once: readers see the old file or the new, never a part.

    ``mode``: the new file's permissions (e.g. 0o600 for a secret); by default the temporary's 0o600 widened
    to what the umask allows for a normal file.
    """
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    tmp = _write_temp(p, raw, mode)
    try:
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(p.parent)
    return p


def write_group(files: Mapping[str | os.PathLike, bytes | str], *,
                modes: Mapping[str | os.PathLike, int] | None = None) -> list[Path]:
    """Write several files that belong together: every one complete on disk before any replaces its target.

    ``modes``: permissions by path (e.g. 0o600 for a key); the others get what the umask allows. If writing
    any of them fails, no target is touched and the temporaries are removed.
    """
    umask = os.umask(0)
    os.umask(umask)
    modes = {Path(k): v for k, v in (modes or {}).items()}
    written: list[tuple[Path, Path]] = []
    try:
        for path, data in files.items():
            p = Path(path)
            raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
            written.append((_write_temp(p, raw, modes.get(p, 0o666 & ~umask)), p))
    except BaseException:
        for tmp, _ in written:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, p in written:
        os.replace(tmp, p)
    for folder in {p.parent for _, p in written}:
        _fsync_dir(folder)
    return [p for _, p in written]
