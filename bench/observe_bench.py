#!/usr/bin/env python3
"""What events and the audit log cost (issue 14), side by side in one run.

Two hutchd on the same built binaries and guest image: one as it runs by default (events
published and stored, every exec and file operation audited, metrics counted), one started with
`--no-audit --no-events`. They take turns, a round each, so a change in the host's load hits
both alike. Per round and daemon:

1. exec round trip of `true` in a running box: `POST /v1/boxes/{box}/exec` (JSON) over the unix
   socket on one keep-alive connection, `--execs` times; hutchd's own CPU time per exec
   (utime+stime of its pid before and after, divided by the count);
2. create -> running of a box (`POST /v1/boxes`, no warm pool: a restore from the template
   snapshot each time), then its removal (not timed), `--creates` times.

Usage: bench/observe_bench.py [--rounds 3] [--execs 40] [--creates 4] [--build build]
                              [--image DIR] [--json FILE]
Root (hutchd jails every QEMU). Prints a table; with --json writes every sample. Not a test:
nothing fails on a slow number.
"""
import argparse
import http.client
import json
import os
import pathlib
import socket
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from hutchd_daemon import HutchDaemon  # noqa: E402


class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("hutchd", timeout=600)
        self.path_ = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.path_)
        self.sock = s


def call(conn, method, target, body=None):
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, target, body=data,
                 headers={"Content-Type": "application/json"} if data else {})
    res = conn.getresponse()
    text = res.read()
    if res.status >= 300:
        raise RuntimeError(f"{method} {target}: {res.status} {text[:300]!r}")
    return json.loads(text) if text else None


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def one_round(d, box, execs, creates, tag, samples):
    conn = Unix(d.socket)
    cpu0 = cpu_seconds(d.pid)
    for _ in range(execs):
        t = time.perf_counter()
        r = call(conn, "POST", f"/v1/boxes/{box}/exec", {"argv": ["true"]})
        samples[tag]["exec_ms"].append((time.perf_counter() - t) * 1000)
        assert r["exit_code"] == 0, r
    samples[tag]["hutchd_cpu_ms_per_exec"].append((cpu_seconds(d.pid) - cpu0) / execs * 1000)
    for i in range(creates):
        name = f"bench-{tag}-{len(samples[tag]['create_ms'])}"
        t = time.perf_counter()
        call(conn, "POST", "/v1/boxes", {"name": name})
        samples[tag]["create_ms"].append((time.perf_counter() - t) * 1000)
        call(conn, "DELETE", f"/v1/boxes/{name}?force=true")
    conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--execs", type=int, default=40)
    ap.add_argument("--creates", type=int, default=4)
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--image", default=os.environ.get("HUTCH_TEST_IMAGE"))
    ap.add_argument("--json")
    args = ap.parse_args()

    configs = {"on": [], "off": ["--no-audit", "--no-events"]}
    samples = {tag: {"exec_ms": [], "create_ms": [], "hutchd_cpu_ms_per_exec": []}
               for tag in configs}
    daemons = {}
    boxes = {}
    try:
        for tag, extra in configs.items():
            d = HutchDaemon(tempfile.mkdtemp(prefix=f"hutch-obs-{tag}-"), build=args.build,
                            image=args.image, extra_args=extra)
            d.start()
            daemons[tag] = d
            conn = Unix(d.socket)
            boxes[tag] = call(conn, "POST", "/v1/boxes", {"name": f"bench-{tag}"})["name"]
            call(conn, "POST", f"/v1/boxes/{boxes[tag]}/exec", {"argv": ["true"]})  # warm
            conn.close()
        for r in range(args.rounds):
            for tag, d in daemons.items():
                one_round(d, boxes[tag], args.execs, args.creates, tag, samples)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        for d in daemons.values():
            d.stop()

    print(f"\nevents + audit on vs off: {args.rounds} rounds of {args.execs} execs and "
          f"{args.creates} creates each, taking turns")
    print(f"{'':30} {'on':>12} {'off':>12}")
    for key, label in (("exec_ms", "exec `true` median ms"), ("create_ms", "create median ms")):
        on, off = samples["on"][key], samples["off"][key]
        print(f"{label:30} {statistics.median(on):12.1f} {statistics.median(off):12.1f}")
        print(f"{key.split('_')[0] + ' p95 ms':30} {pct(on, 95):12.1f} {pct(off, 95):12.1f}")
    cpu_on = statistics.median(samples["on"]["hutchd_cpu_ms_per_exec"])
    cpu_off = statistics.median(samples["off"]["hutchd_cpu_ms_per_exec"])
    print(f"{'hutchd CPU ms per exec':30} {cpu_on:12.2f} {cpu_off:12.2f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {"args": vars(args), "samples": samples}, indent=1))


if __name__ == "__main__":
    main()
