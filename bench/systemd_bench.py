#!/usr/bin/env python3
"""What systemd as PID 1 costs (issue 16.1): the systemd template against base (hutch-agent as
PID 1) side by side, in one hutchd, with the same memory and CPUs.

For each template:
  - template snapshot: the first `hutch run` of the template (a cold boot, the ready check, the
    snapshot; systemd's ready check waits for `systemctl is-system-running`);
  - create: `hutch run -d` of a box restored from that snapshot, then its first `exec true`
    (median of --runs);
  - cold boot: `hutch stop --shutdown` and `hutch start` of that box, then its first exec (median
    of --cold); the shutdown is timed too (systemd stops its services in order);
  - idle: after --settle seconds, the QEMU's resident memory, the guest's own used memory
    (MemTotal - MemAvailable) and processes, and the QEMU's CPU over --idle-window seconds
    (idle pause off: the box stays running).

Usage: sudo bench/systemd_bench.py --systemd-image DIR [--image DIR] [--build build-dev]
                                   [--runs 5] [--cold 3] [--json FILE]
Not a test: nothing fails on a slow number.
"""
import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from hutchd_daemon import HutchDaemon  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from benchlib import Cli, report  # noqa: E402




def qemu_pid(cli, box):
    return json.loads(cli.run("inspect", box)[0])[0]["pid"]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid):
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(cli, template, a):
    out = {}
    _, out["template_snapshot_s"] = cli.run("run", "--name", f"{template}-first", "--template",
                                            template, "--rm", "--", "true")
    creates = []
    for i in range(a.runs):
        name = f"{template}-{i}"
        _, run_s = cli.run("run", "-d", "--name", name, "--template", template)
        _, exec_s = cli.run("exec", name, "--", "true")
        creates.append(run_s + exec_s)
        if i < a.runs - 1:
            cli.run("rm", "-f", name)
    box = f"{template}-{a.runs - 1}"
    out["create_to_first_exec_s"] = {"median": round(statistics.median(creates), 3),
                                     "max": round(max(creates), 3), "n": len(creates)}

    time.sleep(a.settle)
    pid = qemu_pid(cli, box)
    cpu0 = cpu_seconds(pid)
    time.sleep(a.idle_window)
    out["idle_qemu_cpu_pct"] = round(100 * (cpu_seconds(pid) - cpu0) / a.idle_window, 2)
    out["idle_qemu_rss_mib"] = round(rss_mib(pid), 1)
    meminfo, _ = cli.run("exec", box, "--", "cat", "/proc/meminfo")
    kib = {line.split(":")[0]: int(line.split()[1]) for line in meminfo.splitlines()}
    out["guest_used_mib"] = round((kib["MemTotal"] - kib["MemAvailable"]) / 1024, 1)
    procs, _ = cli.run("exec", box, "--", "sh", "-c", "ps -e --no-headers | wc -l")
    out["guest_processes"] = int(procs)

    shutdowns, boots = [], []
    for _ in range(a.cold):
        _, stop_s = cli.run("stop", "--shutdown", box)
        _, start_s = cli.run("start", box)
        _, exec_s = cli.run("exec", box, "--", "true")
        shutdowns.append(stop_s)
        boots.append(start_s + exec_s)
    out["shutdown_s"] = {"median": round(statistics.median(shutdowns), 3), "n": len(shutdowns)}
    out["cold_start_to_first_exec_s"] = {"median": round(statistics.median(boots), 3),
                                         "n": len(boots)}
    cli.run("rm", "-f", box)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--image", default=os.environ.get("HUTCH_TEST_IMAGE"),
                    help="the base image (default $HUTCH_TEST_IMAGE)")
    ap.add_argument("--systemd-image", default=os.environ.get("HUTCH_TEST_SYSTEMD_IMAGE"),
                    help="the systemd image (default $HUTCH_TEST_SYSTEMD_IMAGE)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cold", type=int, default=3)
    ap.add_argument("--settle", type=int, default=20)
    ap.add_argument("--idle-window", type=int, default=30)
    ap.add_argument("--json")
    a = ap.parse_args()
    if not a.image or not a.systemd_image:
        ap.error("--image and --systemd-image (or HUTCH_TEST_IMAGE and HUTCH_TEST_SYSTEMD_IMAGE) "
                 "must name built images: scripts/build-image.sh --recipe images/systemd")

    hutch = str(pathlib.Path(a.build) / "src" / "cli" / "hutch")
    d = HutchDaemon(tempfile.mkdtemp(prefix="hutch-systemd-bench-"), build=a.build,
                    image=a.image, extra_args=["--idle-pause", "0"])
    state = d.dir / "state" / "templates"
    state.mkdir(parents=True, exist_ok=True)
    (state / "systemd").symlink_to(pathlib.Path(a.systemd_image).resolve())
    d.start()
    results = {}
    try:
        cli = Cli(hutch, d.socket)
        for template in ("base", "systemd"):
            results[template] = measure(cli, template, a)
            print(f"[{template}] {json.dumps(results[template])}", file=sys.stderr)
    finally:
        d.stop()
    report(results, a.json)


if __name__ == "__main__":
    main()
