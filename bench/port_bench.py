#!/usr/bin/env python3
"""Published-port benchmarks: throughput and latency through `hutch port` (host -> hutchd ->
agent channel -> TCP in the box) against a direct loopback connection to the same server on the
host; optionally create -> `docker run --rm IMAGE true` done, cold boot vs the docker template's
snapshot. Starts its own hutchd on a temp socket and state dir, always with --pool-size 0: the
warm pool (on by default) would hand the "snapshot" mode VMs restored ahead of time and refill
in the background while the other modes measure, so every create here pays its own restore.

Usage: bench/port_bench.py --image BASE_DIR [--docker-image DOCKER_DIR] [--build build]
                           [--mib 64] [--pings 500] [--connects 100] [--runs 3]
Prints one JSON object; docs/benchmarks.md records the results with this command.
"""
import argparse, json, os, socket, statistics, subprocess, sys, tempfile, threading, time

# The same server runs in the box and on the host: 7001 echo, 7002 sends N bytes (an 8-byte
# size first), 7003 reads to end-of-file and answers the byte count.
SERVER = r'''
import socket, socketserver, struct, sys
base = int(sys.argv[1])
class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            d = s.recv(65536)
            if not d: break
            s.sendall(d)
class Source(socketserver.BaseRequestHandler):
    def handle(self):
        n = struct.unpack("!Q", self.request.recv(8, socket.MSG_WAITALL))[0]
        chunk = b"\0" * 262144
        while n > 0:
            k = min(n, len(chunk)); self.request.sendall(chunk[:k]); n -= k
        self.request.shutdown(socket.SHUT_WR)
class Sink(socketserver.BaseRequestHandler):
    def handle(self):
        total = 0
        while True:
            d = self.request.recv(262144)
            if not d: break
            total += len(d)
        self.request.sendall(struct.pack("!Q", total))
socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer.daemon_threads = True
socketserver.ThreadingTCPServer.request_queue_size = 128
import threading
for off, h in ((1, Echo), (2, Source), (3, Sink)):
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", base + off), h)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
threading.Event().wait()
'''


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def connect(port, retries=200):
    for _ in range(retries):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=60)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return s
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"cannot connect to port {port}")


def wait_echo(port):
    for _ in range(300):
        try:
            s = connect(port)
            s.sendall(b"x")
            if s.recv(1) == b"x":
                s.close(); return
            s.close()
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"echo on {port} never answered")


def measure(ports, mib, pings, connects):
    echo, source, sink = ports
    size = mib << 20
    # Download: box -> host.
    s = connect(source); t0 = time.monotonic()
    s.sendall(size.to_bytes(8, "big")); got = 0
    while True:
        d = s.recv(1 << 20)
        if not d: break
        got += len(d)
    down = mib / (time.monotonic() - t0); s.close()
    assert got == size, (got, size)
    # Upload: host -> box.
    s = connect(sink); buf = b"\0" * (1 << 20); t0 = time.monotonic()
    for _ in range(mib): s.sendall(buf)
    s.shutdown(socket.SHUT_WR)
    total = int.from_bytes(s.recv(8, socket.MSG_WAITALL), "big")
    up = mib / (time.monotonic() - t0); s.close()
    assert total == size, (total, size)
    # Latency: 1-byte ping-pong on one connection.
    s = connect(echo); rtts = []
    for _ in range(pings):
        t0 = time.monotonic(); s.sendall(b"p"); s.recv(1); rtts.append(time.monotonic() - t0)
    s.close()
    # Connection setup: connect + first echoed byte.
    setups = []
    for _ in range(connects):
        t0 = time.monotonic(); s = connect(echo); s.sendall(b"c"); s.recv(1)
        setups.append(time.monotonic() - t0); s.close()
    rtts.sort(); setups.sort()
    return {"download_mib_s": round(down, 1), "upload_mib_s": round(up, 1),
            "rtt_ms_median": round(statistics.median(rtts) * 1000, 3),
            "rtt_ms_p90": round(rtts[int(len(rtts) * 0.9)] * 1000, 3),
            "connect_ms_median": round(statistics.median(setups) * 1000, 3),
            "connect_ms_p90": round(setups[int(len(setups) * 0.9)] * 1000, 3)}


