"""Files in real boxes, without exec (the /files endpoints)."""

from __future__ import annotations

import hashlib
import os

import pytest

import hutch

pytestmark = pytest.mark.files_api


def test_write_read_stat(box):
    info = box.files.write("notes/a.txt", "héllo\n")
    assert info.path == "/home/hutch/notes/a.txt" and info.type == "file"
    assert info.size == len("héllo\n".encode()) and info.owner == "hutch"
    assert box.files.read_text("notes/a.txt") == "héllo\n"
    assert box.exec(["cat", "/home/hutch/notes/a.txt"]).stdout == "héllo\n"
    blob = bytes(range(256)) * 10
    box.files.write("/tmp/blob", blob, mode=0o600)
    st = box.files.stat("/tmp/blob")
    assert st.mode == 0o600 and st.permissions == "-rw-------" and st.size == len(blob)
    assert box.files.read("/tmp/blob") == blob
    # An existing file keeps its mode.
    box.files.write("/tmp/blob", b"new")
    assert box.files.stat("/tmp/blob").mode == 0o600
    assert box.files.exists("/tmp/blob") and not box.files.exists("/tmp/nope")


def test_user_and_permissions(box):
    with pytest.raises(hutch.PermissionDeniedError):
        box.files.write("/etc/hutch-test", b"x")
    info = box.files.write("/etc/hutch-test", b"x", user="root")
    assert info.owner == "root"
    with pytest.raises(hutch.PermissionDeniedError):
        box.files.read("/etc/shadow")
    assert box.files.read("/etc/shadow", user="root")
    box.files.write("/tmp/owned", b"x", user="root", owner="hutch")
    assert box.files.stat("/tmp/owned").owner == "hutch"


def test_not_found_and_wrong_types(box):
    with pytest.raises(hutch.NotFoundError):
        box.files.read("/no/such/file")
    with pytest.raises(hutch.NotFoundError):
        box.files.stat("/no/such/file")
    with pytest.raises(hutch.InvalidArgumentError):
        box.files.read("/etc")
    with pytest.raises(hutch.InvalidArgumentError):
        box.files.list("/etc/hostname")


def test_mkdir_list_move_remove(box):
    made = box.files.mkdir("/tmp/d/e/f", mode=0o750)
    assert made.type == "dir" and made.mode == 0o750
    again = box.files.mkdir("/tmp/d/e/f")
    assert again.created is False
    box.files.write("/tmp/d/one", b"1")
    box.files.write("/tmp/d/e/two", b"2")
    top = box.files.list("/tmp/d")
    assert [e.name for e in top] == ["e", "one"] and not top.truncated
    deep = box.files.list("/tmp/d", depth=3)
    assert [e.path for e in deep] == ["/tmp/d/e", "/tmp/d/e/f", "/tmp/d/e/two", "/tmp/d/one"]
    with pytest.raises(hutch.AlreadyExistsError):  # a file is in the way (docs/api.md)
        box.files.mkdir("/tmp/d/one")
    moved = box.files.move("/tmp/d/one", "/tmp/d/uno")
    assert moved.path == "/tmp/d/uno"
    box.files.write("/tmp/d/other", b"o")
    with pytest.raises(hutch.AlreadyExistsError):
        box.files.move("/tmp/d/other", "/tmp/d/uno")
    box.files.move("/tmp/d/other", "/tmp/d/uno", overwrite=True)
    assert box.files.read("/tmp/d/uno") == b"o"
    with pytest.raises(hutch.FailedPreconditionError):
        box.files.remove("/tmp/d")
    box.files.remove("/tmp/d", recursive=True)
    assert not box.files.exists("/tmp/d")


def test_big_file_streams_both_ways(box, tmp_path):
    src = tmp_path / "big"
    with open(src, "wb") as f:
        for _ in range(40):
            f.write(os.urandom(1 << 20))
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    with open(src, "rb") as f:
        assert box.files.write("/tmp/big", f).size == 40 << 20
    assert box.exec(["sha256sum", "/tmp/big"]).stdout.split()[0] == digest
    out = tmp_path / "back"
    assert box.files.read_to("/tmp/big", out) == 40 << 20
    assert hashlib.sha256(out.read_bytes()).hexdigest() == digest
    with box.files.stream("/tmp/big") as f:
        assert f.size == 40 << 20
        h = hashlib.sha256()
        for chunk in f:
            h.update(chunk)
    assert h.hexdigest() == digest


def make_tree(root):
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "main.py").write_text("print('hi')\n")
    (root / "src" / "pkg" / "data.bin").write_bytes(os.urandom(300_000))
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(root / "run.sh", 0o755)
    os.symlink("src/main.py", root / "main-link")
    (root / "empty").mkdir()


def snapshot(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir",)
            else:
                out[rel] = ("file", hashlib.sha256(open(p, "rb").read()).hexdigest(),
                            os.stat(p).st_mode & 0o777)
    return out


def test_upload_and_download_a_tree(box, tmp_path):
    local = tmp_path / "proj"
    local.mkdir()
    make_tree(local)
    entries = box.files.upload(local, "/home/hutch/proj")
    assert entries >= 6
    assert box.exec(["sh", "/home/hutch/proj/run.sh"]).stdout == "run\n"
    assert box.exec(["readlink", "/home/hutch/proj/main-link"]).stdout == "src/main.py\n"
    assert box.files.stat("/home/hutch/proj/run.sh").mode == 0o755
    assert box.files.stat("/home/hutch/proj/src/main.py").owner == "hutch"
    back = tmp_path / "back"
    box.files.download("/home/hutch/proj", back)
    assert snapshot(back) == snapshot(local)


def test_upload_and_download_one_file(box, tmp_path):
    f = tmp_path / "single.txt"
    f.write_text("one file\n")
    box.files.upload(f, "/tmp/into")
    assert box.files.read_text("/tmp/into/single.txt") == "one file\n"
    box.files.download("/tmp/into/single.txt", tmp_path / "out")
    assert (tmp_path / "out" / "single.txt").read_text() == "one file\n"


def test_upload_as_root(box, tmp_path):
    (tmp_path / "x").write_text("x")
    box.files.upload(tmp_path, "/opt/rooted", user="root")
    assert box.files.stat("/opt/rooted/x").owner == "root"
    with pytest.raises(hutch.PermissionDeniedError):
        box.files.upload(tmp_path, "/opt/denied")
