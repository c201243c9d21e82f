#!/usr/bin/env python3
"""Memory back (issue 15.4): what a box's QEMU keeps of memory its guest freed, with the virtio
balloon's free page reporting (hutchd's default) and without it (--no-memory-return), side by
side in one run.

For each: a box from the template snapshot; QEMU's private memory (RssAnon) idle; after 200 MiB
written to the guest's tmpfs; 5 s after that file is removed (and how long until most of it had
left QEMU); then the time to write and remove 200 MiB again (the price of the pages coming back).

Usage: bench/memory_return_bench.py [--build build] [--image DIR]
Root. Not a test: nothing fails on a number.
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


def anon_mib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) // 1024
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--image", default=os.environ.get("HUTCH_TEST_IMAGE"))
    args = ap.parse_args()
    hutch = str(pathlib.Path(args.build, "src", "cli", "hutch"))
    for tag, extra in [("free page reporting", []),
                       ("--no-memory-return", ["--no-memory-return"])]:
        d = HutchDaemon(tempfile.mkdtemp(prefix="hutch-mem-"), build=args.build, image=args.image,
                        extra_args=extra)
        d.start()
        try:
            def run(*a):
                return subprocess.run([hutch, "--socket", d.socket, *a], check=True,
                                      capture_output=True, text=True).stdout
            run("run", "--name", "m")
            box = json.loads(run("--json", "inspect", "m"))
            pid = (box[0] if isinstance(box, list) else box)["pid"]
            time.sleep(3)
            idle = anon_mib(pid)
            run("exec", "m", "--", "sh", "-c",
                "dd if=/dev/zero of=/dev/shm/f bs=1M count=200 2>/dev/null; sync")
            filled = anon_mib(pid)
            t0 = time.perf_counter()
            run("exec", "m", "--", "rm", "/dev/shm/f")
            back = None
            for _ in range(60):
                time.sleep(0.5)
                if anon_mib(pid) < filled - 120:
                    back = time.perf_counter() - t0
                    break
            time.sleep(5)
            after = anon_mib(pid)
            t1 = time.perf_counter()
            run("exec", "m", "--", "sh", "-c",
                "dd if=/dev/zero of=/dev/shm/g bs=1M count=200 2>/dev/null; rm /dev/shm/g")
            refill = time.perf_counter() - t1
            print(f"{tag:22} RssAnon MiB: idle {idle}, 200 MiB in tmpfs {filled}, after rm "
                  f"{after}; most back after {'%.1f s' % back if back else 'never (60 s)'}; "
                  f"write+rm 200 MiB again {refill:.2f} s")
        finally:
            d.stop()


if __name__ == "__main__":
    main()
