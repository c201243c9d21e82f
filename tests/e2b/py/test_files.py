"""files.* through the E2B Python SDK (sync API), in one shared sandbox."""

import hashlib
import os

import pytest

from e2b import FileType, FilesystemEventType, SandboxException

from support import FileNotFound, wait_for


def test_write_and_read_text(sbx):
    info = sbx.files.write("/home/user/t/a.txt", "hello files\n")
    assert info.name == "a.txt"
    assert info.path == "/home/user/t/a.txt"
    if info.type is not None:  # a FileType in newer SDKs, the JSON's string in older ones
        assert getattr(info.type, "value", info.type) == "file"
    assert sbx.files.read("/home/user/t/a.txt") == "hello files\n"
    r = sbx.commands.run('stat -c "%U %s" /home/user/t/a.txt; cat /home/user/t/a.txt')
    assert r.stdout == "user 12\nhello files\n"
    sbx.files.write("/home/user/t/utf8.txt", "žluťoučký kůň — 🐇")
    assert sbx.files.read("/home/user/t/utf8.txt") == "žluťoučký kůň — 🐇"


def test_write_and_read_bytes_exactly(sbx):
    data = bytes(range(256)) + bytes(reversed(range(256))) + b"\x00\xff\x00\xfe"
    sbx.files.write("/home/user/t/bin.dat", data)
    back = sbx.files.read("/home/user/t/bin.dat", format="bytes")
    assert bytes(back) == data
    r = sbx.commands.run("sha256sum /home/user/t/bin.dat")
    assert r.stdout.split(" ")[0] == hashlib.sha256(data).hexdigest()
    sbx.commands.run('printf "\\000\\377\\001x" > /home/user/t/made.dat')
    assert bytes(sbx.files.read("/home/user/t/made.dat", format="bytes")) == b"\x00\xff\x01x"
    sbx.files.write("/home/user/t/empty", "")
    assert sbx.files.read("/home/user/t/empty") == ""
    assert sbx.files.get_info("/home/user/t/empty").size == 0


def test_large_file_both_ways(sbx):
    big = os.urandom(20 * 1024 * 1024)
    sbx.files.write("/home/user/t/big.bin", big)
    r = sbx.commands.run("stat -c %s /home/user/t/big.bin; sha256sum < /home/user/t/big.bin")
    size, digest = r.stdout.split("\n")[:2]
    assert int(size) == len(big)
    assert digest.split(" ")[0] == hashlib.sha256(big).hexdigest()
    back = sbx.files.read("/home/user/t/big.bin", format="bytes")
    assert len(back) == len(big)
    assert hashlib.sha256(back).hexdigest() == hashlib.sha256(big).hexdigest()


def test_relative_paths_resolve_against_home(sbx):
    info = sbx.files.write("rel-dir/r.txt", "relative")
    assert info.path == "/home/user/rel-dir/r.txt"
    assert sbx.files.exists("/home/user/rel-dir/r.txt") is True
    assert sbx.files.read("rel-dir/r.txt") == "relative"
    assert sbx.commands.run("cat /home/user/rel-dir/r.txt").stdout == "relative"
    assert [e.path for e in sbx.files.list("rel-dir")] == ["/home/user/rel-dir/r.txt"]


def test_list_with_depth(sbx):
    sbx.commands.run("rm -rf /home/user/l && mkdir -p /home/user/l/sub/deeper && printf 12345 > "
                     "/home/user/l/f.txt && printf ab > /home/user/l/sub/g.txt && "
                     "touch /home/user/l/sub/deeper/h")
    one = {e.name: e for e in sbx.files.list("/home/user/l")}
    assert sorted(one) == ["f.txt", "sub"]
    assert one["f.txt"].type == FileType.FILE
    assert one["f.txt"].path == "/home/user/l/f.txt"
    assert one["f.txt"].size == 5
    assert one["sub"].type == FileType.DIR
    two = sbx.files.list("/home/user/l", depth=2)
    assert sorted(e.path for e in two) == ["/home/user/l/f.txt", "/home/user/l/sub",
                                           "/home/user/l/sub/deeper", "/home/user/l/sub/g.txt"]
    assert [e.size for e in two if e.name == "g.txt"] == [2]


