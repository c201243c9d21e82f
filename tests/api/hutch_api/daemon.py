"""A hutchd for the tests.

tests/support/hutchd_daemon.py (HutchDaemon) is the project's launcher: a fresh state dir, a
TLS listener, a plain-HTTP loopback listener, an admin key and a non-admin key. When it is not
there (or HUTCH_API_LAUNCHER=local), LocalDaemon starts hutchd the way tests/e2e/harness.cc
does: a temp state dir with templates/base linked to the image, --pool-size 0, a uid range
hutchd picks and locks itself, the unix socket only.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from .validator import REPO

SUPPORT = REPO / "tests" / "support"


def build_dir() -> Path:
    return Path(os.environ.get("HUTCH_BUILD_DIR") or REPO / "build")


def test_image() -> Optional[Path]:
    env = os.environ.get("HUTCH_TEST_IMAGE")
    if env:
        return Path(env)
    cache = Path(os.environ.get("HUTCH_CACHE_DIR") or "/var/cache/hutch")
    found = sorted(glob.glob(str(cache / "images" / "base-*" / "rootfs.img")),
                   key=os.path.getmtime)
    return Path(found[-1]).parent if found else None


class LocalDaemon:
    """hutchd on a unix socket in a temp dir (no TCP listener: https_url etc. are None)."""

    https_url = None
    http_url = None
    admin_key = None
    key = None
    fingerprint = None
    ca_cert = None

    def __init__(self, build: Path | None = None, image: Path | None = None,
                 extra_args: tuple[str, ...] = ()):
        self.build = Path(build or build_dir())
        self.image = image or test_image()
        self.extra_args = list(extra_args)
        self.proc: Optional[subprocess.Popen] = None
        self.dir: Optional[str] = None

    @property
    def socket(self) -> str:
        return str(Path(self.dir) / "s")

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else 0

    def __enter__(self) -> "LocalDaemon":
        hutchd = self.build / "src" / "daemon" / "hutchd"
        if not hutchd.exists():
            raise RuntimeError(f"No hutchd at {hutchd}: build it or set HUTCH_BUILD_DIR")
        if self.image is None or not (Path(self.image) / "rootfs.img").exists():
            raise RuntimeError("No guest image: set HUTCH_TEST_IMAGE to a built image directory")
        self.dir = tempfile.mkdtemp(prefix="hutch-api-")
        state = Path(self.dir) / "state"
        (state / "templates").mkdir(parents=True)
        (state / "templates" / "base").symlink_to(Path(self.image).resolve())
        # No --uid-base: hutchd takes a free range of its own (a host-wide lock).
        argv = [str(hutchd), "--socket", self.socket, "--state-dir", str(state),
                "--log-level", "debug", "--pool-size", "0",
                *self.extra_args]
        self.log_path = Path(self.dir) / "hutchd.log"
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if _answers(self.socket):
                return self
            time.sleep(0.1)
        log_text = self.log_path.read_text(errors="replace")[-4000:]
        self.__exit__(None, None, None)
        raise RuntimeError(f"hutchd did not come up; its log:\n{log_text}")

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            _remove_all_boxes(self.socket)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if os.environ.get("HUTCH_API_KEEP") != "1" and self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def _answers(sock_path: str) -> bool:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(sock_path)
        s.sendall(b"GET /v1/info HTTP/1.1\r\nHost: hutchd\r\nConnection: close\r\n\r\n")
        data = s.recv(64)
        s.close()
        return data.startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def _remove_all_boxes(sock_path: str) -> None:
    import httpx
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=sock_path),
                          base_url="http://hutchd", timeout=120) as c:
            for b in c.get("/v1/boxes").json().get("boxes", []):
                c.delete(f"/v1/boxes/{b['id']}", params={"force": "true"})
    except Exception as e:  # the daemon is being stopped anyway
        print(f"hutch_api: could not remove boxes: {e}", file=sys.stderr)


def hutchd_has_remote_api(build: Path | None = None) -> bool:
    """Whether this hutchd has the TCP listeners (--listen) that HutchDaemon starts."""
    hutchd = Path(build or build_dir()) / "src" / "daemon" / "hutchd"
    try:
        out = subprocess.run([str(hutchd), "--help"], capture_output=True, text=True, timeout=30)
    except OSError:
        return False
    return "--listen" in out.stdout


def start_daemon(**kwargs):
    """HutchDaemon (TLS + HTTP listeners and keys) when the project has it and hutchd has the
    remote API, else LocalDaemon (the unix socket only). HUTCH_API_LAUNCHER=local forces the
    latter."""
    build = kwargs.get("build")
    image = kwargs.get("image") or test_image()
    if (SUPPORT / "hutchd_daemon.py").exists() and \
            os.environ.get("HUTCH_API_LAUNCHER", "auto") != "local":
        if hutchd_has_remote_api(build):
            sys.path.insert(0, str(SUPPORT))
            from hutchd_daemon import HutchDaemon  # noqa: E402  (tests/support)
            return _Project(HutchDaemon(tempfile.mkdtemp(prefix="hutch-api-"), build=build,
                                        image=image))
        print("hutch_api: this hutchd has no --listen: the unix socket only (TCP tests skip)",
              file=sys.stderr)
    return LocalDaemon(build=build, image=image)


class _Project:
    """HutchDaemon, and its directory removed after (unless HUTCH_API_KEEP=1)."""

    def __init__(self, d):
        self._d = d

    def __getattr__(self, name):
        return getattr(self._d, name)

    def __enter__(self):
        self._d.start()
        return self

    def __exit__(self, *exc):
        self._d.stop()
        if os.environ.get("HUTCH_API_KEEP") != "1":
            shutil.rmtree(self._d.dir, ignore_errors=True)
