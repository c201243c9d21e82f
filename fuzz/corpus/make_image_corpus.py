#!/usr/bin/env python3
"""Writes the seed corpora of the image fuzz targets (fuzz/corpus/image_manifest/seed-* and
fuzz/corpus/image_layer/seed-*): real-shaped indexes, manifests and configs (the first byte picks
the media type the document is announced as, see image_manifest_fuzz.cc), and small layer tars
made with tarfile, among them whiteouts and escapes (../ names, symlinks out of the root followed
by entries through them, hard links out).

    fuzz/corpus/make_image_corpus.py     (re)writes every seed; other files (regression-*) stay

Deterministic.
"""

import io
import json
import pathlib
import tarfile

ROOT = pathlib.Path(__file__).resolve().parent

# Indexes into kHints of image_manifest_fuzz.cc.
HINT_NONE, HINT_OCI_INDEX, HINT_OCI_MANIFEST, HINT_DOCKER_LIST, HINT_DOCKER_MANIFEST = range(5)


def write(target, name, data):
    d = ROOT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed-{name}").write_bytes(data)


def digest(c):
    return "sha256:" + c * 64


def desc(media_type, c, size, **extra):
    return dict(mediaType=media_type, digest=digest(c), size=size, **extra)


def doc(hint, obj):
    return bytes([hint]) + json.dumps(obj, indent=2).encode()


