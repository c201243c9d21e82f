#!/usr/bin/env python3
"""Soak (issue 18.4): one hutchd, several boxes at once, a long mix of what an agent harness
does, hutchd restarted in the middle, and a leak check at the end.

Each of --boxes workers owns a box and runs operations on it, picked at random by weight, until
--ops operations were done in all and --minutes have passed:

  exec        `cat marker; echo TOKEN`: the box's marker file and the token must come back
  mark        writes a new marker (what every later check expects)
  files       PUT 16 KiB-2 MiB of random bytes, GET them back (sha256 checked), DELETE
  cp          `hutch cp` of a small tree (files, a symlink, a subdirectory) into the box and back
              out (tar through an exec stream): the trees must be equal
  fork        forks the box; the child must hold the parent's marker; the child is removed
  checkpoint  checkpoint, write another marker, roll back: the marker must be the old one
  stop-start  stop (suspend; one in three a clean shutdown), start, the marker must be there
  diff        `GET .../diff`: the marker file must be listed as added
  recreate    rm -f the box and create a new one from the template

Every --ops/(--restarts+1) operations (and --minutes/(--restarts+1)), the workers finish what
they are doing, and hutchd is ended (SIGTERM and SIGKILL in turn) and started again on the same
state: every box must still be running with its marker. A failed operation is counted with its message, and the box is
healed (started or recreated) so the run goes on.

At the end every box is removed and the run checks what is left: processes that mention the
run's directory (QEMU, hutch-egress, jails), network namespaces and box cgroups that were not
there before, files in the state directory that were not there after the warm-up, and
hutchd's memory, descriptors and threads against its last start. hutchd's warnings and errors
are counted by message.

Exit code: 0 when every operation succeeded and nothing leaked, 1 otherwise, 2 for bad usage.

Usage: bench/soak.py [--boxes 4] [--ops 1000] [--minutes 0] [--restarts 3] [--memory 512]
                     [--seed N] [--build build] [--image DIR] [--json FILE] [--keep]
       bench/soak.py --boxes 2 --ops 60 --restarts 1      # the smoke run CI does
Root (hutchd jails every QEMU). hutchd runs with --pool-size 0 and its defaults otherwise.
"""
import argparse
import hashlib
import json
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
sys.path.insert(0, str(REPO / "bench"))
from benchlib import Api, Errors, daemon_usage, summary  # noqa: E402
from hutchd_daemon import HutchDaemon  # noqa: E402

WEIGHTS = {"exec": 30, "mark": 10, "files": 12, "cp": 6, "fork": 8, "checkpoint": 8,
           "stop-start": 12, "diff": 3, "recreate": 5}
MARKER = "/home/hutch/soak-marker"


def cgroup_boxes(ours):
    """The box cgroups on the host named in `ours` (the children of each `hutch-boxes`
    directory are named by their box's id; other hutchds, CI's other lane's, have their own)."""
    found = set()
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        if root.count("/") > 9:
            dirs[:] = []
            continue
        if os.path.basename(root) == "hutch-boxes":
            found.update(os.path.join(root, d) for d in dirs if d in ours)
            dirs[:] = []
    return found


def netns_names(uid_base):
    """The network namespaces of the hutchd whose boxes' uids start at uid_base: it names them
    hutch-<uid base in hex>-<index>, so those of other hutchds on the host are not counted."""
    try:
        names = os.listdir("/run/netns")
    except FileNotFoundError:
        return set()
    return {n for n in names
            if (m := re.fullmatch(r"hutch-([0-9a-f]+)-\d+", n)) and int(m.group(1), 16) == uid_base}


def ids_in(path):
    """Every box-id-like word (12 hex digits) in a file: hutchd's debug log names each VM's run
    directory and box as it makes them."""
    return set(re.findall(r"\b[0-9a-f]{12}\b", pathlib.Path(path).read_text(errors="replace")))


def processes_mentioning(needle, but=()):
    """pid -> command line of every process whose command line holds `needle`."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in but:
            continue
        try:
            cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if needle.encode() in cmdline:
            found[int(pid)] = cmdline.replace(b"\0", b" ").decode(errors="replace")[:200]
    return found


def tree(root):
    """relative path -> ("file", bytes) | ("link", target) | ("dir", None), below root."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                out[rel] = ("dir", None)
            else:
                out[rel] = ("file", pathlib.Path(path).read_bytes())
    return out


