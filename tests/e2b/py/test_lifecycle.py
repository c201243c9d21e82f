"""Sandbox lifecycle through the E2B Python SDK (sync API): create, connect, info, list,
set_timeout, kill, pause, fork and snapshots, and the sandbox timeout being enforced."""

import time
from datetime import datetime, timezone

import pytest

from e2b import Sandbox, SandboxQuery, SandboxState

from support import (RUN_ID, TEMPLATE, SandboxNotFound, create_sandbox, list_all, track,
                     wait_for)

# pytest runs a module's tests in file order; the first and the last test belong together.
_short = {}


def _ts(dt):
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def test_create_short_lived_first():
    """A sandbox with a 10 s timeout, checked by the last test of this file."""
    _short["at"] = time.time()
    _short["sbx"] = create_sandbox(timeout=10, metadata={"kind": "short"})
    assert _short["sbx"].sandbox_id


_state = {}


def test_create_template_timeout_metadata_envs():
    _state["created_at"] = time.time()
    sbx = create_sandbox(timeout=120, metadata={"kind": "lifecycle", "owner": "tests"},
                         envs={"HUTCH_E2B_ENV": "from-create", "SECOND_VAR": "two words"})
    _state["sbx"] = sbx
    assert isinstance(sbx.sandbox_id, str) and sbx.sandbox_id
    r = sbx.commands.run('echo "$HUTCH_E2B_ENV|$SECOND_VAR"')
    assert r.stdout == "from-create|two words\n"
    assert r.exit_code == 0


def test_get_info():
    sbx = _state["sbx"]
    info = sbx.get_info()
    assert info.sandbox_id == sbx.sandbox_id
    assert TEMPLATE in (info.template_id, info.name), (info.template_id, info.name)
    assert info.metadata["kind"] == "lifecycle"
    assert info.metadata["owner"] == "tests"
    assert info.metadata["run"] == RUN_ID
    assert isinstance(info.started_at, datetime) and isinstance(info.end_at, datetime)
    assert abs(_ts(info.started_at) - _state["created_at"]) < 60
    lifetime = _ts(info.end_at) - _ts(info.started_at)
    assert 100 < lifetime < 140, f"end_at - started_at = {lifetime} s, want ~120"
    assert info.state == SandboxState.RUNNING
    assert info.cpu_count >= 1
    assert info.memory_mb >= 128
    again = Sandbox.get_info(sbx.sandbox_id)
    assert again.sandbox_id == sbx.sandbox_id
    assert again.metadata == info.metadata


def test_list_and_metadata_filter():
    sbx = _state["sbx"]
    everything = list_all()
    mine = [s for s in everything if s.sandbox_id == sbx.sandbox_id]
    assert mine, f"Sandbox.list() ({len(everything)} sandboxes) lacks {sbx.sandbox_id}"
    assert mine[0].state == SandboxState.RUNNING
    assert mine[0].metadata["kind"] == "lifecycle"
    filtered = list_all(query=SandboxQuery(metadata={"kind": "lifecycle", "run": RUN_ID}))
    assert [s.sandbox_id for s in filtered] == [sbx.sandbox_id]
    none = list_all(query=SandboxQuery(metadata={"kind": "no-such-kind", "run": RUN_ID}))
    assert none == []


def test_set_timeout_moves_end_at():
    sbx = _state["sbx"]
    sbx.set_timeout(300)
    left = _ts(sbx.get_info().end_at) - time.time()
    assert 240 < left < 360, f"end_at is {left} s away, want ~300"
    Sandbox.set_timeout(sbx.sandbox_id, 200)
    left = _ts(sbx.get_info().end_at) - time.time()
    assert 140 < left < 260, f"end_at is {left} s away, want ~200"


def test_connect_reaches_the_same_sandbox():
    sbx = _state["sbx"]
    sbx.files.write("/tmp/connect-marker", "written before connect")
    other = Sandbox.connect(sbx.sandbox_id)
    assert other.sandbox_id == sbx.sandbox_id
    # Every envd request of the connected object is routed to the same box.
    assert other.commands.run("cat /tmp/connect-marker").stdout == "written before connect"
    assert other.files.read("/tmp/connect-marker") == "written before connect"
    assert other.is_running() is True


def test_kill_then_not_running():
    sbx = _state["sbx"]
    assert sbx.is_running() is True
    assert sbx.kill() is True
    assert Sandbox.kill(sbx.sandbox_id) is False
    assert sbx.is_running() is False
    assert not [s for s in list_all() if s.sandbox_id == sbx.sandbox_id]
    with pytest.raises(SandboxNotFound):
        Sandbox.get_info(sbx.sandbox_id)


