"""pytest fixtures of the E2B Python suites; the helpers are in support.py."""

import pytest

from support import create_sandbox, kill_made


def pytest_sessionfinish(session, exitstatus):
    kill_made()


@pytest.fixture(scope="module")
def sbx():
    """One sandbox per test module, for the tests that do not need their own."""
    return create_sandbox()
