#!/usr/bin/env python3
"""A hostile OCI registry for the tests (standard library only): plain HTTP on 127.0.0.1.

    hostile_registry.py LAYOUT [--tag latest] [--port-file FILE] [--bomb-mib N]

Serves the image tagged TAG in the OCI image layout LAYOUT (one of tests/registry/images.sh's,
e.g. `busybox`) through the distribution API (GET/HEAD /v2/, manifests by tag or digest, blobs
by digest), and misbehaves as the first component of the repository name says, so that one
server gives every case: `127.0.0.1:PORT/MODE/NAME:TAG` (NAME and TAG are free).

  good                  the image as it is
  unauthorized          401 (WWW-Authenticate: Basic) for everything of the repository
  missing               404 MANIFEST_UNKNOWN for the manifest
  ratelimited           429 TOOMANYREQUESTS (Retry-After: 1) for the manifest
  broken                500 for the manifest
  hang-manifest         never answers the manifest request (the connection stays open)
  hang-blob             the layer: the header and half of the bytes, then nothing, forever
  blob-401, blob-404,   the manifest and config as they are, the layer answers that status
  blob-429, blob-500
  bad-manifest-digest   the manifest with a byte changed: asked for by its digest, the answer
                        does not hash to it
  bad-blob-digest       the layer with a byte changed (same length): its digest does not match
  oversized-blob        the layer with 1 MiB more than its descriptor's size
  huge                  a manifest whose layer claims 20 GiB (beyond any sane limit); that
                        manifest is consistent (it is served under its own digest)
  bomb                  another image: one gzip layer of a single file of N MiB of zeros
                        (--bomb-mib, default 96), a few hundred KiB compressed; all digests right

Prints "PORT" (and writes it to --port-file when given) once it listens, then one line per
request on stderr: "MODE METHOD PATH -> WHAT". Runs until killed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import select
import sys
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MANIFEST_MT = "application/vnd.oci.image.manifest.v1+json"
CONFIG_MT = "application/vnd.oci.image.config.v1+json"
LAYER_GZIP_MT = "application/vnd.oci.image.layer.v1.tar+gzip"
REF_NAME = "org.opencontainers.image.ref.name"
HUGE_LAYER = 20 << 30


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


class Image:
    """One image: its manifest bytes and every blob it names, by digest."""

    def __init__(self, manifest: bytes, blobs: dict[str, bytes]):
        self.manifest = manifest
        self.digest = digest_of(manifest)
        self.blobs = blobs
        doc = json.loads(manifest)
        self.config_digest = doc["config"]["digest"]
        self.layers = [layer["digest"] for layer in doc["layers"]]


def load_layout(layout: str, tag: str) -> Image:
    with open(os.path.join(layout, "index.json"), "rb") as f:
        index = json.load(f)
    entries = [m for m in index["manifests"] if m.get("annotations", {}).get(REF_NAME) == tag]
    if len(entries) != 1:
        sys.exit(f"hostile_registry: {layout} has {len(entries)} images tagged {tag}")

    def blob(digest: str) -> bytes:
        with open(os.path.join(layout, "blobs", "sha256", digest.split(":", 1)[1]), "rb") as f:
            return f.read()

    manifest = blob(entries[0]["digest"])
    doc = json.loads(manifest)
    if doc.get("mediaType", MANIFEST_MT) != MANIFEST_MT:
        sys.exit(f"hostile_registry: {layout}:{tag} is not one OCI image manifest")
    blobs = {doc["config"]["digest"]: blob(doc["config"]["digest"])}
    for layer in doc["layers"]:
        blobs[layer["digest"]] = blob(layer["digest"])
    return Image(manifest, blobs)


def bomb_image(mib: int) -> Image:
    """One layer holding one file of `mib` MiB of zeros, gzip-compressed (mtime fixed)."""
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("zeros")
        info.size = mib << 20
        info.mtime = 1700000000
        info.mode = 0o644

        tar.addfile(info, io.BytesIO(bytes(info.size)))
    raw = tar_bytes.getvalue()
    layer = gzip.compress(raw, compresslevel=9, mtime=0)
    config = canonical({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [digest_of(raw)]},
    })
    manifest = canonical({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MT,
        "config": {"mediaType": CONFIG_MT, "digest": digest_of(config), "size": len(config)},
        "layers": [{"mediaType": LAYER_GZIP_MT, "digest": digest_of(layer), "size": len(layer)}],
    })
    return Image(manifest, {digest_of(config): config, digest_of(layer): layer})


def huge_image(base: Image) -> Image:
    doc = json.loads(base.manifest)
    doc["layers"][0]["size"] = HUGE_LAYER
    return Image(canonical(doc), base.blobs)


def flip_middle_byte(data: bytes) -> bytes:
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]


PATH = re.compile(r"^/v2/(?P<mode>[a-z0-9-]+)/(?P<name>[a-z0-9._/-]+)/"
                  r"(?P<kind>manifests|blobs)/(?P<ref>[A-Za-z0-9_.:+-]+)$")
STATUS_TEXT = {401: "UNAUTHORIZED", 404: "NOT_FOUND", 429: "TOOMANYREQUESTS", 500: "UNKNOWN"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hostile-registry/1"
    images: dict[str, Image] = {}

    def log_message(self, fmt, *args):  # the one line per request below instead
        pass

    def say(self, mode, what):
        print(f"{mode} {self.command} {self.path} -> {what}", file=sys.stderr, flush=True)

    def send_bytes(self, status, body, content_type="application/json", extra=None,
                   length=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_error_code(self, mode, status, code, message):
        extra = {}
        if status == 401:
            extra["WWW-Authenticate"] = 'Basic realm="hostile-registry"'
        if status == 429:
            extra["Retry-After"] = "1"
        body = canonical({"errors": [{"code": code, "message": message}]})
        self.say(mode, f"{status} {code}")
        self.send_bytes(status, body, extra=extra)

    def hang(self, mode, what):
        self.say(mode, f"hang ({what})")
        # Until the client goes away (its end of the connection reads as closed) or the server
        # is killed; whatever the client sends meanwhile is read and dropped.
        while True:
            readable, _, _ = select.select([self.connection], [], [], 1.0)
            if not readable:
                continue
            try:
                if not self.connection.recv(65536):
                    break
            except OSError:
                break
        self.say(mode, f"client gone ({what})")
        self.close_connection = True

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        if self.path in ("/v2", "/v2/"):
            self.send_bytes(200, b"{}")
            return
        m = PATH.match(self.path)
        if not m:
            self.send_error_code("-", 404, "NOT_FOUND", "no such path")
            return
        mode, kind, ref = m["mode"], m["kind"], m["ref"]
        image = self.images["bomb" if mode == "bomb" else "huge" if mode == "huge" else "base"]
        if mode == "unauthorized":
            self.send_error_code(mode, 401, "UNAUTHORIZED", "authentication required")
            return
        if kind == "manifests":
            self.manifest(mode, image, ref)
        else:
            self.blob(mode, image, ref)

    def manifest(self, mode, image, ref):
        if mode == "missing":
            self.send_error_code(mode, 404, "MANIFEST_UNKNOWN", "manifest unknown")
            return
        if mode == "ratelimited":
            self.send_error_code(mode, 429, "TOOMANYREQUESTS", "too many requests")
            return
        if mode == "broken":
            self.say(mode, "500")
            self.send_bytes(500, b"internal server error\n", "text/plain")
            return
        if mode == "hang-manifest":
            self.hang(mode, "manifest")
            return
        body = image.manifest
        if ref.startswith("sha256:") and ref != image.digest:
            self.send_error_code(mode, 404, "MANIFEST_UNKNOWN", "manifest unknown")
            return
        if mode == "bad-manifest-digest":
            body = body.replace(b'"schemaVersion":2', b'"schemaVersion": 2', 1)
            if body == image.manifest:
                body = body + b" "
        self.say(mode, f"manifest {digest_of(body)}")
        self.send_bytes(200, body, MANIFEST_MT, {"Docker-Content-Digest": image.digest})

    def blob(self, mode, image, digest):
        data = image.blobs.get(digest)
        if data is None:
            self.send_error_code(mode, 404, "BLOB_UNKNOWN", "blob unknown")
            return
        is_layer = digest in image.layers
        if is_layer and mode.startswith("blob-"):
            status = int(mode[5:])
            self.send_error_code(mode, status, STATUS_TEXT.get(status, "UNKNOWN"), "refused")
            return
        extra = {"Docker-Content-Digest": digest}
        if is_layer and mode == "hang-blob":
            if self.command == "HEAD":
                self.send_bytes(200, b"", "application/octet-stream", extra, length=len(data))
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.hang(mode, f"blob after {len(data) // 2} of {len(data)} bytes")
            return
        if is_layer and mode == "bad-blob-digest":
            data = flip_middle_byte(data)
        if is_layer and mode == "oversized-blob":
            data = data + bytes(1 << 20)
        self.say(mode, f"blob {digest} ({len(data)} bytes)")
        self.send_bytes(200, data, "application/octet-stream", extra)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("layout")
    parser.add_argument("--tag", default="latest")
    parser.add_argument("--port-file")
    parser.add_argument("--bomb-mib", type=int, default=96)
    args = parser.parse_args()
    base = load_layout(args.layout, args.tag)
    Handler.images = {"base": base, "huge": huge_image(base), "bomb": bomb_image(args.bomb_mib)}
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.rename(tmp, args.port_file)
    print(port, flush=True)
    threading.current_thread().name = "hostile-registry"
    server.serve_forever()


if __name__ == "__main__":
    main()
