#!/usr/bin/env python3
"""Shared folders (issue 16.4): a folder shared with `hutch run -v` against the box's own disk,
side by side in one box: sequential write and read of --mib MiB, --files small files made, listed
and removed, and whether an edit on the host is seen at once in the box (and the other way).

Timed inside the guest (date +%s%N around each step), so exec's own cost is not counted; the read
follows a drop of the guest's page cache. The box's disk is ext4 on virtio-blk (a qcow2 overlay);
the share is virtio-fs (virtiofsd, as hutchd starts it).

Usage: bench/share_bench.py [--mib 64] [--files 1000] [--edits 50] [--build build] [--image DIR]
                            [--json FILE]
Root. Not a test: nothing fails on a slow number; a stale read is counted and printed.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from hutchd_daemon import HutchDaemon  # noqa: E402

OWNER = 4242  # an ordinary host uid owns the shared folder

STEPS = r"""
set -e
d=$1; mib=$2; files=$3
t() { date +%s%N; }
a=$(t); dd if=/dev/zero of=$d/big bs=1M count=$mib conv=fsync 2>/dev/null; b=$(t)
sync; echo 3 > /proc/sys/vm/drop_caches
c=$(t); cat $d/big > /dev/null; e=$(t)
mkdir -p $d/many
f=$(t); i=0; while [ $i -lt $files ]; do echo $i > $d/many/f$i; i=$((i+1)); done; g=$(t)
h=$(t); ls -l $d/many > /dev/null; j=$(t)
k=$(t); rm -r $d/many $d/big; l=$(t)
echo "{\"write_ms\": $(((b-a)/1000000)), \"read_ms\": $(((e-c)/1000000)),
 \"create_ms\": $(((g-f)/1000000)), \"list_ms\": $(((j-h)/1000000)),
 \"remove_ms\": $(((l-k)/1000000))}"
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--image", default=os.environ.get("HUTCH_TEST_IMAGE"))
    ap.add_argument("--json")
    args = ap.parse_args()
    hutch = str(pathlib.Path(args.build, "src", "cli", "hutch"))
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hutch-share-bench-"))
    shared = tmp / "shared"
    shared.mkdir()
    os.chown(shared, OWNER, OWNER)
    with HutchDaemon(tmp / "daemon", build=args.build, image=args.image) as d:
        cli = [hutch, "--socket", d.socket]

        def run(*argv, **kw):
            return subprocess.run(cli + list(argv), check=True, capture_output=True, text=True,
                                  **kw).stdout

        run("run", "-d", "--name", "bench", "--memory", "1G", "-v", f"{shared}:/work")
        results = {}
        for where, path in (("disk", "/home/hutch/bench"), ("share", "/work/bench")):
            run("exec", "bench", "--", "mkdir", "-p", path)
            out = run("exec", "-u", "root", "bench", "--", "sh", "-c", STEPS, "sh", path,
                      str(args.mib), str(args.files))
            results[where] = json.loads(out)
        # Coherence: the host rewrites a file the box has read; the box reads it right after.
        stale_in_box = 0
        stale_on_host = 0
        for i in range(args.edits):
            (shared / "edit.txt").write_text(f"host {i}\n")
            os.chown(shared / "edit.txt", OWNER, OWNER)  # the host user's edit
            if run("exec", "bench", "--", "cat", "/work/edit.txt") != f"host {i}\n":
                stale_in_box += 1
            run("exec", "bench", "--", "sh", "-c", f"echo box {i} > /work/edit.txt")
            if (shared / "edit.txt").read_text() != f"box {i}\n":
                stale_on_host += 1
        results["coherence"] = {"edits": args.edits, "stale_in_box": stale_in_box,
                                "stale_on_host": stale_on_host}
        run("rm", "-f", "bench")
    mib = args.mib
    print(f"{'':8} {'write MiB/s':>12} {'read MiB/s':>11} {'create/s':>9} {'ls -l ms':>9} "
          f"{'rm ms':>7}")
    for where in ("disk", "share"):
        r = results[where]
        print(f"{where:8} {mib * 1000 / max(r['write_ms'], 1):12.0f} "
              f"{mib * 1000 / max(r['read_ms'], 1):11.0f} "
              f"{args.files * 1000 / max(r['create_ms'], 1):9.0f} {r['list_ms']:9d} "
              f"{r['remove_ms']:7d}")
    c = results["coherence"]
    print(f"coherence: {c['edits']} edits each way, stale reads in the box {c['stale_in_box']}, "
          f"on the host {c['stale_on_host']}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
