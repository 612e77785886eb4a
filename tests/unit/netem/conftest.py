"""A fake of the few ip/tc behaviours the shaper relies on, so apply/clear run without root."""

import subprocess

import pytest


class FakeKernel:
    """Records commands and keeps per-device qdisc state, answering like tc/ip do (including their refusals)."""

    def __init__(self, devices=("eth0",)):
        self.links = {(None, d) for d in devices}
        self.state = {}
        self.calls = []

    def _dev(self, ns, dev):
        return self.state.setdefault((ns, dev), {"root": None, "class": None, "leaf": None, "ingress": False})

    def __call__(self, cmd, netns=None, *, check=True):
        cmd = list(cmd)
        self.calls.append((netns, cmd))
        rc, out, err = self._do(cmd, netns)
        if check and rc:
            from synclab.netem.tc import TcError
            raise TcError(cmd, rc, err)
        return subprocess.CompletedProcess(cmd, rc, out, err)

    def _do(self, cmd, ns):
        if cmd[0] == "ethtool":
            return 0, "", ""
        if cmd[:2] == ["ip", "link"]:
            verb = cmd[2]
            if verb == "add":
                key = (ns, cmd[4])
                if key in self.links:
                    return 2, "", "RTNETLINK answers: File exists"
                self.links.add(key)
                return 0, "", ""
            dev = cmd[4]
            if (ns, dev) not in self.links:
                return 1, "", f'Cannot find device "{dev}"'
            if verb == "del":
                self.links.discard((ns, dev))
                self.state.pop((ns, dev), None)
            return 0, "", ""
        assert cmd[0] == "tc", cmd
        dev = cmd[cmd.index("dev") + 1]
        if (ns, dev) not in self.links:
            return 1, "", f'Cannot find device "{dev}"'
        st = self._dev(ns, dev)
        if cmd[1] == "-s":
            return 0, self._show(st, cmd[2]), ""
        obj, verb = cmd[1], cmd[2]
        if obj == "filter":
            return (0, "", "") if st["ingress"] else (2, "", "Error: Parent Qdisc doesn't exists.")
        if obj == "class":
            if not st["root"] or st["root"]["kind"] != "htb":
                return 2, "", "RTNETLINK answers: Operation not supported"
            st["class"] = self._opts(cmd)
            return 0, "", ""
        if verb == "del":
            what = cmd[-1]
            if what == "root":
                if not st["root"]:
                    return 2, "", "Error: Cannot delete qdisc with handle of zero."
                st.update(root=None, **{"class": None}, leaf=None)
            else:
                if not st["ingress"]:
                    return 2, "", "Error: Invalid handle."
                st["ingress"] = False
            return 0, "", ""
        if "ingress" in cmd:
            st["ingress"] = True
            return 0, "", ""
        if "root" in cmd:
            kind = cmd[cmd.index("handle") + 2]
            if st["root"] and st["root"]["kind"] != kind:
                return 2, "", "Error: Invalid qdisc name: must match existing qdisc."
            if st["root"] and kind == "htb":
                return 2, "", "Error: Change operation not supported by specified qdisc."
            st["root"] = {"kind": kind, **self._opts(cmd)}
            return 0, "", ""
        st["leaf"] = {"kind": cmd[cmd.index("handle") + 2], **self._opts(cmd)}
        return 0, "", ""

    @staticmethod
    def _opts(cmd):
        out = {}
        for key in ("rate", "ceil", "burst", "limit", "delay", "loss"):
            if key in cmd:
                out[key] = cmd[cmd.index(key) + 1]
        return out

    @staticmethod
    def _line(head, o):
        parts = [head]
        for key in ("rate", "ceil"):
            if key in o:
                parts.append(f"{key} {o[key]}")
        if "burst" in o:
            parts.append(f"burst {o['burst']}b")
        if "limit" in o:
            parts.append(f"limit {o['limit']}")
        if "delay" in o:
            parts.append(f"delay {int(o['delay'].rstrip('us')) / 1000:g}ms")
        if "loss" in o:
            parts.append(f"loss {o['loss']}")
        stats = " Sent 10 bytes 1 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0"
        return " ".join(parts) + "\n" + stats

    def _show(self, st, what):
        blocks = []
        if what == "class":
            if st["class"]:
                blocks.append(self._line("class htb 1:1 root leaf 10: prio 0", st["class"]))
        else:
            r = st["root"]
            blocks.append(self._line(f"qdisc {r['kind']} 1: root refcnt 2", r) if r
                          else self._line("qdisc noqueue 0: root refcnt 2", {}))
            if st["leaf"]:
                blocks.append(self._line(f"qdisc {st['leaf']['kind']} 10: parent 1:1", st["leaf"]))
            if st["ingress"]:
                blocks.append(self._line("qdisc ingress ffff: parent ffff:fff1 ----------------", {}))
        return "\n".join(blocks) + "\n"

    def commands(self):
        return [c for _, c in self.calls if c[:3] != ["tc", "-s", "qdisc"] and c[:3] != ["tc", "-s", "class"]
                and c[:3] != ["ip", "link", "show"]]


@pytest.fixture
def kernel():
    return FakeKernel()
