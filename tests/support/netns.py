"""The netns tests' one rule for a missing prerequisite: skip, or fail when CI requires them."""

import os

import pytest


def unavailable(reason: str):
    """Skip for ``reason``, or fail when ``SYNCLAB_REQUIRE_NETNS=1`` (``.ci/run`` sets it): CI must not pass by
    skipping what it claims to test, as ``SYNCLAB_REQUIRE_DOCKER`` already ensures for the container tests."""
    if os.environ.get("SYNCLAB_REQUIRE_NETNS") == "1":
        pytest.fail(f"netns tests are required (SYNCLAB_REQUIRE_NETNS=1) but {reason}")
    pytest.skip(reason)
