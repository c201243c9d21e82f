#!/usr/bin/env python3
"""Saves and removes E2B snapshots at the same time, as E2B's own suites do, and checks that no
snapshot hutchd answered for has lost its files (issue 38.1: the sweep of snapshot directories
without a record raced a save that had made its directory but not yet recorded it).

    snapshot_race.py URL KEY STATE_DIR SANDBOX... [--seconds N]

One thread per sandbox saves it in a loop; one more thread removes every snapshot as soon as it
is made (each removal runs hutchd's garbage collection, which used to delete the directory of a
save in flight). After each save, the snapshot's manifest must be on disk; at the end, every
snapshot still listed must have one, and one must restore into a new sandbox. Prints a JSON
summary; exits 1 on any loss.
"""
import argparse
import http.client
import json
import os
import queue
import sys
import threading
import time
import urllib.parse


class Api:
    def __init__(self, url: str, key: str):
        u = urllib.parse.urlparse(url)
        self.host, self.port, self.key = u.hostname, u.port, key

    def call(self, method: str, path: str, body=None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=300)
        try:
            headers = {"X-API-Key": self.key}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            raw = r.read()
            try:
                return r.status, json.loads(raw) if raw else None
            except ValueError:
                return r.status, raw.decode(errors="replace")
        finally:
            conn.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("key")
    ap.add_argument("state_dir")
    ap.add_argument("sandboxes", nargs="+")
    ap.add_argument("--seconds", type=float, default=60)
    args = ap.parse_args()
    api = Api(args.url, args.key)
    snapshots_dir = os.path.join(args.state_dir, "snapshots")
    made: "queue.Queue[str]" = queue.Queue()
    lost, errors = [], []
    counts = {"saved": 0, "removed": 0}
    lock = threading.Lock()
    deadline = time.monotonic() + args.seconds
    savers_done = threading.Event()

    def saver(sandbox: str) -> None:
        while time.monotonic() < deadline:
            status, body = api.call("POST", f"/sandboxes/{sandbox}/snapshots", {})
            if status != 201:
                with lock:
                    errors.append(f"save {sandbox}: {status} {body}")
                return
            sid = body["snapshotID"]
            if not os.path.exists(os.path.join(snapshots_dir, sid, "manifest.json")):
                with lock:
                    lost.append(sid)
            with lock:
                counts["saved"] += 1
            made.put(sid)

    def remover() -> None:
        while not (savers_done.is_set() and made.empty()):
            try:
                sid = made.get(timeout=0.2)
            except queue.Empty:
                continue
            status, body = api.call("DELETE", f"/templates/{sid}")
            if status != 204:
                with lock:
                    errors.append(f"remove {sid}: {status} {body}")
            with lock:
                counts["removed"] += 1

    savers = [threading.Thread(target=saver, args=(s,)) for s in args.sandboxes]
    removers = [threading.Thread(target=remover)]
    for t in savers + removers:
        t.start()
    for t in savers:
        t.join()
    savers_done.set()
    for t in removers:
        t.join()

    # One more, kept: it must restore.
    status, body = api.call("POST", f"/sandboxes/{args.sandboxes[0]}/snapshots", {})
    restored = None
    if status == 201:
        sid = body["snapshotID"]
        status, made_box = api.call("POST", "/sandboxes", {"templateID": sid, "timeout": 120})
        restored = status
        if status == 201:
            api.call("DELETE", f"/sandboxes/{made_box['sandboxID']}")
        else:
            errors.append(f"restore {sid}: {status} {made_box}")
        api.call("DELETE", f"/templates/{sid}")
    else:
        errors.append(f"last save: {status} {body}")
    # Whatever is still listed has its files.
    status, listed = api.call("GET", "/snapshots")
    for s in listed if isinstance(listed, list) else []:
        if not os.path.exists(os.path.join(snapshots_dir, s["snapshotID"], "manifest.json")):
            lost.append(s["snapshotID"])
    print(json.dumps({**counts, "lost": lost, "errors": errors, "restore_status": restored}))
    return 1 if lost or errors else 0


if __name__ == "__main__":
    sys.exit(main())
