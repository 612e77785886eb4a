"""No quiet skips in CI: the complete list of skips CI may take, and a hook that fails every other one.

``.ci/run`` sets ``CI=true``. There a test that skips (``pytest.skip``, a ``skipif`` mark, ``importorskip``, at
collection or in a fixture) fails instead, unless its node id and reason match an entry of :data:`ALLOWED_CI_SKIPS`.
A suite that passes in CI has then run everything it claims to test except what this list names, each entry with
the reason it may not run there. The container and netns tests already fail under ``SYNCLAB_REQUIRE_DOCKER=1`` /
``SYNCLAB_REQUIRE_NETNS=1``; this catches every other skip, including ones added later.

To allow a new skip in CI, add an entry here saying why CI cannot run it; better, make CI able to run it. Outside
CI (``CI`` unset) skips stay skips. The end of a CI run lists the allowed skips it took.
"""

from __future__ import annotations

import fnmatch
import os
import re
from typing import NamedTuple

import pytest

pytest_plugins = ["pytester"]  # tests/unit/test_ci_skips.py runs this hook in an inner pytest


class CiSkip(NamedTuple):
    where: str  # a glob over the node id, e.g. "tests/gpu/*"
    reason: str  # a regular expression searched in the skip's reason
    why: str  # why CI may take this skip


ALLOWED_CI_SKIPS: list[CiSkip] = [
    CiSkip("tests/gpu/*", r"needs a CUDA GPU",
           "CI machines have no GPU; scripts/gpu/check.sh runs these tests on a lent GPU"),
    CiSkip("tests/integration/netem/test_launcher_netns.py::test_loss_without_netem_is_refused",
           r"this kernel has netem",
           "the refusal it tests exists only on kernels without sch_netem; with netem the loss is applied "
           "(tested by the netns shaping tests)"),
]

# (node id glob, why CI may carry this known failure); none today.
ALLOWED_CI_XFAILS: list[tuple[str, str]] = []

_taken: list[tuple[str, str]] = []  # allowed skips this run took
_collection_skips: list[str] = []  # modules skipped at collection that CI may not skip


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1")


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


def allowed_in_ci(nodeid: str, reason: str) -> CiSkip | None:
    """The allowlist entry that lets CI skip ``nodeid`` for ``reason``, or None."""
    return next((a for a in ALLOWED_CI_SKIPS if fnmatch.fnmatchcase(nodeid, a.where) and re.search(a.reason, reason)),
                None)


def _unexpected(report: pytest.TestReport | pytest.CollectReport) -> str | None:
    """Why ``report`` is a skip CI may not take, or None."""
    if not (report.skipped and in_ci()):
        return None
    if hasattr(report, "wasxfail"):
        if any(fnmatch.fnmatchcase(report.nodeid, where) for where, _ in ALLOWED_CI_XFAILS):
            return None
        return (f"{report.nodeid} is an expected failure under CI=true ({report.wasxfail!r}). CI does not carry a "
                f"known failure quietly: fix it, or list it in ALLOWED_CI_XFAILS in tests/conftest.py with why.")
    reason = skip_reason(report)
    if allowed_in_ci(report.nodeid, reason):
        _taken.append((report.nodeid, reason))
        return None
    return (f"{report.nodeid} skipped under CI=true: {reason!r}. CI may skip only what ALLOWED_CI_SKIPS in "
            f"tests/conftest.py lists; make this test run in CI, or add an entry there saying why it cannot.")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A test's unexpected skip becomes its failure."""
    report = yield
    why = _unexpected(report)
    if why:
        report.outcome, report.longrepr = "failed", why
        if hasattr(report, "wasxfail"):
            del report.wasxfail
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """A module skipped at collection stays a skip, so the rest of the suite still runs; the session fails."""
    report = yield
    why = _unexpected(report)
    if why:
        _collection_skips.append(why)
    return report


def pytest_sessionfinish(session):
    if _collection_skips and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _collection_skips:
        terminalreporter.section("modules skipped under CI=true that CI may not skip: the run fails", red=True)
        for why in _collection_skips:
            terminalreporter.line(why)
    if in_ci() and _taken:
        terminalreporter.section("skips CI is allowed to take (tests/conftest.py ALLOWED_CI_SKIPS)")
        for nodeid, reason in _taken:
            terminalreporter.line(f"{nodeid}: {reason}")
