#!/usr/bin/env python3
"""What a create and an exec cost in CPU, and who spends it (issues 15.5 and 18.6).

1. The churn loop (`hutch run -d` -> `hutch exec BOX -- echo hi` -> `hutch rm -f BOX`,
   --iterations times, default settings: a warm pool of 1 that grows to 4): per iteration, the CPU
   of the boxes' QEMUs (restore, warm-up, the exec, the shutdown: the cpuacct of hutchd's
   --cgroup-parent), of hutchd itself, of the CLI processes, and of the whole host.
2. --execs sequential `hutch exec BOX -- true` in one running box (no idle pause): per exec, the
   QEMU's CPU (the box's idle CPU subtracted) and hutchd's; and what the idle box costs a second.

Each figure is a lower bound on what the loop or an exec rate needs from the host's cores.
Needs cgroup v1 with a cpuacct hierarchy (this host's). Root. Not a test: nothing fails on a slow
number.

Usage: bench/cpu_cost_bench.py [--iterations 60] [--execs 60] [--build build] [--image DIR]
"""
import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from hutchd_daemon import HutchDaemon  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")


class Measured:
    """A hutchd whose boxes' cgroups are in a parent of their own, so that their CPU adds up."""

    def __init__(self, args, extra):
        self.parent = f"/hutch-cpu-cost-{os.getpid()}-{len(extra)}"
        self.d = HutchDaemon(tempfile.mkdtemp(prefix="hutch-cpu-cost-"), build=args.build,
                             image=args.image, extra_args=extra + ["--cgroup-parent", self.parent])
        self.hutch = str(pathlib.Path(args.build, "src", "cli", "hutch"))

    def __enter__(self):
        self.d.start()
        return self

    def __exit__(self, *exc):
        self.d.stop()
        for hierarchy in pathlib.Path("/sys/fs/cgroup").iterdir():
            try:
                (hierarchy / self.parent.lstrip("/")).rmdir()
            except OSError:
                pass

    def cli(self, *argv):
        return subprocess.run([self.hutch, "--socket", self.d.socket, *argv], check=True,
                              capture_output=True, text=True).stdout

    def qemu_ms(self):
        usage = pathlib.Path(f"/sys/fs/cgroup/cpuacct{self.parent}/cpuacct.usage")
        return int(usage.read_text()) / 1e6

    def hutchd_ms(self):
        # utime and stime; not the children's (the QEMUs are reaped below hutchd).
        fields = pathlib.Path(f"/proc/{self.d.process.pid}/stat").read_text().rsplit(")", 1)[1]
        return sum(int(x) for x in fields.split()[11:13]) * 1000 / HZ


def host_busy_ms():
    values = [int(x) for x in pathlib.Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return (sum(values) - values[3] - values[4]) * 1000 / HZ


def churn(args):
    with Measured(args, ["--pool-size", "1"]) as m:
        m.cli("run", "--name", "warmup", "--rm", "--", "true")
        time.sleep(8)  # the template snapshot is made and the pool has refilled
        cli0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        q0, h0, b0, w0 = m.qemu_ms(), m.hutchd_ms(), host_busy_ms(), time.monotonic()
        times = []
        for _ in range(args.iterations):
            t0 = time.monotonic()
            box = m.cli("run", "-d").strip()
            m.cli("exec", box, "--", "echo", "hi")
            m.cli("rm", "-f", box)
            times.append(time.monotonic() - t0)
        wall = time.monotonic() - w0
        time.sleep(3)  # the last removal and refill, which the loop caused
        q1, h1, b1 = m.qemu_ms(), m.hutchd_ms(), host_busy_ms()
        cli1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    n = args.iterations
    cli_ms = ((cli1.ru_utime + cli1.ru_stime) - (cli0.ru_utime + cli0.ru_stime)) * 1000
    times.sort()
    print(f"churn: {n} iterations in {wall:.1f} s: median {1000 * statistics.median(times):.0f} ms,"
          f" p95 {1000 * times[int(0.95 * (n - 1))]:.0f} ms, mean {1000 * wall / n:.0f} ms")
    print(f"churn: CPU per iteration (ms): QEMUs {(q1 - q0) / n:.0f}, hutchd {(h1 - h0) / n:.0f},"
          f" CLI {cli_ms / n:.0f}, whole host {(b1 - b0) / n:.0f}")


def execs(args):
    with Measured(args, ["--idle-pause", "0"]) as m:
        m.cli("run", "--name", "b")
        for _ in range(5):
            m.cli("exec", "b", "--", "true")  # the exec path translated once
        q0 = m.qemu_ms()
        time.sleep(10)
        idle_per_s = (m.qemu_ms() - q0) / 10
        q0, h0, w0 = m.qemu_ms(), m.hutchd_ms(), time.monotonic()
        times = []
        for _ in range(args.execs):
            t0 = time.monotonic()
            m.cli("exec", "b", "--", "true")
            times.append(time.monotonic() - t0)
        wall = time.monotonic() - w0
        q1, h1 = m.qemu_ms(), m.hutchd_ms()
        m.cli("rm", "-f", "b")
    n = args.execs
    print(f"exec: {n} in {wall:.1f} s ({n / wall:.1f}/s), median {1000 * statistics.median(times):.0f} ms")
    print(f"exec: CPU per exec (ms): QEMU {(q1 - q0 - idle_per_s * wall) / n:.1f} (idle subtracted),"
          f" hutchd {(h1 - h0) / n:.1f}; the idle box {idle_per_s:.1f} ms a second")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--execs", type=int, default=60)
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--image", default=os.environ.get("HUTCH_TEST_IMAGE"))
    args = ap.parse_args()
    if not pathlib.Path("/sys/fs/cgroup/cpuacct").is_dir():
        sys.exit("cpu_cost_bench: needs cgroup v1's cpuacct hierarchy (/sys/fs/cgroup/cpuacct)")
    churn(args)
    execs(args)


if __name__ == "__main__":
    main()
