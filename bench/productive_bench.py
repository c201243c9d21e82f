#!/usr/bin/env python3
"""Time to productive (issue 16.6): how long from `hutch run` until a small app answers.

What the seeds time on their own machines ("a Python project with Postgres answering"), with
hutch's CLI, as a new user would, each step timed:

  A. fresh: `hutch run` a base box (--network-policy debian-mirrors, a published port), install
     postgresql and python3-psycopg2 with apt from the host's Debian mirrors, make Postgres and
     the app services of the box (/etc/hutch/services: they start at every boot), create the
     database, start both now, and GET the app through the published port: it inserts a row
     into a table and answers the count.
  B. from a template made of that box after the install (`hutch template create --from`): the
     first `hutch run` (it makes the template's snapshot: a cold boot that starts the services)
     and the next one (restored from that snapshot, Postgres and the app already running), each
     until the app answers.
  C. docker: `hutch run --template docker`, `docker build` of a busybox image (FROM scratch, the
     host's busybox-static: nothing from a registry) and `docker compose up -d --wait` of two
     services with health checks, until the front one answers through a published port.

Usage: sudo bench/productive_bench.py [--build build] [--image DIR] [--docker-image DIR]
                                      [--skip-docker] [--json FILE]
Needs the host's apt mirrors reachable (phase A is the only step that downloads: the Debian
packages, through the box's wall). Not a test: nothing fails on a slow number.
"""
import argparse
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from hutchd_daemon import HutchDaemon  # noqa: E402

APP = r'''import http.server
import psycopg2


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with psycopg2.connect(dbname="app") as db, db.cursor() as cur:
            cur.execute("create table if not exists visits (at timestamptz default now())")
            cur.execute("insert into visits default values")
            cur.execute("select count(*) from visits")
            body = f"visits={cur.fetchone()[0]}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


http.server.HTTPServer(("127.0.0.1", 8000), Handler).serve_forever()
'''

# Postgres as a service of the box: its socket directory is on /run (a tmpfs each boot).
POSTGRES = ("install -d -o postgres -g postgres -m 2775 /run/postgresql && "
            "v=$(ls /usr/lib/postgresql) && exec runuser -u postgres -- "
            "/usr/lib/postgresql/$v/bin/postgres -D /var/lib/postgresql/$v/main "
            "-c config_file=/etc/postgresql/$v/main/postgresql.conf")

COMPOSE = """services:
  db:
    image: bb
    command: ["httpd", "-f", "-p", "5000", "-h", "/www/db"]
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "-", "http://127.0.0.1:5000/"]
      interval: 1s
      retries: 60
  web:
    image: bb
    command: ["httpd", "-f", "-p", "8080", "-h", "/www/web"]
    ports: ["8080:8080"]
    depends_on:
      db:
        condition: service_healthy
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "-", "http://db:5000/"]
      interval: 1s
      retries: 60
"""

