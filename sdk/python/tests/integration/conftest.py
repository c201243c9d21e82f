"""A real hutchd with real boxes for the integration tests (one daemon per session).

The daemon comes from tests/support/hutchd_daemon.py of the repository (the same one every
SDK's tests use): it needs root, the built binaries (HUTCH_BUILD_DIR, default build/) and a
guest image (HUTCH_TEST_IMAGE). Or point HUTCH_SDK_DAEMON at the JSON line that
``hutchd_daemon.py start`` printed (a file) to use a daemon already running.

Without those the tests are skipped, saying why; HUTCH_SDK_REQUIRE_DAEMON=1 makes that a
failure instead (CI, scripts/test.sh --integration).
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import tempfile
import uuid
from types import SimpleNamespace

import pytest

import hutch

REPO = pathlib.Path(__file__).resolve().parents[4]
SUPPORT = REPO / "tests" / "support"


def _unavailable(reason: str) -> None:
    if os.environ.get("HUTCH_SDK_REQUIRE_DAEMON") == "1":
        pytest.fail(f"Integration tests need a real hutchd: {reason}", pytrace=False)
    pytest.skip(f"no real hutchd: {reason}")


@pytest.fixture(scope="session")
def daemon():
    """The daemon's fields: https_url, http_url, socket, admin_key, key, fingerprint, ca_cert."""
    external = os.environ.get("HUTCH_SDK_DAEMON")
    if external:
        yield SimpleNamespace(**json.loads(pathlib.Path(external).read_text()))
        return
    if os.geteuid() != 0:
        _unavailable("hutchd needs root (run the tests as root)")
    if not (SUPPORT / "hutchd_daemon.py").exists():
        _unavailable(f"{SUPPORT / 'hutchd_daemon.py'} is missing")
    sys.path.insert(0, str(SUPPORT))
    from hutchd_daemon import HutchDaemon  # noqa: E402

    # Short: the unix socket's path must fit in 108 bytes.
    directory = tempfile.mkdtemp(prefix="hutch-pysdk-")
    try:
        d = HutchDaemon(directory)
    except RuntimeError as e:
        _unavailable(str(e))
    hutchd = d.build / "src" / "daemon" / "hutchd"
    if not hutchd.exists():
        _unavailable(f"{hutchd} is not built")
    if not (d.image / "rootfs.img").exists():
        _unavailable(f"{d.image} is not a built guest image")
    try:
        d.start()
    except RuntimeError as e:
        pytest.fail(f"hutchd did not start: {e}", pytrace=False)
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="session")
def admin(daemon):
    """An admin key over HTTPS with the certificate pinned."""
    with hutch.Client(host=daemon.https_url, api_key=daemon.admin_key,
                      fingerprint=daemon.fingerprint) as c:
        yield c


@pytest.fixture(scope="session")
def client(daemon):
    """An ordinary (non-admin) key over HTTPS, pinned: what a remote agent uses."""
    with hutch.Client(host=daemon.https_url, api_key=daemon.key,
                      fingerprint=daemon.fingerprint) as c:
        yield c


@pytest.fixture(scope="session")
def local(daemon):
    """The unix socket: the host administrator, no key."""
    with hutch.Client(socket=daemon.socket) as c:
        yield c


def unique(prefix: str = "py") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class BoxFactory:
    def __init__(self, client: hutch.Client) -> None:
        self.client = client
        self.made: list[hutch.Box] = []

    def __call__(self, client: hutch.Client | None = None, **options) -> hutch.Box:
        options.setdefault("name", unique())
        box = (client or self.client).boxes.create(**options)
        self.made.append(box)
        return box

    def track(self, box: hutch.Box) -> hutch.Box:
        self.made.append(box)
        return box

    def cleanup(self, admin: hutch.Client) -> None:
        for box in self.made:
            try:
                admin.boxes.get(box.id).remove(force=True)
            except hutch.NotFoundError:
                pass


@pytest.fixture
def boxes(client, admin):
    """boxes(**create_options) makes a box with the ordinary key; all are removed after."""
    factory = BoxFactory(client)
    yield factory
    factory.cleanup(admin)


@pytest.fixture
def box(boxes):
    return boxes()
