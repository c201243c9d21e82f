import io
import os
import subprocess
import sys
import tarfile
import tracemalloc

import pytest

import hutch
from hutch._tar import ChunkReader, extract, tar_stream


def tree(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                out[rel] = ("dir", os.stat(path).st_mode & 0o777)
            else:
                with open(path, "rb") as f:
                    out[rel] = ("file", f.read(), os.stat(path).st_mode & 0o777)
    return out


def make_src(root):
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "a.txt").write_text("A")
    (root / "sub" / "deep" / "b.bin").write_bytes(os.urandom(100_003))
    (root / "empty").mkdir()
    (root / "x.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "x.sh", 0o750)
    os.chmod(root / "sub", 0o700)
    os.symlink("a.txt", root / "link")
    os.symlink("/etc/passwd", root / "abs-link")
    os.symlink("sub", root / "dir-link")
    (root / "ünï cödé name").write_text("u")
    (root / ("long" * 40)).write_text("pax")


def test_roundtrip_of_a_tree(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    make_src(src)
    data = b"".join(tar_stream(src))
    assert len(data) % 512 == 0
    out = tmp_path / "out"
    count = extract(io.BytesIO(data), out)
    assert tree(out) == tree(src)
    assert count == len(tree(src))


def test_gnu_tar_reads_it(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    make_src(src)
    archive = tmp_path / "a.tar"
    archive.write_bytes(b"".join(tar_stream(src)))
    listing = subprocess.run(["tar", "-tf", str(archive)], capture_output=True, text=True,
                             check=True).stdout.split()
    assert "sub/deep/b.bin" in listing and "a.txt" in listing


def test_a_single_file_is_named_after_itself(tmp_path):
    f = tmp_path / "one.txt"
    f.write_text("1")
    with tarfile.open(fileobj=io.BytesIO(b"".join(tar_stream(f)))) as tar:
        assert tar.getnames() == ["one.txt"]
    out = tmp_path / "out"
    extract(io.BytesIO(b"".join(tar_stream(f))), out)
    assert (out / "one.txt").read_text() == "1"


def test_the_writer_streams(tmp_path):
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(64 << 20)  # 64 MiB, sparse
    was_tracing = tracemalloc.is_tracing()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    total = 0
    for chunk in tar_stream(big):
        total += len(chunk)
    _, peak = tracemalloc.get_traced_memory()
    if not was_tracing:
        tracemalloc.stop()
    assert total >= 64 << 20
    assert peak - base < 8 << 20


def test_the_reader_streams_from_chunks(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"z" * 3_000_000)
    chunks = iter([c for c in tar_stream(src)])
    out = tmp_path / "out"
    extract(io.BufferedReader(ChunkReader(chunks)), out)
    assert (out / "f").read_bytes() == b"z" * 3_000_000


def archive(*members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def entry(name, data=None, type_=tarfile.REGTYPE, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = type_
    info.linkname = linkname
    if data is not None:
        info.size = len(data)
    return info, data


@pytest.mark.parametrize("name", ["/etc/evil", "../evil", "a/../../evil"])
def test_bad_names_are_refused(tmp_path, name):
    with pytest.raises(hutch.ProtocolError):
        extract(io.BytesIO(archive(entry(name, b"x"))), tmp_path / "out")
    assert not (tmp_path / "evil").exists()


def test_no_write_through_a_symlink(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    data = archive(entry("l", type_=tarfile.SYMTYPE, linkname=str(outside)),
                   entry("l/pwned", b"x"))
    with pytest.raises(hutch.ProtocolError, match="symlink"):
        extract(io.BytesIO(data), tmp_path / "out")
    assert not (outside / "pwned").exists()


def test_a_symlink_in_the_way_is_replaced_not_followed(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "target"
    target.write_text("keep")
    os.symlink(target, out / "f")
    extract(io.BytesIO(archive(entry("f", b"new"))), out)
    assert target.read_text() == "keep" and (out / "f").read_text() == "new"
    assert not os.path.islink(out / "f")


def test_devices_are_skipped(tmp_path):
    data = archive(entry("fifo", type_=tarfile.FIFOTYPE), entry("ok", b"1"))
    assert extract(io.BytesIO(data), tmp_path / "out") == 1
    assert os.listdir(tmp_path / "out") == ["ok"]


def test_setuid_is_dropped(tmp_path):
    info, data = entry("suid", b"x")
    info.mode = 0o4755
    extract(io.BytesIO(archive((info, data))), tmp_path / "out")
    assert os.stat(tmp_path / "out" / "suid").st_mode & 0o7777 == 0o755


def test_top_directory_is_stripped(tmp_path):
    data = archive(entry("proj", type_=tarfile.DIRTYPE), entry("proj/a", b"a"))
    assert extract(io.BytesIO(data), tmp_path / "out") == 2
    assert (tmp_path / "out" / "a").read_bytes() == b"a"
    with pytest.raises(hutch.ProtocolError, match="not under"):
        extract(io.BytesIO(archive(entry("proj", type_=tarfile.DIRTYPE),
                                   entry("other/a", b"a"))), tmp_path / "out2")


def test_python_version_is_supported():
    assert sys.version_info >= (3, 10)
