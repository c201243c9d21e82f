#!/usr/bin/env python3
"""Egress proxy benchmarks (issue 6): throughput and added latency through `hutch-egress`
against a direct connection to the same server, with network namespaces and no VM.

The layout is hutchd's: the proxy's listening sockets are created inside a "box" namespace B
(explicit proxy 10.0.2.2:3128, transparent :15001, DNS 10.0.2.2:53) and handed to hutch-egress
over its control socket; hutch-egress runs in a "host" namespace H and connects upstream to a
server in an "internet" namespace I over a veth pair (H 198.51.100.1/24, I 198.51.100.2/24). H
resolves bench.test to 198.51.100.2 through /etc/netns/H/hosts; the policy allows only bench.test.
  through the proxy: a client in B -> 10.0.2.2:3128, CONNECT bench.test:9000 -> server in I;
  direct:            a client in H -> 198.51.100.2:9000.
Each run measures, for both paths (the order alternating between runs): one --bytes download
(MiB/s, and the CPU seconds per GiB that hutch-egress, the client and the server used),
--connects sequential connections (connect_us: connect() to the first byte of a 1-byte echo,
CONNECT included; open_us: to connect() returning, or to the proxy's 200) and --rtts 1-byte echo
round trips on one connection (rtt_us). Latencies pool every run's samples; throughput is one
sample per run. Sanity checks fail the run: every byte requested arrives, B has no route but the
proxy, CONNECT other.test is refused (403), and hutch-egress logs the downloads with their bytes.
Needs root, iproute2 and openssl (a throw-away box CA); the namespaces, veth and /etc/netns/H are
the script's own (named with its pid) and are removed at exit.

Usage: sudo bench/egress_bench.py [--egress build/src/egress/proxy/hutch-egress]
                                  [--bytes 536870912] [--connects 200] [--rtts 2000] [--runs 5]
Prints one JSON object; docs/benchmarks.md records the results with this command.
"""
import argparse, ctypes, json, math, os, platform, resource, shlex, shutil, signal
import socket, statistics, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLONE_NEWNET = 0x40000000
BOX_IP, PROXY_PORT, TRANSPARENT_PORT, DNS_PORT = "10.0.2.2", 3128, 15001, 53
HOST_IP, NET_IP, SERVER_PORT = "198.51.100.1", "198.51.100.2", 9000  # documentation range: an
# address hutch-egress may connect to (it refuses private ones)
NAME, DENIED_NAME = "bench.test", "other.test"
POLICY = {"allow": [{"domain": NAME}]}

# The server in I, on 198.51.100.2:9000. A connection sends one line: "GET N\n" is answered with
# N bytes and end-of-file; "ECHO\n" echoes everything after it until end-of-file. One thread and
# non-blocking sockets: a thread per connection made connection setup noisy (GIL hand-offs).
SERVER = r'''
import selectors, socket, sys
R, W = selectors.EVENT_READ, selectors.EVENT_WRITE
chunk = memoryview(bytes(1 << 20))
sel = selectors.DefaultSelector()
class Conn:
    def __init__(self, sock):
        self.sock, self.head, self.mode, self.left, self.out = sock, b"", None, 0, b""
def close(k):
    sel.unregister(k.sock); k.sock.close()
def flush(k):  # echo output; what the socket does not take waits for writability
    try:
        if k.out:
            k.out = k.out[k.sock.send(k.out):]
    except BlockingIOError:
        pass
    sel.modify(k.sock, R | W if k.out else R, k)
def readable(k):
    d = k.sock.recv(65536)
    if not d:
        return close(k)
    if k.mode is None:
        k.head += d
        if b"\n" not in k.head:
            return close(k) if len(k.head) > 256 else None
        line, d = k.head.split(b"\n", 1)
        if line.startswith(b"GET ") and line[4:].isdigit():
            k.mode, k.left = "get", int(line[4:])
            return sel.modify(k.sock, R | W, k)
        if line != b"ECHO":
            return close(k)
        k.mode = "echo"
    if k.mode == "echo" and d:
        k.out += d; flush(k)
def writable(k):
    if k.mode == "echo":
        return flush(k)
    if k.left > 0:
        k.left -= k.sock.send(chunk[:min(k.left, len(chunk))])
    if k.left == 0:  # all sent: end-of-file, then wait for the client's
        k.sock.shutdown(socket.SHUT_WR); k.mode = "done"; sel.modify(k.sock, R, k)
srv = socket.create_server((sys.argv[1], int(sys.argv[2])), backlog=512)
srv.setblocking(False)
sel.register(srv, R, None)
print("ready", flush=True)
while True:
    for key, ev in sel.select():
        if key.data is None:
            try:
                c, _ = srv.accept()
            except BlockingIOError:
                continue
            c.setblocking(False)
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sel.register(c, R, Conn(c))
            continue
        k = key.data
        try:
            if ev & R and k.mode != "get":
                readable(k)
            if ev & W and k.sock.fileno() >= 0:
                writable(k)
        except BlockingIOError:
            pass
        except OSError as e:
            print(f"server: {e}", file=sys.stderr, flush=True)
            if k.sock.fileno() >= 0:
                close(k)
'''

