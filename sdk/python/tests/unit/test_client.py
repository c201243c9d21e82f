"""Requests and answers of every resource, against a fake hutchd, for both clients."""

from __future__ import annotations

import base64
import io
import json
import os
import tarfile

import httpx
import pytest

import hutch
from conftest import BOX


def box_of(client, fake):
    fake.on("GET", "/v1/boxes/dev", body=BOX)
    return client.boxes.get("dev")


def test_info_and_auth_header(client, fake):
    fake.on("GET", "/v1/info", body={
        "version": "0.9", "backend": "qemu", "state_dir": "/var/lib/hutch",
        "accel": {"name": "kvm", "reason": "/dev/kvm"},
        "tls": {"fingerprint_sha256": "AB:CD"}, "listeners": ["unix:/run/hutch/hutchd.sock"],
        "caller": {"name": "alice", "admin": False, "max_boxes": 2}})
    info = client.info()
    assert info.version == "0.9" and info.accel.name == "kvm"
    assert info.fingerprint_sha256 == "AB:CD"
    assert info.caller.name == "alice" and info.caller.max_boxes == 2 and not info.caller.admin
    assert fake.last.headers["authorization"] == "Bearer e2b_" + "a" * 40
    assert fake.last.headers["user-agent"].startswith("hutch-python/")


def test_no_key_no_header(make_client, fake):
    fake.on("GET", "/v1/info", body={"version": "1"})
    make_client(api_key=None).info()
    assert "authorization" not in fake.last.headers


def test_create_box_sends_exactly_what_was_given(client, fake):
    fake.on("POST", "/v1/boxes", 201, BOX)
    box = client.boxes.create(template="base", cpus=2, memory="2G", disk=8192,
                              network_policy={"allow": [{"domain": "*.debian.org"}]},
                              secrets=["API_KEY"], env={"A": "1"}, name="dev")
    assert fake.last_json() == {"name": "dev", "template": "base", "cpus": 2, "memory_mib": 2048,
                                "disk_mib": 8192,
                                "network_policy": {"allow": [{"domain": "*.debian.org"}]},
                                "secrets": ["API_KEY"], "env": {"A": "1"}}
    assert box.id == "3f2a9c01d4e5" and box.name == "dev" and box.state == "running"
    assert box.info.env == {"A": "1"} and box.info.owner == "alice"
    assert box.info.raw["future_field"] == {"x": 1}


def test_create_box_defaults_are_the_servers(client, fake):
    fake.on("POST", "/v1/boxes", 201, BOX)
    client.boxes.create()
    assert fake.last_json() == {}


def test_create_box_refuses_bad_sizes_before_sending(client, fake):
    with pytest.raises(hutch.InvalidArgumentError):
        client.boxes.create(memory="lots")
    assert fake.requests == []


def test_error_answers_raise_their_class(client, fake):
    fake.on("POST", "/v1/boxes", 409, {"error": {"code": "already_exists",
                                                 "message": "Box dev exists"}})
    with pytest.raises(hutch.AlreadyExistsError) as info:
        client.boxes.create(name="dev")
    assert info.value.status == 409 and info.value.message == "Box dev exists"
    with pytest.raises(hutch.NotFoundError):
        client.boxes.get("nope")


def test_success_that_is_not_json_is_a_protocol_error(client, fake):
    fake.on("GET", "/v1/boxes", body=b"<html>")
    with pytest.raises(hutch.ProtocolError):
        client.boxes.list()
    fake.on("GET", "/v1/boxes", body={"items": []})
    with pytest.raises(hutch.ProtocolError):
        client.boxes.list()


def test_list_boxes(client, fake):
    fake.on("GET", "/v1/boxes", body={"boxes": [BOX, dict(BOX, id="b2", name="web")]})
    boxes = client.boxes.list()
    assert [b.name for b in boxes] == ["dev", "web"]


def test_lifecycle(client, fake):
    box = box_of(client, fake)
    fake.on("POST", "/v1/boxes/3f2a9c01d4e5/stop", body=dict(BOX, state="stopped"))
    assert box.stop().state == "stopped" and box.state == "stopped"
    fake.on("POST", "/v1/boxes/3f2a9c01d4e5/start", body=BOX)
    box.start()
    assert box.state == "running"
    fake.on("GET", "/v1/boxes/3f2a9c01d4e5", body=dict(BOX, state="failed", reason="oops"))
    assert box.refresh().reason == "oops"
    fake.on("DELETE", "/v1/boxes/3f2a9c01d4e5", body={"removed": "3f2a9c01d4e5"})
    box.remove()
    assert "force" not in fake.last.url.params
    box.remove(force=True)
    assert fake.last.url.params["force"] == "true"


