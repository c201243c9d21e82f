#!/usr/bin/env python3
"""Image archives for the tests of `hutch template create --from-archive` (standard library only).

  archives.py oci-tar LAYOUT OUT [MODE]
      The OCI image layout LAYOUT (one of images.sh's) as a tar (an "oci-archive"), entries
      named from inside it (oci-layout, index.json, blobs/...), and with MODE:
        good          as it is
        escape        plus an entry ../../hutch-archive-escape (a name outside the archive)
        absolute      plus an entry /tmp/hutch-archive-absolute
        symlink       plus a symlink blobs/sha256/link -> /etc
        device        plus a character device dev-null (1, 3)
        missing-blob  without the blob of the image's (first) layer
        altered-blob  with one byte of that layer changed (same size): not what its digest says
        duplicate     with index.json twice, the second naming no image
  archives.py docker-merge OUT A.tar B.tar...
      One `docker save` archive holding the images of several (skopeo writes one image per
      archive): every entry of each, once, and their manifest.json lists joined.
  archives.py docker-alter-layer IN OUT
      A `docker save` archive whose first layer has one byte of a file's contents changed (the
      tar stays whole): its diff_id no longer matches the config's.
"""

import io
import json
import os
import sys
import tarfile

REF_NAME = "org.opencontainers.image.ref.name"


def die(msg):
    print(f"archives: {msg}", file=sys.stderr)
    sys.exit(1)


def _first_layer(layout):
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    desc = index["manifests"][0]
    with open(os.path.join(layout, "blobs", *desc["digest"].split(":", 1)), "rb") as f:
        manifest = json.load(f)
    return "blobs/sha256/" + manifest["layers"][0]["digest"].split(":", 1)[1]


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


def _add(tar, name, data=b"", kind=tarfile.REGTYPE, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mtime = 1700000000
    info.linkname = linkname
    if kind == tarfile.CHRTYPE:
        info.devmajor, info.devminor = 1, 3
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def oci_tar(layout, out, mode="good"):
    layer = _first_layer(layout)
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for root, dirs, files in os.walk(layout):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, layout)
                if rel == layer and mode == "missing-blob":
                    continue
                with open(path, "rb") as f:
                    data = f.read()
                if rel == layer and mode == "altered-blob":
                    data = _flip(data, len(data) // 2)
                _add(tar, rel, data)
        if mode == "escape":
            _add(tar, "../../hutch-archive-escape", b"escaped\n")
        elif mode == "absolute":
            _add(tar, "/tmp/hutch-archive-absolute", b"escaped\n")
        elif mode == "symlink":
            _add(tar, "blobs/sha256/link", kind=tarfile.SYMTYPE, linkname="/etc")
        elif mode == "device":
            _add(tar, "dev-null", kind=tarfile.CHRTYPE)
        elif mode == "duplicate":
            _add(tar, "index.json", b'{"schemaVersion":2,"manifests":[]}')
        elif mode not in ("good", "missing-blob", "altered-blob"):
            die(f"unknown mode {mode}")


def docker_merge(out, archives):
    seen = set()
    manifests = []
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as dst:
        for path in archives:
            with tarfile.open(path) as src:
                for member in src.getmembers():
                    if member.name == "manifest.json":
                        manifests += json.load(src.extractfile(member))
                        continue
                    if member.name == "repositories" or member.name in seen:
                        continue
                    seen.add(member.name)
                    dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        _add(dst, "manifest.json", json.dumps(manifests).encode())


def docker_alter_layer(src_path, out):
    with tarfile.open(src_path) as src:
        manifest = json.load(src.extractfile("manifest.json"))
        layer_name = manifest[0]["Layers"][0]  # skopeo's: <hex>.tar, a file (links point at it)
        with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as dst:
            for member in src.getmembers():
                data = src.extractfile(member).read() if member.isfile() else None
                if member.name == layer_name:
                    if data is None:
                        die(f"{layer_name} is not a file in {src_path}")
                    data = _alter_layer(data)
                dst.addfile(member, io.BytesIO(data) if data is not None else None)


def _alter_layer(layer: bytes) -> bytes:
    """One byte of the first non-empty regular file's contents changed, the tar kept whole."""
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.size > 0:
                return _flip(layer, member.offset_data + member.size // 2)
    die("the layer has no file to alter")


def main(argv):
    if len(argv) < 2:
        die(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "oci-tar" and len(args) in (2, 3):
        oci_tar(*args)
    elif cmd == "docker-merge" and len(args) >= 3:
        docker_merge(args[0], args[1:])
    elif cmd == "docker-alter-layer" and len(args) == 2:
        docker_alter_layer(*args)
    else:
        die(__doc__)


if __name__ == "__main__":
    main(sys.argv)
