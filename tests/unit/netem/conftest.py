"""A fake of the few ip/tc behaviours the shaper relies on, so apply/clear run without root."""

import json
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
        if cmd[1] == "-j":
            return 0, self._show(st, "class" if "class" in cmd[:4] else "qdisc"), ""
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
    def _entry(kind, handle, parent, o):
        """One qdisc as ``tc -j -s qdisc show`` prints it (rates in bytes/s, bursts in bytes, netem delay in s)."""
        opts = {}
        if "rate" in o:
            opts["rate"] = int(o["rate"].removesuffix("bit")) // 8
        if "burst" in o:
            opts["burst"] = int(o["burst"])
        if "limit" in o and kind != "tbf":  # tbf shows its latency instead
            opts["limit"] = int(o["limit"])
        if "delay" in o:
            opts["delay"] = {"delay": int(o["delay"].removesuffix("us")) / 1e6, "jitter": 0}
        if "loss" in o:
            opts["loss-random"] = {"loss": float(o["loss"].rstrip("%")) / 100}
        where = {"root": True} if parent == "root" else {"parent": parent}
        return {"kind": kind, "handle": handle, **where, "options": opts, "bytes": 10, "packets": 1, "drops": 0,
                "overlimits": 0, "requeues": 0, "backlog": 0, "qlen": 0}

    def _show(self, st, what):
        if what == "class":  # iproute2 6.1: class lines even under -j
            c = st["class"]
            return f"class htb 1:1 root leaf 10: prio 0 rate {c['rate']} ceil {c['ceil']} burst {c['burst']}b \n" \
                if c else ""
        r = st["root"]
        items = [self._entry(r["kind"], "1:", "root", r) if r else self._entry("noqueue", "0:", "root", {})]
        if st["leaf"]:
            items.append(self._entry(st["leaf"]["kind"], "10:", "1:1", st["leaf"]))
        if st["ingress"]:
            items.append(self._entry("ingress", "ffff:", "ffff:fff1", {}))
        return json.dumps(items)

    def commands(self):
        return [c for _, c in self.calls if c[:2] != ["tc", "-j"] and c[:3] != ["ip", "link", "show"]]


@pytest.fixture
def kernel():
    return FakeKernel()
