#!/usr/bin/env python3
"""Images to boxes (issue 32.8): `hutch template create --from-image` and the first box of it, for
a ~100 MB and a ~1 GB image, side by side in one hutchd against a real registry on loopback.

The registry is Debian's docker-registry (tests/registry/registry.sh, TLS with its own CA). The
images: `debian` (a Debian minbase from mmdebstrap, tests/registry/images.sh) and `big`, the
same with one more layer of ~900 MB (half of it random bytes, half text: a layer as large and as
compressible as a toolchain's), built once and kept in $HUTCH_CACHE_DIR/bench-images.

For each image, three rounds:
  cold    the store is empty (no template of it, `hutch image prune --keep 0`): pull, unpack,
          root disk; then the first box (`hutch run -- true`), which boots the template cold and
          takes its snapshot;
  cached  the template removed, the store kept: create again (nothing to fetch, and the root
          disk made the first time is linked, not unpacked again), first box;
  made    the template and its snapshot exist: one more box (`hutch run -- true`).
Printed and written (--json): the seconds of each step, the image's compressed and unpacked
sizes, and the template's root disk.

Usage: sudo bench/image_bench.py [--build build] [--image DIR] [--json FILE] [--only debian|big]
Not a test: nothing fails on a slow number.
"""
import argparse
import hashlib
import inspect
import json
import os
import pathlib
import random
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from benchlib import Cli, daemon_args, own_daemon, report  # noqa: E402

REGISTRY = REPO / "tests" / "registry"
CACHE = pathlib.Path(os.environ.get("HUTCH_CACHE_DIR") or "/var/cache/hutch") / "bench-images"
BIG_FILES = 16
BIG_FILE_BYTES = 56 << 20  # 16 x 56 MiB = 896 MiB in the extra layer


def sh(*argv, **kw):
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{shlex.join(str(a) for a in argv)}: exit {r.returncode}: "
                           f"{r.stderr.strip()[-2000:]}")
    return r.stdout


def big_layer(path):
    """The extra layer: files of seeded random bytes and of text, the same on every machine."""
    rng = random.Random(20261207)
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("opt/big")
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
        for i in range(BIG_FILES):
            f = tempfile.TemporaryFile()
            if i % 2 == 0:
                for _ in range(BIG_FILE_BYTES >> 20):
                    f.write(rng.randbytes(1 << 20))
            else:
                line = b"".join(rng.choice([b"alpha ", b"beta ", b"gamma ", b"delta "])
                                for _ in range(12)) + b"\n"
                for _ in range(BIG_FILE_BYTES // len(line)):
                    f.write(line)
            info = tarfile.TarInfo(f"opt/big/file{i:02d}")
            info.size, info.mode = f.tell(), 0o644
            f.seek(0)
            tar.addfile(info, f)


def images():
    """{"debian": OCI layout, "big": OCI layout} (the big one built once, keyed by its inputs)."""
    out = sh("bash", REGISTRY / "images.sh", tempfile.mkdtemp(prefix="hutch-bench-img-"), "debian")
    debian = pathlib.Path(out.split()[1])
    key = hashlib.sha256((debian.name + inspect.getsource(big_layer) +
                          f"{BIG_FILES} {BIG_FILE_BYTES}").encode()).hexdigest()[:12]
    big = CACHE / f"big-{key}"
    if not (big / "index.json").exists():
        print(f"building the big image in {big} (once)", file=sys.stderr, flush=True)
        work = pathlib.Path(tempfile.mkdtemp(prefix="hutch-bench-big-"))
        try:
            shutil.copytree(debian, work / "layout")
            big_layer(work / "layer.tar")
            sh("umoci", "raw", "add-layer", "--image", f"{work / 'layout'}:latest",
               "--tag", "latest", work / "layer.tar")
            CACHE.mkdir(parents=True, exist_ok=True)
            shutil.move(str(work / "layout"), str(big))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return {"debian": debian, "big": big}


def layout_bytes(layout):
    """The compressed size of the image's blobs in its layout."""
    return sum(p.stat().st_size for p in (layout / "blobs").rglob("*") if p.is_file())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    daemon_args(ap)
    ap.add_argument("--only", choices=["debian", "big"])
    a = ap.parse_args()
    layouts = images()
    if a.only:
        layouts = {a.only: layouts[a.only]}
    reg_dir = pathlib.Path(tempfile.mkdtemp(prefix="hutch-bench-registry-"))
    env = dict(line.split("=", 1) for line in
               sh("bash", REGISTRY / "registry.sh", "start", reg_dir, "--no-auth").split())
    registry = env["REGISTRY"]
    d, hutch = own_daemon(ap, a, "hutch-image-bench-",
                          ["--registry-certs", str(reg_dir / "certs.d")])
    results = {}
    try:
        for name, layout in layouts.items():
            sh("bash", REGISTRY / "registry.sh", "push", reg_dir, f"{layout}:latest",
               f"bench/{name}:latest")
        d.start()
        cli = Cli(hutch, d.socket)
        for name, layout in layouts.items():
            ref = f"{registry}/bench/{name}:latest"
            r = {"compressed_mib": round(layout_bytes(layout) / (1 << 20), 1)}

            def create(round_name):
                _, s = cli.run("template", "create", "--from-image", ref, name)
                r[f"{round_name}_create_s"] = round(s, 2)
                _, s = cli.run("run", "--rm", "--name", f"{name}-{round_name}", "--template",
                               name, "--", "true")
                r[f"{round_name}_first_box_s"] = round(s, 2)
                r[f"{round_name}_image_to_first_box_s"] = round(
                    r[f"{round_name}_create_s"] + s, 2)

            cli.run("image", "prune", "--keep", "0")
            create("cold")
            t = next(t for t in json.loads(cli.run("--json", "template", "ls")[0])
                     if t["name"] == name)
            r["unpacked_mib"] = round(t.get("image", {}).get("bytes", 0) / (1 << 20), 1)
            rootfs = pathlib.Path(t["dir"]) / "rootfs.img"
            r["root_disk_mib"] = round(rootfs.stat().st_size / (1 << 20), 1)
            _, s = cli.run("run", "--rm", "--name", f"{name}-made", "--template", name, "--",
                           "true")
            r["made_box_s"] = round(s, 2)
            cli.run("template", "rm", name)
            create("cached")
            cli.run("template", "rm", name)
            cli.run("image", "prune", "--keep", "0")
            results[name] = r
            print(name, json.dumps(r), file=sys.stderr, flush=True)
    finally:
        d.stop()
        subprocess.run(["bash", str(REGISTRY / "registry.sh"), "stop", str(reg_dir)],
                       capture_output=True)
        shutil.rmtree(reg_dir, ignore_errors=True)
    report(results, a.json)


if __name__ == "__main__":
    main()