def manifests():
    oci_manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": desc("application/vnd.oci.image.config.v1+json", "c", 1470),
        "layers": [
            desc("application/vnd.oci.image.layer.v1.tar+gzip", "1", 29124181),
            desc("application/vnd.oci.image.layer.v1.tar+zstd", "2", 3511),
            desc("application/vnd.oci.image.layer.v1.tar", "3", 10240),
        ],
        "annotations": {"org.opencontainers.image.base.name": "docker.io/library/debian:12"},
    }
    write("image_manifest", "oci-manifest", doc(HINT_OCI_MANIFEST, oci_manifest))
    docker_manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": desc("application/vnd.docker.container.image.v1+json", "c", 7023),
        "layers": [desc("application/vnd.docker.image.rootfs.diff.tar.gzip", "a", 31357624),
                   desc("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", "b", 5,
                        urls=["https://example.com/layer"])],
    }
    write("image_manifest", "docker-manifest", doc(HINT_DOCKER_MANIFEST, docker_manifest))
    platforms = [("amd64", None, "a"), ("arm", "v7", "b"), ("arm64", "v8", "d"),
                 ("s390x", None, "e"), ("unknown", None, "f")]
    entries = []
    for arch, variant, c in platforms:
        p = {"os": "unknown" if arch == "unknown" else "linux", "architecture": arch}
        if variant:
            p["variant"] = variant
        entries.append(desc("application/vnd.oci.image.manifest.v1+json", c, 1024, platform=p))
    write("image_manifest", "oci-index", doc(HINT_OCI_INDEX, {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": entries}))
    write("image_manifest", "docker-list", doc(HINT_DOCKER_LIST, {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
        "manifests": [dict(e, mediaType="application/vnd.docker.distribution.manifest.v2+json")
                      for e in entries[1:4]]}))
    write("image_manifest", "layout-index", doc(HINT_NONE, {
        "schemaVersion": 2, "manifests": [desc(
            "application/vnd.oci.image.manifest.v1+json", "9", 592,
            annotations={"org.opencontainers.image.ref.name": "python:3.12"})]}))
    write("image_manifest", "schema1", doc(HINT_NONE, {
        "schemaVersion": 1, "name": "library/busybox", "tag": "latest", "fsLayers": []}))
    config = {
        "architecture": "amd64", "os": "linux", "created": "2024-06-01T00:00:00Z",
        "config": {
            "Env": ["PATH=/usr/local/bin:/usr/local/sbin:/usr/bin", "LANG=C.UTF-8",
                    "PYTHON_VERSION=3.12.4"],
            "Entrypoint": None, "Cmd": ["python3"], "WorkingDir": "/app", "User": "app",
            "ExposedPorts": {"8000/tcp": {}}, "Labels": {"org.opencontainers.image.source": "x"},
            "StopSignal": "SIGINT"},
        "rootfs": {"type": "layers", "diff_ids": [digest("4"), digest("5")]},
        "history": [{"created": "2024-06-01T00:00:00Z", "created_by": "/bin/sh -c #(nop) ADD"}],
    }
    write("image_manifest", "config", doc(HINT_NONE, config))
    for name, ref in [("ref-hub", "python:3.12"), ("ref-digest", "ghcr.io/o/app:v1@" + digest("a")),
                      ("ref-ipv6", "[::1]:5000/x/y"), ("ref-localhost", "localhost:5000/alpine")]:
        write("image_manifest", name, bytes([HINT_NONE]) + ref.encode())


def tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            info = tarfile.TarInfo(e["name"])
            info.mtime = 1700000000
            info.mode = e.get("mode", 0o644)
            info.uid = e.get("uid", 0)
            info.gid = e.get("gid", 0)
            info.type = e.get("type", tarfile.REGTYPE)
            info.linkname = e.get("link", "")
            if "xattrs" in e:
                info.pax_headers = {"SCHILY.xattr." + k: v for k, v in e["xattrs"].items()}
            data = e.get("data", b"")
            info.size = len(data) if info.type == tarfile.REGTYPE else 0
            if info.type in (tarfile.CHRTYPE, tarfile.BLKTYPE):
                info.devmajor, info.devminor = 1, 3
            t.addfile(info, io.BytesIO(data) if info.size else None)
    return buf.getvalue()


def layers():
    D, L, H, F = tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE
    write("image_layer", "basic", tar([
        dict(name="etc/", type=D, mode=0o755),
        dict(name="etc/hostname", data=b"box\n"),
        dict(name="usr/bin/tool", data=b"#!/bin/sh\necho hi\n", mode=0o4755, uid=1000, gid=1000,
             xattrs={"user.note": "x", "trusted.no": "y"}),
        dict(name="usr/bin/tool2", type=H, link="usr/bin/tool"),
        dict(name="bin", type=L, link="usr/bin"),
        dict(name="run/fifo", type=F, mode=0o600),
        dict(name="./tmp/", type=D, mode=0o1777),
    ]))
    write("image_layer", "whiteouts", tar([
        dict(name="a/", type=D),
        dict(name="a/.wh.x"),
        dict(name=".wh.b"),
        dict(name="d/", type=D),
        dict(name="d/new", data=b"n"),
        dict(name="d/.wh..wh..opq"),
        dict(name="d/.wh..wh.plnk"),
    ]))
    write("image_layer", "escapes", tar([
        dict(name="../../etc/x", data=b"pwned"),
    ]))
    write("image_layer", "symlink-escape", tar([
        dict(name="/abs", data=b"inside"),
        dict(name="a", type=L, link="../../.."),
        dict(name="a/sentinel/passwd", data=b"pwned"),
        dict(name="a/sentinel/.wh.passwd"),
        dict(name="s", type=L, link="/"),
        dict(name="s/etc/.wh..wh..opq"),
        dict(name="r", type=L, link="../sentinel"),
        dict(name="r/passwd", data=b"pwned"),
        dict(name="h", type=H, link="/etc/shadow"),
    ]))
    write("image_layer", "hardlink-out", tar([
        dict(name="x", data=b"x"),
        dict(name="h", type=H, link="../sentinel/passwd"),
    ]))
    write("image_layer", "replace", tar([
        dict(name="f", type=L, link="../sentinel/passwd"),
        dict(name="f", data=b"replaced"),
        dict(name="d/", type=D),
        dict(name="d/x", data=b"x"),
        dict(name="d", data=b"now a file"),
        dict(name="dev/null", type=tarfile.CHRTYPE),
    ]))


if __name__ == "__main__":
    manifests()
    layers()