def test_fork_checkpoint_rollback(client, fake):
    box = box_of(client, fake)
    fake.on("POST", "/v1/boxes/3f2a9c01d4e5/fork", 201,
            {"boxes": [dict(BOX, id="c1", name="dev-1"), dict(BOX, id="c2", name="dev-2")]})
    children = box.fork(2)
    assert fake.last_json() == {"count": 2} and [c.name for c in children] == ["dev-1", "dev-2"]
    box.fork(1, names=["kid"])
    assert fake.last_json() == {"count": 1, "names": ["kid"]}
    cp = {"id": "s1", "kind": "checkpoint", "box_id": BOX["id"], "name": "cp-1",
          "size_bytes": 10, "created_at": 1}
    fake.on("POST", "/v1/boxes/3f2a9c01d4e5/checkpoints", 201, cp)
    assert box.checkpoint().name == "cp-1" and fake.last_json() == {}
    box.checkpoint("mine")
    assert fake.last_json() == {"name": "mine"}
    fake.on("GET", "/v1/boxes/3f2a9c01d4e5/checkpoints", body={"checkpoints": [cp]})
    assert [c.name for c in box.checkpoints()] == ["cp-1"]
    fake.on("POST", "/v1/boxes/3f2a9c01d4e5/rollback", body=dict(BOX, boot="rolled back"))
    box.rollback("cp-1")
    assert fake.last_json() == {"checkpoint": "cp-1"} and box.info.boot == "rolled back"
    fake.on("DELETE", "/v1/boxes/3f2a9c01d4e5/checkpoints/cp-1", body={"removed": "cp-1"})
    box.remove_checkpoint("cp-1")


def test_exec_json(client, fake):
    box = box_of(client, fake)
    fake.on("POST", "/v1/boxes/3f2a9c01d4e5/exec", body={
        "stdout": "hi\n", "stderr": base64.b64encode(b"\xff\xfe").decode(),
        "stdout_encoding": "utf-8", "stderr_encoding": "base64", "exit_code": 3,
        "signal": None, "duration_ms": 12, "truncated": False, "timed_out": False, "pid": 412,
        "error": None})
    result = box.exec("echo hi; exit 3", env={"K": "V"}, cwd="/tmp", user="root",
                      stdin="text", timeout=30, max_output_bytes=1024)
    assert fake.last_json() == {"argv": ["/bin/sh", "-c", "echo hi; exit 3"], "env": ["K=V"],
                                "cwd": "/tmp", "user": "root", "stdin": "text",
                                "timeout_ms": 30000, "max_output_bytes": 1024}
    assert result.stdout == "hi\n" and result.stderr_bytes == b"\xff\xfe"
    assert result.exit_code == 3 and result.signal is None and not result.ok
    assert result.pid == 412 and result.duration_ms == 12
    box.exec(["cat"], stdin=b"\x00\xff")
    assert fake.last_json() == {"argv": ["cat"], "stdin_base64": base64.b64encode(b"\x00\xff").decode()}
    box.exec(["true"])
    assert fake.last_json() == {"argv": ["true"]}


def test_exec_start_failure_is_a_result(client, fake):
    box = box_of(client, fake)
    fake.on("POST", "/v1/boxes/3f2a9c01d4e5/exec", body={
        "stdout": "", "stderr": "nope: not found\n", "exit_code": 127, "signal": None,
        "error": {"code": "not_found", "message": "nope: not found"}})
    result = box.exec(["nope"])
    assert result.exit_code == 127 and result.error.code == "not_found"


def test_exec_by_signal_and_timeout(client, fake):
    box = box_of(client, fake)
    fake.on("POST", "/v1/boxes/3f2a9c01d4e5/exec", body={
        "stdout": "", "stderr": "", "exit_code": None, "signal": 9, "timed_out": True})
    result = box.exec("sleep 100", timeout=0.5)
    assert result.signal == 9 and result.exit_code is None and result.timed_out
    assert fake.last_json()["timeout_ms"] == 500


