#!/usr/bin/env python3
"""Snapshot benchmarks, side by side in one run (issue 4):

- create to the first exec answer (`hutch run -- true`): cold boot (--no-snapshots), a restore
  of the template snapshot (--pool-size 0) and a create served by the warm pool (--pool-size 1,
  the default, given time to refill between creates);
- fork of a running box to the child's first exec answer; checkpoint time and size; rollback to
  the first exec answer;
- 20 concurrent creates (`hutch run -d`) against one, with the default pool and with a pool as
  deep as the burst, plus the CPU time each create costs (QEMU's from /proc, hutchd's own and
  its children's), which bounds what a burst can do on this host's cores;
- host memory of 10 idle boxes restored from one template snapshot (RSS and PSS: PSS splits
  shared pages between the processes that map them).

The daemons run one after another (never two at once), each with its own state dir and uid
range, so no measure competes with another daemon's VMs.

Usage: bench/snapshot_bench.py --image DIR [--build build] [--runs 7] [--concurrent 20]
Prints one JSON object; docs/benchmarks.md records the results with this command.
"""
import argparse, concurrent.futures, json, os, shutil, statistics, subprocess, tempfile, time

TCK = os.sysconf("SC_CLK_TCK")


class Daemon:
    uid_base = 0x7C000000

    def __init__(self, build, image, tmp, name, *flags):
        self.hutch = os.path.abspath(os.path.join(build, "src/cli/hutch"))
        hutchd = os.path.abspath(os.path.join(build, "src/daemon/hutchd"))
        self.dir = os.path.join(tmp, name)
        state = os.path.join(self.dir, "state")
        os.makedirs(os.path.join(state, "templates"))
        os.symlink(os.path.abspath(image), os.path.join(state, "templates", "base"))
        self.state = state
        self.sock = os.path.join(self.dir, "hutchd.sock")
        self.log = open(os.path.join(self.dir, "hutchd.log"), "w")
        Daemon.uid_base += 10000  # each daemon gives its boxes' QEMUs uids from its own range
        self.proc = subprocess.Popen([hutchd, "--socket", self.sock, "--state-dir", state,
                                      "--uid-base", str(Daemon.uid_base), *flags],
                                     stdout=self.log, stderr=self.log)
        for _ in range(100):
            if subprocess.run([self.hutch, "--socket", self.sock, "ls"],
                              capture_output=True).returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("hutchd did not start; see " + self.log.name)

    def cli(self, *args):
        return subprocess.run([self.hutch, "--socket", self.sock, *args], check=True,
                              capture_output=True, text=True)

    def timed(self, *commands):
        t0 = time.monotonic()
        for args in commands:
            self.cli(*args)
        return time.monotonic() - t0

    def boxes(self):
        return json.loads(self.cli("--json", "ls").stdout)

    def wait_for_pool(self, want, timeout=300):
        """Until `want` warmed-up VMs wait in the pool and no refill runs (hutch pool)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pools = json.loads(self.cli("--json", "pool").stdout)["pools"]
            if pools and pools[0]["ready"] >= want and not pools[0]["filling"]:
                return
            time.sleep(0.2)
        raise RuntimeError(f"the pool did not reach {want} VMs")

    def cpu_s(self, pid=None):
        """utime+stime and the reaped children's, in seconds."""
        with open(f"/proc/{pid or self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TCK, (int(fields[13]) + int(fields[14])) / TCK

    def remove_all(self):
        for b in self.boxes():
            self.cli("rm", "-f", b["id"])

    def stop(self):
        if self.proc.poll() is None:
            for b in self.boxes():
                subprocess.run([self.hutch, "--socket", self.sock, "rm", "-f", b["id"]],
                               capture_output=True)
            self.proc.terminate()
            self.proc.wait()


def memory_kib(pid):
    rss = pss = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    return rss, pss


def median(values):
    return round(statistics.median(values), 3)


def runs(values):
    return [round(x, 3) for x in values]


def creates_to_first_exec(daemon, n, prefix, pool=0):
    times = []
    for i in range(n):
        if pool:
            daemon.wait_for_pool(pool)
        times.append(daemon.timed(("run", "--name", f"{prefix}{i}", "--", "true")))
        daemon.cli("rm", "-f", f"{prefix}{i}")
    return times


def qemu_cpu():
    """utime+stime in seconds of every QEMU on the host, by pid."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if "(qemu-system-" not in stat:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[int(pid)] = (int(fields[11]) + int(fields[12])) / TCK
    return out


def burst(daemon, n, pool):
    """One `run -d` (median of 3), then n at once; and the CPU each create cost."""
    one = []
    for i in range(3):
        if pool:
            daemon.wait_for_pool(pool)
        one.append(daemon.timed(("run", "-d", "--name", f"one{i}")))
        daemon.cli("rm", "-f", f"one{i}")
    if pool:
        daemon.wait_for_pool(pool)
    self0, children0 = daemon.cpu_s()
    qemu0 = qemu_cpu()  # the pooled VMs' restore and warm-up, spent before the burst
    with concurrent.futures.ThreadPoolExecutor(n) as workers:
        t0 = time.monotonic()
        list(workers.map(lambda i: daemon.cli("run", "-d", "--name", f"many{i}"), range(n)))
        many = time.monotonic() - t0
    self1, children1 = daemon.cpu_s()
    qemu1 = qemu_cpu()
    # What each box's QEMU spent from just before the burst to its end (a pooled VM's restore
    # and warm-up came earlier; a VM restored during the burst counts whole).
    qemu = [qemu1.get(b["pid"], 0.0) - qemu0.get(b["pid"], 0.0) for b in daemon.boxes()]
    daemon.remove_all()
    return {"n": n, "pool_size": pool, "one_s": median(one), "one_runs": runs(one),
            "all_s": round(many, 3), "ratio": round(many / statistics.median(one), 2),
            "cpu_s_per_create": {
                "qemu_during_burst": round(statistics.mean(qemu), 3),
                "hutchd": round((self1 - self0) / n, 3),
                "hutchd_children": round((children1 - children0) / n, 3)}}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--image", required=True, help="built guest image directory")
    p.add_argument("--build", default="build")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--concurrent", type=int, default=20)
    p.add_argument("--idle", type=int, default=10)
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="hutch-snapbench-")
    out = {"host": {"cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg()}}
    daemon = None
    try:
        daemon = Daemon(a.build, a.image, tmp, "cold", "--no-snapshots", "--pool-size", "0")
        cold = creates_to_first_exec(daemon, a.runs, "c")
        daemon.stop()

        daemon = Daemon(a.build, a.image, tmp, "restore", "--pool-size", "0")
        # The first create makes the template snapshot (a cold boot + capture): timed apart.
        out["first_create_makes_snapshot_s"] = round(
            daemon.timed(("run", "--name", "first", "--", "true")), 3)
        daemon.cli("rm", "-f", "first")
        restore = creates_to_first_exec(daemon, a.runs, "r")

        daemon.cli("run", "--name", "parent")
        daemon.cli("exec", "parent", "--", "sh", "-c",
                   "head -c 50000000 /dev/urandom > ~/blob; setsid sleep 9999 >/dev/null 2>&1 &")
        forks = []
        for i in range(a.runs):
            forks.append(daemon.timed(("fork", "parent", "--name", f"f{i}"),
                                      ("exec", f"f{i}", "--", "true")))
            daemon.cli("rm", "-f", f"f{i}")
        out["fork_to_child_first_exec_s"] = {"median": median(forks), "runs": runs(forks)}

        cps, sizes, rollbacks = [], [], []
        for i in range(a.runs):
            t0 = time.monotonic()
            made = json.loads(daemon.cli("--json", "checkpoint", "parent",
                                         "--name", f"cp{i}").stdout)
            cps.append(time.monotonic() - t0)
            sizes.append(made["size_bytes"])
            daemon.cli("exec", "parent", "--", "sh", "-c", "rm -f ~/blob")
            rollbacks.append(daemon.timed(("rollback", "parent", f"cp{i}"),
                                          ("exec", "parent", "--", "true")))
        out["checkpoint_s"] = median(cps)
        out["checkpoint_mib"] = round(statistics.median(sizes) / 2**20, 1)
        out["rollback_to_first_exec_s"] = median(rollbacks)
        daemon.remove_all()

        out["concurrent_creates_no_pool"] = burst(daemon, a.concurrent, 0)

        for i in range(a.idle):
            daemon.cli("run", "-d", "--name", f"idle{i}")
        time.sleep(5)
        rss = pss = 0
        for b in daemon.boxes():
            r, s = memory_kib(b["pid"])
            rss += r
            pss += s
        out["idle_boxes"] = {"n": a.idle, "rss_mib_total": round(rss / 1024),
                             "pss_mib_total": round(pss / 1024),
                             "pss_mib_per_box": round(pss / 1024 / a.idle, 1)}
        daemon.stop()

        daemon = Daemon(a.build, a.image, tmp, "pool", "--pool-size", "1")
        daemon.cli("run", "--name", "first", "--", "true")
        daemon.cli("rm", "-f", "first")
        pooled = creates_to_first_exec(daemon, a.runs, "p", pool=1)
        out["create_to_first_exec_s"] = {
            "cold": median(cold), "restore": median(restore), "warm_pool": median(pooled),
            "cold_runs": runs(cold), "restore_runs": runs(restore), "warm_pool_runs": runs(pooled)}
        out["concurrent_creates_default_pool"] = burst(daemon, a.concurrent, 1)
        daemon.stop()

        daemon = Daemon(a.build, a.image, tmp, "deep", "--pool-size", str(a.concurrent))
        daemon.cli("run", "--name", "first", "--", "true")
        daemon.cli("rm", "-f", "first")
        out["concurrent_creates_pool_as_deep_as_the_burst"] = burst(daemon, a.concurrent,
                                                                    a.concurrent)
        daemon.stop()
        out["host"]["loadavg_at_end"] = os.getloadavg()
    finally:
        if daemon:
            daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