class Hutchd:
    def __init__(self, build, templates, extra=()):
        self.hutch = os.path.abspath(os.path.join(build, "src/cli/hutch"))
        hutchd = os.path.abspath(os.path.join(build, "src/daemon/hutchd"))
        self.tmp = tempfile.mkdtemp(prefix="hutch-port-bench-")
        state = os.path.join(self.tmp, "state")
        os.makedirs(os.path.join(state, "templates"))
        for name, path in templates.items():
            os.symlink(os.path.abspath(path), os.path.join(state, "templates", name))
        self.sock = os.path.join(self.tmp, "hutchd.sock")
        log = open(os.path.join(self.tmp, "hutchd.log"), "w")
        self.proc = subprocess.Popen([hutchd, "--socket", self.sock, "--state-dir", state,
                                      "--log-level", "debug", "--pool-size", "0", *extra],
                                     stdout=log, stderr=log)
        for _ in range(100):
            if self.run("ls", check=False).returncode == 0: break
            time.sleep(0.1)

    def run(self, *args, check=True, **kw):
        return subprocess.run([self.hutch, "--socket", self.sock, *args], check=check,
                              capture_output=True, **kw)

    def close(self):
        for b in json.loads(self.run("--json", "ls").stdout):
            self.run("rm", "-f", b["id"], check=False)
        self.proc.terminate(); self.proc.wait()
        print(f"hutchd log: {self.tmp}/hutchd.log", file=sys.stderr)


def port_bench(a):
    d = Hutchd(a.build, {"base": a.image})
    host_server = None
    try:
        base = [free_port() for _ in range(3)]
        d.run("run", "--name", "pb", *sum((["-p", f"{p}:{7001 + i}"] for i, p in enumerate(base)), []))
        d.run("exec", "-d", "pb", "--", "python3", "-c", SERVER, "7000")
        wait_echo(base[0])
        host_base = 17000 + (os.getpid() % 1000) * 4
        host_server = subprocess.Popen([sys.executable, "-c", SERVER, str(host_base)])
        wait_echo(host_base + 1)
        direct = measure([host_base + 1, host_base + 2, host_base + 3], a.mib, a.pings, a.connects)
        forwarded = measure(base, a.mib, a.pings, a.connects)
        # For scale: the same bytes box -> host through exec (stdout of cat).
        d.run("exec", "pb", "--", "sh", "-c", f"head -c {a.mib << 20} /dev/zero > /tmp/blob")
        t0 = time.monotonic()
        d.run("exec", "pb", "--", "cat", "/tmp/blob")
        exec_down = a.mib / (time.monotonic() - t0)
        # 50 parallel connections, 1 MiB each way.
        payload = os.urandom(1 << 20); ok = []
        def one():
            s = connect(base[0]); r = bytearray()
            t = threading.Thread(target=lambda: (s.sendall(payload), s.shutdown(socket.SHUT_WR)))
            t.start()
            while True:
                x = s.recv(1 << 20)
                if not x: break
                r += x
            t.join(); s.close(); ok.append(bytes(r) == payload)
        t0 = time.monotonic()
        threads = [threading.Thread(target=one) for _ in range(50)]
        for t in threads: t.start()
        for t in threads: t.join()
        parallel = time.monotonic() - t0
        return {"direct_loopback": direct, "published_port": forwarded,
                "exec_stdout_mib_s": round(exec_down, 1),
                "parallel_50x1mib_echo_s": round(parallel, 2), "parallel_ok": sum(ok)}
    finally:
        if host_server: host_server.kill()
        d.close()


