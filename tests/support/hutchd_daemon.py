#!/usr/bin/env python3
"""A real hutchd for tests written in other languages (SDKs, the OpenAPI suite, E2B, browsers).

Starts hutchd with a fresh state directory, the built "base" guest image as its template, the
unix socket, an HTTPS listener and a plain-HTTP loopback listener (ports picked by the kernel),
and makes two API keys through the unix socket: an admin key and an ordinary one.

    python3 tests/support/hutchd_daemon.py start --dir DIR [--build BUILD] [--image IMAGE]
        prints one JSON line: {"https_url", "http_url", "socket", "admin_key", "key",
        "fingerprint", "ca_cert", "pid", "dir", "log"}
    python3 tests/support/hutchd_daemon.py stop --dir DIR
        removes every box, stops hutchd (SIGTERM, then SIGKILL), keeps DIR for its log

    from hutchd_daemon import HutchDaemon
    with HutchDaemon(dir) as d:       # the same fields as attributes
        ...

Needs root (hutchd jails every QEMU). Only the standard library. Environment: HUTCH_BUILD_DIR
(default: the repository's build/), HUTCH_TEST_IMAGE (default: the newest built base image in
/var/cache/hutch/images), HUTCHD_EXTRA_ARGS (more hutchd arguments, split on spaces).
"""

import argparse
import http.client
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]


class UnixConnection(http.client.HTTPConnection):
    """HTTP to hutchd's unix socket."""

    def __init__(self, path, timeout=60):
        super().__init__("hutchd", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def _call(sock_path, method, target, body=None, timeout=600):
    conn = UnixConnection(sock_path, timeout=timeout)
    try:
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, target, body=data, headers=headers)
        res = conn.getresponse()
        text = res.read().decode(errors="replace")
        parsed = json.loads(text) if text.strip() else None
        if res.status >= 300:
            raise RuntimeError(f"{method} {target}: {res.status} {text.strip()}")
        return parsed
    finally:
        conn.close()


def _default_image():
    env = os.environ.get("HUTCH_TEST_IMAGE")
    if env:
        return pathlib.Path(env)
    images = sorted(pathlib.Path("/var/cache/hutch/images").glob("base-*/rootfs.img"),
                    key=lambda p: p.stat().st_mtime)
    if not images:
        raise RuntimeError("No guest image: build one (scripts/build-image.sh) or set "
                           "HUTCH_TEST_IMAGE")
    return images[-1].parent


def _default_build():
    return pathlib.Path(os.environ.get("HUTCH_BUILD_DIR", REPO / "build"))


