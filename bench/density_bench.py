#!/usr/bin/env python3
"""Density (issue 15.6): N boxes of 512 MiB from one template on this host, each running a small
server, created in one go; then every box answers an exec (paused ones are woken by it), and
M stop -> start cycles (suspend and resume) each check that the box's server process survived.

Two hutchd configurations, one after the other in the same run (100 busy-ish TCG boxes of both
at once would measure the CPU fight, not hutch):

  paused + memory back   --idle-pause S (default 30 s) and the virtio balloon (hutchd's default)
  always on              --idle-pause 0 --no-memory-return

For each: the create wall time, host memory used (MemTotal - MemAvailable, less what was used
before the daemon started), the QEMUs' RSS (sum, mean), host CPU busy while the boxes sit idle
(over --idle-window seconds after --settle seconds), how many boxes were paused, the exec answer
time (median, p99) over every box, the stop and start times (median, p99) and how many servers
survived their cycle.

Usage: bench/density_bench.py [--boxes 100] [--cycles 100] [--parallel 4] [--settle 90]
                              [--idle-window 30] [--idle-pause 30] [--build build]
                              [--image DIR] [--json FILE] [--only paused|always]
Root. Not a test: nothing fails on a slow number; a box whose server did not survive is counted
and printed.
"""
import argparse
import concurrent.futures
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

# A small server that sleeps in select() between requests, its pid in /tmp/srv.pid.
SERVER = "echo $$ > /tmp/srv.pid; exec python3 -m http.server 8000 --bind 127.0.0.1"


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def mem_used_kib():
    info = {}
    for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
        key, value = line.split(":", 1)
        info[key] = int(value.split()[0])
    return info["MemTotal"] - info["MemAvailable"]


def cpu_times():
    fields = pathlib.Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in fields]
    idle = values[3] + values[4]
    return sum(values), idle


