#!/usr/bin/env python3
"""Remote API benchmarks (issue 12), every path side by side in one run against one hutchd.

1. exec round trip of `true` in a running box: JSON `POST /exec` over loopback HTTP and HTTPS
   (one keep-alive connection; HTTPS also with a new connection per request), the exec
   WebSocket (HTTP and HTTPS, a new WebSocket per exec, as the protocol has it), the Python SDK
   and the TypeScript SDK (HTTPS, a client kept for the run; JSON and WebSocket), the CLI over
   the unix socket and over TLS (a whole `hutch exec` process). The paths take turns, one exec
   each per round, so a change in the host's load hits them alike. With every row: hutchd's and
   the box QEMU's CPU time per exec.
2. hutchd's own CPU time per JSON exec request (utime+stime of its pid before and after a batch
   of requests over one keep-alive connection, divided by their number).
3. a --mib file (random bytes) written into the box and read back through the files API
   (`PUT`/`GET /files?path=`, HTTPS and loopback HTTP), with `hutch cp` (unix socket and TLS)
   and, for scale, a plain `hutch exec` of the same bytes; sha256 of what came back and of what
   the box holds checked, hutchd's and QEMU's CPU recorded. The files API rows are skipped,
   saying why, when hutchd does not serve /files.
4. create -> first exec of `true` through raw JSON, each SDK and the CLI, taking turns (the box
   is removed afterwards, untimed; with --pool-size N the pool is refilled before each create).

Usage: bench/api_bench.py [--runs 20] [--image DIR] [--build build] [--mib 100] [--json FILE]
                          [--file-runs 3] [--cpu-requests 200] [--pool-size 0] [--setup]
Starts its own hutchd with tests/support/hutchd_daemon.py (root: hutchd jails every QEMU) from
copies of the built binaries (others may relink build/ meanwhile), sets up the SDKs the way
their test scripts do (the Python venv in ~/.cache/hutch/python-sdk-venv, `npm ci && npm run
build` in sdk/typescript when its build is missing or stale), prints a table and, with --json,
writes every sample. Every box it made is removed and hutchd stopped at the end, also on Ctrl-C
or an error; hutchd's log is kept when something failed. A failed attempt is counted and
reported, not timed. Not a test: nothing here fails on a slow number.
"""
import argparse
import base64
import hashlib
import http.client
import json
import math
import os
import pathlib
import select
import shutil
import signal
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse

REPO = pathlib.Path(__file__).resolve().parents[1]
def newest_base_image() -> str:
    """The newest built base image in the cache (what scripts/test.sh last built)."""
    cache = pathlib.Path(os.environ.get("HUTCH_CACHE_DIR", "/var/cache/hutch"), "images")
    images = sorted(cache.glob("base-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    return str(images[0]) if images else ""


DEFAULT_IMAGE = newest_base_image()
EXEC_TRUE = json.dumps({"argv": ["true"]}).encode()


# --- the Python SDK's driver (runs in the SDK's venv) ------------------------------------------

def python_sdk_driver():
    """One hutch.Client for the run, driven by JSON lines on stdin (see api_bench_ts.mjs)."""
    import hutch

    def out(v):
        sys.stdout.write(json.dumps(v) + "\n")
        sys.stdout.flush()

    client = hutch.Client()
    out({"ready": True, "version": client.info().version, "endpoint": client.base_url,
         "sdk": hutch.__file__})
    boxes = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        try:
            if cmd["op"] == "quit":
                break
            if cmd["op"] == "exec":
                box = boxes.get(cmd["box"]) or boxes.setdefault(cmd["box"],
                                                                client.boxes.get(cmd["box"]))
                kw = {"on_stdout": lambda chunk: None} if cmd.get("ws") else {}
                t0 = time.perf_counter()
                r = box.exec(["true"], **kw)
                s = time.perf_counter() - t0
                if r.exit_code != 0:
                    raise RuntimeError(f"true ended with {r.exit_code} / signal {r.signal}")
                out({"s": s})
            elif cmd["op"] == "create_exec":
                t0 = time.perf_counter()
                box = client.boxes.create(template=cmd.get("template", "base"))
                r = box.exec(["true"])
                s = time.perf_counter() - t0
                if r.exit_code != 0:
                    raise RuntimeError(f"true ended with {r.exit_code} / signal {r.signal}")
                out({"s": s, "id": box.id})
            else:
                raise RuntimeError(f"unknown op {cmd['op']}")
        except Exception as e:  # noqa: BLE001 - reported to the bench, which says so
            out({"error": f"{type(e).__name__}: {e}"})
    client.close()
    return 0


class Driver:
    """An SDK driver process (api_bench_ts.mjs or python_sdk_driver) and its line protocol."""

    def __init__(self, name, argv, env, log_path):
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, text=True, env=env)
        self.hello = self._read()

    def _read(self):
        line = self.p.stdout.readline()
        if not line:
            self.p.wait(timeout=10)
            raise RuntimeError(f"{self.name} driver exited ({self.p.returncode}): "
                               + pathlib.Path(self.log_path).read_text()[-2000:])
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.name}: {reply['error']}")
        return reply

    def call(self, **cmd):
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()
        return self._read()

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write('{"op":"quit"}\n')
                self.p.stdin.flush()
                self.p.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                self.p.kill()
                self.p.wait()
        self.log.close()


# --- setup of the SDKs ------------------------------------------------------------------------

def run_logged(argv, cwd=None):
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} failed ({r.returncode}):\n"
                           + (r.stdout + r.stderr)[-3000:])


