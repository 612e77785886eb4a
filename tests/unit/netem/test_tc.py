import shutil
import subprocess
from pathlib import Path

import pytest

from synclab.linkprofile import profile_from_mapping
from synclab.netem import tc
from synclab.netem.profile import load_profile
from synclab.netem.tc import (
    BackendChoice,
    ShapingError,
    apply,
    choose_backend,
    clear,
    clear_commands,
    detect_backends,
    egress_commands,
    ingress_commands,
    parse_classes,
    parse_qdiscs,
    verify,
)

ALL = frozenset({"netem", "htb", "tbf", "ifb"})
NO_NETEM = ALL - {"netem"}


def prof(**kw):
    return profile_from_mapping(kw, name="t")


# -- builders -----------------------------------------------------------------------------------

def test_tbf_egress_is_one_replace_with_derived_burst_and_queue():
    assert egress_commands("eth0", prof(rate="200mbit"), "tbf") == [
        ["tc", "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "tbf",
         "rate", "200000000bit", "burst", "100000", "limit", "625000"]]


def test_htb_egress_sets_rate_ceil_burst_cburst_quantum_and_a_byte_fifo():
    cmds = egress_commands("eth0", prof(rate="4gbit", burst="4MB"), "htb")
    assert cmds == [
        ["tc", "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1"],
        ["tc", "class", "replace", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", "4000000000bit",
         "ceil", "4000000000bit", "burst", "4000000", "cburst", "4000000", "quantum", "200000"],
        ["tc", "qdisc", "replace", "dev", "eth0", "parent", "1:1", "handle", "10:", "bfifo", "limit", "12500000"]]


