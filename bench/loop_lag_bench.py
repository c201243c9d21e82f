#!/usr/bin/env python3
"""hutchd's event-loop lag under a burst of box work: hutch_event_loop_lag_seconds from /metrics.

hutchd samples how late its loop runs a timer due every 100 ms (docs/observability.md). This
starts a hutchd of its own (benchlib.own_daemon: temp state directory, the built base image),
makes the template snapshot with one box (not measured), then reads the histogram:

1. idle: `--idle` seconds with nothing to do;
2. burst: `--workers` threads, each `--iterations` times: create a box (`POST /v1/boxes`), exec
   `true` in it `--execs` times (`POST /v1/boxes/{box}/exec`), remove it (`DELETE ?force=true`).

Each phase's figures are the difference of the scrapes around it: the samples, how many were
later than 10 ms / 100 ms / 1 s, and p50 / p99 / the largest bucket, estimated from the
buckets as Prometheus' histogram_quantile does (linear inside the bucket the rank falls in).

Usage: bench/loop_lag_bench.py [--build build] [--image DIR] [--idle 10] [--workers 2]
                               [--iterations 6] [--execs 5] [--json FILE]
Root (hutchd jails every QEMU). Not a test: nothing fails on a slow number.
"""
import argparse
import json
import math
import threading
import time

from benchlib import Api, Errors, daemon_args, host_busy_pct, host_cpu, loadavg, own_daemon, \
    report

METRIC = "hutch_event_loop_lag_seconds"


def scrape(api):
    """The lag histogram: ({upper bound: cumulative count}, count, sum)."""
    status, payload = api.call("GET", "/metrics")
    if status != 200:
        raise RuntimeError(f"GET /metrics: {status}")
    buckets, count, total = {}, 0.0, 0.0
    for line in payload.decode().splitlines():
        if line.startswith(METRIC + "_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[math.inf if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
        elif line.startswith(METRIC + "_count"):
            count = float(line.rsplit(" ", 1)[1])
        elif line.startswith(METRIC + "_sum"):
            total = float(line.rsplit(" ", 1)[1])
    if not buckets:
        raise RuntimeError(f"/metrics has no {METRIC}: is this hutchd older than the probe?")
    return buckets, count, total


def quantile(q, buckets):
    """histogram_quantile(q) over cumulative buckets {le: count} (seconds)."""
    bounds = sorted(buckets)
    n = buckets[math.inf]
    if n == 0:
        return None
    rank = q * n
    lower, below = 0.0, 0.0
    for le in bounds:
        if buckets[le] >= rank:
            if le == math.inf:
                return lower  # past the largest finite bucket: its bound, as Prometheus does
            inside = buckets[le] - below
            return lower + (le - lower) * ((rank - below) / inside if inside else 1)
        lower, below = le, buckets[le]
    return lower


def phase(before, after, seconds):
    buckets = {le: after[0][le] - before[0].get(le, 0) for le in after[0]}
    n = buckets[math.inf]
    below, top = 0, None  # top: the largest bucket any sample of the phase fell in
    for le in sorted(buckets):
        if buckets[le] > below:
            top = le
        below = buckets[le]

    def later_than(s):
        return int(n - buckets[s])

    def ms(v):
        return None if v is None else round(v * 1000, 2)

    return {
        "seconds": round(seconds, 1),
        "samples": int(n),
        "mean_ms": ms((after[2] - before[2]) / n) if n else None,
        "p50_ms": ms(quantile(0.5, buckets)),
        "p99_ms": ms(quantile(0.99, buckets)),
        "largest_bucket_le_s": None if top is None else ("+Inf" if top == math.inf else top),
        "later_than_10ms": later_than(0.01),
        "later_than_100ms": later_than(0.1),
        "later_than_1s": later_than(1.0),
        "buckets": {("+Inf" if le == math.inf else str(le)): int(c)
                    for le, c in sorted(buckets.items())},
    }


def worker(api, w, args, errors, done):
    for i in range(args.iterations):
        name = f"lag-{w}-{i}"
        try:
            api.json("POST", "/v1/boxes", {"name": name})
            for _ in range(args.execs):
                r = api.json("POST", f"/v1/boxes/{name}/exec", {"argv": ["true"]})
                if r.get("exit_code") != 0:
                    errors.add("burst", name, f"exec: {r}")
            api.json("DELETE", f"/v1/boxes/{name}?force=true")
            done.append(name)
        except Exception as e:  # noqa: BLE001 -- counted and printed, the burst goes on
            errors.add("burst", name, str(e))
    api.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    daemon_args(ap)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--execs", type=int, default=5)
    a = ap.parse_args()

    d, _ = own_daemon(ap, a, "hutch-lag-")
    errors = Errors()
    results = {"args": {k: v for k, v in vars(a).items() if k != "json"}}
    d.start()
    try:
        api = Api(d.socket)
        # The template snapshot is made by the first create: not part of either phase.
        api.json("POST", "/v1/boxes", {"name": "warmup"})
        api.json("POST", "/v1/boxes/warmup/exec", {"argv": ["true"]})
        api.json("DELETE", "/v1/boxes/warmup?force=true")
        time.sleep(1)

        s0, t0 = scrape(api), time.monotonic()
        time.sleep(a.idle)
        s1, t1 = scrape(api), time.monotonic()
        results["idle"] = phase(s0, s1, t1 - t0)

        cpu0, load0 = host_cpu(), loadavg()
        done = []
        threads = [threading.Thread(target=worker, args=(Api(d.socket), w, a, errors, done))
                   for w in range(a.workers)]
        t2 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        s3, t3 = scrape(api), time.monotonic()
        results["burst"] = phase(s1, s3, t3 - t2)
        results["burst"]["boxes"] = len(done)
        results["burst"]["errors"] = errors.count("burst")
        results["host"] = {"busy_pct": host_busy_pct(cpu0, host_cpu()), "load_before": load0,
                           "load_after": loadavg()}
    finally:
        d.stop()
    report(results, a.json)


if __name__ == "__main__":
    main()
