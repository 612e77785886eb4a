"""Wire-level byte counters of network interfaces, read from /sys/class/net (what bwm-ng reads in P3 §5).

Which interfaces count is one rule, :func:`select_interfaces`, shared by the
Prometheus collector (read at scrape time) and the 10 ms traffic sampler (which
keeps the counter files open, :class:`InterfaceReader`).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from prometheus_client.core import CounterMetricFamily

SYS_NET = Path("/sys/class/net")
# ifb devices mirror another device's ingress (tc's ingress shaping): counting them counts traffic twice.
DEFAULT_EXCLUDE = ("lo", "ifb*")
LOOPBACK = "lo"


def select_interfaces(names: Iterable[str], interfaces: Sequence[str] | None = None,
                      exclude: Sequence[str] = DEFAULT_EXCLUDE) -> list[str]:
    """The interfaces to count among ``names`` (those present).

    ``interfaces`` given: exactly those that are present. Otherwise every name
    that matches no ``exclude`` glob; when that leaves nothing, ``lo`` if
    present (a node alone in a bare network namespace talks over loopback).
    """
    present = sorted(set(names))
    if interfaces is not None:
        return [n for n in interfaces if n in present]
    chosen = [n for n in present if not any(fnmatch.fnmatchcase(n, pat) for pat in exclude)]
    if not chosen and LOOPBACK in present:
        chosen = [LOOPBACK]
    return chosen


def list_interfaces(root: Path = SYS_NET) -> list[str]:
    """Interface names under ``root``; none where sysfs is not mounted."""
    try:
        return [p.name for p in root.iterdir()]
    except OSError:
        return []


def _read_counter(path: Path) -> int:
    return int(path.read_text())


def interface_counters(interfaces: Sequence[str] | None = None, exclude: Sequence[str] = DEFAULT_EXCLUDE,
                       root: Path = SYS_NET) -> dict[str, tuple[int, int]]:
    """``{interface: (tx_bytes, rx_bytes)}`` for the selected interfaces.

    An interface that disappears between listing and reading (a container's
    network torn down) is left out rather than failing a scrape.
    """
    out = {}
    for name in select_interfaces(list_interfaces(root), interfaces, exclude):
        stats = root / name / "statistics"
        try:
            out[name] = (_read_counter(stats / "tx_bytes"), _read_counter(stats / "rx_bytes"))
        except (OSError, ValueError):
            continue
    return out


class InterfaceReader:
    """Summed (tx_bytes, rx_bytes) of fixed interfaces, cheap enough for every 10 ms bin.

    The counter files stay open and are re-read with ``pread`` at offset 0 (sysfs
    regenerates the value on each read): about 10 µs per read against about
    170 µs for open + read + close.
    """

    def __init__(self, interfaces: Sequence[str], root: Path = SYS_NET):
        self.interfaces = list(interfaces)
        self._fds: list[tuple[int, int]] = []
        try:
            for name in self.interfaces:
                stats = root / name / "statistics"
                tx = os.open(stats / "tx_bytes", os.O_RDONLY)
                try:
                    rx = os.open(stats / "rx_bytes", os.O_RDONLY)
                except OSError:
                    os.close(tx)
                    raise
                self._fds.append((tx, rx))
        except OSError:
            self.close()
            raise

    def read(self) -> tuple[int, int] | None:
        """Summed counters, or None when there is no interface or one has gone away."""
        if not self._fds:
            return None
        tx_total = rx_total = 0
        try:
            for tx, rx in self._fds:
                tx_total += int(os.pread(tx, 32, 0))
                rx_total += int(os.pread(rx, 32, 0))
        except (OSError, ValueError):
            return None
        return tx_total, rx_total

    def close(self) -> None:
        fds, self._fds = self._fds, []
        for tx, rx in fds:
            os.close(tx)
            os.close(rx)


class InterfaceCollector:
    """``synclab_interface_{transmit,receive}_bytes_total{node,interface}``, read at scrape time."""

    def __init__(self, node: str, interfaces: Sequence[str] | None = None,
                 exclude: Sequence[str] = DEFAULT_EXCLUDE, root: Path = SYS_NET):
        self.node, self.interfaces, self.exclude, self.root = node, interfaces, exclude, root

    def _families(self) -> tuple[CounterMetricFamily, CounterMetricFamily]:
        labels = ["node", "interface"]
        return (CounterMetricFamily("synclab_interface_transmit_bytes",
                                    "Bytes an interface sent on the wire (sysfs tx_bytes)", labels=labels),
                CounterMetricFamily("synclab_interface_receive_bytes",
                                    "Bytes an interface received from the wire (sysfs rx_bytes)", labels=labels))

    def describe(self):
        return self._families()

    def collect(self):
        tx, rx = self._families()
        for name, (t, r) in interface_counters(self.interfaces, self.exclude, self.root).items():
            tx.add_metric([self.node, name], t)
            rx.add_metric([self.node, name], r)
        return tx, rx
