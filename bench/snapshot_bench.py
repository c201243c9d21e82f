#!/usr/bin/env python3
"""Snapshot benchmarks, side by side in one run: cold create vs warm create (to the first exec
answer), fork of a running box to the child's first exec answer, checkpoint time and size,
rollback time, 20 concurrent creates vs one, and the host memory of 10 idle boxes restored
from one template snapshot (RSS and PSS: PSS splits shared pages between the processes that
map them). Starts two hutchd of its own (one with --no-snapshots, for the cold creates).

Usage: bench/snapshot_bench.py --image DIR [--build build] [--runs 7] [--concurrent 20]
Prints one JSON object; docs/benchmarks.md records the results with this command.
"""
import argparse, concurrent.futures, json, os, shutil, statistics, subprocess, tempfile, time


class Daemon:
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
        self.proc = subprocess.Popen([hutchd, "--socket", self.sock, "--state-dir", state, *flags],
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

    def stop(self):
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--image", required=True, help="built guest image directory")
    p.add_argument("--build", default="build")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--concurrent", type=int, default=20)
    p.add_argument("--idle", type=int, default=10)
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="hutch-snapbench-")
    warm = Daemon(a.build, a.image, tmp, "warm")
    # Each daemon gives its boxes' QEMUs uids from its own range.
    cold = Daemon(a.build, a.image, tmp, "cold", "--no-snapshots", "--uid-base",
                  str(0x7C000000 + 30000))
    out = {}
    try:
        # The first create makes the template snapshot (a cold boot + capture): timed apart.
        out["first_create_makes_snapshot_s"] = round(
            warm.timed(("run", "--name", "first", "--", "true")), 3)
        warm.cli("rm", "-f", "first")

        cold_runs, warm_runs = [], []
        for i in range(a.runs):  # alternated, so host noise hits both alike
            cold_runs.append(cold.timed(("run", "--name", f"c{i}", "--", "true")))
            cold.cli("rm", "-f", f"c{i}")
            warm_runs.append(warm.timed(("run", "--name", f"w{i}", "--", "true")))
            warm.cli("rm", "-f", f"w{i}")
        out["create_to_first_exec_s"] = {"cold": median(cold_runs), "warm": median(warm_runs),
                                         "cold_runs": [round(x, 3) for x in cold_runs],
                                         "warm_runs": [round(x, 3) for x in warm_runs]}
        cold.stop()

        warm.cli("run", "--name", "parent")
        warm.cli("exec", "parent", "--", "sh", "-c",
                 "head -c 50000000 /dev/urandom > ~/blob; setsid sleep 9999 >/dev/null 2>&1 &")
        forks = []
        for i in range(a.runs):
            forks.append(warm.timed(("fork", "parent", "--name", f"f{i}"),
                                    ("exec", f"f{i}", "--", "true")))
            warm.cli("rm", "-f", f"f{i}")
        out["fork_to_child_first_exec_s"] = median(forks)

        cps, sizes, rollbacks = [], [], []
        for i in range(a.runs):
            t0 = time.monotonic()
            made = json.loads(warm.cli("--json", "checkpoint", "parent", "--name", f"cp{i}").stdout)
            cps.append(time.monotonic() - t0)
            sizes.append(made["size_bytes"])
            warm.cli("exec", "parent", "--", "sh", "-c", "rm -f ~/blob")
            rollbacks.append(warm.timed(("rollback", "parent", f"cp{i}"),
                                        ("exec", "parent", "--", "true")))
        out["checkpoint_s"] = median(cps)
        out["checkpoint_mib"] = round(statistics.median(sizes) / 2**20, 1)
        out["rollback_to_first_exec_s"] = median(rollbacks)
        warm.cli("rm", "-f", "parent")

        one = []
        for i in range(3):
            one.append(warm.timed(("run", "-d", "--name", f"one{i}")))
            warm.cli("rm", "-f", f"one{i}")
        with concurrent.futures.ThreadPoolExecutor(a.concurrent) as pool:
            t0 = time.monotonic()
            list(pool.map(lambda i: warm.cli("run", "-d", "--name", f"many{i}"),
                          range(a.concurrent)))
            many = time.monotonic() - t0
        out["concurrent_creates"] = {"n": a.concurrent, "one_s": median(one),
                                     "all_s": round(many, 3),
                                     "ratio": round(many / statistics.median(one), 2)}
        for b in warm.boxes():
            warm.cli("rm", "-f", b["id"])

        for i in range(a.idle):
            warm.cli("run", "-d", "--name", f"idle{i}")
        time.sleep(5)
        rss = pss = 0
        for b in warm.boxes():
            r, s = memory_kib(b["pid"])
            rss += r
            pss += s
        out["idle_boxes"] = {"n": a.idle, "rss_mib_total": round(rss / 1024),
                             "pss_mib_total": round(pss / 1024),
                             "pss_mib_per_box": round(pss / 1024 / a.idle, 1)}
    finally:
        warm.stop()
        if cold.proc.poll() is None:
            cold.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