def test_exists_and_get_info(sbx):
    sbx.files.write("/home/user/t/info.txt", "seven!!")
    sbx.commands.run("chmod 640 /home/user/t/info.txt")
    assert sbx.files.exists("/home/user/t/info.txt") is True
    assert sbx.files.exists("/home/user/t") is True
    assert sbx.files.exists("/home/user/t/no-such-file") is False
    info = sbx.files.get_info("/home/user/t/info.txt")
    assert info.name == "info.txt"
    assert info.path == "/home/user/t/info.txt"
    assert info.type == FileType.FILE
    assert info.size == 7
    assert info.permissions == "-rw-r-----"
    assert info.mode & 0o777 == 0o640
    assert info.owner == "user"
    assert info.group == "user"
    mtime = int(sbx.commands.run("stat -c %Y /home/user/t/info.txt").stdout.strip())
    assert int(info.modified_time.timestamp()) == mtime
    d = sbx.files.get_info("/home/user/t")
    assert d.type == FileType.DIR
    assert d.permissions.startswith("d")


def test_make_dir(sbx):
    assert sbx.files.make_dir("/home/user/md/a/b") is True
    assert sbx.files.make_dir("/home/user/md/a/b") is False
    assert sbx.files.get_info("/home/user/md/a/b").type == FileType.DIR
    assert sbx.commands.run("stat -c %U /home/user/md/a/b").stdout == "user\n"


def test_rename_and_remove(sbx):
    sbx.files.write("/home/user/mv/from.txt", "moving")
    moved = sbx.files.rename("/home/user/mv/from.txt", "/home/user/mv/to.txt")
    assert moved.path == "/home/user/mv/to.txt"
    assert moved.name == "to.txt"
    assert sbx.files.exists("/home/user/mv/from.txt") is False
    assert sbx.files.read("/home/user/mv/to.txt") == "moving"
    sbx.files.remove("/home/user/mv/to.txt")
    assert sbx.files.exists("/home/user/mv/to.txt") is False
    sbx.files.write("/home/user/mv/sub/x", "x")
    sbx.files.remove("/home/user/mv")
    assert sbx.files.exists("/home/user/mv") is False


def test_watch_dir_sync_polls_events(sbx):
    """The sync SDK watches through CreateWatcher / GetWatcherEvents / RemoveWatcher."""
    sbx.files.make_dir("/home/user/w")
    handle = sbx.files.watch_dir("/home/user/w")
    events = []
    try:
        sbx.files.write("/home/user/w/new.txt", "watched")

        def saw(kind):
            events.extend(handle.get_new_events())
            return any(e.name == "new.txt" and e.type == kind for e in events)

        wait_for("a create event for new.txt", lambda: saw(FilesystemEventType.CREATE),
                 timeout=15, interval=0.3)
        sbx.commands.run("rm /home/user/w/new.txt")
        wait_for("a remove event for new.txt", lambda: saw(FilesystemEventType.REMOVE),
                 timeout=15, interval=0.3)
    finally:
        handle.stop()


def test_file_errors(sbx):
    with pytest.raises(FileNotFound):
        sbx.files.read("/home/user/definitely-missing.txt")
    with pytest.raises(FileNotFound):
        sbx.files.get_info("/home/user/definitely-missing.txt")
    with pytest.raises(FileNotFound):
        sbx.files.list("/home/user/definitely-missing-dir")
    sbx.files.make_dir("/home/user/a-dir")
    with pytest.raises(SandboxException):
        sbx.files.read("/home/user/a-dir")
    sbx.files.write("/home/user/a-file", "x")
    with pytest.raises(SandboxException):
        sbx.files.list("/home/user/a-file")
    with pytest.raises(SandboxException):
        sbx.files.write("/root/forbidden.txt", "x")
    assert sbx.files.write("/root/allowed.txt", "root here", user="root").path == "/root/allowed.txt"
    assert sbx.files.read("/root/allowed.txt", user="root") == "root here"
