"""Files without exec (docs/api.md "Files without exec"), with a real box."""

from __future__ import annotations

import io
import tarfile

import pytest

from conftest import unique


@pytest.fixture
def workdir(api, box):
    d = f"/tmp/{unique('files')}"
    r = api.post(f"/v1/boxes/{box['name']}/files/mkdir", json={"path": d, "mode": 0o777})
    assert r.status_code == 201, r.text
    yield d
    api.delete(f"/v1/boxes/{box['name']}/files", params={"path": d, "recursive": "true"})


def files(box):
    return f"/v1/boxes/{box['name']}/files"


def test_write_read_stat(api, box, workdir):
    path = f"{workdir}/a/b/c.bin"
    data = bytes(range(256)) * 100
    r = api.put(files(box), params={"path": path, "mode": "0640"}, content=data,
                headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 200, r.text
    info = r.json()
    assert info["path"] == path and info["type"] == "file" and info["size"] == len(data)
    assert info["mode"] == 0o640 and info["permissions"] == "-rw-r-----"
    assert info["owner"] == "hutch"
    r = api.get(files(box), params={"path": path})
    assert r.status_code == 200 and r.content == data
    assert int(r.headers["x-hutch-file-mode"]) == 0o640
    assert int(r.headers["content-length"]) == len(data)
    r = api.get(f"{files(box)}/stat", params={"path": path})
    assert r.json() == {**info, **{k: r.json()[k] for k in ("mtime_ns",)}}


def test_relative_paths_are_in_the_users_home(api, box):
    name = unique("rel")
    r = api.put(files(box), params={"path": name}, content=b"x")
    assert r.status_code == 200 and r.json()["path"] == f"/home/hutch/{name}"
    r = api.put(files(box), params={"path": name, "user": "root"}, content=b"x")
    assert r.json()["path"] == f"/root/{name}" and r.json()["owner"] == "root"
    api.delete(files(box), params={"path": name})
    api.delete(files(box), params={"path": name, "user": "root"})


def test_list_mkdir_move_delete(api, box, workdir):
    for n in ("x", "y"):
        api.put(files(box), params={"path": f"{workdir}/d/{n}"}, content=n.encode())
    r = api.get(f"{files(box)}/list", params={"path": workdir, "depth": 2})
    assert r.status_code == 200
    paths = [e["path"] for e in r.json()["entries"]]
    assert paths == sorted(paths) and f"{workdir}/d/x" in paths and not r.json()["truncated"]
    r = api.post(f"{files(box)}/mkdir", json={"path": f"{workdir}/d"})
    assert r.status_code == 200 and r.json()["created"] is False
    r = api.post(f"{files(box)}/mkdir", json={"path": f"{workdir}/d/x"})
    assert r.status_code == 409
    r = api.post(f"{files(box)}/move", json={"from": f"{workdir}/d/x", "to": f"{workdir}/d/y"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "already_exists"
    r = api.post(f"{files(box)}/move", json={"from": f"{workdir}/d/x", "to": f"{workdir}/d/y",
                                             "overwrite": True})
    assert r.status_code == 200 and r.json()["path"] == f"{workdir}/d/y"
    r = api.delete(files(box), params={"path": f"{workdir}/d"})
    assert r.status_code == 409
    r = api.delete(files(box), params={"path": f"{workdir}/d", "recursive": "true"})
    assert r.status_code == 200 and r.json() == {"removed": f"{workdir}/d"}


def test_file_errors(api, box, workdir):
    assert api.get(files(box), params={"path": f"{workdir}/missing"}).status_code == 404
    assert api.get(f"{files(box)}/stat", params={"path": f"{workdir}/missing"}).status_code == 404
    assert api.get(files(box), params={"path": workdir}).status_code == 400  # a directory
    assert api.get(f"{files(box)}/list", params={"path": "/etc/hostname"}).status_code == 400
    assert api.get(f"{files(box)}/list", params={"path": workdir, "depth": 0}).status_code == 400
    assert api.get(f"{files(box)}/list", params={"path": workdir, "depth": 33}).status_code == 400
    r = api.get(files(box), params={"path": "/etc/shadow"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "permission_denied"
    r = api.put(files(box), params={"path": "/root/nope"}, content=b"x")
    assert r.status_code == 403
    assert api.get(files(box)).status_code == 400  # no path


def test_archives(api, box, workdir):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("top/a.txt", b"a"), ("top/sub/b.txt", b"bb")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    r = api.put(f"{files(box)}/archive", params={"path": f"{workdir}/unpacked"},
                content=buf.getvalue(), headers={"Content-Type": "application/x-tar"})
    assert r.status_code == 200, r.text
    assert r.json()["path"] == f"{workdir}/unpacked" and r.json()["entries"] >= 2
    r = api.get(f"{files(box)}/archive", params={"path": f"{workdir}/unpacked/top"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(r.content)) as tar:
        names = sorted(m.name.rstrip("/") for m in tar.getmembers())
        assert "top/sub/b.txt" in names
        assert tar.extractfile("top/sub/b.txt").read() == b"bb"
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    r = api.put(f"{files(box)}/archive", params={"path": f"{workdir}/evil"},
                content=evil.getvalue())
    assert r.status_code == 400, r.text
    r = api.put(f"{files(box)}/archive", params={"path": f"{workdir}/bad"}, content=b"not a tar")
    assert r.status_code == 400, r.text
