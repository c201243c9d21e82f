"""What the benches share: hutchd's API on its unix socket and its CLI, error bookkeeping, percentiles and
/proc readings of a process and the host. Only the standard library."""
import http.client
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "support"))
from hutchd_daemon import HutchDaemon  # noqa: E402
from hutchd_daemon import UnixConnection as UnixHTTP  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")

# A kept-alive connection the server has closed while it sat idle fails on its next request
# with one of these, before the server read anything: an idempotent request is sent again on a
# new connection (as HTTP clients do), anything else fails.
STALE_CONNECTION = (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected)
IDEMPOTENT = ("GET", "HEAD", "PUT", "DELETE", "OPTIONS")


class Cli:
    """The hutch CLI against one hutchd: run() gives (stdout, seconds) or raises; the stderr of
    the last run (progress, build logs) stays in .stderr."""

    def __init__(self, hutch, sock):
        self.argv = [hutch, "--socket", sock]
        self.stderr = ""

    def run(self, *args):
        t0 = time.perf_counter()
        r = subprocess.run(self.argv + list(args), capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        self.stderr = r.stderr
        if r.returncode != 0:
            raise RuntimeError(f"hutch {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
        return r.stdout, seconds


class Errors:
    """Every error: printed when it happens, kept by phase."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_phase = {}

    def add(self, phase, what, message):
        with self.lock:
            self.by_phase.setdefault(phase, []).append(f"{what}: {message}")
        print(f"ERROR [{phase}] {what}: {message}", file=sys.stderr, flush=True)

    def count(self, phase=None):
        if phase:
            return len(self.by_phase.get(phase, []))
        return sum(len(v) for v in self.by_phase.values())


class Api:
    """hutchd's API on its unix socket; one kept connection per thread."""

    def __init__(self, sock):
        self.sock = sock
        self.local = threading.local()

    def call(self, method, target, body=None, raw=None, timeout=600):
        """-> (status, bytes). A connection that failed is dropped, never reused; an idempotent
        request that met a kept-alive connection the server had closed is sent once more."""
        headers = {}
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn = getattr(self.local, "conn", None)
        reused = conn is not None and conn.timeout == timeout
        if not reused:
            if conn is not None:
                conn.close()
            conn = self.local.conn = UnixHTTP(self.sock, timeout)
        while True:
            try:
                conn.request(method, target, body=data, headers=headers)
                res = conn.getresponse()
                payload = res.read()
                return res.status, payload
            except Exception as e:
                conn.close()
                self.local.conn = None
                if not (reused and method in IDEMPOTENT and isinstance(e, STALE_CONNECTION)):
                    raise
                reused = False
                conn = self.local.conn = UnixHTTP(self.sock, timeout)

    def close(self):
        """Closes this thread's connection."""
        conn = getattr(self.local, "conn", None)
        if conn is not None:
            conn.close()
            self.local.conn = None

    def json(self, method, target, body=None, timeout=600):
        status, payload = self.call(method, target, body=body, timeout=timeout)
        if status >= 300:
            raise RuntimeError(f"{method} {target}: {status} "
                               f"{payload.decode(errors='replace').strip()}")
        return json.loads(payload) if payload.strip() else None


def pct(values, p):
    values = sorted(values)
    if not values:
        return None
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def summary(values):
    """p50 / p99 / max, in the values' own unit, rounded."""
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50": round(pct(values, 50), 1), "p99": round(pct(values, 99), 1),
            "max": round(max(values), 1)}


def proc_cpu_s(pid):
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


def host_cpu():
    values = [int(v) for v in pathlib.Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return sum(values), values[3] + values[4]


def host_busy_pct(before, after):
    total, idle = after[0] - before[0], after[1] - before[1]
    return round(100.0 * (1 - idle / total), 1) if total else None


def loadavg():
    return pathlib.Path("/proc/loadavg").read_text().split()[0]


def daemon_usage(pid):
    """hutchd's resident memory (KiB), open fds and threads."""
    out = {"rss_kib": None, "fds": None, "threads": None}
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                out["rss_kib"] = int(line.split()[1])
            elif line.startswith("Threads:"):
                out["threads"] = int(line.split()[1])
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        pass
    return out


def report(results, json_path=None):
    """Prints the results as JSON and, with a path, writes them there too."""
    text = json.dumps(results, indent=2)
    print(text)
    if json_path:
        pathlib.Path(json_path).write_text(text + "\n")


def daemon_args(ap):
    """--build and --image (default $HUTCH_BUILD_DIR and $HUTCH_TEST_IMAGE) and --json: what a
    bench that starts a hutchd of its own takes."""
    repo = pathlib.Path(__file__).resolve().parents[1]
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(repo / "build")))
    ap.add_argument("--image", default=os.environ.get("HUTCH_TEST_IMAGE"))
    ap.add_argument("--json")


def own_daemon(ap, a, prefix, extra_args=()):
    """A hutchd of the bench's own (not started; idle pause off) and the path of the CLI."""
    if not a.image:
        ap.error("--image (or HUTCH_TEST_IMAGE) must name the built base image")
    d = HutchDaemon(tempfile.mkdtemp(prefix=prefix), build=a.build, image=a.image,
                    extra_args=["--idle-pause", "0", *extra_args])
    return d, str(pathlib.Path(a.build) / "src" / "cli" / "hutch")