libc = ctypes.CDLL(None, use_errno=True)


class BenchError(RuntimeError):
    pass


def sh(*args, check=True):
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise BenchError(f"{shlex.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def setns(fd):
    if libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"setns(CLONE_NEWNET): {os.strerror(e)}")


class Namespaces:
    """B (box), H (host, hutch-egress), I (internet), all removed by close()."""

    def __init__(self):
        pid = os.getpid()
        self.b, self.h, self.i = (f"hutch-bench-{k}-{pid}" for k in "bhi")
        self.etc = f"/etc/netns/{self.h}"
        self.made_etc_netns = not os.path.isdir("/etc/netns")
        self.created, self.fds = [], {}
        self.home = os.open("/proc/self/ns/net", os.O_RDONLY)  # the namespace we started in

    def setup(self):
        for ns in (self.b, self.h, self.i):
            sh("ip", "netns", "add", ns); self.created.append(ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            self.fds[ns] = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        pid = os.getpid()
        vh, vi = f"hbh{pid}", f"hbi{pid}"
        sh("ip", "link", "add", vh, "netns", self.h, "type", "veth", "peer", "name", vi,
           "netns", self.i)
        sh("ip", "-n", self.h, "addr", "add", f"{HOST_IP}/24", "dev", vh)
        sh("ip", "-n", self.i, "addr", "add", f"{NET_IP}/24", "dev", vi)
        sh("ip", "-n", self.h, "link", "set", vh, "up")
        sh("ip", "-n", self.i, "link", "set", vi, "up")
        sh("ip", "-n", self.b, "addr", "add", f"{BOX_IP}/32", "dev", "lo")
        # `ip netns exec H` bind-mounts these over /etc/hosts and /etc/resolv.conf. The name
        # server is never asked (bench.test is in hosts; other.test is refused before lookup).
        os.makedirs(self.etc)
        with open(f"{self.etc}/hosts", "w") as f:
            f.write(f"127.0.0.1 localhost\n{NET_IP} {NAME}\n")
        with open(f"{self.etc}/resolv.conf", "w") as f:
            f.write(f"nameserver {NET_IP}\n")

    def socket_in(self, ns, family=socket.AF_INET, kind=socket.SOCK_STREAM):
        """A socket created in namespace ns (it stays there; this thread comes back home)."""
        setns(self.fds[ns])
        try:
            return socket.socket(family, kind)
        finally:
            setns(self.home)

    def close(self):
        for fd in self.fds.values():
            os.close(fd)
        for ns in reversed(self.created):
            r = sh("ip", "netns", "del", ns, check=False)
            if r.returncode != 0:
                print(f"egress_bench: cannot delete netns {ns}: {r.stderr.strip()}",
                      file=sys.stderr)
        shutil.rmtree(self.etc, ignore_errors=True)
        if self.made_etc_netns:
            try:
                os.rmdir("/etc/netns")
            except OSError:
                pass
        os.close(self.home)


def cpu_s(pid):
    """CPU seconds a process used so far, all its threads (utime + stime of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def box_ca(tmp):
    """A throw-away CA for the box op (required; never used: nothing here is intercepted)."""
    key, cert = os.path.join(tmp, "ca.key"), os.path.join(tmp, "ca.pem")
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
       "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=hutch egress bench",
       "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
       "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    with open(cert) as c, open(key) as k:
        return {"cert": c.read(), "key": k.read()}


class Egress:
    """hutch-egress in namespace H with a SOCK_SEQPACKET control socket on its fd 3."""

    def __init__(self, path, ns, tmp, timeout):
        self.control, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log_path = os.path.join(tmp, "hutch-egress.log")
        self.events, self.lock, self.stop = [], threading.Lock(), threading.Event()
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", ns, path, "--control-fd", "3"], stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, pass_fds=(3,),
                preexec_fn=lambda: os.dup2(child.fileno(), 3))
        child.close()
        try:
            self._ready(path, timeout)
        except BaseException:
            self.close()
            raise
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _ready(self, path, timeout):
        self.control.settimeout(timeout)
        try:
            first = self._recv()
        except (socket.timeout, OSError, ValueError) as e:
            raise BenchError(f"hutch-egress sent no ready event ({e}){self.tail()}")
        if first.get("event") != "ready":
            raise BenchError(f"hutch-egress: expected the ready event, got {first}{self.tail()}")
        # `ip netns exec` execs the command: the pid is hutch-egress's own (for /proc/PID/stat).
        exe = os.readlink(f"/proc/{self.proc.pid}/exe")
        if os.path.basename(exe) != os.path.basename(path):
            raise BenchError(f"pid {self.proc.pid} runs {exe}, not {path}")
        self.control.settimeout(0.2)

    def _recv(self):
        data = self.control.recv(1 << 20)
        if not data:
            raise OSError("hutch-egress closed its control socket")
        return json.loads(data)

    def _read(self):  # log events arrive for every connection: keep the socket drained
        while not self.stop.is_set():
            try:
                ev = self._recv()
            except socket.timeout:
                continue
            except (OSError, ValueError) as e:
                with self.lock:
                    self.events.append({"event": "closed", "message": str(e)})
                return
            with self.lock:
                self.events.append(ev)

    def box(self, box_id, policy, ca, fds):
        msg = json.dumps({"op": "box", "id": box_id, "policy": policy, "secrets": [], "ca": ca})
        socket.send_fds(self.control, [msg.encode()], fds)

    def check(self):
        if self.proc.poll() is not None:
            raise BenchError(f"hutch-egress exited with {self.proc.returncode}{self.tail()}")
        with self.lock:
            bad = [e for e in self.events if e.get("event") in ("error", "closed")]
        if bad:
            raise BenchError(f"hutch-egress: {bad[0].get('message')}{self.tail()}")

    def logs(self):
        with self.lock:
            return [e["entry"] for e in self.events if e.get("event") == "log"]

    def cpu_s(self):
        return cpu_s(self.proc.pid)

    def tail(self):
        try:
            with open(self.log_path) as f:
                lines = f.read().splitlines()[-15:]
        except OSError:
            return ""
        return f"\nhutch-egress log ({self.log_path}):\n  " + "\n  ".join(lines) if lines else ""

    def close(self):
        self.stop.set()
        if hasattr(self, "reader"):
            self.reader.join(timeout=2)
        self.control.close()  # hutch-egress exits when its control socket closes
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill(); self.proc.wait()


class Paths:
    """Opens a connection to the server, ready for its one-line request, either way."""

    def __init__(self, nets, timeout):
        self.nets, self.timeout = nets, timeout

    def socket(self, path):
        s = self.nets.socket_in(self.nets.b if path == "proxy" else self.nets.h)
        s.settimeout(self.timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def open(self, path, s, host=NAME):
        """Connects s; through the proxy, CONNECT host and expect 200. Returns s."""
        if path == "direct":
            s.connect((NET_IP, SERVER_PORT))
            return s
        s.connect((BOX_IP, PROXY_PORT))
        status, _ = connect_request(s, host)
        if status != 200:
            raise BenchError(f"CONNECT {host}:{SERVER_PORT} through hutch-egress answered "
                             f"{status}, not 200")
        return s


def connect_request(s, host):
    """Sends CONNECT host:9000; returns (status, head) with head read up to the blank line."""
    target = f"{host}:{SERVER_PORT}"
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(4096)
        if not d:
            break
        head += d
        if len(head) > 16384:
            raise BenchError("CONNECT answer head over 16 KiB")
    parts = head.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise BenchError(f"CONNECT {host}: not an HTTP answer: {head[:200]!r}")
    status = int(parts[1])
    if status == 200 and not head.endswith(b"\r\n\r\n"):  # the server was asked nothing yet
        raise BenchError(f"CONNECT {host}: bytes after the 200 answer's head: {head[:200]!r}")
    return status, head


def throughput(paths, path, nbytes, egress, server_pid):
    s = paths.socket(path)
    with s:
        paths.open(path, s)
        buf = bytearray(4 << 20); view = memoryview(buf); got = 0
        own = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])  # user + system
        cpu0, srv0, me0 = egress.cpu_s(), cpu_s(server_pid), own()
        t0 = time.perf_counter()
        s.sendall(f"GET {nbytes}\n".encode())
        while True:
            n = s.recv_into(view)
            if not n:
                break
            got += n
        dt = time.perf_counter() - t0
        cpu1, srv1, me1 = egress.cpu_s(), cpu_s(server_pid), own()
    if got != nbytes:
        raise BenchError(f"{path}: received {got} bytes, requested {nbytes}")
    gib = nbytes / (1 << 30)
    client = me1 - me0
    return {"mib_s": nbytes / (1 << 20) / dt, "egress_cpu_s_per_gib": (cpu1 - cpu0) / gib,
            "egress_cpu_util": (cpu1 - cpu0) / dt, "client_cpu_s_per_gib": client / gib,
            "server_cpu_s_per_gib": (srv1 - srv0) / gib}


def echo_byte(s, b=b"x"):
    s.sendall(b)
    d = s.recv(1)
    if d != b:
        raise BenchError(f"echo answered {d!r}, not {b!r}")


def connect_times(paths, path, count):
    """[(connect() to the echoed byte, connect() to open: connected / the 200 arrived)]"""
    out = []
    for _ in range(count):
        s = paths.socket(path)
        with s:
            t0 = time.perf_counter()
            paths.open(path, s)
            t1 = time.perf_counter()
            s.sendall(b"ECHO\n")
            echo_byte(s)
            out.append((time.perf_counter() - t0, t1 - t0))
    return out


def round_trips(paths, path, count):
    s = paths.socket(path)
    with s:
        paths.open(path, s)
        s.sendall(b"ECHO\n")
        echo_byte(s)
        out = []
        for _ in range(count):
            t0 = time.perf_counter()
            echo_byte(s)
            out.append(time.perf_counter() - t0)
    return out


def stats(xs, scale=1.0, nd=1):
    xs = sorted(x * scale for x in xs)
    rank = lambda p: xs[max(0, min(len(xs) - 1, math.ceil(p * len(xs)) - 1))]
    return {"n": len(xs), "min": round(xs[0], nd), "median": round(statistics.median(xs), nd),
            "p90": round(rank(0.90), nd), "p99": round(rank(0.99), nd), "max": round(xs[-1], nd)}


def sanity(nets, paths):
    """Fails unless the proxy is the box's only way out and it enforces the policy."""
    checks = {}
    s = nets.socket_in(nets.b)  # no route from B to the internet but through the proxy
    s.settimeout(5)
    with s:
        try:
            s.connect((NET_IP, SERVER_PORT))
        except OSError as e:
            checks["box_direct_connect"] = e.strerror or str(e)
        else:
            raise BenchError(f"B reached {NET_IP}:{SERVER_PORT} directly: the proxy is not the "
                             "only path")
    s = paths.socket("proxy")
    with s:
        s.connect((BOX_IP, PROXY_PORT))
        status, _ = connect_request(s, DENIED_NAME)
    if status != 403:
        raise BenchError(f"CONNECT {DENIED_NAME}:{SERVER_PORT} answered {status}, not 403: "
                         "the policy is not enforced (is hutch-egress in the path?)")
    checks["denied_connect_status"] = status
    return checks


def bench(a):
    egress_path = a.egress if os.path.isabs(a.egress) else os.path.join(ROOT, a.egress)
    if not os.access(egress_path, os.X_OK):
        raise BenchError(f"{egress_path} is not an executable hutch-egress; build it "
                         "(ninja -C build hutch-egress) or pass --egress PATH")
    if os.geteuid() != 0:
        raise BenchError("needs root (network namespaces, veth, /etc/netns)")
    for tool in ("ip", "openssl"):
        if not shutil.which(tool):
            raise BenchError(f"needs {tool} on PATH")
    tmp = tempfile.mkdtemp(prefix="hutch-egress-bench-")
    nets, server, egress, listeners, done = Namespaces(), None, None, [], False
    try:
        nets.setup()
        server = subprocess.Popen(["ip", "netns", "exec", nets.i, sys.executable, "-c", SERVER,
                                   NET_IP, str(SERVER_PORT)],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        # readline() has no timeout: the server either prints or dies (EOF).
        if server.stdout.readline().strip() != "ready":
            raise BenchError(f"the server in {nets.i} did not start (exit {server.poll()})")
        ca = box_ca(tmp)
        egress = Egress(egress_path, nets.h, tmp, a.timeout)
        # The box's sockets, made in B as hutchd makes them in the box's namespace.
        for addr, kind in (((BOX_IP, PROXY_PORT), socket.SOCK_STREAM),
                           (("0.0.0.0", TRANSPARENT_PORT), socket.SOCK_STREAM),
                           ((BOX_IP, DNS_PORT), socket.SOCK_DGRAM)):
            s = nets.socket_in(nets.b, kind=kind); listeners.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(addr)
            if kind == socket.SOCK_STREAM:
                s.listen(512)
        egress.box("bench", POLICY, ca, [s.fileno() for s in listeners])
        for s in listeners:
            s.close()
        listeners = []
        time.sleep(0.2)
        egress.check()
        paths = Paths(nets, a.timeout)
        checks = sanity(nets, paths)
        for path in ("direct", "proxy"):  # warm up: ARP, the resolver, page cache of the code
            connect_times(paths, path, 20); round_trips(paths, path, 100)
            throughput(paths, path, min(a.bytes, 16 << 20), egress, server.pid)
        egress.check()
        logs_before = len(egress.logs())
        res = {p: {"tput": [], "connect": [], "rtt": []} for p in ("direct", "proxy")}
        for run in range(a.runs):
            for path in (("direct", "proxy") if run % 2 == 0 else ("proxy", "direct")):
                r = res[path]
                r["tput"].append(throughput(paths, path, a.bytes, egress, server.pid))
                r["connect"] += connect_times(paths, path, a.connects)
                r["rtt"] += round_trips(paths, path, a.rtts)
            egress.check()
        # Every tunnel is logged when it closes, with its bytes: the downloads must be there.
        want = a.runs * (1 + a.connects + 1)
        deadline = time.monotonic() + 5
        while len(egress.logs()) - logs_before < want and time.monotonic() < deadline:
            time.sleep(0.05)
        logs = egress.logs()[logs_before:]
        big = [e for e in logs if e.get("host") == NAME and e.get("decision") == "allow"
               and e.get("bytes_down") == a.bytes]
        if len(big) < a.runs:
            raise BenchError(f"hutch-egress logged {len(big)} tunnels with {a.bytes} bytes down, "
                             f"expected {a.runs} (log entries seen: {len(logs)} of {want})")
        checks["egress_log_entries"] = len(logs)
        checks["egress_logged_downloads"] = len(big)
        denied = [e for e in egress.logs() if e.get("host") == DENIED_NAME]
        if not denied or denied[0].get("decision") != "deny":
            raise BenchError(f"hutch-egress did not log the denied CONNECT {DENIED_NAME}")
        checks["denied_logged_reason"] = denied[0].get("reason")

        out = {}
        for path, r in res.items():
            t = lambda key, nd: stats([x[key] for x in r["tput"]], 1, nd)
            out[path] = {"throughput_mib_s": t("mib_s", 1),
                         "throughput_runs_mib_s": [round(x["mib_s"], 1) for x in r["tput"]],
                         "client_cpu_s_per_gib": t("client_cpu_s_per_gib", 3),
                         "server_cpu_s_per_gib": t("server_cpu_s_per_gib", 3),
                         "connect_us": stats([c[0] for c in r["connect"]], 1e6),
                         "open_us": stats([c[1] for c in r["connect"]], 1e6),
                         "rtt_us": stats(r["rtt"], 1e6)}
            if path == "proxy":  # hutch-egress's CPU during the downloads
                out[path]["egress_cpu_s_per_gib"] = t("egress_cpu_s_per_gib", 3)
                out[path]["egress_cpu_util"] = t("egress_cpu_util", 2)
        d, p = out["direct"], out["proxy"]
        diff = lambda key, q: round(p[key][q] - d[key][q], 1)
        out["proxy_vs_direct"] = {
            "throughput_ratio_median": round(p["throughput_mib_s"]["median"] /
                                             d["throughput_mib_s"]["median"], 3),
            "connect_added_us_median": diff("connect_us", "median"),
            "connect_added_us_p90": diff("connect_us", "p90"),
            "open_added_us_median": diff("open_us", "median"),
            "rtt_added_us_median": diff("rtt_us", "median"),
            "rtt_added_us_p99": diff("rtt_us", "p99")}
        out["checks"] = checks
        done = True
        return out
    except OSError:
        if egress:
            egress.check()  # a clearer error when hutch-egress died under the clients
        raise
    finally:
        for s in listeners:
            s.close()
        if egress:
            egress.close()
        if server:
            server.kill(); server.wait()
        nets.close()
        if done:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"egress_bench: hutch-egress's log is kept in {tmp}", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--egress", default="build/src/egress/proxy/hutch-egress",
                   help="the hutch-egress binary (relative paths: from the repository root)")
    p.add_argument("--bytes", type=int, default=512 << 20, help="download size per run")
    p.add_argument("--connects", type=int, default=200, help="sequential connections per run")
    p.add_argument("--rtts", type=int, default=2000, help="1-byte round trips per run")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--timeout", type=float, default=60, help="seconds, on every socket")
    a = p.parse_args()
    if a.bytes < 1 or a.connects < 1 or a.rtts < 1 or a.runs < 1:
        p.error("--bytes, --connects, --rtts and --runs must be positive")
    # SIGTERM/SIGHUP unwind like ^C, so the namespaces and /etc/netns files go away.
    def interrupted(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupted)
    t0 = time.time()
    try:
        res = bench(a)
    except (BenchError, OSError, subprocess.SubprocessError) as e:
        sys.exit(f"egress_bench: {e}")
    except KeyboardInterrupt as e:
        sys.exit(f"egress_bench: interrupted ({e or 'SIGINT'}); cleaned up")
    out = {"date": time.strftime("%Y-%m-%d"), "command": shlex.join(sys.argv), "cwd": os.getcwd(),
           "host": {"nproc": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0)),
                    "kernel": platform.release(), "python": platform.python_version()},
           "params": {"egress": a.egress, "bytes": a.bytes, "connects": a.connects,
                      "rtts": a.rtts, "runs": a.runs},
           **res, "wall_s": round(time.time() - t0, 1)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
