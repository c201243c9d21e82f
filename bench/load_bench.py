#!/usr/bin/env python3
"""Load (issue 18.6): one hutchd, N running boxes, and in one run:

  1. creates   N concurrent `POST /v1/boxes` (512 MiB each, restored from the base template's
               snapshot, made by an untimed warm-up box first): each one's time, p50/p99;
  2. execs     JSON `POST /v1/boxes/{box}/exec` of `echo TOKEN` (stdout checked) spread round
               robin over the boxes, open loop at --rate per second for --duration seconds, at
               most --inflight at once (each driver thread keeps its unix-socket connection).
               When every slot is busy the next exec waits for one: the achieved rate is then
               what the host sustains. Latency is the request's own (sent -> answered) and
               "from schedule" (from the moment the open loop meant to send it, so the queue
               behind a saturated host counts). hutchd's and the QEMUs' CPU per exec say where
               the time went. --rate takes a list (`100,20`): one exec run per rate; `auto`
               in it is 80 % of what the exec run before it achieved (latency below saturation);
  3. transfers --connections concurrent TCP connections through published ports (an echo
               server in every box, started as a detached process; each connection echoes
               --conn-kib random bytes, checked byte for byte) and, at the same moment, one file
               transfer per box (`PUT` then `GET /v1/boxes/{box}/files`, 1-8 MiB of random
               bytes, checked by sha256); --rounds times;
  4. together  all of it at once, as the issue words it: execs at the last exec run's rate
               while N more boxes are created and a round of connections and files runs; the
               N new boxes are removed afterwards (--no-together skips this);
  5. leaks     hutchd's RSS, open fds and threads after start, after each phase and after every
               box is removed; each published port's open connections once the clients closed;
               hutchd's own warnings and errors in its log.

Every error is printed with its message when it happens and counted. Not a test: nothing fails
on a slow number; the exit code is 0 unless the usage is wrong (2) or hutchd died (1).

Usage: bench/load_bench.py [--boxes 20] [--rate 100[,auto]] [--duration 60] [--inflight 32]
                           [--connections 50] [--conn-kib 1024] [--rounds 3]
                           [--no-together] [--idle-pause 0] [--build build] [--image DIR]
                           [--json FILE] [--keep]
       bench/load_bench.py --boxes 3 --duration 10          # a quick check
Root (hutchd jails every QEMU). hutchd runs with --idle-pause 0 (boxes never pause) and
--pool-size 0 (every create restores on its own), the HutchDaemon defaults otherwise.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import pathlib
import random
import re
import shutil
import socket
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from hutchd_daemon import HutchDaemon  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from benchlib import (Api, Errors, daemon_usage, host_busy_pct, host_cpu, loadavg,  # noqa: E402
                      proc_cpu_s, summary)

# Echo on BASE+1, in threads, with a real server's listen backlog.
SERVER = r'''
import socket, socketserver, sys, threading
class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            d = s.recv(65536)
            if not d: break
            s.sendall(d)
socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer.daemon_threads = True
socketserver.ThreadingTCPServer.request_queue_size = 128
srv = socketserver.ThreadingTCPServer(("127.0.0.1", int(sys.argv[1]) + 1), Echo)
srv.serve_forever()
'''
BOX_PORT = 7001


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Bench:
    def __init__(self, args):
        self.args = args
        self.errors = Errors()
        self.result = {"usage": {}, "phases": {}, "timeline": []}
        self.stopping = threading.Event()
        self.dir = tempfile.mkdtemp(prefix="hutch-load-")
        extra = ["--idle-pause", str(args.idle_pause)]
        self.daemon = HutchDaemon(self.dir, build=args.build, image=args.image, extra_args=extra)
        self.api = None
        self.names = []
        self.ports = {}  # box name -> host port

    # --- helpers

    def alive(self):
        return self.daemon.process is not None and self.daemon.process.poll() is None

    def check_alive(self, where):
        if not self.alive():
            code = self.daemon.process.returncode if self.daemon.process else None
            print(f"hutchd died ({where}): exit {code}; log {self.daemon.log}", file=sys.stderr)
            tail = pathlib.Path(self.daemon.log).read_text(errors="replace").splitlines()[-30:]
            print("\n".join(tail), file=sys.stderr)
            raise SystemExit(1)

    def usage(self, tag):
        u = daemon_usage(self.daemon.pid)
        try:
            u["boxes"] = len(self.api.json("GET", "/v1/boxes")["boxes"])
        except Exception as e:  # noqa: BLE001
            self.errors.add("usage", "box list", f"{type(e).__name__}: {e}")
            u["boxes"] = None
        u["loadavg"] = loadavg()
        self.result["usage"][tag] = u
        print(f"[usage] {tag}: hutchd RSS {u['rss_kib']} KiB, {u['fds']} fds, "
              f"{u['threads']} threads, load {u['loadavg']}", file=sys.stderr, flush=True)

    def sample(self):
        """hutchd's RSS and fds every 5 s, for the JSON: a leak grows along the run."""
        t0 = time.monotonic()
        while not self.stopping.wait(5):
            u = daemon_usage(self.daemon.pid)
            self.result["timeline"].append([round(time.monotonic() - t0), u["rss_kib"],
                                            u["fds"]])

    def qemu_pids(self):
        boxes = self.api.json("GET", "/v1/boxes")["boxes"]
        return [b["pid"] for b in boxes if b.get("pid")]

    # --- phases

    def start(self):
        self.daemon.start()
        self.api = Api(self.daemon.socket)
        threading.Thread(target=self.sample, daemon=True).start()
        # The template snapshot is made here, untimed.
        self.api.json("POST", "/v1/boxes", {"name": "warmup", "memory_mib": self.args.memory})
        self.api.json("DELETE", "/v1/boxes/warmup?force=true")
        self.api.close()
        self.usage("start (no boxes)")

    def creates(self, names, tag="creates", usage=True):
        """Creates every box in names at once; -> the names created."""
        n = len(names)
        barrier = threading.Barrier(n)
        times = {}

        def create(name):
            barrier.wait()
            t0 = time.perf_counter()
            try:
                box = self.api.json("POST", "/v1/boxes",
                                    {"name": name, "memory_mib": self.args.memory})
                if box.get("state") != "running":
                    raise RuntimeError(f"state {box.get('state')}: {box.get('reason')}")
                times[name] = (time.perf_counter() - t0) * 1000
            except Exception as e:  # noqa: BLE001 -- every error is reported
                self.errors.add(tag, name, f"{type(e).__name__}: {e}")

        cpu0 = host_cpu()
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            list(pool.map(create, names))
        wall = time.perf_counter() - t0
        created = [name for name in names if name in times]
        ms = list(times.values())
        r = {"boxes": n, "ok": len(ms), "errors": self.errors.count(tag),
             "wall_s": round(wall, 2), "ms": summary(ms),
             "host_cpu_busy_pct": host_busy_pct(cpu0, host_cpu())}
        self.result["phases"][tag] = r
        print(f"[{tag}] {len(ms)}/{n} in {wall:.1f} s; each p50 {r['ms'].get('p50')} ms, "
              f"p99 {r['ms'].get('p99')} ms", file=sys.stderr, flush=True)
        self.check_alive(f"after {tag}")
        if usage:
            self.usage(f"after {n} creates")
        return created

    def execs(self, rate, tag=None, stop=None):
        """Execs at rate/s for --duration s, or until stop is set; -> the achieved rate."""
        tag = tag or f"execs@{rate:g}/s"
        args = self.args
        names = self.names
        samples = []  # (scheduled, started, ended, inside_ms)
        lock = threading.Lock()
        slots = threading.BoundedSemaphore(args.inflight)

        def one(i, scheduled, started):
            name = names[i % len(names)]
            token = f"x{i}"
            try:
                status, payload = self.api.call(
                    "POST", f"/v1/boxes/{name}/exec",
                    body={"argv": ["echo", token], "timeout_ms": 120000}, timeout=300)
                ended = time.monotonic()
                if status != 200:
                    raise RuntimeError(f"{status} {payload.decode(errors='replace').strip()}")
                res = json.loads(payload)
                if res.get("exit_code") != 0 or res.get("stdout") != token + "\n":
                    raise RuntimeError(f"exit {res.get('exit_code')} signal {res.get('signal')}"
                                       f" stdout {res.get('stdout')!r} stderr "
                                       f"{res.get('stderr')!r} error {res.get('error')}")
                with lock:
                    samples.append((scheduled, started, ended, res.get("duration_ms")))
            except Exception as e:  # noqa: BLE001
                self.errors.add(tag, f"exec {i} in {name}", f"{type(e).__name__}: {e}")
            finally:
                slots.release()

        pids = self.qemu_pids()
        qemu0 = sum(proc_cpu_s(p) for p in pids)
        hutchd0 = proc_cpu_s(self.daemon.pid)
        cpu0 = host_cpu()
        issued = 0
        with concurrent.futures.ThreadPoolExecutor(args.inflight) as pool:
            t0 = time.monotonic()
            end = t0 + args.duration if stop is None else float("inf")
            while stop is None or not stop.is_set():
                scheduled = t0 + issued / rate
                if scheduled >= end:
                    break
                now = time.monotonic()
                if scheduled > now:
                    if stop is None:
                        time.sleep(scheduled - now)
                    elif stop.wait(scheduled - now):
                        break
                slots.acquire()
                if time.monotonic() >= end:
                    slots.release()
                    break
                pool.submit(one, issued, scheduled, time.monotonic())
                issued += 1
            window = time.monotonic() - t0
        drained = time.monotonic() - t0
        cpu1 = host_cpu()
        hutchd_cpu = proc_cpu_s(self.daemon.pid) - hutchd0
        qemu_cpu = sum(proc_cpu_s(p) for p in pids) - qemu0
        ok = len(samples)
        in_window = sum(1 for s in samples if s[2] <= t0 + window)
        # Completions per 10 s slice of the window: is the rate sustained or sagging?
        slices = [0] * max(1, int(window // 10))
        for s in samples:
            k = int((s[2] - t0) // 10)
            if k < len(slices):
                slices[k] += 1
        r = {"target_per_s": rate, "duration_s": round(window, 1), "inflight": args.inflight,
             "boxes": len(names), "issued": issued, "ok": ok,
             "errors": self.errors.count(tag),
             "issue_rate_per_s": round(issued / window, 1),
             "achieved_per_s": round(in_window / window, 1),
             "completed_per_10s": slices,
             "drain_s": round(drained - window, 1),
             "latency_ms": summary([(s[2] - s[1]) * 1000 for s in samples]),
             "from_schedule_ms": summary([(s[2] - s[0]) * 1000 for s in samples]),
             "inside_hutchd_ms": summary([s[3] for s in samples if s[3] is not None]),
             "hutchd_cpu_ms_per_exec": round(hutchd_cpu * 1000 / max(ok, 1), 2),
             "qemu_cpu_ms_per_exec": round(qemu_cpu * 1000 / max(ok, 1), 1),
             "host_cpu_busy_pct": host_busy_pct(cpu0, cpu1), "loadavg_after": loadavg()}
        self.result["phases"][tag] = r
        print(f"[{tag}] {ok} ok of {issued} issued, {r['errors']} errors; achieved "
              f"{r['achieved_per_s']}/s; latency p50 {r['latency_ms'].get('p50')} p99 "
              f"{r['latency_ms'].get('p99')} ms; from schedule p50 "
              f"{r['from_schedule_ms'].get('p50')} p99 {r['from_schedule_ms'].get('p99')} ms; "
              f"hutchd {r['hutchd_cpu_ms_per_exec']} ms and QEMU {r['qemu_cpu_ms_per_exec']} ms "
              f"CPU per exec; host {r['host_cpu_busy_pct']} % busy", file=sys.stderr, flush=True)
        self.check_alive(f"after {tag}")
        if stop is None:
            self.usage(f"after {tag}")
        return r["achieved_per_s"]

    def setup_servers(self):
        """An echo server in every box (a detached process) behind a published port."""
        tag = "setup"
        for name in list(self.names):
            try:
                self.api.json("POST", f"/v1/boxes/{name}/processes",
                              {"argv": ["python3", "-c", SERVER, str(BOX_PORT - 1)]})
                for attempt in range(20):
                    port = free_port()
                    status, payload = self.api.call("POST", f"/v1/boxes/{name}/ports",
                                                    body={"host_port": port,
                                                          "box_port": BOX_PORT})
                    if status == 201:
                        self.ports[name] = port
                        break
                    if status != 409:
                        raise RuntimeError(f"publish: {status} {payload.decode().strip()}")
                else:
                    raise RuntimeError("publish: every free port was taken meanwhile")
            except Exception as e:  # noqa: BLE001
                self.errors.add(tag, name, f"{type(e).__name__}: {e}")
        # The servers answer (Python starts slowly in a TCG guest).
        deadline = time.monotonic() + 120
        for name, port in list(self.ports.items()):
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                        s.sendall(b"x")
                        if s.recv(1) == b"x":
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    self.errors.add(tag, name, f"the echo server behind port {port} never "
                                    "answered")
                    del self.ports[name]
                    break
                time.sleep(0.3)

    def transfers(self, tag="transfers", rounds=None, usage=True):
        args = self.args
        rounds = args.rounds if rounds is None else rounds
        boxes = [n for n in self.names if n in self.ports]
        if not boxes:
            print(f"[{tag}] no box with a server: skipped", file=sys.stderr)
            return
        size = args.conn_kib * 1024
        conn_ms, first_ms, file_up_ms, file_down_ms = [], [], [], []
        lock = threading.Lock()
        checked = {"conn_bytes": 0, "file_bytes": 0}
        rnd = random.Random(18)

        def connection(i, barrier):
            name = boxes[i % len(boxes)]
            payload = os.urandom(size)
            barrier.wait()
            t0 = time.monotonic()
            try:
                s = socket.create_connection(("127.0.0.1", self.ports[name]), timeout=120)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sender_error = []

                def send():
                    try:
                        s.sendall(payload)
                        s.shutdown(socket.SHUT_WR)
                    except OSError as e:
                        sender_error.append(e)

                sender = threading.Thread(target=send)
                sender.start()
                got = bytearray()
                first = None
                while True:
                    d = s.recv(1 << 20)
                    if not d:
                        break
                    if first is None:
                        first = time.monotonic()
                    got += d
                sender.join()
                s.close()
                ended = time.monotonic()
                if sender_error:
                    raise sender_error[0]
                if bytes(got) != payload:
                    raise RuntimeError(f"{len(got)} bytes back of {size}, "
                                       f"{'equal' if got == payload[:len(got)] else 'differing'}"
                                       " prefix")
                with lock:
                    conn_ms.append((ended - t0) * 1000)
                    first_ms.append((first - t0) * 1000)
                    checked["conn_bytes"] += size
            except Exception as e:  # noqa: BLE001
                self.errors.add(tag, f"connection {i} to {name}:{self.ports[name]}",
                                f"{type(e).__name__}: {e}")

        def transfer(i, nbytes, barrier):
            name = boxes[i % len(boxes)]
            data = os.urandom(nbytes)
            digest = hashlib.sha256(data).hexdigest()
            path = f"/tmp/load-{i}.bin"
            barrier.wait()
            try:
                t0 = time.monotonic()
                status, payload = self.api.call("PUT", f"/v1/boxes/{name}/files?path={path}",
                                                raw=data, timeout=600)
                t1 = time.monotonic()
                if status != 200:
                    raise RuntimeError(f"PUT: {status} {payload.decode(errors='replace')}")
                info = json.loads(payload)
                if info.get("size") != nbytes:
                    raise RuntimeError(f"PUT: size {info.get('size')} of {nbytes}")
                status, back = self.api.call("GET", f"/v1/boxes/{name}/files?path={path}",
                                             timeout=600)
                t2 = time.monotonic()
                if status != 200:
                    raise RuntimeError(f"GET: {status} {back[:300].decode(errors='replace')}")
                if hashlib.sha256(back).hexdigest() != digest:
                    raise RuntimeError(f"GET: {len(back)} bytes of {nbytes}, sha256 differs")
                self.api.call("DELETE", f"/v1/boxes/{name}/files?path={path}")
                with lock:
                    file_up_ms.append((t1 - t0) * 1000)
                    file_down_ms.append((t2 - t1) * 1000)
                    checked["file_bytes"] += nbytes
            except Exception as e:  # noqa: BLE001
                self.errors.add(tag, f"file {i} ({nbytes} bytes) in {name}",
                                f"{type(e).__name__}: {e}")

        pids = self.qemu_pids()
        qemu0 = sum(proc_cpu_s(p) for p in pids)
        hutchd0 = proc_cpu_s(self.daemon.pid)
        cpu0 = host_cpu()
        walls, rss = [], []
        n_files = len(boxes)
        for rnd_i in range(rounds):
            sizes = [rnd.randint(1 << 20, 8 << 20) for _ in range(n_files)]
            barrier = threading.Barrier(args.connections + n_files)
            threads = [threading.Thread(target=connection, args=(i, barrier))
                       for i in range(args.connections)]
            threads += [threading.Thread(target=transfer, args=(i, sizes[i], barrier))
                        for i in range(n_files)]
            t0 = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            walls.append(round(time.monotonic() - t0, 2))
            rss.append(daemon_usage(self.daemon.pid)["rss_kib"])
            print(f"[{tag}] round {rnd_i + 1}: {walls[-1]} s", file=sys.stderr, flush=True)
        cpu1 = host_cpu()
        # Each published port's open connections, once every client closed its own.
        time.sleep(2)
        still_open = {}
        for name in boxes:
            try:
                for p in self.api.json("GET", f"/v1/boxes/{name}/ports")["ports"]:
                    if p.get("connections"):
                        still_open[name] = p["connections"]
            except Exception as e:  # noqa: BLE001
                self.errors.add(tag, f"port list of {name}", f"{type(e).__name__}: {e}")
        r = {"rounds": rounds, "connections_per_round": args.connections,
             "conn_kib": args.conn_kib, "files_per_round": n_files, "boxes": len(boxes),
             "round_wall_s": walls, "hutchd_rss_kib_after_round": rss,
             "errors": self.errors.count(tag),
             "connections_ok": len(conn_ms), "files_ok": len(file_up_ms),
             "conn_echo_ms": summary(conn_ms), "conn_first_byte_ms": summary(first_ms),
             "file_put_ms": summary(file_up_ms), "file_get_ms": summary(file_down_ms),
             "bytes_checked": checked,
             "hutchd_cpu_s": round(proc_cpu_s(self.daemon.pid) - hutchd0, 2),
             "qemu_cpu_s": round(sum(proc_cpu_s(p) for p in pids) - qemu0, 1),
             "host_cpu_busy_pct": host_busy_pct(cpu0, cpu1),
             "port_connections_left_open": still_open}
        self.result["phases"][tag] = r
        print(f"[{tag}] {len(conn_ms)}/{args.connections * rounds} connections, "
              f"{len(file_up_ms)}/{n_files * rounds} files, {r['errors']} errors; echo p50 "
              f"{r['conn_echo_ms'].get('p50')} p99 {r['conn_echo_ms'].get('p99')} ms; PUT p50 "
              f"{r['file_put_ms'].get('p50')} p99 {r['file_put_ms'].get('p99')} ms; GET p50 "
              f"{r['file_get_ms'].get('p50')} p99 {r['file_get_ms'].get('p99')} ms; left open "
              f"{still_open}", file=sys.stderr, flush=True)
        self.check_alive(f"after {tag}")
        if usage:
            self.usage(f"after {tag}")

    def all_at_once(self, rate):
        """Execs at rate/s over the running boxes while N more boxes are created and a round of
        connections and file transfers runs; the new boxes are removed afterwards."""
        n = self.args.boxes
        stop = threading.Event()
        execs = threading.Thread(target=self.execs,
                                 args=(rate, f"together: execs@{rate:g}/s", stop))
        execs.start()
        time.sleep(2)  # the exec load is on before the rest starts
        extra = [f"extra{i:02d}" for i in range(n)]
        creates = threading.Thread(target=self.creates,
                                   args=(extra, f"together: {n} more creates", False))
        creates.start()
        self.transfers("together: transfers", rounds=1, usage=False)
        creates.join()
        stop.set()
        execs.join()
        self.usage(f"after together ({2 * n} boxes)")
        for name in extra:
            status, payload = self.api.call("DELETE", f"/v1/boxes/{name}?force=true")
            if status >= 300 and status != 404:
                self.errors.add("together: remove", name,
                                f"{status} {payload.decode(errors='replace').strip()}")
        self.check_alive("after the extra boxes were removed")
        time.sleep(2)
        self.usage(f"{n} extra boxes removed")

    def remove_all(self):
        tag = "remove"
        for name in self.names:
            try:
                self.api.json("DELETE", f"/v1/boxes/{name}?force=true")
            except Exception as e:  # noqa: BLE001
                self.errors.add(tag, name, f"{type(e).__name__}: {e}")
        self.names = []
        self.api.close()
        time.sleep(5)
        self.check_alive("after removing the boxes")
        self.usage("every box removed")

    def log_counts(self):
        """hutchd's own warnings and errors in its log."""
        counts, examples = {}, {}
        for line in pathlib.Path(self.daemon.log).read_text(errors="replace").splitlines():
            # spdlog: [2026-12-03 18:40:01.259] [hutchd] [warning] ...
            m = re.match(r"\[[^]]*\] \[[^]]*\] \[(warning|error|critical)\]", line)
            if m:
                level = m.group(1)
                counts[level] = counts.get(level, 0) + 1
                examples.setdefault(level, []).append(line[:300])
        self.result["hutchd_log"] = {"counts": counts,
                                     "first": {k: v[:20] for k, v in examples.items()}}
        for level, lines in examples.items():
            print(f"[hutchd log] {len(lines)} {level} lines; first ones:", file=sys.stderr)
            for line in lines[:20]:
                print(f"  {line}", file=sys.stderr)

    def run(self):
        try:
            self.start()
            names = [f"load{i:02d}" for i in range(self.args.boxes)]
            self.names = self.creates(names)
            if self.names:
                achieved, rate = None, None
                for rate in self.args.rate:
                    if rate == "auto":  # 80 % of what the previous exec phase achieved
                        if not achieved:
                            continue
                        rate = round(0.8 * achieved, 1)
                    achieved = self.execs(rate)
                self.setup_servers()
                self.transfers()
                if self.args.together and rate:
                    self.all_at_once(rate)
            self.remove_all()
            self.log_counts()
        finally:
            self.stopping.set()
            if self.alive():
                self.daemon.stop()
            if self.args.keep:
                print(f"kept: {self.dir} (hutchd log {self.daemon.log})", file=sys.stderr)
            else:
                shutil.rmtree(self.dir, ignore_errors=True)
        self.result["errors"] = self.errors.by_phase
        self.result["error_count"] = self.errors.count()
        return self.result


def print_table(result):
    print(f"\nload: {result['args']['boxes']} boxes of {result['args']['memory']} MiB, "
          f"{result['error_count']} errors in all")
    for tag, r in result["phases"].items():
        print(f"\n{tag}")
        for key, value in r.items():
            print(f"  {key:28} {value}")
    print("\nhutchd (RSS KiB, fds, threads)")
    for tag, u in result["usage"].items():
        print(f"  {tag:28} {u['rss_kib']:>8} {u['fds']:>6} {u['threads']:>4}   "
              f"boxes {u['boxes']}, load {u['loadavg']}")
    for phase, errors in result["errors"].items():
        print(f"\nerrors in {phase}: {len(errors)}")
        for e in errors:
            print(f"  {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--boxes", type=int, default=20)
    ap.add_argument("--memory", type=int, default=512, help="MiB per box")
    ap.add_argument("--rate", default="100",
                    help="execs per second to offer; a comma list runs one exec phase each; "
                    "`auto`: 80 %% of the rate the previous exec phase achieved")
    ap.add_argument("--duration", type=float, default=60, help="seconds per exec phase")
    ap.add_argument("--inflight", type=int, default=32, help="execs at once, at most")
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--conn-kib", type=int, default=1024, help="bytes echoed per connection")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of connections and files")
    ap.add_argument("--no-together", dest="together", action="store_false",
                    help="skip the last phase (execs, creates, connections and files at once)")
    ap.add_argument("--idle-pause", type=int, default=0, help="hutchd --idle-pause (s)")
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--image", default=os.environ.get("HUTCH_TEST_IMAGE"))
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true", help="keep the state dir and hutchd's log")
    args = ap.parse_args()
    try:
        args.rate = [r if r == "auto" else float(r) for r in args.rate.split(",")]
    except ValueError:
        ap.error(f"--rate: not a list of numbers and `auto`: {args.rate}")
    if args.boxes < 1 or args.inflight < 1 or args.connections < 0 or args.rounds < 0 \
            or any(r != "auto" and r <= 0 for r in args.rate):
        ap.error("--boxes, --inflight and every --rate must be positive")
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    result = Bench(args).run()
    result["args"] = vars(args)
    result["started"] = started
    result["ended"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print_table(result)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