def test_pause_then_connect_resumes_with_files_memory_and_processes():
    # E2B's pause keeps the sandbox's memory: a tmpfs file and a running process come back.
    p = create_sandbox(metadata={"kind": "pause"})
    p.files.write("/home/user/kept.txt", "survives pause")
    p.commands.run("echo from-disk > /home/user/kept2.txt && sync")
    p.commands.run("echo only-in-ram > /dev/shm/ram.txt")
    sleeper = p.commands.run("sleep 3600", background=True)
    paused = p.pause()
    if paused is not None:  # e2b >= 2.27 answers a bool; older versions nothing
        assert paused is True
    assert Sandbox.get_info(p.sandbox_id).state == SandboxState.PAUSED
    listed = list_all(query=SandboxQuery(metadata={"kind": "pause", "run": RUN_ID},
                                         state=[SandboxState.PAUSED]))
    assert [s.sandbox_id for s in listed] == [p.sandbox_id]
    resumed = Sandbox.connect(p.sandbox_id)
    assert resumed.is_running() is True
    assert resumed.get_info().state == SandboxState.RUNNING
    assert resumed.files.read("/home/user/kept.txt") == "survives pause"
    assert resumed.commands.run("cat /home/user/kept2.txt").stdout == "from-disk\n"
    assert resumed.commands.run("cat /dev/shm/ram.txt").stdout == "only-in-ram\n"
    assert resumed.commands.run(f"kill -0 {sleeper.pid}").exit_code == 0
    assert p.commands.run("echo again").stdout == "again\n"


def test_fork():
    if not hasattr(Sandbox, "fork"):
        pytest.skip("this SDK version has no Sandbox.fork")
    parent = create_sandbox(metadata={"kind": "fork-parent"})
    parent.files.write("/home/user/fork.txt", "from the parent")
    children = parent.fork()
    assert len(children) == 1
    child = children[0]
    assert not isinstance(child, Exception), f"fork answered an error: {child!r}"
    track(child.sandbox_id)
    assert child.sandbox_id != parent.sandbox_id
    assert child.files.read("/home/user/fork.txt") == "from the parent"
    child.files.write("/home/user/fork.txt", "from the child")
    assert parent.files.read("/home/user/fork.txt") == "from the parent"
    assert child.files.read("/home/user/fork.txt") == "from the child"


def test_create_snapshot_keeps_memory_and_outlives_its_sandbox():
    """A snapshot is the box saved with its memory (docs/e2b.md): files, a tmpfs file and a
    running process are in a sandbox made from it, after the source is gone."""
    if not hasattr(Sandbox, "create_snapshot"):
        pytest.skip("this SDK version has no create_snapshot")
    src = create_sandbox(metadata={"kind": "snapshot-src"})
    src.files.write("/home/user/snap.txt", "in the snapshot")
    src.commands.run("echo only-in-ram > /dev/shm/ram.txt")
    src.commands.run("sh -c 'echo $$ > /dev/shm/sleeper.pid; exec sleep 3600'", background=True)
    wait_for("the sleeper to write its pid",
             lambda: src.commands.run("cat /dev/shm/sleeper.pid 2>/dev/null || true").stdout.strip())
    name = f"snap-{RUN_ID}"
    snap = src.create_snapshot(name)
    assert isinstance(snap.snapshot_id, str) and snap.snapshot_id
    assert list(snap.names) == [name]
    assert src.commands.run("cat /home/user/snap.txt").stdout == "in the snapshot"
    snaps = src.list_snapshots().next_items()
    assert [s.snapshot_id for s in snaps] == [snap.snapshot_id], snaps
    src.kill()

    restored = Sandbox.create(snap.snapshot_id, timeout=300, metadata={"run": RUN_ID})
    track(restored.sandbox_id)
    assert restored.sandbox_id != src.sandbox_id
    assert restored.files.read("/home/user/snap.txt") == "in the snapshot"
    assert restored.commands.run("cat /dev/shm/ram.txt").stdout == "only-in-ram\n"
    assert restored.commands.run('kill -0 "$(cat /dev/shm/sleeper.pid)"').exit_code == 0
    restored.kill()
    assert Sandbox.delete_snapshot(snap.snapshot_id) is True
    assert Sandbox.delete_snapshot(snap.snapshot_id) is False


def test_short_lived_timeout_was_enforced_last():
    sbx = _short.get("sbx")
    assert sbx is not None, "the short-lived sandbox was not created"
    wait = _short["at"] + 10 - time.time()
    if wait > 0:
        time.sleep(wait)
    # E2B kills a sandbox whose timeout passed; allow a minute past the deadline.
    wait_for("the timed-out sandbox to stop running", lambda: not sbx.is_running(),
             timeout=60, interval=1)
    listed = list_all(query=SandboxQuery(metadata={"run": RUN_ID, "kind": "short"}))
    assert [s.sandbox_id for s in listed if s.state == SandboxState.RUNNING] == []
    with pytest.raises(SandboxNotFound):
        Sandbox.connect(sbx.sandbox_id)
