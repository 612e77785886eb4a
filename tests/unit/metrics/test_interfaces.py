import pytest

from synclab.metrics import InterfaceReader, interface_counters, select_interfaces


def test_default_selection_skips_loopback_and_ifb():
    assert select_interfaces(["lo", "eth0", "ifb0", "eth1"]) == ["eth0", "eth1"]


def test_loopback_counts_when_it_is_the_only_interface():
    assert select_interfaces(["lo"]) == ["lo"]
    assert select_interfaces(["lo", "ifb0"]) == ["lo"]
    assert select_interfaces([]) == []


def test_explicit_interfaces_and_exclude_patterns():
    names = ["lo", "eth0", "veth1", "docker0"]
    assert select_interfaces(names, interfaces=["eth0", "lo", "eth9"]) == ["eth0", "lo"]
    assert select_interfaces(names, exclude=("lo", "veth*", "docker*")) == ["eth0"]


def test_interface_counters_read_sysfs(sys_net):
    assert interface_counters(root=sys_net) == {"eth0": (10, 20)}
    assert interface_counters(["lo"], root=sys_net) == {"lo": (1, 1)}
    assert interface_counters(root=sys_net / "absent") == {}


def test_reader_sums_and_rereads_open_files(sys_net, write_counters):
    write_counters(sys_net, "eth1", 5, 6)
    reader = InterfaceReader(["eth0", "eth1"], sys_net)
    try:
        assert reader.read() == (15, 26)
        write_counters(sys_net, "eth0", 110, 220)
        assert reader.read() == (115, 226)
    finally:
        reader.close()


def test_reader_without_interfaces_reads_nothing(sys_net):
    assert InterfaceReader([], sys_net).read() is None
    with pytest.raises(OSError):
        InterfaceReader(["eth9"], sys_net)
