"""The CI skip rule of tests/conftest.py, run in an inner pytest (in process): under CI=true a skip fails unless
ALLOWED_CI_SKIPS lists it, and an expected failure fails; outside CI a skip stays a skip and an xfail an xfail."""

from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

TESTS = {
    "tests/gpu/test_gpu_like.py": """
import pytest

@pytest.mark.skipif(True, reason="needs a CUDA GPU")
def test_on_a_gpu():
    pass
""",
    "tests/unit/test_quiet.py": """
import pytest

def test_skips_quietly():
    pytest.skip("a dependency is missing")

@pytest.fixture
def engine():
    pytest.skip("no engine here")

def test_skips_in_a_fixture(engine):
    pass

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_to_fail():
    assert False

def test_runs():
    pass
""",
    "tests/unit/test_module_skip.py": """
import pytest

pytest.importorskip("no_such_module_anywhere")
""",
}


@pytest.fixture
def suite(pytester):
    pytester.makeconftest(CONFTEST.read_text())
    for path, text in TESTS.items():
        (pytester.path / path).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / path).write_text(text)
    return pytester


def test_outside_ci_skips_stay_skips(suite, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    result = suite.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=4, xfailed=1)
    assert result.ret == pytest.ExitCode.OK


def test_a_module_skipped_at_collection_fails_the_run_only_in_ci(suite, monkeypatch):
    monkeypatch.setenv("CI", "true")
    result = suite.runpytest_inprocess("-p", "no:cacheprovider", "tests/unit/test_module_skip.py", "tests/gpu")
    result.assert_outcomes(skipped=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_in_ci_only_the_listed_skip_is_taken_and_the_others_fail(suite, monkeypatch):
    monkeypatch.setenv("CI", "true")
    result = suite.runpytest_inprocess("-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=1, skipped=2, failed=2, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str()
    assert "test_skips_quietly skipped under CI=true: 'a dependency is missing'" in text
    assert "test_skips_in_a_fixture skipped under CI=true: 'no engine here'" in text
    assert "test_expected_to_fail is an expected failure under CI=true ('known')" in text
    assert "modules skipped under CI=true that CI may not skip" in text
    assert "tests/unit/test_module_skip.py skipped under CI=true" in text and "no_such_module_anywhere" in text
    assert "skips CI is allowed to take" in text
    assert "tests/gpu/test_gpu_like.py::test_on_a_gpu: needs a CUDA GPU" in text
