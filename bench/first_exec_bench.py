#!/usr/bin/env python3
"""Creates from a full warm pool (issue 15.5): does the first exec in a pooled box cost more than
the next ones? One hutchd with --pool-size 1; each iteration waits --gap seconds so the pool has
refilled, then `hutch run -d`, three `hutch exec BOX -- echo hi`, `hutch rm -f`. Prints each
step's median and max (ms) and every sample.

Usage: bench/first_exec_bench.py [--iterations 8] [--gap 4] [--build build] [--image DIR]
Root. Not a test: nothing fails on a slow number.
"""
import argparse
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--gap", type=float, default=4, help="seconds for the pool to refill")
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--image", default=os.environ.get("HUTCH_TEST_IMAGE"))
    args = ap.parse_args()
    hutch = str(pathlib.Path(args.build, "src", "cli", "hutch"))
    d = HutchDaemon(tempfile.mkdtemp(prefix="hutch-first-exec-"), build=args.build,
                    image=args.image, extra_args=["--pool-size", "1"])
    d.start()

    def timed(*argv):
        t = time.monotonic()
        r = subprocess.run([hutch, "--socket", d.socket, *argv], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"hutch {argv[0]}: {r.stderr.strip()}")
        return (time.monotonic() - t) * 1000

    steps = {"run -d": [], "exec 1": [], "exec 2": [], "exec 3": []}
    try:
        # The template snapshot and the first pool VM are made before timing starts.
        timed("run", "--name", "warmup", "--rm", "--", "true")
        for i in range(args.iterations):
            time.sleep(args.gap)
            steps["run -d"].append(timed("run", "-d", "--name", f"b{i}"))
            for k in ("exec 1", "exec 2", "exec 3"):
                steps[k].append(timed("exec", f"b{i}", "--", "echo", "hi"))
            timed("rm", "-f", f"b{i}")
    finally:
        d.stop()
    for k, v in steps.items():
        print(f"{k:<8} median {statistics.median(v):4.0f} ms  max {max(v):4.0f}  "
              f"{[round(x) for x in v]}")


if __name__ == "__main__":
    main()
