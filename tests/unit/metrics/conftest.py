from pathlib import Path

import pytest


def write_counters(root: Path, name: str, tx: int, rx: int) -> None:
    stats = root / name / "statistics"
    stats.mkdir(parents=True, exist_ok=True)
    (stats / "tx_bytes").write_text(f"{tx}\n")
    (stats / "rx_bytes").write_text(f"{rx}\n")


@pytest.fixture(name="write_counters")
def write_counters_fixture():
    """Set an interface's counters in a fake sysfs tree."""
    return write_counters


@pytest.fixture
def sys_net(tmp_path):
    """A fake /sys/class/net: eth0 (10/20 bytes), ifb0 mirroring its ingress, and lo."""
    root = tmp_path / "sys-class-net"
    write_counters(root, "eth0", 10, 20)
    write_counters(root, "ifb0", 20, 20)
    write_counters(root, "lo", 1, 1)
    return root
