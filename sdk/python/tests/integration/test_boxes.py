"""Boxes: lifecycle, owners, quotas, snapshots, ports, policy."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

import hutch
from conftest import unique


def test_create_with_everything(boxes, client):
    name = unique()
    box = boxes(name=name, cpus=1, memory="768M", disk="4G", env={"GREETING": "hello"},
                network_policy="none")
    assert box.name == name and box.state == "running"
    assert box.info.memory_mib == 768 and box.info.disk_mib == 4096 and box.info.cpus == 1
    assert box.info.env == {"GREETING": "hello"} and box.info.owner == "test-user"
    assert box.exec("echo $GREETING").stdout == "hello\n"
    # A request's own variable wins over the box's.
    assert box.exec("echo $GREETING", env={"GREETING": "bye"}).stdout == "bye\n"
    assert client.boxes.get(name).id == box.id
    assert client.boxes.get(box.id[:8]).name == name
    assert box.id in [b.id for b in client.boxes.list()]


def test_stop_start_keeps_files(box):
    box.exec(["sh", "-c", "echo kept > /home/hutch/f"])
    assert box.stop(shutdown=True).state == "stopped"
    with pytest.raises(hutch.FailedPreconditionError):
        box.exec(["true"])
    assert box.start().state == "running"
    assert box.exec(["cat", "/home/hutch/f"]).stdout == "kept\n"
    assert box.refresh().state == "running"


def test_stop_suspends_and_start_resumes_processes(box):
    box.exec(["sh", "-c", "echo in-memory > /dev/shm/m"])
    pid = box.exec(["sh", "-c", "sleep 1000 >/dev/null 2>&1 & echo $!"]).stdout.strip()
    assert box.stop().state == "suspended"
    with pytest.raises(hutch.FailedPreconditionError):
        box.exec(["true"])
    info = box.start()
    assert info.state == "running" and info.boot == "resumed from its suspended state"
    assert box.exec(["cat", "/dev/shm/m"]).stdout == "in-memory\n"
    assert box.exec(["kill", "-0", pid]).exit_code == 0


def test_remove_needs_force_while_running(box, client):
    with pytest.raises(hutch.FailedPreconditionError):
        box.remove()
    box.remove(force=True)
    with pytest.raises(hutch.NotFoundError):
        client.boxes.get(box.id)


def test_errors_from_the_server(boxes, client):
    with pytest.raises(hutch.NotFoundError):
        client.boxes.get(unique("none"))
    box = boxes()
    with pytest.raises(hutch.AlreadyExistsError):
        client.boxes.create(name=box.name)
    with pytest.raises(hutch.InvalidArgumentError):
        client.boxes.create(memory=64)
    with pytest.raises(hutch.NotFoundError):
        client.boxes.create(template=unique("none"))


def test_owners_see_only_their_boxes(boxes, admin, client):
    mine = boxes()
    theirs = boxes(client=admin)
    assert theirs.info.owner == "test-admin"
    with pytest.raises(hutch.NotFoundError):
        client.boxes.get(theirs.id)
    assert theirs.id not in [b.id for b in client.boxes.list()]
    assert mine.id in [b.id for b in admin.boxes.list()]
    assert admin.boxes.get(mine.id).info.owner == "test-user"


def test_quota(admin, daemon, boxes):
    name = unique("quota")
    key = admin.keys.create(name, max_boxes=1)
    try:
        with hutch.Client(host=daemon.https_url, api_key=key.key,
                          fingerprint=daemon.fingerprint) as limited:
            boxes(client=limited)
            with pytest.raises(hutch.ResourceExhaustedError, match="max_boxes") as e:
                limited.boxes.create()
            assert e.value.status == 429
    finally:
        admin.keys.remove(name)


def test_fork(box, boxes):
    box.exec(["sh", "-c", "echo parent > /home/hutch/who"])
    children = [boxes.track(c) for c in box.fork(2)]
    assert len(children) == 2 and all(c.state == "running" for c in children)
    for child in children:
        assert child.exec(["cat", "/home/hutch/who"]).stdout == "parent\n"
    children[0].exec(["sh", "-c", "echo child > /home/hutch/who"])
    assert box.exec(["cat", "/home/hutch/who"]).stdout == "parent\n"
    named = [boxes.track(c) for c in box.fork(1, names=[unique("kid")])]
    assert named[0].name.startswith("kid-")


def test_checkpoint_and_rollback(box):
    box.exec(["sh", "-c", "echo one > /home/hutch/state"])
    first = box.checkpoint()
    assert first.name and first.kind == "checkpoint" and first.box_id == box.id
    box.exec(["sh", "-c", "echo two > /home/hutch/state"])
    named = box.checkpoint("second")
    assert named.name == "second"
    assert [c.name for c in box.checkpoints()] == [first.name, "second"]
    with pytest.raises(hutch.AlreadyExistsError):
        box.checkpoint("second")
    box.rollback(first.name)
    assert box.state == "running" and "rolled back" in box.info.boot
    assert box.exec(["cat", "/home/hutch/state"]).stdout == "one\n"
    box.rollback(named)
    assert box.exec(["cat", "/home/hutch/state"]).stdout == "two\n"
    box.remove_checkpoint("second")
    assert [c.name for c in box.checkpoints()] == [first.name]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ports(box):
    box.processes.start(["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"],
                        cwd="/etc")
    host_port = free_port()
    port = box.ports.publish(8000, host_port)
    assert port.host_port == host_port and port.box_port == 8000 and port.listening
    assert port.address == "127.0.0.1"
    deadline = time.monotonic() + 30
    while True:
        try:
            answer = httpx.get(f"http://127.0.0.1:{host_port}/hostname", timeout=5)
            break
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)
    assert answer.status_code == 200 and answer.text.strip()
    assert [p.host_port for p in box.ports.list()] == [host_port]
    with pytest.raises(hutch.AlreadyExistsError):
        box.ports.publish(8001, host_port)
    box.ports.remove(host_port)
    assert box.ports.list() == []


def test_policy(box):
    policy = box.policy.get()
    assert policy.id == box.id and isinstance(policy.policy, dict)
    box.policy.set({"allow": [{"domain": "deb.debian.org", "ports": [80, 443]}]})
    assert box.policy.get().policy["allow"] == [{"domain": "deb.debian.org",
                                                 "ports": [80, 443]}]
    with pytest.raises(hutch.InvalidArgumentError):
        box.policy.set({"allow": [{"domian": "typo.example"}]})
    box.policy.set("none")
    box.exec("curl -sS -m 5 https://example.com/ || true")
    page = box.policy.log()
    assert isinstance(page.next, int)
    denied = [e for e in page.entries if e.decision == "deny"]
    assert denied, page.entries
    again = box.policy.log(after=page.next)
    assert all(e not in page.entries for e in again.entries)


def test_logs_and_stats(box, admin):
    assert isinstance(box.logs(), str)
    stats = admin.boxes.get(box.id).stats()
    assert stats["id"] == box.id and stats["memory"]["bytes"] > 0