DOCKERFILE = """FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN mkdir -p /www/db /www/web && echo db-ok > /www/db/index.html && \\
    echo "hello from a compose stack in a hutch box" > /www/web/index.html
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Bench:
    def __init__(self, hutch, daemon):
        self.cli = [hutch, "--socket", daemon.socket]
        self.steps = []

    def run(self, *args, stdin=None):
        r = subprocess.run(self.cli + list(args), capture_output=True, text=True, input=stdin)
        if r.returncode != 0:
            raise RuntimeError(f"hutch {' '.join(args)} exited {r.returncode}: {r.stderr[-2000:]}")
        return r.stdout

    def step(self, name, fn, *args, **kw):
        t = time.perf_counter()
        out = fn(*args, **kw)
        self.steps.append((name, time.perf_counter() - t))
        print(f"  {name}: {self.steps[-1][1]:.2f} s", file=sys.stderr)
        return out

    @staticmethod
    def answer(port, needle, timeout=600):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
                    body = r.read().decode()
                    if needle in body:
                        return body
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"no answer with {needle!r} on port {port} in {timeout} s")


def fresh(b, port):
    b.step("hutch run (base, debian-mirrors, -p)", b.run, "run", "-d", "--name", "pg",
           "--memory", "1G", "--network-policy", "debian-mirrors", "-p", f"{port}:8000")
    b.step("apt-get install postgresql python3-psycopg2", b.run, "exec", "-u", "root", "pg", "--",
           "sh", "-c", "apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive "
           "apt-get install -y -q --no-install-recommends postgresql python3-psycopg2 >/dev/null")
    services = {"postgres": {"argv": ["/bin/sh", "-c", POSTGRES]},
                "app": {"argv": ["python3", "/home/hutch/app.py"], "user": "hutch",
                        "cwd": "/home/hutch"}}
    # The template's readiness check (docs/protocol.md): its snapshot is taken once the app
    # answers, so that boxes restored from it answer at once.
    script = ("mkdir -p /etc/hutch/services && cat > /home/hutch/app.py && "
              "chown hutch /home/hutch/app.py && printf '#!/bin/sh\\nexec curl -fs -o /dev/null "
              "--max-time 2 http://127.0.0.1:8000/\\n' > /etc/hutch/ready && "
              "chmod 0755 /etc/hutch/ready")
    for name, spec in services.items():
        script += f" && echo '{json.dumps(spec)}' > /etc/hutch/services/{name}.json"
    b.step("write the app and the services", b.run, "exec", "-i", "-u", "root", "pg", "--", "sh",
           "-c", script, stdin=APP)
    b.step("start postgres (detached)", b.run, "exec", "-d", "-u", "root", "pg", "--", "sh",
           "-c", POSTGRES)
    b.step("create the role and database", b.run, "exec", "-u", "root", "pg", "--", "sh", "-c",
           "for i in $(seq 600); do pg_isready -q && break; sleep 0.2; done && "
           "runuser -u postgres -- psql -q -c 'create role hutch login' "
           "-c 'create database app owner hutch'")
    b.step("start the app", b.run, "exec", "-d", "pg", "--", "python3", "/home/hutch/app.py")
    b.step("first answer through the port", b.answer, port, "visits=")


def from_template(b, ports):
    b.run("stop", "--shutdown", "pg")
    b.step("template create --from", b.run, "template", "create", "--from", "pg", "pg-app")
    for name, port in zip(("first run (makes the snapshot)", "next run (restored)"), ports):
        t = time.perf_counter()
        box = b.run("run", "-d", "--template", "pg-app", "-p", f"{port}:8000").strip()
        b.answer(port, "visits=")
        b.steps.append((f"template: {name}: run to answer", time.perf_counter() - t))
        print(f"  {b.steps[-1][0]}: {b.steps[-1][1]:.2f} s", file=sys.stderr)
        b.run("rm", "-f", box)


def docker(b, port):
    stack = pathlib.Path(tempfile.mkdtemp(prefix="hutch-stack-"))
    stack.chmod(0o755)  # hutch cp keeps modes: the box's user builds from it
    shutil.copy("/bin/busybox", stack / "busybox")
    (stack / "Dockerfile").write_text(DOCKERFILE)
    (stack / "compose.yaml").write_text(COMPOSE)
    t = time.perf_counter()
    b.step("hutch run (docker, -p)", b.run, "run", "-d", "--name", "dc", "--template", "docker",
           "--memory", "1G", "-p", f"{port}:8080")
    b.step("hutch cp the stack", b.run, "cp", str(stack), "dc:/tmp/stack")
    b.step("docker build (FROM scratch + busybox)", b.run, "exec", "dc", "--", "docker", "build",
           "-q", "-t", "bb", "/tmp/stack")
    b.step("docker compose up -d --wait", b.run, "exec", "-w", "/tmp/stack", "dc", "--", "docker",
           "compose", "up", "-d", "--wait")
    b.step("answer through the port", b.answer, port, "compose stack")
    b.steps.append(("docker: run to answer", time.perf_counter() - t))
    shutil.rmtree(stack)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--image", default=os.environ.get("HUTCH_TEST_IMAGE"))
    ap.add_argument("--docker-image", default=os.environ.get("HUTCH_TEST_DOCKER_IMAGE"))
    ap.add_argument("--skip-docker", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    hutch = str(pathlib.Path(args.build, "src", "cli", "hutch"))
    d = HutchDaemon(tempfile.mkdtemp(prefix="hutch-productive-"), build=args.build,
                    image=args.image)
    if args.docker_image and not args.skip_docker:
        (d.dir / "state" / "templates").mkdir(parents=True, exist_ok=True)
        (d.dir / "state" / "templates" / "docker").symlink_to(args.docker_image)
    d.start()
    b = Bench(hutch, d)
    try:
        print("A. fresh base box to a Python app on Postgres", file=sys.stderr)
        t = time.perf_counter()
        fresh(b, free_port())
        b.steps.append(("fresh: run to answer", time.perf_counter() - t))
        print("B. the same from a template made after the install", file=sys.stderr)
        from_template(b, (free_port(), free_port()))
        if args.docker_image and not args.skip_docker:
            print("C. docker compose up --wait of two services", file=sys.stderr)
            docker(b, free_port())
    finally:
        d.stop()
    print()
    for name, seconds in b.steps:
        print(f"{name:55} {seconds:8.2f} s")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"args": vars(args), "steps": b.steps},
                                                      indent=1))


if __name__ == "__main__":
    main()
