"""The unit tier's guard (tests/unit/conftest.py), run in an inner pytest in process: a unit test that starts a
process or a server fails, naming the call and where to move the test, even when the code under test swallows the
refusal; a test that does neither passes."""

from pathlib import Path

UNIT_CONFTEST = Path(__file__).resolve().parent / "conftest.py"

SUITE = """
import multiprocessing
import os
import socket
import subprocess

import pytest


def test_pure():
    assert sum(range(4)) == 6


def test_runs_a_command():
    subprocess.run(["true"], check=True)


def test_swallows_the_refusal():
    try:
        os.system("true")
    except Exception:
        pass


def test_starts_a_process():
    multiprocessing.get_context("spawn").Process(target=print).start()


@pytest.fixture
def server():
    s = socket.create_server(("127.0.0.1", 0))
    yield s
    s.close()


def test_serves(server):
    pass
"""


def test_processes_and_servers_fail_a_unit_test(pytester):
    unit = pytester.path / "tests" / "unit"
    unit.mkdir(parents=True)
    (unit / "conftest.py").write_text(UNIT_CONFTEST.read_text())
    (unit / "test_tier.py").write_text(SUITE)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rfE", "tests/unit")
    result.assert_outcomes(passed=1, failed=3, errors=1)
    text = result.stdout.str()
    for name, what in [("test_runs_a_command (call)", "a process start (subprocess)"),
                       ("test_swallows_the_refusal (call)", "os.system"),
                       ("test_starts_a_process (call)", "multiprocessing Process.start"),
                       ("test_serves (setup)", "a listening socket (a server)")]:
        assert f"tests/unit/test_tier.py::{name} tried {what} from tests/unit/test_tier.py:" in text, name
    assert "move this test to tests/integration/test_tier.py" in text
