#!/usr/bin/env python3
"""SSH into a box against hutch's own paths (issue 35.6): `ssh BOX.hutch true` against
`hutch exec BOX -- true` (round trips), sftp and scp against `hutch cp` (throughput, one file
each way), and what idle SSH connections cost hutchd (CPU time over a quiet period, resident
memory per connection). One hutchd, one box; the SSH clients are Debian's OpenSSH with the block
`hutch ssh-config` prints. Prints JSON.

Usage: bench/ssh_bench.py [--iterations 10] [--mib 64] [--idle 10] [--connections 20]
                          [--build build] [--image DIR]
Root. sftp and scp need openssh-sftp-server in the image (images/base/packages). Not a test:
nothing fails on a slow number.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from hutchd_daemon import HutchDaemon  # noqa: E402


def cpu_seconds(pid):
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--mib", type=int, default=64, help="size of the file moved each way")
    ap.add_argument("--idle", type=float, default=10, help="seconds of idle connections")
    ap.add_argument("--connections", type=int, default=20, help="idle connections held open")
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--image", default=os.environ.get("HUTCH_TEST_IMAGE"))
    args = ap.parse_args()
    hutch = str(pathlib.Path(args.build, "src", "cli", "hutch"))
    work = pathlib.Path(tempfile.mkdtemp(prefix="hutch-ssh-bench-"))
    d = HutchDaemon(work / "d", build=args.build, image=args.image, extra_args=["--pool-size", "0"])
    d.start()
    cli = [hutch, "--socket", d.socket]
    config = work / "ssh_config"

    def run(argv, **kw):
        r = subprocess.run(argv, capture_output=True, **kw)
        if r.returncode != 0:
            raise RuntimeError(f"{argv[0]}: {r.stderr.decode(errors='replace').strip()}")
        return r

    def timed(argv):
        t = time.monotonic()
        run(argv)
        return (time.monotonic() - t) * 1000

    result = {}
    try:
        run(cli + ["run", "--name", "bench"])
        config.write_text(run(cli + ["ssh-config"]).stdout.decode())
        ssh = ["ssh", "-F", str(config)]
        timed(ssh + ["bench.hutch", "true"])  # warm
        rt = {"ssh": [], "exec": []}
        for _ in range(args.iterations):
            rt["ssh"].append(timed(ssh + ["bench.hutch", "true"]))
            rt["exec"].append(timed(cli + ["exec", "bench", "--", "true"]))
        result["round_trip_ms"] = {k: {"median": statistics.median(v), "max": max(v)}
                                   for k, v in rt.items()}

        data = work / "data"
        with open(data, "wb") as f:
            f.write(os.urandom(args.mib << 20))
        has_sftp = subprocess.run(cli + ["exec", "bench", "--", "test", "-x",
                                         "/usr/lib/openssh/sftp-server"]).returncode == 0
        # Each method its own file in the box: hutch cp writes as root, ssh as the box's user.
        moves = {
            "hutch cp": (cli + ["cp", str(data), "bench:/tmp/data-cp"],
                         cli + ["cp", "bench:/tmp/data-cp", str(work / "back")]),
        }
        if has_sftp:
            moves["scp"] = (["scp", "-F", str(config), str(data), "bench.hutch:/tmp/data-scp"],
                            ["scp", "-F", str(config), "bench.hutch:/tmp/data-scp",
                             str(work / "back")])
            batch_up, batch_down = work / "up.batch", work / "down.batch"
            batch_up.write_text(f"put {data} /tmp/data-sftp\n")
            batch_down.write_text(f"get /tmp/data-sftp {work / 'back'}\n")
            moves["sftp"] = (["sftp", "-F", str(config), "-b", str(batch_up), "bench.hutch"],
                             ["sftp", "-F", str(config), "-b", str(batch_down), "bench.hutch"])
        moves["ssh cat"] = (
            ["sh", "-c", f"{' '.join(ssh)} bench.hutch 'cat > /tmp/data-ssh' < {data}"],
            ["sh", "-c", f"{' '.join(ssh)} bench.hutch 'cat /tmp/data-ssh' > {work / 'back'}"])
        tp = {}
        for name, (up, down) in moves.items():
            up_ms = timed(up)
            down_ms = timed(down)
            tp[name] = {"up_mib_s": round(args.mib / (up_ms / 1000), 1),
                        "down_mib_s": round(args.mib / (down_ms / 1000), 1)}
        result["throughput"] = tp

        # Idle connections: hutchd's CPU while they stay open, and its memory per connection.
        rss0 = rss_kib(d.pid)
        held = [subprocess.Popen(ssh + ["-N", "bench.hutch"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(args.connections)]
        time.sleep(3)  # all connected
        cpu0 = cpu_seconds(d.pid)
        time.sleep(args.idle)
        cpu1 = cpu_seconds(d.pid)
        rss1 = rss_kib(d.pid)
        for p in held:
            p.terminate()
            p.wait()
        result["idle"] = {"connections": args.connections, "seconds": args.idle,
                          "hutchd_cpu_ms": round((cpu1 - cpu0) * 1000),
                          "hutchd_rss_kib_per_connection": round((rss1 - rss0) / args.connections)}
    finally:
        d.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
