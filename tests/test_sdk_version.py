"""The SDK the tests run against is the one they were meant to run against: `make test-sdk-oldest`
sets SPANASSERT_EXPECT_SDK to the pinned oldest version, so a venv that drifted fails here rather
than silently testing the newest SDK twice."""
from __future__ import annotations

import os

from importlib.metadata import version


def test_the_sdk_under_test_is_the_expected_one() -> None:
    expected = os.environ.get("SPANASSERT_EXPECT_SDK")
    installed = version("opentelemetry-sdk")
    if expected:
        assert installed == expected
    else:
        major, minor = (int(x) for x in installed.split(".")[:2])
        assert (major, minor) >= (1, 40)  # pyproject's floor
