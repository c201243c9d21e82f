#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/seed-*), real-looking inputs
made with the standard library: agent frames as hutch-agent sends them, DNS queries, ClientHellos
from the ssl module (OpenSSL), tar archives from tarfile, masked WebSocket frames, HTTP requests.

    fuzz/make_corpus.py            (re)writes every seed; other files (regression-*) are kept

Deterministic except the ClientHellos (random and key shares). Inputs of crashes found are kept
beside the seeds as regression-<what> (docs/reliability.md, "Fuzzing").
"""

import gzip
import hashlib
import io
import json
import os
import pathlib
import ssl
import struct
import tarfile

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"


def write(target, name, data):
    d = ROOT / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (d / f"seed-{name}").write_bytes(data)


def j(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


# ---- the agent protocol (docs/protocol.md) ----

T = dict(hello=0x01, hello_ack=0x02, ping=0x03, pong=0x04, exec=0x10, started=0x11, stdin=0x12,
         stdin_eof=0x13, stdout=0x14, stderr=0x15, exit=0x16, signal=0x17, window=0x18,
         resize=0x19, poweroff=0x20, identity=0x21, result=0x22, processes=0x23,
         signal_process=0x24, services=0x25, connect=0x30, connected=0x31, data=0x32, eof=0x33,
         close=0x34, file_stat=0x40, file_list=0x41, file_entries=0x42, file_mkdir=0x43,
         file_move=0x44, file_remove=0x45, file_read=0x46, file_write=0x47, file_opened=0x48,
         watch=0x49, file_events=0x4a, error=0x7f)


def frame(kind, stream, payload=b""):
    if not isinstance(payload, bytes):
        payload = j(payload)
    return struct.pack("<IBBHI", len(payload), T[kind], 0, 0, stream) + payload


FILE_INFO = {"name": "main.c", "path": "/home/hutch/main.c", "type": "file", "size": 120,
             "mode": 0o644, "permissions": "-rw-r--r--", "uid": 1000, "gid": 1000,
             "owner": "hutch", "group": "hutch", "mtime_ns": 1700000000000000000,
             "symlink_target": ""}
LINK_INFO = dict(FILE_INFO, name="lib", path="/home/hutch/lib", type="symlink", size=7,
                 mode=0o777, permissions="lrwxrwxrwx", symlink_target="/usr/lib")
HELLO_ACK = {"version": 1, "agent": "0.1.0",
             "capabilities": ["identity", "detach", "services", "tcp", "files", "watch"]}
MESSAGES = {  # agent_messages_fuzz.cc's kTypes order
    0: [{"version": 1, "host": "hutchd 0.1.0"}],
    1: [HELLO_ACK],
    2: [{"argv": ["sh", "-c", "echo hi"], "env": ["PATH=/usr/bin:/bin"], "cwd": "/home/hutch",
         "user": "hutch", "stdin": True, "tty": True, "rows": 24, "cols": 80},
        {"argv": ["sleep", "100"], "detach": True, "env": [], "stdin": False}],
    3: [{"pid": 4242}],
    4: [{"code": 0}, {"signal": 9}, {"code": 1, "signal": 9}],
    5: [{"signal": 15}],
    6: [struct.pack("<I", 65536)],
    7: [{"rows": 24, "cols": 80}],
    8: [{"hostname": "dev", "machine_id": "0123456789abcdef0123456789abcdef",
         "time_ns": 1700000000000000000, "seed": "00" * 32, "grow_root": True}],
    9: [{"root_bytes": 4294967296, "root_grown": True},
        {"processes": [{"id": "0000abcd", "pid": 77, "argv": ["sleep", "100"], "user": "hutch",
                        "started_ns": 1700000000000000000, "log": "/var/log/hutch/0000abcd.log"},
                       {"id": "0000abce", "pid": 78, "argv": ["true"], "user": "",
                        "started_ns": 1, "exit": {"code": 0}, "log": "/l"}]},
        {"services": [{"name": "docker", "state": "running", "pid": 300, "restarts": 0,
                       "started_ns": 5, "error": ""},
                      {"name": "web", "state": "restarting", "pid": 0, "restarts": 3,
                       "started_ns": 5, "last_exit": {"code": 1}, "error": "exited"}]},
        FILE_INFO, {"entries": [FILE_INFO, LINK_INFO], "truncated": False},
        {"entry": FILE_INFO, "created": True}],
    10: [{"id": "0000abcd", "signal": 15}],
    11: [{"argv": ["/usr/sbin/dockerd", "--debug"], "env": ["K=V"], "user": "root", "cwd": "/",
          "restart": "on-failure"}],
    12: [{"address": "127.0.0.1", "port": 8080}],
    13: [{"path": "/home/hutch", "user": "hutch", "follow": True}],
    14: [{"path": "/home/hutch", "user": "hutch", "depth": 2, "max_entries": 100}],
    15: [{"entries": [FILE_INFO], "truncated": True}],
    16: [{"path": "/home/hutch/a/b", "user": "hutch", "mode": 0o755, "parents": True}],
    17: [{"from": "/home/hutch/a", "to": "/home/hutch/b", "user": "hutch", "overwrite": False}],
    18: [{"path": "/home/hutch/a", "user": "hutch", "recursive": True}],
    19: [{"path": "/etc/hostname", "user": "root"}],
    20: [{"path": "/home/hutch/new", "user": "hutch", "mode": 0o600, "parents": True}],
    21: [FILE_INFO, {"path": "/home/hutch/new", "created": True}],
    22: [{"path": "/home/hutch", "user": "hutch", "recursive": True}],
    23: [{"events": [{"type": "create", "path": "/home/hutch/x"},
                     {"type": "write", "path": "/home/hutch/x"},
                     {"type": "remove", "path": "/home/hutch/y"}]}],
    24: [{"code": "not_found", "message": "No such file: /home/hutch/x"},
         {"code": "unsupported", "message": "version 2"}],
}


def agent():
    for index, payloads in MESSAGES.items():
        for n, payload in enumerate(payloads):
            data = payload if isinstance(payload, bytes) else j(payload)
            write("agent_messages", f"{index:02d}-{n}", bytes([index]) + data)
    session = b"".join([
        frame("hello_ack", 0, HELLO_ACK),
        frame("started", 1, {"pid": 4242}),
        frame("stdout", 1, b"hello\n"),
        frame("stderr", 1, b"warning: x\n"),
        frame("window", 1, struct.pack("<I", 4096)),
        frame("exit", 1, {"code": 0}),
        frame("result", 3, {"root_bytes": 4294967296, "root_grown": True}),
        frame("file_opened", 5, FILE_INFO),
        frame("data", 5, b"int main() { return 0; }\n"),
        frame("eof", 5),
        frame("close", 5, {}),
        frame("file_entries", 7, {"entries": [FILE_INFO, LINK_INFO], "truncated": False}),
        frame("result", 7, {"entries": [], "truncated": False}),
        frame("file_events", 9, MESSAGES[23][0]),
        frame("error", 11, MESSAGES[24][0]),
        frame("pong", 0, b"x"),
    ])
    write("agent_frames", "session", bytes([7]) + session)
    write("agent_frames", "whole", bytes([63]) + session)
    # A reconnect: the tail of an old session's half-written frame before the answer.
    stale = frame("stdout", 1, b"old output " * 20)[:40]
    write("agent_frames", "stale-then-ack", bytes([3]) + stale + frame("hello_ack", 0, HELLO_ACK)
          + frame("started", 1, {"pid": 1}))
    write("agent_frames", "refused", bytes([0]) + frame("error", 0, MESSAGES[24][1]))
    write("agent_frames", "exec-request", bytes([5]) + frame("exec", 1, MESSAGES[2][0])
          + frame("stdin", 1, b"ls\n") + frame("stdin_eof", 1) + frame("resize", 1,
          {"rows": 50, "cols": 132}) + frame("signal", 1, {"signal": 2}))


# ---- the API ----

def api():
    bodies = {
        0: [{"name": "dev", "template": "base", "cpus": 2, "memory_mib": 2048, "disk_mib": 8192,
             "env": {"LANG": "C.UTF-8"}, "timeout_s": 3600, "on_timeout": "stop",
             "network_policy": {"allow": [{"domain": "*.debian.org", "ports": [80, 443]}]},
             "secrets": ["API_KEY"], "max_exec_ms": 60000, "idle_pause_ms": 0},
            {"template": "docker"}],
        1: [{"timeout_s": 600, "on_timeout": "suspend"}],
        2: [{"count": 2, "names": ["a", "b"]}],
        3: [{"name": "before-upgrade"}],
        4: [{"checkpoint": "cp-1a2b3c"}],
        5: [{"host_port": 8080, "box_port": 80, "address": "127.0.0.1"}],
        6: [{"argv": ["sh", "-c", "cat; echo done"], "env": {"A": "1"}, "cwd": "/tmp",
             "user": "root", "stdin": "aGVsbG8=", "timeout_ms": 5000,
             "max_output_bytes": 1024}],
        7: [{"argv": ["bash", "-l"], "tty": True, "rows": 24, "cols": 80, "stdin": True,
             "env": ["TERM=xterm"], "login_shell": True, "timeout_ms": 0}],
        8: [{"argv": ["sleep", "30"], "detach": True, "user": "hutch"}],
        9: [{"path": "/home/hutch/a/b", "mode": "0755", "parents": True, "user": "hutch"}],
        10: [{"from": "/home/hutch/a", "to": "/home/hutch/b", "overwrite": True}],
        11: [{"type": "resize", "rows": 40, "cols": 120}, {"type": "signal", "signal": 2},
             {"type": "stdin_eof"}],
        12: [{"id": "3f2a", "name": "dev", "state": "running", "template": "base"},
             {"error": {"code": "not_found", "message": "No box 'x'"}}],
        13: ["aGVsbG8gd29ybGQ=", "not base64!"],
        14: ["0755", "4777", "9"],
        15: [{"a": [1, 2.5, None, True, "\u00e9"]}],
    }
    for which, items in bodies.items():
        for n, body in enumerate(items):
            data = body.encode() if isinstance(body, str) else j(body)
            write("api_json", f"{which:02d}-{n}", bytes([which]) + data)
    reqs = {
        "create": "POST /v1/boxes HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
                  "\r\nContent-Length: 33\r\n\r\n{\"name\":\"dev\",\"template\":\"base\"}",
        "list-query": "GET /v1/boxes/dev/files/list?path=%2Fhome%2Fhutch&depth=2&user=hutch "
                      "HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer e2b_abc\r\n\r\n",
        "chunked": "POST /v1/boxes/dev/exec HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked"
                   "\r\n\r\n10\r\n{\"argv\":[\"ls\"]}\r\n0\r\n\r\n",
        "websocket": "GET /v1/boxes/dev/exec/ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: hutch.exec.v1, "
                     "hutch.key.e2b_abc\r\n\r\n",
        "percent": "DELETE /v1/boxes/a%2Fb%20c/checkpoints/cp-1?force=true&x HTTP/1.0\r\n\r\n",
        "files-put": "PUT /v1/boxes/dev/files?path=/tmp/x&mode=0644&owner=hutch HTTP/1.1\r\n"
                     "Host: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    }
    for name, text in reqs.items():
        write("api_request", name, text)
    # The exec WebSocket: masked client frames after the upgrade.
    def ws(opcode, payload, fin=True, mask=b"\x37\xfa\x21\x3d"):
        if isinstance(payload, str):
            payload = payload.encode()
        head = bytes([(0x80 if fin else 0) | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return head + mask + masked
    start = j({"argv": ["bash"], "tty": True, "rows": 24, "cols": 80, "stdin": True,
               "env": {"TERM": "xterm"}, "timeout_ms": 60000})
    write("exec_websocket", "session", ws(1, start) + ws(2, b"\x00ls -la\n")
          + ws(1, '{"type":"resize","rows":50,"cols":132}') + ws(9, b"ping")
          + ws(1, '{"type":"signal","signal":2}') + ws(1, '{"type":"stdin_eof"}')
          + ws(8, struct.pack(">H", 1000) + b"bye"))
    write("exec_websocket", "fragmented", ws(1, start[:10], fin=False) + ws(0, start[10:])
          + ws(2, b"\x00" + b"y" * 300))
    write("exec_websocket", "binary-first", ws(2, b"\x00data") + ws(8, b""))
    write("exec_websocket", "large", ws(1, start) + ws(2, b"\x00" + b"z" * 70000))


def tar_bytes(fmt, build, compress=None):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        build(tf)
    data = buf.getvalue()
    if compress == "gz":
        data = gzip.compress(data, mtime=0)
    return data


def add(tf, name, data=b"", kind=tarfile.REGTYPE, link="", mode=0o644, uid=1000):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.uid = info.gid = uid
    info.uname = info.gname = "hutch"
    info.mtime = 1700000000
    info.linkname = link
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    else:
        tf.addfile(info)


def tars():
    def tree(tf, root="src"):
        add(tf, root + "/", kind=tarfile.DIRTYPE, mode=0o755)
        add(tf, root + "/main.c", b"int main(void) { return 0; }\n")
        add(tf, root + "/lib", kind=tarfile.SYMTYPE, link="../lib")
        add(tf, root + "/again.c", kind=tarfile.LNKTYPE, link=root + "/main.c")
        add(tf, root + "/empty", b"")
    long_name = "src/" + "d" * 120 + "/" + "f" * 80 + ".txt"

    def pax(tf):
        tree(tf)
        add(tf, long_name, b"long\n")
        add(tf, "src/\u00e9t\u00e9.txt", b"utf8\n")

    def gnu(tf):
        tree(tf)
        add(tf, long_name, b"x" * 1000)
        add(tf, "src/l" + "k" * 110, kind=tarfile.SYMTYPE, link="t" * 120)

    def devices(tf):
        tree(tf)
        add(tf, "dev/null", kind=tarfile.CHRTYPE)
        add(tf, "fifo", kind=tarfile.FIFOTYPE)

    cases = {
        "upload-ustar": (0, tar_bytes(tarfile.USTAR_FORMAT, tree)),
        "upload-pax": (0, tar_bytes(tarfile.PAX_FORMAT, pax)),
        "upload-gnu": (0, tar_bytes(tarfile.GNU_FORMAT, gnu)),
        "download-root": (3, tar_bytes(tarfile.PAX_FORMAT, lambda tf: tree(tf, "home/hutch/src"))),
        "download-any": (1, tar_bytes(tarfile.GNU_FORMAT, devices)),
        "upload-escape": (0, tar_bytes(tarfile.USTAR_FORMAT, lambda tf: add(
            tf, "a", kind=tarfile.SYMTYPE, link="../../etc"))),
    }
    for name, (mode, data) in cases.items():
        write("tar_filter", name, bytes([mode, 200]) + data)
        write("tar_filter", name + "-whole", bytes([mode, 255]) + data)


def oci():
    def blob(data):
        return "sha256", hashlib.sha256(data).hexdigest(), data
    layer = tar_bytes(tarfile.USTAR_FORMAT, lambda tf: add(tf, "etc/motd", b"hi\n"))
    config = j({"architecture": "amd64", "os": "linux", "rootfs": {
        "type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]}})
    blobs = [blob(layer), blob(config)]
    manifest = j({"schemaVersion": 2, "mediaType":
                  "application/vnd.oci.image.manifest.v1+json",
                  "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                             "digest": "sha256:" + blobs[1][1], "size": len(config)},
                  "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                              "digest": "sha256:" + blobs[0][1], "size": len(layer)}]})
    blobs.append(blob(manifest))
    arm = j({"schemaVersion": 2, "config": {"digest": "sha256:" + "0" * 64, "size": 1},
             "layers": []})
    blobs.append(blob(arm))
    nested = j({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": [
                    {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                     "digest": "sha256:" + blobs[3][1], "size": len(arm),
                     "platform": {"architecture": "arm64", "os": "linux"}},
                    {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                     "digest": "sha256:" + blobs[2][1], "size": len(manifest),
                     "platform": {"architecture": "amd64", "os": "linux"}}]})
    blobs.append(blob(nested))
    def layout(index):
        def build(tf):
            add(tf, "oci-layout", j({"imageLayoutVersion": "1.0.0"}))
            add(tf, "index.json", j(index))
            for alg, hexd, data in blobs:
                add(tf, f"blobs/{alg}/{hexd}", data)
        return build
    direct = {"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json",
         "digest": "sha256:" + blobs[2][1], "size": len(manifest),
         "annotations": {"org.opencontainers.image.ref.name": "example.com/app:1.0"}}]}
    via_index = {"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.index.v1+json",
         "digest": "sha256:" + blobs[4][1], "size": len(nested),
         "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}
    write("oci_archive", "oci-layout", tar_bytes(tarfile.USTAR_FORMAT, layout(direct)))
    write("oci_archive", "oci-nested-index.tar.gz",
          tar_bytes(tarfile.PAX_FORMAT, layout(via_index), "gz"))
    def docker_save(tf):
        add(tf, "manifest.json", j([{"Config": "blobs/sha256/" + blobs[1][1],
                                     "RepoTags": ["app:1"],
                                     "Layers": ["blobs/sha256/" + blobs[0][1]]}]))
        add(tf, "blobs/sha256/" + blobs[1][1], config)
        add(tf, "blobs/sha256/" + blobs[0][1], layer)
    write("oci_archive", "docker-save", tar_bytes(tarfile.USTAR_FORMAT, docker_save))


# ---- hutch-egress ----

def dns_name(name):
    out = b""
    for label in name.split(".") if name else []:
        out += bytes([len(label)]) + label.encode()
    return out + b"\x00"


def dns_query(qid, name, qtype, flags=0x0100, extra=b"", arcount=0):
    return struct.pack(">HHHHHH", qid, flags, 1, 0, 0, arcount) + dns_name(name) + struct.pack(
        ">HH", qtype, 1) + extra


def egress():
    policies = {
        "allow-list": {"allow": [{"domain": "api.example.com", "ports": [443]},
                                 {"domain": "*.debian.org"}],
                       "deny": [{"domain": "evil.example.com"}],
                       "allow_private": ["192.168.1.0/24", "fd00::/8"]},
        "presets": {"presets": ["allow-all"], "deny": [{"domain": "*.example.net",
                                                        "ports": [80, 8080]}]},
        "wildcard": {"allow": [{"domain": "*"}]},
    }
    for name, policy in policies.items():
        write("egress_policy", name, json.dumps(policy, indent=1) + "\nWWW.Debian.ORG.")
    write("egress_policy", "preset-name", "allow-all")
    write("egress_policy", "preset-none", "none")
    opt = b"\x00" + struct.pack(">HHIH", 41, 1232, 0, 0)  # EDNS(0)
    queries = {
        "a": dns_query(0x1a2b, "deb.debian.org", 1),
        "aaaa-edns": dns_query(0x3c4d, "API.Example.COM", 28, extra=opt, arcount=1),
        "root": dns_query(7, "", 2),
        "txt-long": dns_query(9, ".".join(["l" * 63] * 3) + ".x", 16),
        "underscore": dns_query(11, "_sip._tcp.example.com", 33),
        "pointer": struct.pack(">HHHHHH", 5, 0x0100, 1, 0, 0, 0) + b"\xc0\x0c" + b"\x00\x01"
                   b"\x00\x01",
    }
    for name, data in queries.items():
        write("dns", name, data)
    # ClientHellos as OpenSSL sends them.
    def hello(sni, maximum=None, alpn=None):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        if maximum:
            ctx.maximum_version = maximum
        if alpn:
            ctx.set_alpn_protocols(alpn)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(incoming, outgoing, server_hostname=sni)
        try:
            obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        return outgoing.read()
    write("client_hello", "tls13", hello("api.example.com", alpn=["h2", "http/1.1"]))
    write("client_hello", "tls12", hello("Mixed.Case.Example.test", ssl.TLSVersion.TLSv1_2))
    write("client_hello", "no-sni", hello(None))
    write("client_hello", "http", "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
    write("client_hello", "ssh", "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
    reqs = {
        "absolute": "GET http://deb.debian.org/debian/dists/bookworm/InRelease HTTP/1.1\r\n"
                    "Host: deb.debian.org\r\nProxy-Connection: keep-alive\r\nUser-Agent: "
                    "Debian APT-HTTP/1.3 (2.6.1)\r\n\r\n",
        "connect": "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n"
                   "\x16\x03\x01",
        "transparent-secrets": "POST /v1/chat HTTP/1.1\r\nHost: API.example.com.\r\n"
                               "Authorization: Bearer placeholder\r\nX-Token: "
                               "HUTCH_TOKEN_PLACEHOLDER\r\nContent-Length: 11\r\n\r\n{\"q\":\"hi\"}\n",
        "chunked-pipeline": "POST http://up.example.com:8080/u?x=1#f HTTP/1.1\r\nHost: x\r\n"
                            "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nTrailer: t\r\n"
                            "\r\nGET /next HTTP/1.1\r\nHost: [::1]:80\r\nConnection: close\r\n\r\n",
        "http10": "GET http://example.com HTTP/1.0\r\n\r\n",
    }
    for name, text in reqs.items():
        write("http_relay", name, text)


if __name__ == "__main__":
    for d in ROOT.glob("*/seed-*"):
        d.unlink()
    agent()
    api()
    tars()
    oci()
    egress()
    count = sum(1 for _ in ROOT.glob("*/seed-*"))
    print(f"make_corpus: {count} seeds in {ROOT}")
