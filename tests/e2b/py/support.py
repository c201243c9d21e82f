"""Helpers of the E2B Python suites (tests/e2b/run.sh runs them once per `e2b` version).

The SDK is the unmodified PyPI package `e2b`, one venv per pinned version. It reads
E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY itself; E2B_TEST_KEY_B is a second, non-admin key
of another owner. Where versions differ, tests look at what the package has (hasattr), never
at its version string.
"""

import os
import time
import uuid

import e2b
from e2b import Sandbox

for _name in ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY"):
    if not os.environ.get(_name):
        raise RuntimeError(f"{_name} is not set (tests/e2b/run.sh sets it)")

TEMPLATE = os.environ.get("E2B_TEST_TEMPLATE", "base")
RUN_ID = f"py-{os.getpid()}-{uuid.uuid4().hex[:8]}"
KEY_B = os.environ.get("E2B_TEST_KEY_B", "")

# Newer SDKs raise subclasses of NotFoundException; every 2.x has NotFoundException itself.
SandboxNotFound = getattr(e2b, "SandboxNotFoundException", e2b.NotFoundException)
FileNotFound = getattr(e2b, "FileNotFoundException", e2b.NotFoundException)

_made = []


def create_sandbox(**kwargs):
    metadata = {"suite": "hutch-e2b", "run": RUN_ID, **kwargs.pop("metadata", {})}
    kwargs.setdefault("timeout", 600)
    sbx = Sandbox.create(TEMPLATE, metadata=metadata, **kwargs)
    _made.append(sbx.sandbox_id)
    return sbx


def track(sandbox_id):
    _made.append(sandbox_id)


def kill_made():
    for sandbox_id in _made:
        try:
            Sandbox.kill(sandbox_id)
        except Exception:  # noqa: BLE001 - best effort; run.sh removes every box anyway
            pass


def wait_for(what, fn, timeout=20.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def list_all(**kwargs):
    paginator = Sandbox.list(**kwargs)
    out = []
    while paginator.has_next:
        out.extend(paginator.next_items())
        if len(out) > 10000:
            break
    return out


def process_lines(sbx):
    """The command lines of the box's processes, from /proc (no procps needed)."""
    r = sbx.commands.run(
        'for p in /proc/[0-9]*; do [ -r $p/cmdline ] && tr "\\0" " " < $p/cmdline && echo; done; true',
        user="root")
    return [line.strip() for line in r.stdout.split("\n") if line.strip()]