def test_processes(client, fake):
    box = box_of(client, fake)
    proc = {"id": "p1", "pid": 77, "argv": ["sleep", "9"], "user": "hutch", "running": True,
            "log": "/var/log/hutch/p1.log"}
    fake.on("POST", "/v1/boxes/3f2a9c01d4e5/processes", 201, proc)
    started = box.processes.start(["sleep", "9"], env=["A=1"], cwd="/", user="hutch")
    assert fake.last_json() == {"argv": ["sleep", "9"], "env": ["A=1"], "cwd": "/",
                                "user": "hutch"}
    assert started.id == "p1" and started.running and started.code is None
    fake.on("GET", "/v1/boxes/3f2a9c01d4e5/processes",
            body={"processes": [dict(proc, running=False, code=0)]})
    assert box.processes.list()[0].code == 0
    fake.on("POST", "/v1/boxes/3f2a9c01d4e5/processes/p1/signal",
            body={"signalled": "p1", "signal": 9})
    box.processes.signal(started, 9)
    assert fake.last_json() == {"signal": 9}
    box.processes.signal("p1")
    assert fake.last_json() == {"signal": 15}


def test_ports(client, fake):
    box = box_of(client, fake)
    port = {"box_id": BOX["id"], "address": "127.0.0.1", "host_port": 8080, "box_port": 80,
            "listening": True, "error": "", "connections": 0, "accepted": 0, "created_at": 1}
    fake.on("POST", "/v1/boxes/3f2a9c01d4e5/ports", 201, port)
    assert box.ports.publish(80, 8080).listening
    assert fake.last_json() == {"host_port": 8080, "box_port": 80}
    box.ports.publish(80, 8080, "0.0.0.0")
    assert fake.last_json()["address"] == "0.0.0.0"
    fake.on("GET", "/v1/boxes/3f2a9c01d4e5/ports", body={"ports": [port]})
    assert box.ports.list()[0].host_port == 8080
    fake.on("DELETE", "/v1/boxes/3f2a9c01d4e5/ports/8080", body={"removed": 8080})
    box.ports.remove(8080)
    assert "address" not in fake.last.url.params
    box.ports.remove(8080, address="::1")
    assert fake.last.url.params["address"] == "::1"


def test_policy(client, fake):
    box = box_of(client, fake)
    answer = {"id": BOX["id"], "name": "dev", "policy": {"allow": [{"domain": "*"}], "deny": []}}
    fake.on("GET", "/v1/boxes/3f2a9c01d4e5/policy", body=answer)
    assert box.policy.get().policy["allow"] == [{"domain": "*"}]
    fake.on("PUT", "/v1/boxes/3f2a9c01d4e5/policy", body=answer)
    box.policy.set("allow-all")
    assert fake.last_json() == {"policy": "allow-all"}
    box.policy.set({"allow": [{"domain": "example.com", "ports": [443]}]})
    assert fake.last_json() == {"policy": {"allow": [{"domain": "example.com", "ports": [443]}]}}
    fake.on("GET", "/v1/boxes/3f2a9c01d4e5/policy/log", body={
        "entries": [{"box": "dev", "proto": "https", "host": "example.com", "port": 443,
                     "decision": "deny", "reason": "not allowed"}], "next": 7})
    page = box.policy.log(after=3, limit=10)
    assert page.next == 7 and page.entries[0].decision == "deny"
    assert dict(fake.last.url.params) == {"after": "3", "limit": "10"}


FILE = {"name": "a.txt", "path": "/home/hutch/a.txt", "type": "file", "size": 5, "mode": 420,
        "permissions": "-rw-r--r--", "uid": 1000, "gid": 1000, "owner": "hutch",
        "group": "hutch", "mtime_ns": 1, "symlink_target": ""}


def test_files_metadata(client, fake):
    box = box_of(client, fake)
    fake.on("GET", "/v1/boxes/3f2a9c01d4e5/files/stat", body=FILE)
    info = box.files.stat("a.txt", user="root")
    assert info.is_file and info.mode == 0o644
    assert dict(fake.last.url.params) == {"path": "a.txt", "user": "root"}
    fake.on("GET", "/v1/boxes/3f2a9c01d4e5/files/list",
            body={"entries": [FILE, dict(FILE, name="d", type="dir")], "truncated": True})
    listing = box.files.list("/home/hutch", depth=2)
    assert [e.name for e in listing] == ["a.txt", "d"] and listing.truncated
    assert dict(fake.last.url.params) == {"path": "/home/hutch", "depth": "2"}
    fake.on("POST", "/v1/boxes/3f2a9c01d4e5/files/mkdir", 201, dict(FILE, type="dir"))
    box.files.mkdir("/tmp/x", mode=0o700)
    assert fake.last_json() == {"path": "/tmp/x", "parents": True, "mode": 448}
    fake.on("POST", "/v1/boxes/3f2a9c01d4e5/files/move", body=FILE)
    box.files.move("a", "b", overwrite=True)
    assert fake.last_json() == {"from": "a", "to": "b", "overwrite": True}
    fake.on("DELETE", "/v1/boxes/3f2a9c01d4e5/files", body={"removed": "x"})
    box.files.remove("/tmp/x", recursive=True)
    assert dict(fake.last.url.params) == {"path": "/tmp/x", "recursive": "true"}
    fake.on("GET", "/v1/boxes/3f2a9c01d4e5/files/stat", 404,
            {"error": {"code": "not_found", "message": "No such file"}})
    assert box.files.exists("nope") is False


