#!/usr/bin/env python3
"""Creates under churn (issue 15): the loop a new user writes, with hutch's CLI,

    hutch run -d  ->  hutch exec BOX -- echo hi  ->  hutch rm -f BOX

`--iterations` times in a row against a hutchd with its default settings (warm pool of 1 that
grows when creates find it empty), and, side by side in the same run, against one with the
pool fixed at one VM (--pool-max 1: what hutch did before). The two daemons take turns, a block
of iterations each. Reports each command's latency (median, p95) and the whole iteration's.

Usage: bench/churn_bench.py [--iterations 100] [--block 20] [--build build] [--image DIR]
                            [--json FILE]
Root. Not a test: nothing fails on a slow number.
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


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--block", type=int, default=20)
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--image", default=os.environ.get("HUTCH_TEST_IMAGE"))
    ap.add_argument("--json")
    args = ap.parse_args()
    hutch = str(pathlib.Path(args.build, "src", "cli", "hutch"))

    configs = {"default": ["--pool-size", "1"], "fixed pool of 1": ["--pool-size", "1",
                                                                     "--pool-max", "1"]}
    samples = {tag: {"run": [], "exec": [], "rm": [], "iteration": []} for tag in configs}
    daemons = {}
    try:
        for tag, extra in configs.items():
            d = HutchDaemon(tempfile.mkdtemp(prefix="hutch-churn-"), build=args.build,
                            image=args.image, extra_args=extra)
            d.start()
            daemons[tag] = d
            # The template snapshot and the first pool VM are made before timing starts.
            subprocess.run([hutch, "--socket", d.socket, "run", "--name", "warmup", "--rm", "--",
                            "true"], check=True, capture_output=True)
        done = {tag: 0 for tag in configs}
        while any(n < args.iterations for n in done.values()):
            for tag, d in daemons.items():
                for _ in range(min(args.block, args.iterations - done[tag])):
                    cli = [hutch, "--socket", d.socket]
                    t0 = time.perf_counter()
                    box = subprocess.run(cli + ["run", "-d"], check=True, capture_output=True,
                                         text=True).stdout.strip()
                    t1 = time.perf_counter()
                    out = subprocess.run(cli + ["exec", box, "--", "echo", "hi"], check=True,
                                         capture_output=True, text=True).stdout
                    t2 = time.perf_counter()
                    subprocess.run(cli + ["rm", "-f", box], check=True, capture_output=True)
                    t3 = time.perf_counter()
                    assert out == "hi\n", out
                    s = samples[tag]
                    s["run"].append((t1 - t0) * 1000)
                    s["exec"].append((t2 - t1) * 1000)
                    s["rm"].append((t3 - t2) * 1000)
                    s["iteration"].append((t3 - t0) * 1000)
                    done[tag] += 1
            print(f"{done}", file=sys.stderr)
        pools = {tag: json.loads(subprocess.run([hutch, "--socket", d.socket, "--json", "pool"],
                                                check=True, capture_output=True).stdout)
                 for tag, d in daemons.items()}
    finally:
        for d in daemons.values():
            d.stop()

    print(f"\n{args.iterations} iterations of run -d / exec echo hi / rm -f, per daemon "
          f"(blocks of {args.block}, taking turns); ms")
    print(f"{'':22}" + "".join(f"{tag:>24}" for tag in configs))
    for key in ("run", "exec", "rm", "iteration"):
        row = "".join(f"{statistics.median(samples[t][key]):11.0f} / {pct(samples[t][key], 95):9.0f}"
                      for t in configs)
        print(f"{key + ' median / p95':22}{row}")
    for tag, p in pools.items():
        print(f"pool at the end ({tag}): {p}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"args": vars(args), "samples": samples,
                                                       "pools": pools}, indent=1))


if __name__ == "__main__":
    main()
