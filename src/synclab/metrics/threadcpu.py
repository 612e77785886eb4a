"""Where a process's CPU went, thread by thread (Linux ``/proc/self/task``): the data plane's cheap profile.

:func:`thread_cpu` reads every thread's user+system seconds and names it: a Python thread by its
``threading`` name (``rx-r0-r3``, ``ThreadPoolExecutor-0_1``, grpc's ``Thread-5 (channel_spin)`` …), any
other by the kernel's ``comm`` (gRPC core's own threads name themselves; torch's OpenMP workers and the
main thread inherit the interpreter's name). :func:`cpu_by_role` folds the names into a few roles so
ranks and runs compare: no sampling, no overhead while the measured code runs.
"""

from __future__ import annotations

import os
import re
import threading

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")

# (role, pattern on the thread's name), first match wins
ROLES = (
    ("main", re.compile(r"^MainThread$")),
    ("rx reader", re.compile(r"^rx-")),
    ("tx writer (tcp engine)", re.compile(r"^tx-")),
    ("grpc server handler (sends)", re.compile(r"^ThreadPoolExecutor")),
    ("grpc request consumer (sends)", re.compile(r"consume_request_iterator")),
    ("grpc python poller", re.compile(r"channel_spin|_serve|poll|spin", re.I)),
    ("delay line", re.compile(r"^delay-")),
)


def _read_stat(path: str) -> tuple[str, float] | None:
    try:
        with open(path) as f:
            s = f.read()
    except OSError:  # the thread ended between listing and reading
        return None
    comm = s[s.index("(") + 1:s.rindex(")")]
    fields = s[s.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15
    return comm, (int(fields[11]) + int(fields[12])) * _TICK_S


def thread_cpu(task_dir: str = "/proc/self/task") -> dict[int, tuple[str, float]]:
    """tid -> (name, CPU seconds so far) of every live thread of this process."""
    names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    out = {}
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return {}
    for entry in tids:
        if not entry.isdigit():
            continue
        got = _read_stat(os.path.join(task_dir, entry, "stat"))
        if got is None:
            continue
        tid = int(entry)
        out[tid] = (names.get(tid, f"native:{got[0]}"), got[1])
    return out


def cpu_between(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds per thread name spent between two :func:`thread_cpu` snapshots (threads born in between
    count from zero; threads that ended in between are lost, so the sum can be below the process's)."""
    out: dict[str, float] = {}
    for tid, (name, s) in after.items():
        d = s - before.get(tid, (name, 0.0))[1]
        if d > 0:
            out[name] = out.get(name, 0.0) + d
    return out


def role_of(name: str) -> str:
    if name.startswith("native:"):
        comm = name[len("native:"):]
        return "native (torch OpenMP / unnamed)" if comm.startswith("python") else f"grpc core ({comm})"
    for role, pat in ROLES:
        if pat.search(name):
            return role
    return "other python"


def cpu_by_role(per_name: dict[str, float]) -> dict[str, float]:
    """Fold :func:`cpu_between`'s names into roles (grpc core threads grouped by their name's stem)."""
    out: dict[str, float] = {}
    for name, s in per_name.items():
        role = re.sub(r"[-_]?\d+\)?$", "", role_of(name))
        out[role] = out.get(role, 0.0) + s
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