def state_files(state):
    """The files under the state directory, but for the database, logs and sockets."""
    out = set()
    for root, _, files in os.walk(state):
        for f in files:
            path = os.path.relpath(os.path.join(root, f), state)
            if re.search(r"(\.db|\.db-wal|\.db-shm|\.log|\.sock|\.lock)$", path):
                continue
            out.add(path)
    return out


class Gate:
    """Workers pass it around each operation; restart() waits until none is inside."""

    def __init__(self):
        self.cond = threading.Condition()
        self.closed = False
        self.inside = 0

    def enter(self):
        with self.cond:
            while self.closed:
                self.cond.wait()
            self.inside += 1

    def leave(self):
        with self.cond:
            self.inside -= 1
            self.cond.notify_all()

    def close(self):
        with self.cond:
            self.closed = True
            while self.inside:
                self.cond.wait()

    def open(self):
        with self.cond:
            self.closed = False
            self.cond.notify_all()


class WrongResult(Exception):
    pass


class Soak:
    def __init__(self, args, daemon):
        self.args = args
        self.d = daemon
        self.api = Api(daemon.socket)
        self.errors = Errors()
        self.gate = Gate()
        self.lock = threading.Lock()
        self.done = 0
        self.latency = {k: [] for k in WEIGHTS}
        self.failed = {k: 0 for k in WEIGHTS}
        self.markers = {}  # box -> its marker's text
        self.heals = []
        self.restarts = []
        self.usage = []
        self.t0 = time.monotonic()
        self.stop = threading.Event()

    # --- the API, as a harness calls it ------------------------------------------------------
    def exec(self, box, script):
        r = self.api.json("POST", f"/v1/boxes/{box}/exec",
                          {"argv": ["sh", "-c", script], "timeout_ms": 120000}, timeout=300)
        if r.get("exit_code") != 0:
            raise WrongResult(f"exec {script!r}: exit {r.get('exit_code')} "
                              f"stderr {r.get('stderr')!r} error {r.get('error')}")
        return r.get("stdout", "")

    def create(self, box):
        self.api.json("POST", "/v1/boxes", {"name": box, "memory_mib": self.args.memory})
        self.write_marker(box)

    def write_marker(self, box):
        text = f"{box}-{random.getrandbits(48):x}"
        self.exec(box, f"echo {text} > {MARKER}")
        self.markers[box] = text

    def expect_marker(self, box, where=None):
        got = self.exec(box, f"cat {MARKER}").strip()
        want = self.markers[box] if where is None else where
        if got != want:
            raise WrongResult(f"{box}'s marker is {got!r}, not {want!r}")

    def remove(self, box):
        status, payload = self.api.call("DELETE", f"/v1/boxes/{box}?force=true", timeout=300)
        if status not in (200, 404):
            raise RuntimeError(f"rm {box}: {status} {payload.decode(errors='replace').strip()}")

    # --- the operations ----------------------------------------------------------------------
    def op_exec(self, box, rng):
        token = f"t{rng.getrandbits(32):x}"
        out = self.exec(box, f"cat {MARKER}; echo {token}")
        if out != f"{self.markers[box]}\n{token}\n":
            raise WrongResult(f"exec printed {out!r}")

    def op_mark(self, box, rng):
        self.write_marker(box)

    def op_files(self, box, rng):
        data = rng.randbytes(rng.randint(16 << 10, 2 << 20))
        path = urllib.parse.quote(f"/home/hutch/blob-{rng.getrandbits(32):x}", safe="")
        target = f"/v1/boxes/{box}/files?path={path}"
        status, payload = self.api.call("PUT", target, raw=data, timeout=300)
        if status >= 300:
            raise RuntimeError(f"PUT: {status} {payload.decode(errors='replace').strip()}")
        status, back = self.api.call("GET", target, timeout=300)
        if status != 200:
            raise RuntimeError(f"GET: {status} {back.decode(errors='replace').strip()}")
        if hashlib.sha256(back).digest() != hashlib.sha256(data).digest():
            raise WrongResult(f"GET gave {len(back)} bytes that differ from the {len(data)} put")
        status, payload = self.api.call("DELETE", target, timeout=300)
        if status >= 300:
            raise RuntimeError(f"DELETE: {status} {payload.decode(errors='replace').strip()}")

    def op_cp(self, box, rng):
        work = pathlib.Path(tempfile.mkdtemp(prefix="cp-", dir=self.d.dir))
        try:
            src = work / "src"
            (src / "sub").mkdir(parents=True)
            for i in range(rng.randint(1, 5)):
                (src / f"f{i}").write_bytes(rng.randbytes(rng.randint(0, 512 << 10)))
            (src / "sub" / "note").write_text("note\n")
            (src / "link").symlink_to("sub/note")
            inside = f"/home/hutch/cp-{rng.getrandbits(32):x}"
            self.hutch("cp", str(src), f"{box}:{inside}")
            self.hutch("cp", f"{box}:{inside}", str(work / "back"))
            if tree(work / "back") != tree(src):
                raise WrongResult("the tree copied out differs from the one copied in")
            self.exec(box, f"rm -rf {inside}")
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def hutch(self, *args):
        env = dict(os.environ, HUTCH_SOCKET=self.d.socket)
        env.pop("HUTCH_HOST", None)
        r = subprocess.run([str(self.d.build / "src" / "cli" / "hutch"), *args], env=env,
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"hutch {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
        return r.stdout

    def op_fork(self, box, rng):
        child = f"{box}-f{rng.getrandbits(24):x}"
        self.api.json("POST", f"/v1/boxes/{box}/fork", {"names": [child]}, timeout=300)
        try:
            self.expect_marker(child, self.markers[box])
        finally:
            self.remove(child)

    def op_checkpoint(self, box, rng):
        name = f"c{rng.getrandbits(24):x}"
        before = self.markers[box]
        self.api.json("POST", f"/v1/boxes/{box}/checkpoints", {"name": name}, timeout=300)
        self.write_marker(box)
        self.api.json("POST", f"/v1/boxes/{box}/rollback", {"checkpoint": name}, timeout=300)
        self.markers[box] = before
        self.expect_marker(box)
        self.api.json("DELETE", f"/v1/boxes/{box}/checkpoints/{name}")

    def op_stop_start(self, box, rng):
        shutdown = rng.random() < 1 / 3
        r = self.api.json("POST", f"/v1/boxes/{box}/stop" + ("?shutdown=true" if shutdown else ""),
                          timeout=300)
        want = "stopped" if shutdown else "suspended"
        if r.get("state") != want:
            raise WrongResult(f"stop left the box {r.get('state')}, not {want}")
        self.api.json("POST", f"/v1/boxes/{box}/start", timeout=300)
        self.expect_marker(box)

    def op_diff(self, box, rng):
        r = self.api.json("GET", f"/v1/boxes/{box}/diff", timeout=600)
        paths = {c.get("path"): c.get("change") for c in r.get("changes", [])}
        if paths.get(MARKER) != "added":
            raise WrongResult(f"the diff does not list {MARKER} as added: {paths.get(MARKER)}")

    def op_recreate(self, box, rng):
        self.remove(box)
        self.create(box)

    # --- workers, healing, restarts ----------------------------------------------------------
    def heal(self, box):
        """After a failed operation: the box running with a known marker, whatever it takes."""
        try:
            status, payload = self.api.call("GET", f"/v1/boxes/{box}")
            state = json.loads(payload).get("state") if status == 200 else None
            if state in ("stopped", "suspended", "failed"):
                self.api.json("POST", f"/v1/boxes/{box}/start", timeout=300)
            elif state == "paused" or state == "running":
                pass
            else:
                raise RuntimeError(f"state {state}")
            self.write_marker(box)
            self.heals.append(f"{box}: {state}, started and re-marked")
        except Exception as e:  # noqa: BLE001
            self.heals.append(f"{box}: recreated ({type(e).__name__}: {e})")
            self.remove(box)
            self.create(box)

    def worker(self, i):
        rng = random.Random(self.args.seed * 1000 + i)
        box = f"soak{i}"
        kinds = list(WEIGHTS)
        weights = [WEIGHTS[k] for k in kinds]
        while not self.stop.is_set():
            kind = rng.choices(kinds, weights)[0]
            self.gate.enter()
            try:
                if self.stop.is_set():
                    return
                started = time.monotonic()
                try:
                    getattr(self, "op_" + kind.replace("-", "_"))(box, rng)
                    with self.lock:
                        self.latency[kind].append(time.monotonic() - started)
                except Exception as e:  # noqa: BLE001
                    with self.lock:
                        self.failed[kind] += 1
                    self.errors.add(kind, box, f"{type(e).__name__}: {e}")
                    try:
                        self.heal(box)
                    except Exception as e2:  # noqa: BLE001
                        self.errors.add("heal", box, f"{type(e2).__name__}: {e2}")
                with self.lock:
                    self.done += 1
            finally:
                self.gate.leave()

    def sample(self, tag):
        u = daemon_usage(self.d.pid)
        u.update({"at_s": round(time.monotonic() - self.t0), "tag": tag, "ops": self.done,
                  "box_processes": len(processes_mentioning(str(self.d.dir), but=(self.d.pid,)))})
        self.usage.append(u)
        print(f"[{u['at_s']:>5} s] {tag}: {self.done} ops, {self.errors.count()} errors; hutchd "
              f"{u['rss_kib']} KiB, {u['fds']} fds, {u['threads']} threads; "
              f"{u['box_processes']} box processes", file=sys.stderr, flush=True)

    def restart(self, k):
        self.gate.close()
        sig = signal.SIGTERM if k % 2 == 0 else signal.SIGKILL
        started = time.monotonic()
        self.sample(f"before restart {k + 1}")
        self.d.restart(sig)
        took = time.monotonic() - started
        self.api = Api(self.d.socket)
        checked = []
        for i in range(self.args.boxes):
            box = f"soak{i}"
            try:
                r = self.api.json("GET", f"/v1/boxes/{box}")
                if r.get("state") not in ("running", "paused"):
                    raise WrongResult(f"{box} is {r.get('state')} after the restart")
                self.expect_marker(box)
                checked.append(box)
            except Exception as e:  # noqa: BLE001
                self.errors.add("restart", box, f"{type(e).__name__}: {e}")
                self.heal(box)
        self.restarts.append({"signal": signal.Signals(sig).name, "at_ops": self.done,
                              "answered_s": round(took, 1), "boxes_checked": len(checked)})
        self.sample(f"after restart {k + 1} ({signal.Signals(sig).name})")
        self.base_usage = daemon_usage(self.d.pid)
        self.gate.open()

    def run(self):
        args = self.args
        # A warm-up box makes the template's snapshot: files the run may rightly leave.
        self.create("warmup")
        self.remove("warmup")
        time.sleep(2)
        self.files0 = state_files(self.d.dir / "state")
        self.base_usage = daemon_usage(self.d.pid)
        for i in range(args.boxes):
            self.create(f"soak{i}")
        self.sample("boxes created")
        threads = [threading.Thread(target=self.worker, args=(i,), daemon=True)
                   for i in range(args.boxes)]
        for t in threads:
            t.start()
        # Restarts spread over the operations and over the minutes, whichever comes later.
        restarts_done = 0

        def restart_due(k):
            share = (k + 1) / (args.restarts + 1)
            return (self.done >= args.ops * share and
                    time.monotonic() - self.t0 >= args.minutes * 60 * share)

        last_sample = time.monotonic()
        while True:
            time.sleep(1)
            enough = (self.done >= args.ops and
                      time.monotonic() - self.t0 >= args.minutes * 60)
            if enough:
                break
            if restarts_done < args.restarts and restart_due(restarts_done):
                self.restart(restarts_done)
                restarts_done += 1
            if time.monotonic() - last_sample >= 60:
                self.sample("running")
                last_sample = time.monotonic()
        self.stop.set()
        self.gate.open()
        for t in threads:
            t.join()
        self.sample("operations done")
        return self.leak_check()

    def leak_check(self):
        for b in self.api.json("GET", "/v1/boxes").get("boxes", []):
            self.remove(b["id"])
        # rm answers before the files are gone: give the background cleanup time.
        deadline = time.monotonic() + 120
        while True:
            left = {
                "processes": processes_mentioning(str(self.d.dir), but=(self.d.pid,)),
                "netns": sorted(netns_names(self.uid_base) - self.netns0),
                "cgroups": sorted(cgroup_boxes(ids_in(self.d.log)) - self.cgroups0),
                "files": sorted(state_files(self.d.dir / "state") - self.files0),
            }
            if not any(left.values()) or time.monotonic() > deadline:
                break
            time.sleep(2)
        self.sample("every box removed")
        end = daemon_usage(self.d.pid)
        left["hutchd"] = {"at_last_start": self.base_usage, "at_end": end}
        return left

    def report(self, left):
        ops = {}
        for k in WEIGHTS:
            s = summary(self.latency[k])
            ops[k] = {"ok": s.get("n", 0), "failed": self.failed[k],
                      "p50_s": s.get("p50"), "p99_s": s.get("p99"), "max_s": s.get("max")}
        log = {}
        for line in pathlib.Path(self.d.log).read_text(errors="replace").splitlines():
            m = re.match(r"\[[^]]*\] \[[^]]*\] \[(warning|error|critical)\] (.*)", line)
            if m:
                # Counted by message with the names and numbers taken out.
                key = m.group(1) + ": " + re.sub(r"\b(soak\d+(-f[0-9a-f]+)?|[0-9a-f]{8,}|\d+)\b",
                                                 "#", m.group(2))[:160]
                log[key] = log.get(key, 0) + 1
        leaked = any(left[k] for k in ("processes", "netns", "cgroups", "files"))
        # What hutchd said about the boxes something was left of (their cgroup is named by the
        # box's id), so that a leak seen once, in CI, can be understood from its output.
        ids = {os.path.basename(c) for c in left["cgroups"]}
        ids |= {m for f in left["files"] for m in re.findall(r"\b[0-9a-f]{12}\b", f)}
        leaked_log = [line for line in
                      pathlib.Path(self.d.log).read_text(errors="replace").splitlines()
                      if any(i in line for i in ids)][-80:] if ids else []
        return {"ops": ops, "total_ops": self.done, "errors": self.errors.by_phase,
                "heals": self.heals, "restarts": self.restarts, "usage": self.usage,
                "left": left, "leaked": leaked, "hutchd_log": log, "leaked_log": leaked_log,
                "minutes": round((time.monotonic() - self.t0) / 60, 1)}


def print_report(r):
    print(f"\n{r['total_ops']} operations in {r['minutes']} min; "
          f"{sum(o['failed'] for o in r['ops'].values())} failed")
    print(f"{'operation':<12} {'ok':>6} {'failed':>6} {'p50 s':>7} {'p99 s':>7} {'max s':>7}")
    for k, o in r["ops"].items():
        cells = ["-" if o[c] is None else o[c] for c in ("p50_s", "p99_s", "max_s")]
        print(f"{k:<12} {o['ok']:>6} {o['failed']:>6} {cells[0]:>7} {cells[1]:>7} {cells[2]:>7}")
    for x in r["restarts"]:
        print(f"restart ({x['signal']}) at {x['at_ops']} ops: answered in {x['answered_s']} s, "
              f"{x['boxes_checked']} boxes running with their marker")
    for h in r["heals"]:
        print(f"healed {h}")
    left = r["left"]
    for k in ("processes", "netns", "cgroups", "files"):
        print(f"left behind, {k}: {left[k] or 'nothing'}")
    a, b = left["hutchd"]["at_last_start"], left["hutchd"]["at_end"]
    print(f"hutchd since its last start: RSS {a['rss_kib']} -> {b['rss_kib']} KiB, fds "
          f"{a['fds']} -> {b['fds']}, threads {a['threads']} -> {b['threads']}")
    for msg, n in sorted(r["hutchd_log"].items(), key=lambda kv: -kv[1]):
        print(f"hutchd log x{n}: {msg}")
    for line in r.get("leaked_log", []):
        print(f"hutchd log of a leaked box: {line}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--boxes", type=int, default=4, help="workers, each with a box")
    ap.add_argument("--ops", type=int, default=1000, help="operations in all, at least")
    ap.add_argument("--minutes", type=float, default=0, help="run at least this long")
    ap.add_argument("--restarts", type=int, default=3, help="hutchd restarts in the middle")
    ap.add_argument("--memory", type=int, default=512, help="MiB per box")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--build", help="build directory (default: $HUTCH_BUILD_DIR or build/)")
    ap.add_argument("--image", help="the base guest image (default: the newest built)")
    ap.add_argument("--json", help="write the report here")
    ap.add_argument("--keep", action="store_true", help="keep the run's directory")
    args = ap.parse_args()
    if args.boxes < 1 or args.ops < 1 or args.restarts < 0 or args.minutes < 0:
        ap.error("--boxes and --ops must be at least 1, --restarts and --minutes at least 0")
    if os.geteuid() != 0:
        ap.error("run as root: hutchd jails every QEMU")
    random.seed(args.seed)
    work = pathlib.Path(tempfile.mkdtemp(prefix="hutch-soak-"))
    daemon = HutchDaemon(work, build=args.build, image=args.image)
    daemon.start()
    soak = Soak(args, daemon)
    # Kept in the state directory, so the same for every restart.
    soak.uid_base = int((work / "state" / "uid-base").read_text())
    soak.netns0, soak.cgroups0 = netns_names(soak.uid_base), cgroup_boxes(ids_in(daemon.log))
    try:
        left = soak.run()
    finally:
        soak.stop.set()
        soak.gate.open()
        daemon.stop()
    report = soak.report(left)
    report["args"] = vars(args)
    print_report(report)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=2))
    if args.keep or report["leaked"]:
        print(f"kept {work}", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if report["errors"] or report["leaked"] else 0


if __name__ == "__main__":
    sys.exit(main())