def python_sdk_venv(force):
    """The venv of sdk/python/scripts/test.sh (made the same way when missing or stale), with
    the working tree's package installed into it when what is there differs."""
    sdk = REPO / "sdk" / "python"
    venv = pathlib.Path(os.environ.get("HUTCH_SDK_VENV") or pathlib.Path(
        os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") / "hutch" /
        "python-sdk-venv")
    py = venv / "bin" / "python"
    stamp = hashlib.sha256((sys.version + "\n").encode() + (sdk / "requirements.txt").read_bytes()
                           + (sdk / "requirements-test.txt").read_bytes()).hexdigest()[:16]
    stamp_file = venv / ".hutch-stamp"
    if force or not py.exists() or not stamp_file.exists() or \
            stamp_file.read_text().strip() != stamp:
        print(f"setup: making the Python SDK venv {venv} (as sdk/python/scripts/test.sh does)",
              file=sys.stderr)
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        run_logged([sys.executable, "-m", "venv", str(venv)])
        run_logged([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--require-hashes", "-r", str(sdk / "requirements-test.txt")])
        stamp_file.write_text(stamp + "\n")
    where = subprocess.run([str(py), "-c", "import hutch, os; print(os.path.dirname(hutch.__file__))"],
                           capture_output=True, text=True)
    same = where.returncode == 0
    if same:
        installed = pathlib.Path(where.stdout.strip())
        for f in (sdk / "hutch").rglob("*.py"):
            other = installed / f.relative_to(sdk / "hutch")
            if not other.exists() or other.read_bytes() != f.read_bytes():
                same = False
                break
    if force or not same:
        print("setup: installing sdk/python into the venv", file=sys.stderr)
        run_logged([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--no-deps", "--no-build-isolation", "--force-reinstall", str(sdk)])
    return py


def typescript_sdk(force):
    """sdk/typescript/dist/index.js, after `npm ci && npm run build` if it is missing or older
    than the sources."""
    sdk = REPO / "sdk" / "typescript"
    dist = sdk / "dist" / "index.js"
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise RuntimeError("node and npm are needed for the TypeScript SDK (Node 20 or newer)")
    stale = force or not dist.exists() or not (sdk / "node_modules").exists()
    if not stale:
        built = dist.stat().st_mtime
        sources = list((sdk / "src").rglob("*.ts")) + [sdk / "package-lock.json",
                                                       sdk / "tsconfig.json"]
        stale = any(f.stat().st_mtime > built for f in sources)
    if stale:
        print("setup: npm ci && npm run build in sdk/typescript", file=sys.stderr)
        run_logged(["npm", "ci", "--no-audit", "--no-fund"], cwd=sdk)
        run_logged(["npm", "run", "build"], cwd=sdk)
    return dist


# --- measuring --------------------------------------------------------------------------------

def cpu_ns(pid):
    """A process's CPU time (all its threads, also ended ones) in ns: its CLOCK_PROCESS_CPUTIME
    clock, MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED); the exact figure behind utime+stime."""
    if not pid:
        return 0
    try:
        return time.clock_gettime_ns(((~pid) << 3) | 2)
    except OSError:
        return 0


def stat_ticks(pid):
    """utime + stime of /proc/PID/stat, in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


BINARIES = ("src/cli/hutch", "src/daemon/hutchd", "src/jail/hutch-jail",
            "src/egress/proxy/hutch-egress", "src/jail/hutch-ram-preload.so")


def runs(binary):
    try:
        rc = subprocess.run([str(binary), "--help"], capture_output=True, timeout=30).returncode
    except (OSError, subprocess.TimeoutExpired):
        return False
    return rc >= 0 and rc not in (126, 127)  # hutch-jail's usage is exit 125


def snapshot_build(build, into):
    """Copies of the binaries the run uses, in the build tree's layout: other engineers may
    relink the build while the bench runs (a CLI or hutch-jail half written fails to start).
    A file is copied once it has not changed for 3 s, and kept if it runs (--help)."""
    for rel in BINARIES:  # hutch-jail exposes hutch-ram-preload.so beside it to QEMU
        src, dst = build / rel, into / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(120):
            st = src.stat()
            if time.time() - st.st_mtime > 3:
                shutil.copy2(src, dst)
                if src.stat().st_mtime == st.st_mtime and (rel.endswith(".so") or runs(dst)):
                    break
            time.sleep(1)
        else:
            raise RuntimeError(f"{src} kept changing (or does not run): is a build running?")
    return into


def summary(samples, scale=1.0, digits=1):
    if not samples:
        return None
    xs = sorted(x * scale for x in samples)
    rank = max(1, math.ceil(0.95 * len(xs)))
    return {"median": round(statistics.median(xs), digits), "p95": round(xs[rank - 1], digits),
            "min": round(xs[0], digits), "max": round(xs[-1], digits), "n": len(xs)}


def loadavg():
    return float(pathlib.Path("/proc/loadavg").read_text().split()[0])


def at_end(sock):
    """Whether an idle connection was closed by its peer (or is out of step: unasked data)."""
    if not select.select([sock], [], [], 0)[0]:
        return False
    timeout = sock.gettimeout()
    try:
        sock.setblocking(False)
        sock.recv(1)
        return True
    except (ssl.SSLWantReadError, BlockingIOError):
        return False  # TLS records that are not data (session tickets)
    except OSError:
        return True
    finally:
        sock.settimeout(timeout)


class Api:
    """Raw HTTP/1.1 to one of hutchd's TCP listeners with a key."""

    def __init__(self, url, key, tls_ctx=None):
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.tls = u.hostname, u.port, u.scheme == "https"
        self.key, self.ctx = key, tls_ctx
        self.conn = None
        self.reconnects = 0  # requests on the kept connection that found it closed by hutchd
        self.idle_closed = 0  # kept connections hutchd closed while idle (its 120 s limit)

    def new_conn(self, timeout=600):
        if self.tls:
            return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout,
                             blocksize=1 << 20)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout, blocksize=1 << 20)

    def headers(self, extra=None):
        h = {"Authorization": f"Bearer {self.key}"}
        h.update(extra or {})
        return h

    def call(self, method, path, body=None, conn=None, expect=(200, 201)):
        """A JSON call on the kept connection (or conn); returns (status, parsed body)."""
        c = conn or self.kept()
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data,
                  headers=self.headers({"Content-Type": "application/json"} if data else None))
        r = c.getresponse()
        text = r.read()
        parsed = json.loads(text) if text.strip() else None
        if expect and r.status not in expect:
            raise RuntimeError(f"{method} {path}: {r.status} {text[:500]!r}")
        return r.status, parsed

    def _keep(self):
        self.conn = self.new_conn()
        return self.conn

    def kept(self):
        """The kept connection, made anew when hutchd closed it while it was idle (after
        120 s without a request): a readable idle socket is one at its end (http.client would
        only find out by a failed request)."""
        c = self.conn
        if c is not None and c.sock is not None and at_end(c.sock):
            c.close()
            self.idle_closed += 1
            return self._keep()
        return c or self._keep()

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def json_exec(api, box, keep_alive=True):
    """One POST /exec of `true`: seconds from the request to the whole answer read."""
    t0 = time.perf_counter()
    if keep_alive and api.conn is not None and api.conn.sock is None:
        api.reconnects += 1  # http.client opens a new one: hutchd closed the last
    conn = api.kept() if keep_alive else api.new_conn()
    conn.request("POST", f"/v1/boxes/{box}/exec", body=EXEC_TRUE,
                 headers=api.headers({"Content-Type": "application/json"}))
    r = conn.getresponse()
    data = r.read()
    s = time.perf_counter() - t0
    if not keep_alive:
        conn.close()
    if r.status != 200:
        raise RuntimeError(f"POST /exec: {r.status} {data[:300]!r}")
    result = json.loads(data)
    if result.get("exit_code") != 0:
        raise RuntimeError(f"true ended with {result}")
    # duration_ms: hutchd's own clock from asking the agent to the exit status.
    return s, result["duration_ms"] / 1000


def ws_exec(api, box):
    """One exec of `true` over GET /exec/ws (RFC 6455 by hand, the standard library only):
    seconds from connect to the exit message."""
    t0 = time.perf_counter()
    raw = socket.create_connection((api.host, api.port), timeout=60)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s = api.ctx.wrap_socket(raw, server_hostname=api.host) if api.tls else raw
    try:
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall((f"GET /v1/boxes/{box}/exec/ws HTTP/1.1\r\nHost: {api.host}:{api.port}\r\n"
                   "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Protocol: hutch.exec.v1\r\n"
                   f"Authorization: Bearer {api.key}\r\n\r\n").encode())
        f = s.makefile("rb")
        status = f.readline()
        headers = {}
        while True:
            line = f.readline()
            if line in (b"\r\n", b""):
                break
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        if b" 101 " not in status:
            raise RuntimeError(f"exec/ws upgrade: {status!r} {f.read(300)!r}")
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        if headers.get("sec-websocket-accept") != accept:
            raise RuntimeError("exec/ws: wrong Sec-WebSocket-Accept")

        def send(opcode, payload):
            mask = os.urandom(4)
            n = len(payload)
            head = bytes([0x80 | opcode])
            if n < 126:
                head += bytes([0x80 | n])
            elif n < 65536:
                head += bytes([0x80 | 126]) + struct.pack(">H", n)
            else:
                head += bytes([0x80 | 127]) + struct.pack(">Q", n)
            s.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

        def receive():
            b0, b1 = f.read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", f.read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", f.read(8))[0]
            return b0 & 0x0F, f.read(n)

        send(1, EXEC_TRUE)
        elapsed, end = None, None
        while True:
            opcode, payload = receive()
            if opcode == 1:
                message = json.loads(payload)
                if message.get("type") in ("exit", "error"):
                    elapsed, end = time.perf_counter() - t0, message
            elif opcode == 8:
                send(8, payload[:2])
                break
            elif opcode == 9:
                send(10, payload)
        if end is None or end.get("type") != "exit" or end.get("exit_code") != 0:
            raise RuntimeError(f"exec/ws ended with {end}")
        return elapsed
    finally:
        s.close()


class Row:
    """One measured path: its samples and the CPU that hutchd and the box's QEMU spent on it."""

    def __init__(self, key, label, what, fn, qemu_pid=0):
        self.key, self.label, self.what, self.fn = key, label, what, fn
        self.qemu_pid = qemu_pid
        self.samples, self.inner, self.hutchd_ns, self.qemu_ns = [], [], 0, 0
        self.errors = []  # failed attempts: counted and reported, the row goes on (up to 3)

    def once(self, hutchd_pid, record=True):
        if len(self.errors) >= 3:
            return
        h0, q0 = cpu_ns(hutchd_pid), cpu_ns(self.qemu_pid)
        try:
            s = self.fn()
        except Exception as e:  # noqa: BLE001 - one broken path must not hide the others
            self.errors.append(f"{time.strftime('%H:%M:%S')} {type(e).__name__}: {e}")
            print(f"  {self.label}: {self.errors[-1]}", file=sys.stderr)
            return
        h1, q1 = cpu_ns(hutchd_pid), cpu_ns(self.qemu_pid)
        if record:
            if isinstance(s, tuple):
                s, inner = s
                self.inner.append(inner)
            self.samples.append(s)
            self.hutchd_ns += h1 - h0
            self.qemu_ns += q1 - q0

    def result(self, scale=1000.0, digits=1):
        n = len(self.samples)
        out = {"label": self.label, "what": self.what}
        if self.errors:
            out["errors"] = self.errors
        if n:
            out.update(summary(self.samples, scale, digits))
            out["hutchd_cpu_ms_per_op"] = round(self.hutchd_ns / n / 1e6, 2)
            if self.qemu_pid:
                out["qemu_cpu_ms_per_op"] = round(self.qemu_ns / n / 1e6, 2)
            if self.inner:
                out["duration_ms"] = summary(self.inner, scale, digits)
            out["samples_s"] = [round(x, 6) for x in self.samples]
        return out


def take_turns(rows, rounds, hutchd_pid, warmup=2):
    for _ in range(warmup):
        for row in rows:
            row.once(hutchd_pid, record=False)
    for i in range(rounds):
        for row in rows:
            row.once(hutchd_pid)
        print(f"  round {i + 1}/{rounds}", file=sys.stderr, end="\r")
    print(file=sys.stderr)


# --- the benchmark ----------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=20, help="samples per exec and create path")
    p.add_argument("--image", default=os.environ.get("HUTCH_TEST_IMAGE", DEFAULT_IMAGE),
                   help="built guest image directory (default $HUTCH_TEST_IMAGE, else %(default)s)")
    p.add_argument("--build", default=str(REPO / "build"))
    p.add_argument("--mib", type=int, default=100, help="size of the file-transfer file")
    p.add_argument("--file-runs", type=int, default=3, help="transfers per file path and way")
    p.add_argument("--cpu-requests", type=int, default=200,
                   help="JSON exec requests in the hutchd CPU batch")
    p.add_argument("--pool-size", type=int, default=0,
                   help="hutchd --pool-size (0, the harness's default: every create restores)")
    p.add_argument("--json", help="write the results (with every sample) to this file")
    p.add_argument("--setup", action="store_true",
                   help="remake the Python venv and rebuild the TypeScript SDK first")
    p.add_argument("--keep-dir", action="store_true", help="keep hutchd's directory and log")
    a = p.parse_args()

    sys.path.insert(0, str(REPO / "tests" / "support"))
    from hutchd_daemon import HutchDaemon

    # Cleanup on Ctrl-C, SIGTERM and SIGHUP alike: the finally below runs.
    def interrupted(signo, _frame):
        raise KeyboardInterrupt(f"signal {signo}")
    for signo in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signo, interrupted)  # SIGINT too: a background job inherits it ignored

    results = {"command": " ".join(sys.argv), "date_utc": time.strftime("%Y-%m-%d %H:%M:%S",
                                                                        time.gmtime()),
               "host": {"cpus": os.cpu_count(), "load_start": loadavg()},
               "git": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                     capture_output=True, text=True).stdout.strip(),
               "runs": a.runs, "image": a.image}
    loads = [loadavg()]

    sdk_problems = {}
    try:
        venv_python = python_sdk_venv(a.setup)
    except Exception as e:  # noqa: BLE001
        venv_python, sdk_problems["python"] = None, str(e)
    try:
        ts_dist = typescript_sdk(a.setup)
    except Exception as e:  # noqa: BLE001
        ts_dist, sdk_problems["typescript"] = None, str(e)
    for sdk, why in sdk_problems.items():
        print(f"The {sdk} SDK rows are skipped: {why}", file=sys.stderr)

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hutch-api-bench-"))
    try:
        build = snapshot_build(pathlib.Path(a.build).resolve(), tmp / "build")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    hutch = str(build / "src" / "cli" / "hutch")
    extra = ["--pool-size", str(a.pool_size), "--jail", str(build / BINARIES[2]),
             "--egress", str(build / BINARIES[3])]
    daemon = HutchDaemon(tmp / "daemon", build=build, image=a.image, extra_args=extra)
    drivers = []
    failed = True
    try:
        daemon.start()
        pid = daemon.pid
        tls_ctx = ssl.create_default_context(cafile=daemon.ca_cert)
        http_api = Api(daemon.http_url, daemon.key)
        https_api = Api(daemon.https_url, daemon.key, tls_ctx)
        admin = Api(daemon.http_url, daemon.admin_key)
        _, info = admin.call("GET", "/v1/info")
        results["hutchd"] = {"version": info.get("version"), "accel": info.get("accel"),
                             "pool_size": a.pool_size, "log_level": "debug (hutchd_daemon.py)"}
        print(f"hutchd {info.get('version')} pid {pid}, accel {info['accel']['name']}, "
              f"{daemon.https_url} {daemon.http_url}; load {loadavg()}", file=sys.stderr)

        def wait_pool():
            """With a warm pool, wait until it is full again (untimed), so that every create
            finds what the first one found."""
            if a.pool_size <= 0:
                return
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                _, pools = admin.call("GET", "/v1/system/pool")
                if all(pl["ready"] >= pl["size"] and not pl["filling"]
                       for pl in pools.get("pools", [])):
                    return
                time.sleep(0.2)

        def remove(box):
            admin.call("DELETE", f"/v1/boxes/{box}?force=true")

        cli_env = {k: v for k, v in os.environ.items() if not k.startswith("HUTCH_")}
        tls_env = dict(cli_env, HUTCH_API_KEY=daemon.key)
        sdk_env = dict(cli_env, HUTCH_HOST=daemon.https_url, HUTCH_API_KEY=daemon.key,
                       HUTCH_CA_CERT=daemon.ca_cert)

        def cli_socket(*args):
            return [hutch, "--socket", daemon.socket, *args]

        def cli_tls(*args):
            return [hutch, "--host", daemon.https_url, "--ca-cert", daemon.ca_cert, *args]

        def timed_cli(argv, env):
            t0 = time.perf_counter()
            r = subprocess.run(argv, env=env, capture_output=True)
            s = time.perf_counter() - t0
            if r.returncode != 0:
                raise RuntimeError(f"{' '.join(argv[-6:])}: exit {r.returncode} "
                                   f"{r.stderr.decode(errors='replace').strip()[:300]}")
            return s

        # The box every exec and file row uses, owned by the ordinary key (so every path sees it:
        # the key's own, the unix socket's host administrator).
        t0 = time.perf_counter()
        _, box = http_api.call("POST", "/v1/boxes", {"name": "api-bench", "template": "base"})
        results["first_create_s"] = round(time.perf_counter() - t0, 3)
        bid, qemu = box["id"], box.get("pid", 0)
        results["box"] = {"id": bid, "cpus": box.get("cpus"), "memory_mib": box.get("memory_mib"),
                          "boot": box.get("boot"), "qemu_pid": qemu}
        wait_pool()
        # What the box's QEMU burns doing nothing (timer ticks under TCG): part of every
        # QEMU CPU figure below.
        for _ in range(3):
            json_exec(http_api, bid)
        q0, w0 = cpu_ns(qemu), time.perf_counter()
        time.sleep(3)
        results["qemu_idle_cpu_ms_per_s"] = round((cpu_ns(qemu) - q0) / 1e6
                                                  / (time.perf_counter() - w0), 1)

        for name, argv in (("python", [str(venv_python), str(pathlib.Path(__file__).resolve()),
                                       "--python-sdk-driver"] if venv_python else None),
                           ("typescript", ["node", str(REPO / "bench" / "api_bench_ts.mjs"),
                                           str(ts_dist)] if ts_dist else None)):
            if argv is None:
                continue
            try:
                drivers.append(Driver(name, argv, sdk_env, tmp / f"{name}-driver.log"))
            except Exception as e:  # noqa: BLE001
                sdk_problems[name] = str(e)
                print(f"The {name} SDK rows are skipped: {e}", file=sys.stderr)
        by_name = {d.name: d for d in drivers}
        results["sdk_problems"] = sdk_problems

        # 1. exec round trips.
        rows = [
            Row("json_http", "JSON `POST /exec`, loopback HTTP, keep-alive",
                "http.client, one connection for the run", lambda: json_exec(http_api, bid), qemu),
            Row("json_https", "JSON `POST /exec`, HTTPS, keep-alive",
                "http.client, one TLS connection for the run",
                lambda: json_exec(https_api, bid), qemu),
            Row("json_https_new", "JSON `POST /exec`, HTTPS, new connection each",
                "TCP connect + TLS handshake + request", lambda: json_exec(https_api, bid, False),
                qemu),
            Row("ws_http", "WebSocket `/exec/ws`, loopback HTTP",
                "connect, upgrade, request message, to the exit message", lambda: ws_exec(http_api, bid),
                qemu),
            Row("ws_https", "WebSocket `/exec/ws`, HTTPS", "the same inside TLS",
                lambda: ws_exec(https_api, bid), qemu),
        ]
        for name, label in (("python", "Python SDK"), ("typescript", "TypeScript SDK")):
            d = by_name.get(name)
            if d is None:
                continue
            rows.append(Row(f"{name}_sdk", f"{label} `box.exec`, HTTPS",
                            "a Client kept for the run; JSON `POST /exec`",
                            lambda d=d: d.call(op="exec", box=bid)["s"], qemu))
            rows.append(Row(f"{name}_sdk_ws", f"{label} `box.exec` with an output callback, HTTPS",
                            "the same over the exec WebSocket",
                            lambda d=d: d.call(op="exec", box=bid, ws=True)["s"], qemu))
        rows += [
            Row("cli_socket", "CLI `hutch exec`, unix socket", "a whole CLI process; upgraded "
                "`hutch-exec` frames", lambda: timed_cli(cli_socket("exec", bid, "--", "true"),
                                                          cli_env), qemu),
            Row("cli_tls", "CLI `hutch exec`, TLS (`--host`)", "the same over HTTPS with a key",
                lambda: timed_cli(cli_tls("exec", bid, "--", "true"), tls_env), qemu),
        ]
        print(f"exec round trips: {len(rows)} paths x {a.runs}, taking turns", file=sys.stderr)
        take_turns(rows, a.runs, pid)
        results["exec"] = {r.key: r.result() for r in rows}
        # Requests of the keep-alive rows that found their connection closed by hutchd (0 when
        # it keeps connections open).
        results["exec_keepalive_reconnects"] = {"http": http_api.reconnects,
                                                "https": https_api.reconnects}
        loads.append(loadavg())

        # 2. hutchd's CPU per JSON exec request: a batch over one keep-alive connection.
        print(f"hutchd CPU: {a.cpu_requests} JSON exec requests", file=sys.stderr)
        for _ in range(5):
            json_exec(http_api, bid)
        ticks = os.sysconf("SC_CLK_TCK")
        t0, n0, q0, w0 = stat_ticks(pid), cpu_ns(pid), cpu_ns(qemu), time.perf_counter()
        for _ in range(a.cpu_requests):
            json_exec(http_api, bid)
        t1, n1, q1, w1 = stat_ticks(pid), cpu_ns(pid), cpu_ns(qemu), time.perf_counter()
        results["hutchd_cpu_per_json_exec"] = {
            "requests": a.cpu_requests,
            "stat_utime_stime_ms": round((t1 - t0) * 1000 / ticks / a.cpu_requests, 3),
            "stat_resolution_ms": round(1000 / ticks / a.cpu_requests, 3),
            "cpuclock_ms": round((n1 - n0) / 1e6 / a.cpu_requests, 3),
            "qemu_cpuclock_ms": round((q1 - q0) / 1e6 / a.cpu_requests, 3),
            "wall_ms": round((w1 - w0) * 1000 / a.cpu_requests, 2),
            "threads": len(os.listdir(f"/proc/{pid}/task")),
        }
        loads.append(loadavg())

        # 3. files: the files API against hutch cp, both ways, sha256 checked.
        results["files"] = files_bench(a, daemon, http_api, https_api, bid, qemu, tmp,
                                       cli_socket, cli_tls, cli_env, tls_env, timed_cli)
        loads.append(loadavg())

        # 4. create -> first exec.
        counter = [0]

        def fresh(prefix):
            counter[0] += 1
            return f"api-bench-{prefix}-{counter[0]}"

        def create_raw():
            conn = https_api.new_conn()
            made = None
            try:
                t0 = time.perf_counter()
                try:
                    _, made = https_api.call("POST", "/v1/boxes", {"template": "base"}, conn=conn)
                except (OSError, http.client.HTTPException) as e:
                    raise RuntimeError(f"POST /v1/boxes, {time.perf_counter() - t0:.3f} s after "
                                       f"sending it: {type(e).__name__}: {e}") from e
                t1 = time.perf_counter()
                try:
                    conn.request("POST", f"/v1/boxes/{made['id']}/exec", body=EXEC_TRUE,
                                 headers=https_api.headers({"Content-Type": "application/json"}))
                    r = conn.getresponse()
                    body = json.loads(r.read())
                except (OSError, http.client.HTTPException) as e:
                    raise RuntimeError(f"POST /exec on the connection the create was answered "
                                       f"on ({t1 - t0:.3f} s), {time.perf_counter() - t1:.3f} s "
                                       f"after sending it: {type(e).__name__}: {e}") from e
                s = time.perf_counter() - t0
            finally:
                conn.close()
                if made:
                    remove(made["id"])
            if r.status != 200 or body.get("exit_code") != 0:
                raise RuntimeError(f"exec after create: {r.status} {body}")
            return s

        def create_sdk(d):
            reply = d.call(op="create_exec", template="base")
            remove(reply["id"])
            return reply["s"]

        def create_cli(make, env, prefix):
            name = fresh(prefix)
            try:
                return timed_cli(make("run", "--name", name, "--", "true"), env)
            finally:
                try:
                    remove(name)
                except RuntimeError:
                    pass

        def waiting(fn):
            def run():
                wait_pool()
                return fn()
            return run

        crows = [Row("json_https", "JSON over HTTPS (http.client)",
                     "`POST /v1/boxes` then `POST /exec` on one new connection",
                     waiting(create_raw))]
        for name, label in (("python", "Python SDK"), ("typescript", "TypeScript SDK")):
            d = by_name.get(name)
            if d is not None:
                crows.append(Row(f"{name}_sdk", f"{label}, HTTPS",
                                 "`client.boxes.create()` then `box.exec([\"true\"])`",
                                 waiting(lambda d=d: create_sdk(d))))
        crows += [
            Row("cli_socket", "CLI, unix socket", "`hutch run --name N -- true`, a whole process",
                waiting(lambda: create_cli(cli_socket, cli_env, "sock"))),
            Row("cli_tls", "CLI, TLS (`--host`)", "the same over HTTPS with a key",
                waiting(lambda: create_cli(cli_tls, tls_env, "tls"))),
        ]
        print(f"create -> first exec: {len(crows)} paths x {a.runs}, taking turns",
              file=sys.stderr)
        take_turns(crows, a.runs, pid, warmup=1)
        results["create_first_exec"] = {r.key: r.result(scale=1.0, digits=3) for r in crows}
        loads.append(loadavg())
        results["host"]["load_end"] = loadavg()
        results["host"]["load_max_sampled"] = max(loads)
        http_api.close()
        https_api.close()
        admin.close()
        results["keepalive_idle_closed"] = {"http": http_api.idle_closed,
                                            "https": https_api.idle_closed,
                                            "admin": admin.idle_closed}
        failed = any_failure(results)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for d in drivers:
            d.close()
        daemon.stop()  # removes every box, then SIGTERM (SIGKILL after 30 s)
        # Anything of this run still alive (a QEMU whose box could not be removed): by pid.
        left = subprocess.run(["pgrep", "-f", str(tmp)], capture_output=True, text=True).stdout
        for line in left.split():
            try:
                os.kill(int(line), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        if a.keep_dir:
            print(f"kept (--keep-dir): {tmp}, hutchd's log {daemon.log}", file=sys.stderr)
            results["hutchd_log"] = daemon.log
        else:
            if failed:  # the logs, not the state directory's disks
                logs = pathlib.Path(tempfile.mkdtemp(prefix="hutch-api-bench-logs-"))
                for log in [pathlib.Path(daemon.log)] + sorted(tmp.glob("*-driver.log")):
                    if log.exists():
                        shutil.copy2(log, logs / log.name)
                print(f"something failed: hutchd's log and the drivers' are in {logs}",
                      file=sys.stderr)
                results["hutchd_log"] = str(logs / "hutchd.log")
            shutil.rmtree(tmp, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    print_table(results)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def files_bench(a, daemon, http_api, https_api, bid, qemu, tmp, cli_socket, cli_tls, cli_env,
                tls_env, timed_cli):
    """The --mib file into the box and back: files API over HTTPS and loopback HTTP, hutch cp
    over the unix socket and TLS. Seconds per transfer; sha256 of what came back."""
    out = {"mib": a.mib, "runs": a.file_runs}
    probe = http_api.new_conn(timeout=60)
    try:
        probe.request("GET", f"/v1/boxes/{bid}/files/stat?path=/",
                      headers=http_api.headers())
        r = probe.getresponse()
        text = r.read().decode(errors="replace")
    finally:
        probe.close()
    served = r.status == 200
    if not served:
        why = (f"GET /v1/boxes/{{box}}/files/stat answered {r.status} {text.strip()[:200]}: "
               "this hutchd does not serve the files API")
        out["files_api_skipped"] = why
        print(f"files API rows skipped: {why}", file=sys.stderr)

    size = a.mib << 20
    src = tmp / "file.bin"
    with open(src, "wb") as f:
        for _ in range(a.mib):
            f.write(os.urandom(1 << 20))
    want = hashlib.sha256(src.read_bytes()).hexdigest()
    back = tmp / "back.bin"
    remote = "/home/hutch/api-bench.bin"
    q = urllib.parse.quote(remote, safe="")

    def in_box_sha():
        _, r = http_api.call("POST", f"/v1/boxes/{bid}/exec",
                             {"argv": ["sha256sum", remote], "timeout_ms": 300000})
        return r["stdout"].split()[0] if r.get("exit_code") == 0 else f"error: {r}"

    def rm_remote():
        http_api.call("POST", f"/v1/boxes/{bid}/exec", {"argv": ["rm", "-f", remote]})

    def api_put(api):
        def run():
            conn = api.new_conn()
            try:
                with open(src, "rb") as body:
                    t0 = time.perf_counter()
                    conn.request("PUT", f"/v1/boxes/{bid}/files?path={q}", body=body,
                                 headers=api.headers({"Content-Length": str(size),
                                                      "Content-Type": "application/octet-stream"}))
                    r = conn.getresponse()
                    text = r.read()
                    s = time.perf_counter() - t0
            finally:
                conn.close()
            if r.status != 200:
                raise RuntimeError(f"PUT /files: {r.status} {text[:300]!r}")
            info = json.loads(text)
            if info.get("size") != size:
                raise RuntimeError(f"PUT /files answered size {info.get('size')}, sent {size}")
            return s
        return run

    def api_get(api):
        def run():
            conn = api.new_conn()
            try:
                t0 = time.perf_counter()
                conn.request("GET", f"/v1/boxes/{bid}/files?path={q}", headers=api.headers())
                r = conn.getresponse()
                if r.status != 200:
                    raise RuntimeError(f"GET /files: {r.status} {r.read()[:300]!r}")
                with open(back, "wb") as f:
                    while chunk := r.read(1 << 20):
                        f.write(chunk)
                s = time.perf_counter() - t0
            finally:
                conn.close()
            return s
        return run

    def cp_in(make, env):
        return lambda: timed_cli(make("cp", "-q", str(src), f"{bid}:{remote}"), env)

    def cp_out(make, env):
        return lambda: timed_cli(make("cp", "-q", f"{bid}:{remote}", str(back)), env)

    def piped(argv, env, stdin_path=None, stdout_path=None):
        def run():
            with open(stdin_path or os.devnull, "rb") as i, \
                    open(stdout_path or os.devnull, "wb") as o:
                t0 = time.perf_counter()
                r = subprocess.run(argv, env=env, stdin=i, stdout=o, stderr=subprocess.PIPE)
                s = time.perf_counter() - t0
            if r.returncode != 0:
                raise RuntimeError(f"{' '.join(argv[-6:])}: exit {r.returncode} "
                                   f"{r.stderr.decode(errors='replace').strip()[:300]}")
            return s
        return run

    methods = []
    if served:
        methods += [("api_https", "files API, HTTPS", api_put(https_api), api_get(https_api)),
                    ("api_http", "files API, loopback HTTP", api_put(http_api),
                     api_get(http_api))]
    methods += [("cp_socket", "`hutch cp`, unix socket", cp_in(cli_socket, cli_env),
                 cp_out(cli_socket, cli_env)),
                ("cp_tls", "`hutch cp`, TLS (`--host`)", cp_in(cli_tls, tls_env),
                 cp_out(cli_tls, tls_env)),
                # For scale: the same bytes through a plain exec, no tar.
                ("exec_socket", "plain exec (`exec -i sh -c 'cat > F'`, `exec cat F`), unix socket",
                 piped(cli_socket("exec", "-i", bid, "--", "sh", "-c", f"cat > {remote}"),
                       cli_env, stdin_path=src),
                 piped(cli_socket("exec", bid, "--", "cat", remote), cli_env,
                       stdout_path=back))]
    print(f"files: {a.mib} MiB, {len(methods)} paths x {a.file_runs} each way", file=sys.stderr)
    for key, label, _, _ in methods:
        out[key] = {"label": label, "write_s": [], "read_s": [], "sha256_ok": True,
                    "in_box_sha256_ok": None,
                    "cpu_s": {"write": {"hutchd": 0.0, "qemu": 0.0},
                              "read": {"hutchd": 0.0, "qemu": 0.0}}}

    def timed(m, way, fn):
        h0, q0 = cpu_ns(daemon.pid), cpu_ns(qemu)
        m[f"{way}_s"].append(fn())
        m["cpu_s"][way]["hutchd"] += (cpu_ns(daemon.pid) - h0) / 1e9
        m["cpu_s"][way]["qemu"] += (cpu_ns(qemu) - q0) / 1e9

    for i in range(a.file_runs):
        for key, label, put, get in methods:
            m = out[key]
            if "error" in m:
                continue
            try:
                rm_remote()
                timed(m, "write", put)
                if m["in_box_sha256_ok"] is None:
                    m["in_box_sha256_ok"] = in_box_sha() == want
                back.unlink(missing_ok=True)
                timed(m, "read", get)
                got = hashlib.sha256(back.read_bytes()).hexdigest()
                if got != want:
                    m["sha256_ok"] = False
                    print(f"  {label}: sha256 of what came back {got} != sent {want}",
                          file=sys.stderr)
            except Exception as e:  # noqa: BLE001
                m["error"] = f"{type(e).__name__}: {e}"
                print(f"  {label}: {m['error']}", file=sys.stderr)
        print(f"  round {i + 1}/{a.file_runs}", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    rm_remote()
    for key, *_ in methods:
        m = out[key]
        for way in ("write", "read"):
            xs = m[f"{way}_s"]
            if xs:
                med = statistics.median(xs)
                cpu = m["cpu_s"][way]
                m[way] = {"median_s": round(med, 3), "mib_s": round(a.mib / med, 1),
                          "min_s": round(min(xs), 3), "max_s": round(max(xs), 3), "n": len(xs),
                          # CPU seconds per transfer, and the share of a core over its wall time
                          "hutchd_cpu_s": round(cpu["hutchd"] / len(xs), 3),
                          "qemu_cpu_s": round(cpu["qemu"] / len(xs), 3),
                          "qemu_core_share": round(cpu["qemu"] / sum(xs), 2)}
    back.unlink(missing_ok=True)
    src.unlink(missing_ok=True)
    return out


def failures(row):
    n = len(row.get("errors", []))
    return f" ({n} failed: {row['errors'][0]})" if n else ""


def any_failure(r):
    rows = list(r.get("exec", {}).values()) + list(r.get("create_first_exec", {}).values())
    files = [m for m in r.get("files", {}).values() if isinstance(m, dict)]
    return any(row.get("errors") for row in rows) or any(
        "error" in m or not m.get("sha256_ok", True) for m in files)


def print_table(r):
    print(f"\nhutch remote API benchmark, {r['date_utc']} UTC, {r['git']}, "
          f"{r['host']['cpus']} cores, accel {r['hutchd']['accel']['name']}, "
          f"load {r['host']['load_start']} -> {r['host'].get('load_end')} "
          f"(max sampled {r['host'].get('load_max_sampled')})")
    print(f"first create of the template: {r['first_create_s']} s; box {r['box']}; its QEMU "
          f"idle: {r['qemu_idle_cpu_ms_per_s']} ms CPU per s")
    print(f"\nexec round trip of `true` (ms; {r['runs']} runs each, taking turns)")
    print("| path | median | p95 | hutchd CPU/exec | QEMU CPU/exec | of it hutchd -> agent -> exit |")
    print("|---|---|---|---|---|---|")
    for row in r["exec"].values():
        if not row.get("n"):
            print(f"| {row['label']} | failed: {row['errors'][0][:80]} | | | | |")
            continue
        inner = row.get("duration_ms")
        print(f"| {row['label']}{failures(row)} | {row['median']} | {row['p95']} | "
              f"{row['hutchd_cpu_ms_per_op']} | {row.get('qemu_cpu_ms_per_op', '—')} | "
              f"{inner['median'] if inner else ''} |")
    c = r["hutchd_cpu_per_json_exec"]
    print(f"\nhutchd CPU per JSON exec request ({c['requests']} over one keep-alive loopback HTTP "
          f"connection): {c['stat_utime_stime_ms']} ms by /proc/PID/stat utime+stime "
          f"(resolution {c['stat_resolution_ms']} ms), {c['cpuclock_ms']} ms by its CPU clock; "
          f"the box's QEMU {c['qemu_cpuclock_ms']} ms; wall {c['wall_ms']} ms per request")
    f = r["files"]
    print(f"\nfiles: {f['mib']} MiB of random bytes, median of {f['runs']}")
    if "files_api_skipped" in f:
        print(f"files API rows skipped: {f['files_api_skipped']}")
    print("| path | into the box | out of the box | sha256 back / in the box | CPU in (hutchd, QEMU "
          "share of a core) | CPU out |")
    print("|---|---|---|---|---|---|")
    for key, m in f.items():
        if not isinstance(m, dict):
            continue
        if "error" in m and not m.get("read"):
            print(f"| {m['label']} | error: {m['error'][:80]} | | |")
            continue
        w, rd = m.get("write"), m.get("read")
        print(f"| {m['label']} | {w['median_s']} s ({w['mib_s']} MiB/s) | "
              f"{rd['median_s']} s ({rd['mib_s']} MiB/s) | "
              f"{'ok' if m['sha256_ok'] else 'MISMATCH'} / "
              f"{'ok' if m['in_box_sha256_ok'] else 'MISMATCH'} | "
              f"{w['hutchd_cpu_s']} s, {w['qemu_core_share']} | "
              f"{rd['hutchd_cpu_s']} s, {rd['qemu_core_share']} |")
    print(f"\ncreate -> first exec of `true` (s; {r['runs']} runs each, pool size "
          f"{r['hutchd']['pool_size']})")
    print("| path | median | p95 | hutchd CPU/create |")
    print("|---|---|---|---|")
    for row in r["create_first_exec"].values():
        if not row.get("n"):
            print(f"| {row['label']} | failed: {row['errors'][0][:80]} | | |")
            continue
        print(f"| {row['label']}{failures(row)} | {row['median']} | {row['p95']} | "
              f"{row['hutchd_cpu_ms_per_op']} ms |")
    for sdk, why in r.get("sdk_problems", {}).items():
        print(f"{sdk} SDK rows skipped: {why}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--python-sdk-driver"]:
        sys.exit(python_sdk_driver())
    try:
        sys.exit(main())
    except KeyboardInterrupt as e:
        print(f"api_bench: interrupted ({e or 'Ctrl-C'}); boxes removed, hutchd stopped",
              file=sys.stderr)
        sys.exit(130)
