#!/usr/bin/env python3
"""hutch diff (docs/diff.md): how long a diff takes, and how long a running box stands still for it.

One hutchd, one base box, in one run:
  fresh       diffs of a fresh box (its top layer holds only hutch's identity writes);
  written     diffs after the box wrote --write-mib MiB of random bytes and copied /usr/share/doc;
  suspended   the same box's diffs while it is suspended (nothing to pause);
each --runs times. A diff's time is the API's `took_ms` and the CLI's wall clock. For the running
box, a ticker in the guest (`date +%s%N` in a loop) shows the longest gap between two ticks during
each diff against the longest gap in as long a time without one: the pause the box felt (its top
layer copied while the vCPUs stood still) plus the ticker's own noise under TCG.

Usage: bench/diff_bench.py [--runs 3] [--write-mib 200] [--build build] [--image DIR] [--json FILE]
Root (hutchd jails every QEMU). Not a test: nothing fails on a slow number.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from hutchd_daemon import HutchDaemon  # noqa: E402

TICKER = "while :; do date +%s%N; done > /tmp/ticks"


def hutch(cli, socket, *args, check=True):
    env = dict(os.environ, HUTCH_SOCKET=socket)
    r = subprocess.run([str(cli), *args], env=env, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"hutch {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def max_gap_ms(ticks, start_ns, end_ns):
    inside = [t for t in ticks if start_ns <= t <= end_ns]
    if len(inside) < 2:
        return None
    return max(b - a for a, b in zip(inside, inside[1:])) / 1e6


def guest_ticks(cli, socket, box):
    out = hutch(cli, socket, "exec", box, "--", "cat", "/tmp/ticks").stdout
    return [int(line) for line in out.split() if line.isdigit()]


def diffs(cli, socket, box, runs, ticker):
    rows = []
    for _ in range(runs):
        quiet_start = time.time_ns()
        t0 = time.monotonic()
        r = hutch(cli, socket, "--json", "diff", box)
        wall = time.monotonic() - t0
        end = time.time_ns()
        body = json.loads(r.stdout)
        row = {"took_ms": body["took_ms"], "wall_s": round(wall, 2), "changes": body["total"],
               "hidden": sum(body["hidden"].values())}
        if ticker:
            # As long again without a diff, for the ticker's own longest gap.
            time.sleep(wall)
            after = time.time_ns()
            ticks = guest_ticks(cli, socket, box)
            row["guest_max_gap_ms"] = max_gap_ms(ticks, quiet_start, end)
            row["guest_max_gap_ms_without"] = max_gap_ms(ticks, end, after)
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--write-mib", type=int, default=200)
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--image")
    ap.add_argument("--json")
    args = ap.parse_args()
    cli = pathlib.Path(args.build) / "src" / "cli" / "hutch"
    result = {"runs": args.runs, "write_mib": args.write_mib, "loadavg_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="hutch-diff-bench-") as tmp:
        with HutchDaemon(tmp, build=args.build, image=args.image) as d:
            hutch(cli, d.socket, "run", "--name", "b")
            # The guest's clock is the host's (kvmclock/TSC): ticks compare with time_ns().
            hutch(cli, d.socket, "exec", "-d", "b", "--", "sh", "-c", TICKER)
            time.sleep(2)
            result["fresh"] = diffs(cli, d.socket, "b", args.runs, True)
            hutch(cli, d.socket, "exec", "-u", "root", "b", "--", "sh", "-c",
                  f"head -c {args.write_mib}M /dev/urandom > /root/blob && "
                  "cp -a /usr/share/doc /root/doc")
            result["written"] = diffs(cli, d.socket, "b", args.runs, True)
            # Measured after a diff, whose sync put the guest's writes on the disk.
            top = max(pathlib.Path(tmp, "state", "boxes").glob("*/disk*.qcow2"),
                      key=lambda p: p.stat().st_mtime)
            result["written_top_mib"] = round(top.stat().st_blocks * 512 / 2**20, 1)
            hutch(cli, d.socket, "stop", "b")
            result["suspended"] = diffs(cli, d.socket, "b", args.runs, False)
    result["loadavg_end"] = os.getloadavg()[0]
    for phase in ("fresh", "written", "suspended"):
        print(phase)
        for row in result[phase]:
            print("  " + "  ".join(f"{k} {v}" for k, v in row.items()))
    print(f"written: the box's top layer {result['written_top_mib']} MiB; "
          f"load {result['loadavg_start']:.1f} -> {result['loadavg_end']:.1f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