def test_files_read_write(client, fake, tmp_path):
    box = box_of(client, fake)
    fake.on("GET", "/v1/boxes/3f2a9c01d4e5/files", body=b"hello",
            headers={"X-Hutch-File-Mode": "0644", "X-Hutch-File-Mtime-Ns": "5"})
    assert box.files.read("a.txt") == b"hello"
    assert box.files.read_text("a.txt") == "hello"
    assert box.files.read_to("a.txt", tmp_path / "copy") == 5
    assert (tmp_path / "copy").read_bytes() == b"hello"
    fake.on("PUT", "/v1/boxes/3f2a9c01d4e5/files", body=FILE)
    assert box.files.write("a.txt", "héllo", mode=0o600, owner="root").name == "a.txt"
    assert fake.bodies[-1] == "héllo".encode()
    assert dict(fake.last.url.params) == {"path": "a.txt", "mode": "0600", "owner": "root"}
    box.files.write("b", io.BytesIO(b"x" * 300_000))
    assert fake.bodies[-1] == b"x" * 300_000
    box.files.write("c", [b"a", b"b"])
    assert fake.bodies[-1] == b"ab"
    local = tmp_path / "local.bin"
    local.write_bytes(b"L" * 600_000)
    box.files.write("d", local)
    assert fake.bodies[-1] == b"L" * 600_000
    box.files.write("e", str(local))  # a str is content, never a path
    assert fake.bodies[-1] == str(local).encode()
    fake.on("PUT", "/v1/boxes/3f2a9c01d4e5/files", 403,
            {"error": {"code": "permission_denied", "message": "Cannot write /etc/x"}})
    with pytest.raises(hutch.PermissionDeniedError):
        box.files.write("/etc/x", b"")


def test_upload_sends_a_tar_of_the_directory(client, fake, tmp_path):
    box = box_of(client, fake)
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("A")
    (src / "sub" / "b.bin").write_bytes(os.urandom(70_000))
    os.symlink("a.txt", src / "link")
    fake.on("PUT", "/v1/boxes/3f2a9c01d4e5/files/archive", body={"path": "/w", "entries": 4})
    assert box.files.upload(src, "/w") == 4
    assert dict(fake.last.url.params) == {"path": "/w"}
    with tarfile.open(fileobj=io.BytesIO(fake.bodies[-1])) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"a.txt", "link", "sub", "sub/b.bin"}
        assert members["link"].issym() and members["link"].linkname == "a.txt"
        assert tar.extractfile("sub/b.bin").read() == (src / "sub" / "b.bin").read_bytes()


def test_download_extracts_the_tar(client, fake, tmp_path):
    box = box_of(client, fake)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("proj", None), ("proj/x.txt", b"X"), ("proj/d", None),
                           ("proj/d/y", b"Y" * 1000)):
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                info.mode = 0o640
                tar.addfile(info, io.BytesIO(data))
    fake.on("GET", "/v1/boxes/3f2a9c01d4e5/files/archive", body=buf.getvalue())
    assert box.files.download("/home/hutch/proj", tmp_path / "out") == 4
    assert (tmp_path / "out" / "x.txt").read_bytes() == b"X"
    assert (tmp_path / "out" / "d" / "y").read_bytes() == b"Y" * 1000
    assert oct((tmp_path / "out" / "x.txt").stat().st_mode & 0o777) == oct(0o640)


def test_templates(client, fake):
    tpl = {"name": "mine", "source": "box", "source_box": "dev", "used_by": []}
    fake.on("GET", "/v1/templates", body={"templates": [tpl]})
    assert client.templates.list()[0].source == "box"
    assert client.templates.get("mine").name == "mine"
    with pytest.raises(hutch.NotFoundError):
        client.templates.get("other")
    fake.on("POST", "/v1/templates", 201, tpl)
    box = box_of(client, fake)
    client.templates.create("mine", from_box=box)
    assert fake.last_json() == {"name": "mine", "from_box": "3f2a9c01d4e5"}
    fake.on("DELETE", "/v1/templates/mine", body={"removed": "mine"})
    client.templates.remove("mine")


