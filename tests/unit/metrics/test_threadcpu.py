"""Per-thread CPU accounting (synclab.metrics.threadcpu): a busy named thread is found under its name."""

import threading
import time

import pytest

from synclab.metrics.threadcpu import _read_stat, cpu_between, cpu_by_role, role_of, thread_cpu


def _spin(seconds: float, done: threading.Event) -> None:
    while time.thread_time() < seconds:  # this thread's own CPU time
        pass
    done.wait(30)  # stay alive until read: a thread that ended takes its CPU with it


def test_a_busy_named_thread_gets_its_cpu_under_its_name():
    before = thread_cpu()
    done = threading.Event()
    t = threading.Thread(target=_spin, args=(0.3, done), name="rx-a-b")
    t.start()
    deadline = time.monotonic() + 30
    snap = thread_cpu()
    while time.monotonic() < deadline:
        snap = thread_cpu()
        if any(name == "rx-a-b" and s >= 0.25 for name, s in snap.values()):
            break
        time.sleep(0.02)
    done.set()
    t.join()
    spent = cpu_between(before, snap)
    assert spent.get("rx-a-b", 0.0) >= 0.25
    assert cpu_by_role(spent)["rx reader"] >= 0.25


def test_roles_of_names():
    assert role_of("MainThread") == "main"
    assert role_of("ThreadPoolExecutor-0_3") == "grpc server handler (sends)"
    assert role_of("Thread-7 (consume_request_iterator)") == "grpc request consumer (sends)"
    assert role_of("native:python") == "native (torch OpenMP / unnamed)"
    assert role_of("native:default-execu").startswith("grpc core")
    assert role_of("something") == "other python"
    assert role_of("tx-r0-r1") == "tx writer (tcp engine)"


def test_a_comm_with_spaces_and_parentheses_is_read(tmp_path):
    # comm may hold spaces and ')' — the fields after the LAST ')' are the numbers
    fields = ["S"] + ["0"] * 10 + ["150", "50"] + ["0"] * 30
    (tmp_path / "stat").write_text("123 (a) b) c) " + " ".join(fields) + "\n")
    name, s = _read_stat(str(tmp_path / "stat"))
    assert name == "a) b) c"
    assert s == pytest.approx(200 * _tick())


def _tick():
    import os
    return 1.0 / os.sysconf("SC_CLK_TCK")


def test_a_missing_task_dir_gives_nothing(tmp_path):
    assert thread_cpu(str(tmp_path / "none")) == {}
