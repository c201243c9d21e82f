"""Fixtures: one real hutchd for the session, clients on each of its transports (every
response validated against docs/openapi.yaml), and boxes to work on."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hutch_api.client import tcp_client, unix_client  # noqa: E402
from hutch_api.daemon import start_daemon  # noqa: E402
from hutch_api.validator import EndpointMissing, SpecValidator  # noqa: E402

VALIDATOR = SpecValidator()


def pytest_addoption(parser):
    parser.addoption("--no-daemon", action="store_true",
                     help="run only the tests that need no hutchd (the spec and the validator)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    # A part of the contract the daemon does not serve yet: an expected failure, said as one,
    # unless HUTCH_API_ALL_SERVED=1 (run.sh, CI) says the daemon serves the whole spec.
    if call.excinfo is not None and call.excinfo.errisinstance(EndpointMissing) \
            and report.when in ("call", "setup") \
            and os.environ.get("HUTCH_API_ALL_SERVED") != "1":
        report.outcome = "skipped"
        report.wasxfail = f"not served by this hutchd: {call.excinfo.value}".split("\n")[0]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    covered = VALIDATOR.covered()
    if not covered:
        return
    ops = sorted(VALIDATOR.operations(), key=lambda o: (o[1], o[0]))
    tr = terminalreporter
    tr.section("spec coverage (operations answered, by status)")
    missing = []
    for method, template in ops:
        statuses = covered.get((method, template))
        if statuses:
            tr.write_line(f"  {method:6} {template:45} {' '.join(map(str, sorted(statuses)))}")
        else:
            missing.append(f"{method} {template}")
    if missing:
        tr.write_line(f"  never answered in the spec's terms ({len(missing)}): "
                      + ", ".join(missing))
    validated = len(VALIDATOR.exchanges)
    tr.write_line(f"  {validated} responses validated against docs/openapi.yaml")


@pytest.fixture(scope="session")
def validator() -> SpecValidator:
    return VALIDATOR


@pytest.fixture(scope="session")
def daemon(request):
    if request.config.getoption("--no-daemon"):
        pytest.skip("--no-daemon")
    try:
        d = start_daemon()
        d.__enter__()
    except RuntimeError as e:
        if os.environ.get("HUTCH_API_REQUIRE_DAEMON") == "1":
            raise
        pytest.skip(f"no hutchd to test: {e}")
    yield d
    d.__exit__(None, None, None)


@pytest.fixture(scope="session")
def unix(daemon) -> httpx.Client:
    with unix_client(daemon.socket, VALIDATOR) as c:
        yield c


def _tcp(daemon, key):
    url = getattr(daemon, "http_url", None)
    if not url:
        pytest.skip("this hutchd has no TCP listener (tests/support/hutchd_daemon.py makes one)")
    return tcp_client(url, VALIDATOR, key=key)


@pytest.fixture(scope="session")
def tcp(daemon) -> httpx.Client:
    """Plain HTTP on loopback, with the admin key."""
    with _tcp(daemon, daemon.admin_key) as c:
        yield c


@pytest.fixture(scope="session")
def tcp_user(daemon) -> httpx.Client:
    """Plain HTTP on loopback, with the non-admin key."""
    with _tcp(daemon, daemon.key) as c:
        yield c


@pytest.fixture(scope="session")
def https(daemon) -> httpx.Client:
    url = getattr(daemon, "https_url", None)
    if not url:
        pytest.skip("this hutchd has no TLS listener")
    with tcp_client(url, VALIDATOR, key=daemon.admin_key, verify=daemon.ca_cert) as c:
        yield c


@pytest.fixture(params=["unix", "tcp"])
def api(request) -> httpx.Client:
    """The same test over the unix socket and over TCP (admin key)."""
    return request.getfixturevalue(request.param)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_box(client: httpx.Client, name: str, **fields) -> dict:
    r = client.post("/v1/boxes", json={"name": name, **fields})
    assert r.status_code == 201, r.text
    return r.json()


def remove_box(client: httpx.Client, name: str) -> None:
    r = client.delete(f"/v1/boxes/{name}", params={"force": "true"})
    assert r.status_code in (200, 404), r.text


@pytest.fixture(scope="session")
def box(unix) -> dict:
    """A running box shared by the tests that only read or run things in it."""
    b = create_box(unix, unique("api"))
    yield b
    remove_box(unix, b["name"])


@pytest.fixture(scope="session")
def stopped_box(unix) -> dict:
    b = create_box(unix, unique("api-stopped"))
    r = unix.post(f"/v1/boxes/{b['name']}/stop", params={"shutdown": "true"})
    assert r.status_code == 200, r.text
    yield r.json()
    remove_box(unix, b["name"])
