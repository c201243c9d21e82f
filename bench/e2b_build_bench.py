#!/usr/bin/env python3
"""E2B's template builder against hutch's own (issue 32.8): the same recipe built through the
unmodified E2B Python SDK (`Template.build`: POST /v3/templates, the COPY's presence check and
upload, POST /v2/.../builds, status polled every 200 ms) and through `hutch template build -f
Dockerfile` (one streamed request), side by side in one hutchd, taking turns.

The recipe, from hutch's `base` template: an ENV, a WORKDIR, a COPY of a small tree (20 files),
a RUN that takes a few seconds of CPU in the box (it stands for a package install) and a RUN
that reads what the COPY put there. Each face builds it three ways: from nothing cached
(--no-cache / skipCache), again with nothing changed (every step cached), and with one file of
the COPY changed (that COPY and what follows run again). Each time is the wall time of the
client's whole build, from the first request to the template being usable; the E2B face's own
cost is the difference.

Usage: sudo bench/e2b_build_bench.py [--build build] [--image DIR] [--runs 3] [--json FILE]
It runs under the E2B venv that tests/e2b/run.sh makes (requirements-latest.txt, re-executing
itself with that venv's python when `e2b` is not importable). Not a test: nothing fails on a
slow number.
"""
import argparse
import hashlib
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def venv_python():
    req = REPO / "tests" / "e2b" / "requirements-latest.txt"
    key = hashlib.sha256(req.read_bytes()).hexdigest()[:12]
    cache = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
    return cache / "hutch" / f"e2b-venv-{key}" / "bin" / "python"


try:
    import e2b  # noqa: F401
except ImportError:
    python = venv_python()
    if not python.exists() or os.environ.get("HUTCH_BENCH_REEXEC"):
        sys.exit(f"No e2b package: run tests/e2b/run.sh py-latest once (it makes {python.parent.parent})")
    os.environ["HUTCH_BENCH_REEXEC"] = "1"
    os.execv(str(python), [str(python), *sys.argv])

from e2b import Template  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from benchlib import Cli, daemon_args, own_daemon  # noqa: E402

# The work runs in /bin/sh in both faces: E2B's runCmd runs in `bash -l` and a Dockerfile's RUN in
# /bin/sh, and bash's loop is the slower (that difference would be the shells', not the faces').
WORK = "sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'; echo installed > installed"
DOCKERFILE = f"""FROM base
ENV APP=/srv/app
WORKDIR /srv/app
COPY src/ ./src/
RUN {WORK}
RUN cat src/f0.txt | wc -l > built
"""
SIZE_CLI = ["--memory", "512m", "--cpus", "1"]
SIZE_E2B = {"cpu_count": 1, "memory_mb": 512}


def recipe(context):
    return (Template(file_context_path=str(context)).from_template("base")
            .set_envs({"APP": "/srv/app"})
            .set_workdir("/srv/app")
            .copy("src/", "./src/")
            .run_cmd(WORK)
            .run_cmd("cat src/f0.txt | wc -l > built"))


def median(values):
    return {"median": round(statistics.median(values), 2), "max": round(max(values), 2),
            "n": len(values)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    daemon_args(ap)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    d, hutch = own_daemon(ap, a, "hutch-e2b-build-bench-")
    context = pathlib.Path(tempfile.mkdtemp(prefix="hutch-e2b-build-bench-ctx-"))
    (context / "Dockerfile").write_text(DOCKERFILE)
    (context / "src").mkdir()
    for i in range(20):
        (context / "src" / f"f{i}.txt").write_text(f"{i}\n" * 100)
    d.start()
    os.environ.update(E2B_API_URL=d.http_url, E2B_SANDBOX_URL=d.http_url, E2B_API_KEY=d.key)
    os.environ.pop("E2B_DOMAIN", None)
    cli = Cli(hutch, d.socket)
    n = [0]

    def hutch_build(no_cache=False):
        n[0] += 1
        _, seconds = cli.run("template", "build", f"cli-{n[0]}", "-f", str(context / "Dockerfile"),
                             str(context), *SIZE_CLI, *(["--no-cache"] if no_cache else []))
        stderr = cli.stderr
        cli.run("template", "rm", f"cli-{n[0]}")
        return seconds, stderr.count("CACHED")

    def e2b_build(no_cache=False):
        # One name: each build is a new build of it; the one before goes once it is not tagged.
        logs = []
        t0 = time.perf_counter()
        Template.build(recipe(context), "sdk", skip_cache=no_cache,
                       on_build_logs=logs.append, **SIZE_E2B)
        seconds = time.perf_counter() - t0
        return seconds, sum("CACHED" in getattr(e, "message", "") for e in logs)

    faces = (("hutch_cli", hutch_build), ("e2b_sdk", e2b_build))
    kinds = ("no_cache", "unchanged", "one_file_changed")
    times = {face: {k: [] for k in kinds} for face, _ in faces}
    cached = {face: {} for face, _ in faces}
    try:
        # Each face's cache filled once, untimed (the two faces' caches are not shared).
        for _, build in faces:
            build()
        for i in range(a.runs):
            for face, build in faces:
                times[face]["no_cache"].append(build(no_cache=True)[0])
                seconds, cached[face]["unchanged"] = build()
                times[face]["unchanged"].append(seconds)
            # One file of the COPY changed: both faces rebuild from that step.
            (context / "src" / "f7.txt").write_text(f"changed {i}\n")
            for face, build in faces:
                seconds, cached[face]["one_file_changed"] = build()
                times[face]["one_file_changed"].append(seconds)
    finally:
        d.stop()
    results = {face: {k: median(v) for k, v in t.items()} for face, t in times.items()}
    results["cached_steps"] = cached
    results["e2b_overhead_s"] = {
        k: round(results["e2b_sdk"][k]["median"] - results["hutch_cli"][k]["median"], 2)
        for k in kinds}
    text = json.dumps(results, indent=2)
    print(text)
    if a.json:
        pathlib.Path(a.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
