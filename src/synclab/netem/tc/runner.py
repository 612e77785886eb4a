"""Running ip/tc commands (inside a network namespace when asked) and the errors shaping raises."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Protocol


class ShapingError(RuntimeError):
    """A tc/ip command failed, or the read-back does not match what was applied."""


class ToolMissing(ShapingError):
    """iproute2 (ip, tc) is not installed."""


class TcError(ShapingError):
    def __init__(self, cmd: Sequence[str], returncode: int, stderr: str):
        self.cmd, self.returncode, self.stderr = list(cmd), returncode, stderr.strip()
        super().__init__(f"`{' '.join(self.cmd)}` failed (exit {returncode}): {self.stderr}")


class Runner(Protocol):
    def __call__(self, cmd: Sequence[str], netns: str | None = None, *,
                 check: bool = True) -> subprocess.CompletedProcess[str]: ...


def in_netns(cmd: Sequence[str], netns: str | None) -> list[str]:
    """``cmd`` as run inside ``netns`` (``ip netns exec NS ...``), or unchanged."""
    return ["ip", "netns", "exec", netns, *cmd] if netns else list(cmd)


def run_cmd(cmd: Sequence[str], netns: str | None = None, *, check: bool = True,
            timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run one command (inside ``netns`` if given); raise :class:`TcError` on failure when ``check``."""
    full = in_netns(cmd, netns)
    try:
        proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise ToolMissing(f"{full[0]!r} not found: kernel shaping and netns isolation need iproute2 "
                          "(apt-get install iproute2); without it run with --isolation none (app shaping)") from None
    if check and proc.returncode != 0:
        raise TcError(full, proc.returncode, proc.stderr or proc.stdout)
    return proc
