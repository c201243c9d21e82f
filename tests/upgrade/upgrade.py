#!/usr/bin/env python3
"""Upgrading hutchd while boxes run (issue 18.7), by hand: boxes made by a previous version's
hutchd, which is then replaced by this tree's on the same state directory.

    sudo tests/upgrade/upgrade.py --prev REV [--build build] [--prev-build DIR]

REV (a commit) is built in a worktree under /var/cache/hutch/prev-builds/REV (ccache makes it
quick when its sources are close to this tree's), unless --prev-build names a build of it. With
the previous hutchd (and its CLI): a running box with a background process, a box with a
checkpoint, a suspended box with a background process, a box shut down. Then hutchd is stopped
(SIGTERM, as a package upgrade restarts it: QEMU outlives it) and this tree's hutchd started on
the same state. With the new CLI each box must be as it was: the running one adopted with its
process, the checkpoint rolled back to, the suspended box resumed with its process (or booted
cold saying why), the stopped one started with its disk; a new box restores the template
snapshot the previous version made, and the running box forks. Prints each check; exits 1 if
one fails. Root; the guest image is the newest built base image (HUTCH_TEST_IMAGE to choose).
"""
import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "support"))
from hutchd_daemon import HutchDaemon  # noqa: E402

TARGETS = ["hutchd", "hutch", "hutch-agent", "hutch-egress", "hutch-jail", "hutch-diff"]
MARKER = "setsid nohup sleep 7777 >/dev/null 2>&1 < /dev/null & echo started"
MARKER_RUNNING = "pgrep -x sleep -a | grep -c 7777 || true"


def build_prev(rev):
    full = subprocess.run(["git", "-C", str(REPO), "rev-parse", rev], check=True,
                          capture_output=True, text=True).stdout.strip()
    root = pathlib.Path("/var/cache/hutch/prev-builds") / full[:12]
    src, build = root / "src", root / "build"
    if not src.exists():
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(src), full],
                       check=True)
    if not (build / "build.ninja").exists():
        subprocess.run(["cmake", "-S", str(src), "-B", str(build), "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                        "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"], check=True)
    subprocess.run(["ninja", "-C", str(build), *TARGETS], check=True)
    return build, full


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prev", required=True, help="the previous version: a commit")
    ap.add_argument("--prev-build", help="a build of it (default: built here)")
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(REPO / "build")))
    args = ap.parse_args()
    if args.prev_build:
        prev_build, prev_rev = pathlib.Path(args.prev_build), args.prev
    else:
        prev_build, prev_rev = build_prev(args.prev)
    new_build = pathlib.Path(args.build).resolve()

    d = HutchDaemon(tempfile.mkdtemp(prefix="hutch-upgrade-"), build=str(prev_build))
    d.start()
    failures = []

    def cli(build, *argv):
        return subprocess.run([str(pathlib.Path(build, "src", "cli", "hutch")), "--socket",
                               d.socket, *argv], capture_output=True, text=True, timeout=600)

    def must(build, *argv):
        r = cli(build, *argv)
        if r.returncode != 0:
            raise RuntimeError(f"hutch {' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
        return r.stdout

    def check(what, ok, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else ""), flush=True)
        if not ok:
            failures.append(what)

    def inspect(name, build=new_build):
        return json.loads(must(build, "inspect", name))[0]

    try:
        old = prev_build
        print(f"== boxes made by hutchd {prev_rev[:12]} ({prev_build})", flush=True)
        must(old, "run", "-d", "--name", "running")
        must(old, "exec", "running", "--", "sh", "-c", MARKER)
        must(old, "run", "-d", "--name", "cp")
        must(old, "exec", "cp", "--", "sh", "-c", "echo one > ~/v")
        must(old, "checkpoint", "cp", "--name", "one")
        must(old, "exec", "cp", "--", "sh", "-c", "echo two > ~/v")
        must(old, "run", "-d", "--name", "susp")
        must(old, "exec", "susp", "--", "sh", "-c", MARKER)
        must(old, "stop", "susp")
        must(old, "run", "-d", "--name", "off")
        must(old, "exec", "off", "--", "sh", "-c", "echo kept > ~/kept; sync")
        must(old, "stop", "--shutdown", "off")
        qemu_before = inspect("running", old)["pid"]

        print(f"== upgraded: hutchd of {new_build}", flush=True)
        d._argv[0] = str(new_build / "src" / "daemon" / "hutchd")
        d.restart(signal.SIGTERM)
        states = {b["name"]: b["state"] for b in json.loads(must(new_build, "--json", "ls"))}
        check("every box is listed in its state",
              states == {"running": "running", "cp": "running", "susp": "suspended",
                         "off": "stopped"}, json.dumps(states))
        running = inspect("running")
        check("the running box was adopted: the same QEMU", running.get("pid") == qemu_before,
              f"pid {qemu_before} -> {running.get('pid')}")
        marker = cli(new_build, "exec", "running", "--", "sh", "-c", MARKER_RUNNING)
        check("its background process runs, and exec answers", marker.stdout == "1\n",
              marker.stdout.strip() + marker.stderr.strip())
        rolled = cli(new_build, "rollback", "cp", "one")
        after = cli(new_build, "exec", "cp", "--", "cat", "/home/hutch/v").stdout
        check("a checkpoint the previous version made is rolled back to",
              rolled.returncode == 0 and after == "one\n",
              rolled.stderr.strip() or f"the file reads {after!r}")
        started = cli(new_build, "start", "susp")
        boot = inspect("susp").get("boot", "")
        marker = cli(new_build, "exec", "susp", "--", "sh", "-c", MARKER_RUNNING).stdout
        check("the suspended box starts", started.returncode == 0, started.stderr.strip())
        check("and resumes with its process (else boots cold saying why)",
              marker == "1\n" or "cold boot" in boot, f"boot: {boot}; process: {marker.strip()}")
        started = cli(new_build, "start", "off")
        kept = cli(new_build, "exec", "off", "--", "cat", "/home/hutch/kept").stdout
        check("the box shut down starts with its disk", started.returncode == 0 and kept == "kept\n",
              started.stderr.strip() or repr(kept))
        made = cli(new_build, "run", "-d", "--name", "new")
        boot = inspect("new").get("boot", "") if made.returncode == 0 else made.stderr.strip()
        check("a new box restores the template snapshot the previous version made",
              "restored from template snapshot" in boot, boot)
        forked = cli(new_build, "fork", "running", "--name", "child")
        marker = cli(new_build, "exec", "child", "--", "sh", "-c", MARKER_RUNNING).stdout
        check("the adopted box forks, its process copied", forked.returncode == 0
              and marker == "1\n", forked.stderr.strip() or marker.strip())
    finally:
        d.stop()
    print(f"{len(failures)} failed" if failures else "every check passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