class HutchDaemon:
    """A hutchd started for a test run; a context manager that stops it."""

    def __init__(self, directory, build=None, image=None, extra_args=None):
        self.dir = pathlib.Path(directory).resolve()
        self.build = pathlib.Path(build) if build else _default_build()
        self.image = pathlib.Path(image) if image else _default_image()
        extra = os.environ.get("HUTCHD_EXTRA_ARGS", "").split()
        self.extra_args = list(extra_args or []) + extra
        # Daemons of one process each take their own slot (a range of 65536 box uids).
        self.process = None

    # The fields tests use.
    socket = https_url = http_url = admin_key = key = fingerprint = ca_cert = log = None
    pid = None
    _argv = None

    def _linked_image_cache(self) -> pathlib.Path:
        """An image cache of this daemon's own whose entries link the host's: the image builds
        (templates), and the kernels' builds, whose modules a template from an OCI image gets.
        Links one by one, so what a test builds lands here, never in the host's cache."""
        host = pathlib.Path(os.environ.get("HUTCH_CACHE_DIR") or "/var/cache/hutch")
        cache = self.dir / "image-cache"
        for part in ("images", "kernel"):
            mine = cache / part
            mine.mkdir(parents=True, exist_ok=True)
            if (host / part).is_dir():
                for build in (host / part).iterdir():
                    link = mine / build.name
                    if not build.name.startswith(".") and build.is_dir() and not link.exists():
                        link.symlink_to(build)
        return cache

    def start(self):
        hutchd = self.build / "src" / "daemon" / "hutchd"
        if not hutchd.exists():
            raise RuntimeError(f"{hutchd} is missing: build hutch first (ninja -C {self.build})")
        if not (self.image / "rootfs.img").exists():
            raise RuntimeError(f"{self.image} is not a built guest image (no rootfs.img)")
        self.dir.mkdir(parents=True, exist_ok=True)
        state = self.dir / "state"
        (state / "templates").mkdir(parents=True, exist_ok=True)
        link = state / "templates" / "base"
        if not link.exists():
            link.symlink_to(self.image)
        self.socket = str(self.dir / "hutchd.sock")
        self.log = str(self.dir / "hutchd.log")
        # No --uid-base: hutchd takes a range of its own that no other hutchd on the host
        # holds (a host-wide lock), so concurrent daemons never share box uids.
        argv = [str(hutchd), "--socket", self.socket, "--state-dir", str(state),
                "--listen", "127.0.0.1:0", "--listen-http", "127.0.0.1:0",
                "--log-level", "debug"]
        if "--pool-size" not in self.extra_args:
            argv += ["--pool-size", "0"]
        # An image cache of its own, whose builds are links to the host's: a client that calls
        # POST /v1/images/prune (schemathesis with an admin key) removes links, never a build of
        # the host's, and a template build of a recipe still finds the host's cached image.
        if "--image-cache" not in self.extra_args:
            argv += ["--image-cache", str(self._linked_image_cache())]
        argv += self.extra_args
        self._argv = argv
        self._launch()
        self.admin_key = _call(self.socket, "POST", "/v1/keys",
                               {"name": "test-admin", "admin": True})["key"]
        self.key = _call(self.socket, "POST", "/v1/keys", {"name": "test-user"})["key"]
        (self.dir / "daemon.json").write_text(json.dumps(self.fields()))
        return self

    def restart(self, sig=signal.SIGTERM):
        """Ends hutchd with `sig` (its boxes are left running, as an upgrade or a crash leaves
        them) and starts a new one on the same state with the same arguments; the keys stay."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._launch()
        (self.dir / "daemon.json").write_text(json.dumps(self.fields()))
        return self

    def _launch(self):
        """Starts hutchd with self._argv and waits until it answers."""
        state = self.dir / "state"
        log = open(self.log, "ab")
        self.process = subprocess.Popen(self._argv, stdout=log, stderr=log,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.pid = self.process.pid
        deadline = time.monotonic() + 60
        info = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"hutchd exited with {self.process.returncode}; its log:\n"
                                   + pathlib.Path(self.log).read_text(errors="replace"))
            try:
                info = _call(self.socket, "GET", "/v1/info", timeout=5)
                break
            except (OSError, RuntimeError, http.client.HTTPException):
                time.sleep(0.1)
        if info is None:
            self.stop()
            raise RuntimeError("hutchd did not answer within 60 s; see " + self.log)
        for listener in info.get("listeners", []):
            if listener.startswith("https://"):
                self.https_url = listener
            elif listener.startswith("http://"):
                self.http_url = listener
        self.fingerprint = (info.get("tls") or {}).get("fingerprint_sha256")
        self.ca_cert = str(state / "tls" / "cert.pem")

    def fields(self):
        return {"https_url": self.https_url, "http_url": self.http_url, "socket": self.socket,
                "admin_key": self.admin_key, "key": self.key, "fingerprint": self.fingerprint,
                "ca_cert": self.ca_cert, "pid": self.pid, "dir": str(self.dir), "log": self.log}

    def stop(self):
        _stop(self.socket, self.pid)
        if self.process is not None:
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of ours counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _stop(sock_path, pid):
    if sock_path and os.path.exists(sock_path):
        try:
            for b in _call(sock_path, "GET", "/v1/boxes", timeout=30).get("boxes", []):
                try:
                    _call(sock_path, "DELETE", f"/v1/boxes/{b['id']}?force=true", timeout=120)
                except (OSError, RuntimeError, http.client.HTTPException) as e:
                    print(f"hutchd_daemon: cannot remove box {b.get('name')}: {e}",
                          file=sys.stderr)
        except (OSError, RuntimeError, http.client.HTTPException) as e:
            print(f"hutchd_daemon: cannot list boxes: {e}", file=sys.stderr)
    if pid and _alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start hutchd and print its endpoints as JSON")
    start.add_argument("--dir", required=True)
    start.add_argument("--build")
    start.add_argument("--image")
    stop = sub.add_parser("stop", help="remove every box and stop hutchd")
    stop.add_argument("--dir", required=True)
    args = parser.parse_args()
    if args.command == "start":
        d = HutchDaemon(args.dir, build=args.build, image=args.image)
        try:
            d.start()
        except RuntimeError as e:
            print(f"hutchd_daemon: {e}", file=sys.stderr)
            return 1
        print(json.dumps(d.fields()), flush=True)
        return 0
    saved = pathlib.Path(args.dir) / "daemon.json"
    if not saved.exists():
        print(f"hutchd_daemon: no daemon.json in {args.dir}", file=sys.stderr)
        return 1
    fields = json.loads(saved.read_text())
    _stop(fields["socket"], fields["pid"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