def test_template_build_streams_progress(client, fake):
    lines = [{"progress": "step 1"}, {"progress": "step 2"},
             {"template": {"name": "docker", "source": "recipe"}}]
    fake.on("POST", "/v1/templates", body="\n".join(json.dumps(x) for x in lines) + "\n",
            headers={"Content-Type": "application/x-ndjson"})
    seen = []
    template = client.templates.build("docker", on_progress=seen.append)
    assert seen == ["step 1", "step 2"] and template.name == "docker"
    assert fake.last.headers["accept"] == "application/x-ndjson"
    assert fake.last_json() == {"name": "docker"}


def test_template_build_error_line_raises(client, fake):
    lines = [{"progress": "x"}, {"error": {"code": "unavailable", "message": "no debootstrap"}}]
    fake.on("POST", "/v1/templates", body="\n".join(json.dumps(x) for x in lines),
            headers={"Content-Type": "application/x-ndjson"})
    with pytest.raises(hutch.UnavailableError, match="no debootstrap"):
        client.templates.build("docker")


def test_template_build_without_streaming_server(client, fake):
    fake.on("POST", "/v1/templates", 201, {"name": "docker", "source": "recipe"})
    assert client.templates.build("docker", on_progress=print).name == "docker"


def test_secrets_and_keys(client, fake):
    fake.on("PUT", "/v1/secrets/API_KEY", body={"name": "API_KEY", "domains": ["api.x.com"],
                                                "header": "Authorization"})
    s = client.secrets.set("API_KEY", "v", ["api.x.com"], header="Authorization",
                           format="Bearer {value}")
    assert fake.last_json() == {"value": "v", "domains": ["api.x.com"],
                                "header": "Authorization", "format": "Bearer {value}"}
    assert s.header == "Authorization"
    fake.on("GET", "/v1/secrets", body={"secrets": [{"name": "API_KEY"}]})
    assert client.secrets.list()[0].name == "API_KEY"
    fake.on("DELETE", "/v1/secrets/API_KEY", body={"removed": "API_KEY"})
    client.secrets.remove("API_KEY")
    fake.on("POST", "/v1/keys", 201, {"name": "alice", "admin": False, "max_boxes": 2,
                                      "key": "e2b_" + "1" * 40})
    key = client.keys.create("alice", max_boxes=2, max_memory="4G")
    assert fake.last_json() == {"name": "alice", "admin": False, "max_boxes": 2,
                                "max_memory_mib": 4096}
    assert key.key.startswith("e2b_")
    fake.on("GET", "/v1/keys", body={"keys": [{"name": "alice"}]})
    assert client.keys.list()[0].key is None
    fake.on("DELETE", "/v1/keys/alice", body={"removed": "alice"})
    client.keys.remove("alice")


def test_registries(client, fake):
    fake.on("PUT", "/v1/registries/registry.example:5000",
            body={"registry": "registry.example:5000", "username": "robot"})
    made = client.registries.login("registry.example:5000", "robot", "t0ken")
    assert fake.last_json() == {"username": "robot", "password": "t0ken"}
    assert made.registry == "registry.example:5000" and made.username == "robot"
    fake.on("GET", "/v1/registries", body={"registries": [{"registry": "docker.io",
                                                           "username": "me"}]})
    assert [(r.registry, r.username) for r in client.registries.list()] == [("docker.io", "me")]
    fake.on("DELETE", "/v1/registries/docker.io", body={"removed": "docker.io"})
    client.registries.logout("docker.io")
    with pytest.raises(hutch.InvalidArgumentError):
        client.registries.login("docker.io", "me", "")


def test_names_are_escaped_in_paths(client, fake):
    fake.on("GET", "/v1/boxes/a/b", body=BOX)  # the fake routes the decoded path
    client.boxes.get("a/b")
    assert fake.last.url.raw_path == b"/v1/boxes/a%2Fb"


def test_unreachable_socket_is_a_connect_error(tmp_path, flavor):
    path = str(tmp_path / "none.sock")
    if flavor == "sync":
        with hutch.Client(socket=path) as c, pytest.raises(hutch.ConnectError) as info:
            c.info()
    else:
        import asyncio

        async def go():
            async with hutch.AsyncClient(socket=path) as c:
                await c.info()
        with pytest.raises(hutch.ConnectError) as info:
            asyncio.run(go())
    assert path in str(info.value) and "hutchd running" in str(info.value)
    assert info.value.status == 0