def docker_bench(a):
    """create -> `docker run --rm hutch-busybox true` done: cold boot vs template snapshot."""
    results = {}
    image_tar = os.path.join(tempfile.mkdtemp(prefix="hutch-bb-"), "busybox-image.tar")
    subprocess.run(["sh", "-c", MAKE_IMAGE, "sh", os.path.dirname(image_tar)], check=True)
    # A template with the image loaded, frozen from a docker-template box.
    prep = Hutchd(a.build, {"base": a.image, "docker": a.docker_image})
    try:
        prep.run("run", "--name", "prep", "--template", "docker")
        wait_docker(prep, "prep")
        with open(image_tar, "rb") as f:
            prep.run("image", "load", "prep", "-", stdin=f)
        prep.run("stop", "prep")
        prep.run("template", "create", "--from", "prep", "dockerbb")
        # Its snapshot is taken once dockerd answers: the docker image's /etc/hutch/ready
        # (`docker info`) is on the frozen disk and runs in the template VM.
        tmpl = os.path.realpath(os.path.join(prep.tmp, "state", "templates", "dockerbb"))
    finally:
        prep.close()
    for mode, extra in (("cold", ["--no-snapshots"]), ("snapshot", [])):
        d = Hutchd(a.build, {"base": a.image, "dockerbb": tmpl}, extra)
        try:
            if mode == "snapshot":  # the first box makes the template snapshot
                d.run("run", "--name", "warm", "--template", "dockerbb")
                d.run("rm", "-f", "warm")
            times = []
            for i in range(a.runs):
                t0 = time.monotonic()
                d.run("run", "--name", f"{mode}{i}", "--template", "dockerbb")
                while d.run("exec", f"{mode}{i}", "--", "docker", "run", "--rm", "hutch-busybox",
                            "true", check=False).returncode != 0:
                    time.sleep(0.2)
                times.append(time.monotonic() - t0)
                d.run("rm", "-f", f"{mode}{i}")
            results[mode] = {"median_s": round(statistics.median(times), 2),
                             "runs_s": [round(t, 2) for t in times]}
            if mode == "snapshot":  # for scale: the docker run alone, in a running box
                d.run("run", "--name", "alone", "--template", "dockerbb")
                wait_docker(d, "alone")
                alone = []
                for _ in range(a.runs):
                    t0 = time.monotonic()
                    d.run("exec", "alone", "--", "docker", "run", "--rm", "hutch-busybox", "true")
                    alone.append(time.monotonic() - t0)
                results["docker_run_alone"] = {"median_s": round(statistics.median(alone), 2)}
        finally:
            d.close()
    return results


def wait_docker(d, box):
    for _ in range(600):
        if d.run("exec", box, "--", "docker", "info", check=False).returncode == 0: return
        time.sleep(0.5)
    raise RuntimeError("dockerd never answered")


MAKE_IMAGE = r'''
set -e
cd "$1"
rm -rf root img && mkdir -p root/bin root/etc root/tmp img
cp /bin/busybox root/bin/busybox
for a in sh true; do ln -s busybox root/bin/$a; done
tar -C root --numeric-owner --owner=0 --group=0 -cf layer.tar .
L=$(sha256sum layer.tar | cut -d' ' -f1)
printf '{"architecture":"amd64","os":"linux","config":{"Cmd":["sh"],"Env":["PATH=/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$L" > config.json
C=$(sha256sum config.json | cut -d' ' -f1)
mkdir img/$L && mv layer.tar img/$L/layer.tar && mv config.json img/$C.json
printf '[{"Config":"%s.json","RepoTags":["hutch-busybox:latest"],"Layers":["%s/layer.tar"]}]' "$C" "$L" > img/manifest.json
tar -C img -cf busybox-image.tar .
'''


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--image", required=True, help="built base image directory")
    p.add_argument("--docker-image", help="built docker image directory (enables the docker runs)")
    p.add_argument("--build", default="build")
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--pings", type=int, default=500)
    p.add_argument("--connects", type=int, default=100)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--skip-ports", action="store_true")
    a = p.parse_args()
    out = {"date": time.strftime("%Y-%m-%d")}
    if not a.skip_ports:
        out["ports"] = port_bench(a)
    if a.docker_image:
        out["docker_run"] = docker_bench(a)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
