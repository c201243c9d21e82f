#!/usr/bin/env python3
"""Dockerfile builds (issue 32.8): a build from nothing cached, a rebuild with nothing changed, a
rebuild whose last COPY changed (only it and what follows run again), and a template with a start
command against the same service started by an exec after create, side by side in one hutchd.

The Dockerfile (FROM base): an ENV, a WORKDIR, a COPY of a small tree, a RUN that takes a few
seconds of CPU in the box (it stands for a package install), a second COPY of one file and a RUN
that reads it. The service: a shell loop that writes a file once it has "warmed up" for
--warmup seconds (it stands for a dev server or a database that takes time to come up).

For each: the wall time of the `hutch template build` (median of --runs where it repeats), and
for the service: create-to-service-answering for a box of the start-command template (the
process was running in the snapshot) and for a box of the plain one (exec starts it, then the
wait for it).

Usage: sudo bench/build_bench.py [--build build] [--image DIR] [--runs 3] [--json FILE]
Not a test: nothing fails on a slow number.
"""
import argparse
import pathlib
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from benchlib import Cli, daemon_args, own_daemon, report  # noqa: E402

DOCKERFILE = """FROM base
ENV APP=/srv/app
WORKDIR /srv/app
COPY src/ ./src/
RUN i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo installed > installed
COPY version ./
RUN cat version > built
"""

SIZE = ["--memory", "512m", "--cpus", "1", "--disk", "2g"]




def median(values):
    return {"median": round(statistics.median(values), 2), "max": round(max(values), 2),
            "n": len(values)}


def build(cli, context, name, *extra):
    _, seconds = cli.run("template", "build", name, "-f", str(context / "Dockerfile"),
                         str(context), *SIZE, *extra)
    cached = cli.stderr.count("CACHED")
    cli.run("template", "rm", name)
    return seconds, cached


def wait_for(cli, box, path, timeout=120):
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        try:
            cli.run("exec", box, "--", "test", "-f", path)
            return
        except RuntimeError:
            time.sleep(0.2)
    raise RuntimeError(f"{path} never appeared in {box}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    daemon_args(ap)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    d, hutch = own_daemon(ap, a, "hutch-build-bench-")
    context = pathlib.Path(tempfile.mkdtemp(prefix="hutch-build-bench-ctx-"))
    (context / "Dockerfile").write_text(DOCKERFILE)
    (context / "src").mkdir()
    for i in range(20):
        (context / "src" / f"f{i}.txt").write_text(f"{i}\n" * 100)
    (context / "version").write_text("1\n")
    d.start()
    results = {}
    try:
        cli = Cli(hutch, d.socket)
        cold, _ = build(cli, context, "cold", "--no-cache")
        results["build_no_cache_s"] = round(cold, 2)
        # Fill the cache once, then rebuild.
        build(cli, context, "fill")
        same, changed = [], []
        for i in range(a.runs):
            seconds, cached = build(cli, context, f"same{i}")
            same.append(seconds)
            results["unchanged_cached_steps"] = cached
            (context / "version").write_text(f"{i + 2}\n")
            seconds, cached = build(cli, context, f"changed{i}")
            changed.append(seconds)
            results["last_copy_changed_cached_steps"] = cached
        results["rebuild_unchanged_s"] = median(same)
        results["rebuild_last_copy_changed_s"] = median(changed)

        service = f"sleep {a.warmup}; echo up > /tmp/up; exec sleep 100000"
        _, seconds = cli.run("template", "build", "svc", "-f", str(context / "Dockerfile"),
                             str(context), *SIZE, "--start-cmd", service,
                             "--ready-cmd", "test -f /tmp/up")
        results["build_with_start_cmd_s"] = round(seconds, 2)
        cli.run("template", "build", "plain", "-f", str(context / "Dockerfile"), str(context),
                *SIZE)
        # The first box of each makes its template snapshot (the start template's was made by
        # its build); then boxes are timed from create to the service answering.
        cli.run("run", "--name", "plain-first", "--template", "plain", "--rm", "--", "true")
        with_start, after_create = [], []
        for i in range(a.runs):
            t0 = time.perf_counter()
            cli.run("run", "-d", "--name", f"s{i}", "--template", "svc")
            wait_for(cli, f"s{i}", "/tmp/up")
            with_start.append(time.perf_counter() - t0)
            cli.run("rm", "-f", f"s{i}")
            t0 = time.perf_counter()
            cli.run("run", "-d", "--name", f"p{i}", "--template", "plain")
            cli.run("exec", "-d", f"p{i}", "--", "sh", "-c", service)
            wait_for(cli, f"p{i}", "/tmp/up")
            after_create.append(time.perf_counter() - t0)
            cli.run("rm", "-f", f"p{i}")
        results["service_answering_start_cmd_template_s"] = median(with_start)
        results["service_answering_started_after_create_s"] = median(after_create)
    finally:
        d.stop()
    report(results, a.json)


if __name__ == "__main__":
    main()