def rss_kib(pid):
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Cli:
    def __init__(self, hutch, socket):
        self.base = [hutch, "--socket", socket]

    def run(self, *args, check=True):
        t0 = time.perf_counter()
        r = subprocess.run(self.base + list(args), capture_output=True, text=True)
        ms = (time.perf_counter() - t0) * 1000
        if check and r.returncode != 0:
            raise RuntimeError(f"hutch {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
        return r, ms


def phase(tag, extra, args, hutch):
    d = HutchDaemon(tempfile.mkdtemp(prefix="hutch-density-"), build=args.build,
                    image=args.image, extra_args=extra)
    base_mem = mem_used_kib()
    d.start()
    cli = Cli(hutch, d.socket)
    result = {"config": tag, "hutchd_args": extra}
    try:
        # The template snapshot is made before timing starts.
        cli.run("run", "--name", "warmup", "--rm", "--", "true")
        names = [f"d{i:03d}" for i in range(args.boxes)]

        # A create that fails is counted and its error kept; the run goes on with the others.
        def create(name):
            r, run_ms = cli.run("run", "-d", "--name", name, "--memory", "512", check=False)
            if r.returncode != 0:
                return name, None, r.stderr.strip()
            cli.run("exec", "-d", name, "--", "sh", "-c", SERVER)
            return name, run_ms, None

        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
            created = list(pool.map(create, names))
        result["create_all_s"] = time.perf_counter() - t0
        run_ms = [ms for _, ms, _ in created if ms is not None]
        result["create_failed"] = [[n, e] for n, ms, e in created if ms is None]
        for n, e in result["create_failed"]:
            print(f"[{tag}] create {n} failed: {e}", file=sys.stderr)
        names = [n for n, ms, _ in created if ms is not None]
        result["run_ms_median"] = statistics.median(run_ms)
        result["run_ms_p99"] = pct(run_ms, 99)
        print(f"[{tag}] {args.boxes} boxes created in {result['create_all_s']:.1f} s",
              file=sys.stderr)

        time.sleep(args.settle)
        total0, idle0 = cpu_times()
        time.sleep(args.idle_window)
        total1, idle1 = cpu_times()
        result["idle_host_cpu_busy_pct"] = 100.0 * (1 - (idle1 - idle0) / (total1 - total0))
        boxes = json.loads(cli.run("--json", "ls")[0].stdout)
        states = {}
        for b in boxes:
            states[b["state"]] = states.get(b["state"], 0) + 1
        result["states_when_idle"] = states
        # Every QEMU of this daemon's boxes (ls shows no pid for a paused box).
        boxes_dir = str(pathlib.Path(d.dir) / "state" / "boxes") + "/"
        pids = []
        for proc in pathlib.Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    if boxes_dir.encode() in (proc / "cmdline").read_bytes():
                        pids.append(int(proc.name))
                except OSError:
                    pass
        rss = [rss_kib(p) for p in pids]
        result["qemu_rss_mib_sum"] = sum(rss) / 1024
        result["qemu_rss_mib_mean"] = statistics.mean(rss) / 1024 if rss else 0
        result["host_mem_used_mib"] = (mem_used_kib() - base_mem) / 1024
        print(f"[{tag}] idle: {result['idle_host_cpu_busy_pct']:.1f} % CPU busy, "
              f"{result['host_mem_used_mib']:.0f} MiB used, states {states}", file=sys.stderr)

        exec_ms = []
        for name in names:
            r, ms = cli.run("exec", name, "--", "true", check=False)
            if r.returncode == 0:
                exec_ms.append(ms)
        result["exec_ok"] = len(exec_ms)
        result["exec_ms_median"] = statistics.median(exec_ms) if exec_ms else None
        result["exec_ms_p99"] = pct(exec_ms, 99) if exec_ms else None

        stop_ms, start_ms, survived, lost = [], [], 0, []
        for i in range(args.cycles):
            name = names[i % len(names)]
            pid = cli.run("exec", name, "--", "cat", "/tmp/srv.pid")[0].stdout.strip()
            stop_ms.append(cli.run("stop", name)[1])
            start_ms.append(cli.run("start", name)[1])
            alive = cli.run("exec", name, "--", "sh", "-c", f"kill -0 {pid}", check=False)[0]
            if alive.returncode == 0:
                survived += 1
            else:
                lost.append(name)
        result.update(stop_ms_median=statistics.median(stop_ms), stop_ms_p99=pct(stop_ms, 99),
                      start_ms_median=statistics.median(start_ms),
                      start_ms_p99=pct(start_ms, 99), cycles=args.cycles,
                      servers_survived=survived, servers_lost=lost)
        print(f"[{tag}] cycles: {survived}/{args.cycles} servers survived", file=sys.stderr)
        for name in names:
            cli.run("rm", "-f", name, check=False)
    finally:
        d.stop()
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--boxes", type=int, default=100)
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--settle", type=int, default=90)
    ap.add_argument("--idle-window", type=int, default=30)
    ap.add_argument("--idle-pause", type=int, default=30)
    ap.add_argument("--only", choices=["paused", "always"])
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--image", default=os.environ.get("HUTCH_TEST_IMAGE"))
    ap.add_argument("--json")
    args = ap.parse_args()
    hutch = str(pathlib.Path(args.build, "src", "cli", "hutch"))
    configs = [("paused + memory back", ["--idle-pause", str(args.idle_pause)]),
               ("always on", ["--idle-pause", "0", "--no-memory-return"])]
    if args.only:
        configs = [configs[0] if args.only == "paused" else configs[1]]
    results = []
    for tag, extra in configs:
        try:
            results.append(phase(tag, extra, args, hutch))
        except Exception as e:  # noqa: BLE001 - one configuration's failure must not lose the other's
            print(f"[{tag}] failed: {e}", file=sys.stderr)
            results.append({"config": tag, "error": str(e)})

    keys = ["create_all_s", "run_ms_median", "run_ms_p99", "idle_host_cpu_busy_pct",
            "host_mem_used_mib", "qemu_rss_mib_sum", "qemu_rss_mib_mean", "states_when_idle",
            "exec_ok", "exec_ms_median", "exec_ms_p99", "stop_ms_median", "stop_ms_p99",
            "start_ms_median", "start_ms_p99", "servers_survived", "create_failed"]
    print(f"\n{args.boxes} boxes of 512 MiB, a server in each; {args.cycles} stop/start cycles")
    print(f"{'':26}" + "".join(f"{r['config']:>26}" for r in results))
    for key in keys:
        cells = []
        for r in results:
            v = r.get(key)
            if isinstance(v, list):
                v = len(v)  # create_failed: how many (the errors are in the JSON)
            cells.append(f"{v:26.1f}" if isinstance(v, float) else f"{str(v):>26}")
        print(f"{key:26}" + "".join(cells))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"args": vars(args), "results": results},
                                                      indent=1))


if __name__ == "__main__":
    main()