def test_netem_goes_under_htb_for_the_rate_and_sizes_its_limit_for_the_delay():
    cmds = egress_commands("eth0", load_profile("wan-20ms"), "netem")
    assert cmds[0][-3:] == ["htb", "default", "1"]
    netem = cmds[-1]
    assert netem[:9] == ["tc", "qdisc", "replace", "dev", "eth0", "parent", "1:1", "handle", "10:"]
    assert netem[9:13] == ["netem", "delay", "20000us", "2000us"]
    # 1 Gbit/s: queue 3.125 MB + 2 x rate x 22 ms = 5.5 MB delay line, in 1514-byte frames
    assert netem[-2:] == ["limit", str(-(-(3_125_000 + 5_500_000) // 1514))]
    lossy = egress_commands("eth0", prof(loss="1%"), "netem")
    assert lossy == [["tc", "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "netem", "loss", "1%",
                      "limit", "100000"]]


def test_builders_refuse_what_they_cannot_build():
    assert egress_commands("eth0", prof(rate="1gbit"), "app") == []
    assert egress_commands("eth0", prof(), "none") == []
    with pytest.raises(ValueError, match="no"):
        egress_commands("eth0", prof(delay="5ms"), "tbf")
    with pytest.raises(ValueError, match="unknown backend"):
        egress_commands("eth0", prof(rate="1gbit"), "cake")


def test_ingress_redirects_to_the_ifb_and_shapes_it():
    cmds = ingress_commands("eth0", "ifb0", prof(rate="200mbit", direction="ingress"), "tbf")
    assert cmds[0] == ["ip", "link", "set", "dev", "ifb0", "up"]
    assert cmds[1] == ["tc", "qdisc", "replace", "dev", "eth0", "handle", "ffff:", "ingress"]
    assert cmds[2][:6] == ["tc", "filter", "replace", "dev", "eth0", "parent"]
    assert cmds[2][-6:] == ["action", "mirred", "egress", "redirect", "dev", "ifb0"]
    assert "handle" in cmds[2]  # a fixed filter handle keeps `replace` idempotent
    assert cmds[3:] == egress_commands("ifb0", prof(rate="200mbit"), "tbf")
    assert ingress_commands("eth0", "ifb0", prof(rate="1gbit"), "app") == []


def test_clear_commands():
    assert clear_commands("eth0", "ifb0") == [["tc", "qdisc", "del", "dev", "eth0", "root"],
                                              ["tc", "qdisc", "del", "dev", "eth0", "ingress"],
                                              ["ip", "link", "del", "dev", "ifb0"]]
    assert clear_commands("eth0", root=False, ingress=False) == []
    assert tc.ifb_name_for("averyveryverylongname") == "ifbaveryveryver"


# -- backend choice -----------------------------------------------------------------------------

def test_rate_only_profiles_use_tbf_up_to_1gbit_and_htb_above():
    p = load_profile("1gbit")
    assert choose_backend(p, ALL, True) == BackendChoice("tbf", frozenset(), "tbf for the rate")
    assert choose_backend(p, frozenset({"htb", "ifb"}), True).backend == "htb"
    assert choose_backend(p, ALL, True, prefer=("htb", "tbf")).backend == "htb"
    fast = load_profile("4gbit")
    assert choose_backend(fast, ALL, True) == BackendChoice("htb", frozenset(), "htb for the rate")
    assert choose_backend(fast, frozenset({"tbf", "ifb"}), True).backend == "tbf"
    assert choose_backend(fast, ALL, True, prefer=("tbf",)).backend == "tbf"


def test_netem_detected_both_ways():
    wan = load_profile("wan-20ms")
    with_netem = choose_backend(wan, ALL, True)
    assert with_netem.backend == "netem" and not with_netem.left_to_app
    without = choose_backend(wan, NO_NETEM, True)
    assert without.backend == "tbf"
    assert without.left_to_app == {"delay", "jitter"}
    assert "no sch_netem" in without.reason
    with pytest.raises(ShapingError, match="cannot apply delay, jitter"):
        without.require_kernel()
    with_netem.require_kernel()
    lossy = choose_backend(load_profile("lossy-1pct"), NO_NETEM, True)
    assert lossy.left_to_app == {"loss"}


def test_unprivileged_or_bare_kernel_leaves_everything_to_the_app():
    wan = load_profile("wan-20ms")
    c = choose_backend(wan, ALL, privileged=False)
    assert c.backend == "app" and c.left_to_app == {"rate", "delay", "jitter"} and "CAP_NET_ADMIN" in c.reason
    both = choose_backend(load_profile("2gbit"), frozenset(), True)
    assert both.backend == "app" and both.left_to_app == {"rate", "ingress"}
    delay_only = choose_backend(prof(delay="5ms"), NO_NETEM, True)
    assert delay_only.backend == "app" and delay_only.left_to_app == {"delay"}


def test_ingress_without_ifb_is_reported():
    c = choose_backend(load_profile("2gbit"), frozenset({"tbf"}), True)
    assert c.backend == "tbf" and c.left_to_app == {"ingress"}
    c = choose_backend(prof(rate="1gbit", direction="ingress"), frozenset({"tbf"}), True)
    assert c.backend == "app" and "ifb" in c.reason


def test_unshaped_needs_no_backend():
    c = choose_backend(load_profile("unshaped"), frozenset(), False)
    assert c == BackendChoice("none", frozenset(), "the profile shapes nothing")
    assert not c.kernel


def test_detect_backends_probes_in_a_throwaway_namespace():
    calls = []

    def runner(cmd, netns=None, *, check=True):
        calls.append((netns, list(cmd)))
        bad = ("netem" in cmd) or ("type" in cmd and cmd[-1] == "ifb")
        return subprocess.CompletedProcess(cmd, 2 if bad else 0, "", "Error: Specified qdisc kind is unknown.")

    assert detect_backends(runner=runner) == {"tbf", "htb"}
    ns = calls[0][1][-1]
    assert calls[0][1] == ["ip", "netns", "add", ns] and calls[-1][1] == ["ip", "netns", "del", ns]
    assert all(n == ns for n, c in calls[1:-1])

    def with_netem(cmd, netns=None, *, check=True):
        return subprocess.CompletedProcess(cmd, 0, "", "")

    assert detect_backends(runner=with_netem) == {"netem", "tbf", "htb", "ifb"}


def test_detect_backends_without_privileges_is_empty(monkeypatch):
    monkeypatch.setattr(tc.probe, "has_net_admin", lambda: False)
    assert detect_backends() == frozenset()


# -- read-back ----------------------------------------------------------------------------------

DATA = Path(__file__).parent / "data"  # captured from a real kernel (iproute2 6.1) with the builders' commands


def _data(name):
    return (DATA / name).read_text()


def test_qdiscs_read_from_tc_json():
    (tbf,) = parse_qdiscs(_data("tc_qdisc_tbf.json"))  # tbf rate 123456789bit burst 65536 limit 312500
    assert (tbf.kind, tbf.handle, tbf.is_root, tbf.is_default) == ("tbf", "1:", True, False)
    assert tbf.rate_bps == 15_432_098 * 8  # tc -j: bytes/s, whole bytes
    assert tbf.burst_bytes == 65524  # bytes, after the kernel's conversion to ticks and back
    assert tbf.limit is None  # tbf shows its latency, not its limit
    htb, bfifo, ingress = parse_qdiscs(_data("tc_qdisc_htb_and_ingress.json"))
    assert (htb.kind, htb.is_root, htb.rate_bps) == ("htb", True, None)  # htb's rate is on its class
    assert (bfifo.kind, bfifo.handle, bfifo.parent, bfifo.limit) == ("bfifo", "10:", "1:1", 6_250_000)
    assert (ingress.kind, ingress.handle, ingress.is_root) == ("ingress", "ffff:", False)
    (noqueue,) = parse_qdiscs(_data("tc_qdisc_default.json"))
    assert noqueue.is_root and noqueue.is_default


def test_netem_and_counters_read_from_tc_json():
    # This kernel has no sch_netem: the keys are those of iproute2's q_netem.c (delay in s, loss as a fraction).
    text = ('[{"kind":"netem","handle":"10:","parent":"1:1","options":{"limit":1000,'
            '"delay":{"delay":0.02,"jitter":0.002,"correlation":0},"loss-random":{"loss":0.01,"correlation":0},'
            '"ecn":false,"gap":0},"bytes":101211475,"packets":66877,"drops":3,"overlimits":4791,"requeues":0,'
            '"backlog":1514,"qlen":1}]')
    (netem,) = parse_qdiscs(text)
    assert (netem.delay_s, netem.jitter_s, netem.loss_pct, netem.limit) == (0.02, 0.002, pytest.approx(1.0), 1000)
    assert (netem.sent_bytes, netem.sent_packets, netem.dropped, netem.overlimits, netem.backlog_bytes) == \
        (101211475, 66877, 3, 4791, 1514)


def test_htb_classes_read_from_both_iproute2_outputs():
    # iproute2 6.1 prints classes in its human form even with -j
    (cls,) = parse_classes(_data("tc_class_htb_iproute2_6.1.txt"))
    assert (cls.kind, cls.handle, cls.is_root, cls.rate_bps, cls.ceil_bps) == ("htb", "1:1", True, 2 * 10**9, 2 * 10**9)
    # iproute2 >= 6.2 prints JSON: the options sit beside the class's name, rates in bytes/s (tc/q_htb.c)
    (new,) = parse_classes('[{"class":"htb","handle":"1:1","root":true,"leaf":"10:","prio":0,'
                           '"rate":250000000,"ceil":250000000,"burst":2000000,"cburst":2000000}]')
    assert (new.handle, new.is_root, new.rate_bps, new.ceil_bps, new.burst_bytes) == \
        ("1:1", True, 2 * 10**9, 2 * 10**9, 2_000_000)
    assert parse_classes("") == parse_classes("[]") == []


def test_verify_spots_a_wrong_rate():
    p = prof(rate="2gbit")
    qd = parse_qdiscs(_data("tc_qdisc_htb_and_ingress.json"))
    classes = parse_classes(_data("tc_class_htb_iproute2_6.1.txt"))
    assert verify(p, "htb", qd, classes) == []
    assert "rate" in verify(prof(rate="4gbit"), "htb", qd, classes)[0]
    assert "expected tbf" in verify(p, "tbf", qd)[0]
    assert verify(p, "htb", qd, []) == ["htb class 1:1 missing"]
    assert "still installed" in verify(p, "none", qd)[0]
    assert verify(p, "none", parse_qdiscs(_data("tc_qdisc_default.json"))) == []
    tbf = parse_qdiscs(_data("tc_qdisc_tbf.json"))
    assert verify(prof(rate="123456789bit"), "tbf", tbf) == []


# -- apply / clear against the fake kernel ------------------------------------------------------

def test_apply_tbf_egress_then_idempotent(kernel):
    p = prof(rate="200mbit")
    a = apply("eth0", p, choice=choose_backend(p, NO_NETEM, True), runner=kernel)
    assert a.backend == "tbf" and a.left_to_app == frozenset() and a.egress[0].rate_bps == 200_000_000
    first = kernel.commands()
    kernel.calls.clear()
    apply("eth0", p, choice=choose_backend(p, NO_NETEM, True), runner=kernel)
    assert kernel.commands() == first == egress_commands("eth0", p, "tbf")


def test_apply_tbf_to_a_smaller_bucket_starts_a_new_qdisc(kernel):
    """A live reshape down (1gbit -> 100mbit) must not leave queued packets bigger than the new bucket:
    tbf would never send them. A larger or equal bucket is changed in place (the queue is kept)."""
    fast, slow = prof(rate="1gbit", direction="both"), prof(rate="100mbit", direction="both")
    choice = choose_backend(fast, NO_NETEM, True)
    apply("eth0", fast, choice=choice, runner=kernel)
    kernel.calls.clear()
    a = apply("eth0", slow, choice=choice, runner=kernel)
    dels = [c for c in kernel.commands() if c[:3] == ["tc", "qdisc", "del"] and c[-1] == "root"]
    assert [c[4] for c in dels] == ["eth0", "ifbeth0"]  # egress and the ingress ifb
    assert a.egress[0].rate_bps == a.ingress[0].rate_bps == 100_000_000
    kernel.calls.clear()
    apply("eth0", fast, choice=choice, runner=kernel)
    assert not any(c[:3] == ["tc", "qdisc", "del"] for c in kernel.commands())


def test_apply_htb_twice_keeps_the_root_the_kernel_cannot_change(kernel):
    p = prof(rate="4gbit", direction="both")
    choice = choose_backend(p, NO_NETEM, True, prefer=("htb",))
    apply("eth0", p, choice=choice, runner=kernel)
    kernel.calls.clear()
    a = apply("eth0", prof(rate="2gbit", direction="both"), choice=choice, runner=kernel)
    assert not any(c[:3] == ["tc", "qdisc", "replace"] and "root" in c for c in kernel.commands())
    assert [c for c in kernel.commands() if c[1] == "class"][0][11] == "2000000000bit"
    assert a.backend == "htb"


def test_apply_switches_kinds_by_clearing_first(kernel):
    p = prof(rate="200mbit")
    apply("eth0", p, choice=choose_backend(p, NO_NETEM, True), runner=kernel)
    kernel.calls.clear()
    a = apply("eth0", p, choice=choose_backend(p, NO_NETEM, True, prefer=("htb",)), runner=kernel)
    assert kernel.commands()[0] == ["tc", "qdisc", "del", "dev", "eth0", "root"]
    assert a.backend == "htb"


def test_apply_both_directions_creates_the_ifb_once(kernel):
    p = prof(rate="200mbit", direction="both")
    a = apply("eth0", p, choice=choose_backend(p, NO_NETEM, True), runner=kernel)
    assert a.ifb_dev == "ifbeth0" and a.ingress[0].kind == "tbf"
    assert ["ip", "link", "add", "name", "ifbeth0", "type", "ifb"] in kernel.commands()
    kernel.calls.clear()
    apply("eth0", p, choice=choose_backend(p, NO_NETEM, True), runner=kernel)
    assert not any(c[:3] == ["ip", "link", "add"] for c in kernel.commands())
    # egress-only now: the ingress redirect and the ifb go
    kernel.calls.clear()
    e = prof(rate="200mbit")
    apply("eth0", e, choice=choose_backend(e, NO_NETEM, True), runner=kernel)
    assert ["tc", "qdisc", "del", "dev", "eth0", "ingress"] in kernel.commands()
    assert ["ip", "link", "del", "dev", "ifbeth0"] in kernel.commands()


def test_apply_unshaped_clears_and_clear_is_idempotent(kernel):
    p = prof(rate="1gbit", direction="both")
    apply("eth0", p, choice=choose_backend(p, NO_NETEM, True), runner=kernel)
    a = apply("eth0", load_profile("unshaped"), available=NO_NETEM, privileged=True, runner=kernel)
    assert a.backend == "none"
    assert ["tc", "qdisc", "del", "dev", "eth0", "root"] in a.commands
    assert clear("eth0", runner=kernel) == []  # nothing left: nothing to do, no error


def test_apply_leaves_delay_to_the_app_and_says_so(kernel):
    wan = load_profile("wan-20ms")
    a = apply("eth0", wan, available=NO_NETEM, privileged=True, runner=kernel)
    assert a.backend == "tbf" and a.left_to_app == {"delay", "jitter"}
    assert "left to the transport: delay, jitter" in a.summary()


def test_apply_netem_when_the_kernel_has_it(kernel):
    wan = load_profile("wan-20ms")
    a = apply("eth0", wan, available=ALL, privileged=True, runner=kernel)
    assert a.backend == "netem" and not a.left_to_app
    assert [q.kind for q in a.egress] == ["htb", "netem"]


def test_apply_unprivileged_runs_nothing(kernel):
    a = apply("eth0", load_profile("1gbit"), privileged=False, runner=kernel)
    assert a.backend == "app" and a.left_to_app == {"rate", "ingress"} and kernel.calls == []


def test_apply_raises_when_the_read_back_differs(kernel):
    p = prof(rate="200mbit")

    def lying(cmd, netns=None, *, check=True):
        if cmd[:2] == ["tc", "qdisc"] and "tbf" in cmd:
            cmd = [("100000000bit" if c == "200000000bit" else c) for c in cmd]
        return kernel(cmd, netns, check=check)

    with pytest.raises(ShapingError, match="read back.*200mbit"):
        apply("eth0", p, choice=choose_backend(p, NO_NETEM, True), runner=lying)


def test_failed_command_raises_with_stderr(kernel):
    p = prof(rate="200mbit")
    with pytest.raises(tc.TcError, match='Cannot find device "nope"'):
        apply("nope", p, choice=choose_backend(p, NO_NETEM, True), runner=kernel)


def test_offloads(monkeypatch, kernel):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert "ethtool not installed" in tc.set_offloads("eth0", runner=kernel)
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/sbin/" + name)
    assert tc.set_offloads("eth0", runner=kernel) == "tso/gso/gro off"
    assert kernel.calls[-1][1] == ["ethtool", "-K", "eth0", "tso", "off", "gso", "off", "gro", "off"]
    p = prof(rate="200mbit")
    a = apply("eth0", p, choice=choose_backend(p, NO_NETEM, True), offloads="off", runner=kernel)
    assert a.offloads == "tso/gso/gro off"


def test_run_cmd_reports_missing_tools(monkeypatch):
    def missing(*a, **k):
        raise FileNotFoundError

    monkeypatch.setattr(tc.runner.subprocess, "run", missing)
    with pytest.raises(tc.ToolMissing, match="iproute2"):
        tc.run_cmd(["tc", "qdisc", "show"])
    assert tc.in_netns(["tc", "qdisc"], "ns1") == ["ip", "netns", "exec", "ns1", "tc", "qdisc"]
