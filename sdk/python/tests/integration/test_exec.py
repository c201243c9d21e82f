"""Commands in real boxes: POST /exec, the WebSocket exec, PTYs, detached processes."""

from __future__ import annotations

import hashlib
import io
import os
import time

import pytest

import hutch


def test_exec_string_and_argv(box):
    r = box.exec("echo out; echo err >&2; exit 3")
    assert (r.stdout, r.stderr, r.exit_code, r.signal) == ("out\n", "err\n", 3, None)
    assert r.pid > 0 and not r.timed_out and not r.truncated and r.error is None
    r = box.exec(["printf", "%s|", "a b", "$HOME", "*"])
    assert r.stdout == "a b|$HOME|*|" and r.ok


def test_exec_user_cwd_env(box):
    assert box.exec(["id", "-un"]).stdout == "hutch\n"
    assert box.exec(["pwd"]).stdout == "/home/hutch\n"
    assert box.exec(["id", "-u"], user="root").stdout == "0\n"
    assert box.exec(["pwd"], cwd="/tmp").stdout == "/tmp\n"
    assert box.exec("echo $A-$B", env={"A": "1", "B": "two words"}).stdout == "1-two words\n"
    assert box.exec("echo $A", env=["A=list"]).stdout == "list\n"


def test_exec_stdin(box):
    assert box.exec(["cat"], stdin="text in\n").stdout == "text in\n"
    blob = bytes(range(256)) * 64
    r = box.exec(["cat"], stdin=blob)
    assert r.stdout_bytes == blob  # not UTF-8: came back base64-encoded and was decoded
    assert box.exec(["cat"]).stdout == ""  # no stdin: /dev/null


def test_exec_start_failures_are_results(box):
    r = box.exec(["/no/such/program"])
    assert r.exit_code == 127 and r.error is not None and r.error.code
    r = box.exec(["true"], user="nobody-like-this")
    assert r.exit_code in (126, 127) and r.error is not None
    r = box.exec(["true"], cwd="/no/such/dir")
    assert r.exit_code in (126, 127) and r.error is not None


def test_exec_timeout(box):
    start = time.monotonic()
    r = box.exec("echo before; sleep 30; echo after", timeout=1)
    assert time.monotonic() - start < 20
    assert r.timed_out and r.signal == 9 and r.exit_code is None
    assert r.stdout == "before\n"


def test_exec_output_limit(box):
    r = box.exec("head -c 300000 /dev/zero | tr '\\0' x", max_output_bytes=1000)
    assert r.truncated and len(r.stdout) == 1000 and r.exit_code == 0


def test_exec_stopped_box(box):
    box.stop()
    with pytest.raises(hutch.FailedPreconditionError):
        box.exec(["true"])
    with pytest.raises(hutch.FailedPreconditionError):
        box.exec(["true"], on_stdout=lambda b: None)


def test_streaming_callbacks_arrive_before_the_exit(box):
    seen = []
    r = box.exec("for i in 1 2 3; do echo $i; sleep 0.5; done; echo oops >&2",
                 on_stdout=lambda b: seen.append((time.monotonic(), b)),
                 on_stderr=lambda b: seen.append((time.monotonic(), b)))
    assert b"".join(b for _, b in seen if b != b"oops\n") == b"1\n2\n3\n"
    assert r.stdout == "1\n2\n3\n" and r.stderr == "oops\n" and r.exit_code == 0
    first, last = seen[0][0], seen[-1][0]
    assert last - first > 0.8  # the first chunk came while the command still ran


def test_streaming_big_stdin_and_output(box):
    data = os.urandom(3 << 20)
    got = bytearray()
    r = box.exec(["sh", "-c", "sha256sum; cat /dev/zero | head -c 2000000"],
                 stdin=io.BytesIO(data), on_stdout=got.extend)
    assert r.exit_code == 0
    assert got.startswith(hashlib.sha256(data).hexdigest().encode())
    assert len(got) == 64 + len("  -\n") + 2_000_000


def test_streaming_timeout_and_start_failure(box):
    r = box.exec(["sleep", "30"], timeout=1, on_stdout=lambda b: None)
    assert r.timed_out and r.signal == 9
    r = box.exec(["/no/such/program"], on_stdout=lambda b: None)
    assert r.exit_code == 127 and r.error is not None


def test_session_stdin_handle_and_signal(box):
    with box.exec_session(["cat"], stdin=True) as s:
        assert s.pid > 0
        s.write("hello\n")
        assert s.read_until("hello\n", timeout=10) == b"hello\n"
        s.write(b"\x00\xffbytes\n")
        assert s.read_until(b"bytes\n", timeout=10) == b"\x00\xffbytes\n"
        s.close_stdin()
        r = s.wait(10)
    assert r.exit_code == 0 and r.stdout_bytes == b"hello\n\x00\xffbytes\n"
    with box.exec_session(["sleep", "60"]) as s:
        s.signal(15)
        assert s.wait(10).signal == 15


def test_closing_a_session_kills_the_command(box):
    s = box.exec_session(["sh", "-c", "echo $$ > /tmp/pid; exec sleep 300"])
    deadline = time.monotonic() + 10
    while box.exec(["cat", "/tmp/pid"]).exit_code != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    pid = box.exec(["cat", "/tmp/pid"]).stdout.strip()
    s.close()
    deadline = time.monotonic() + 10
    while box.exec(["kill", "-0", pid]).exit_code == 0:
        assert time.monotonic() < deadline, "the command outlived its WebSocket"
        time.sleep(0.2)


def test_pty_login_shell(box):
    with box.pty(rows=40, cols=100) as pty:
        # A marker the typed line's echo and the prompt (its window title holds the box's random
        # name, "py-fbc6242...") cannot hold: "42" alone once matched the title, before tty ran.
        pty.write("tty; echo pty-$((6*7))-ok\n")
        out = pty.read_until("pty-42-ok", timeout=20)
        assert b"/dev/pts/" in out
        pty.write("stty size\n")
        assert b"40 100" in pty.read_until("40 100", timeout=10)
        pty.resize(50, 120)
        pty.write("stty size\n")
        assert b"50 120" in pty.read_until("50 120", timeout=10)
        pty.write("exit 5\n")
        assert pty.wait(20).exit_code == 5


def test_pty_command_with_callback(box):
    seen = bytearray()
    pty = box.pty(["sh", "-c", "read line; echo got:$line"], on_data=seen.extend)
    pty.write("abc\r")
    r = pty.wait(20)
    assert r.exit_code == 0 and b"got:abc" in bytes(seen)


@pytest.mark.files_api  # the log is read through the files API
def test_processes(box):
    p = box.processes.start("echo started; echo $V; exec sleep 300", env={"V": "from-env"})
    assert p.id and p.pid > 0 and p.running and p.log
    assert p.id in [x.id for x in box.processes.list() if x.running]
    deadline = time.monotonic() + 10
    while b"from-env" not in box.processes.log(p):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert box.processes.log(p.id).startswith(b"started\n")
    box.processes.signal(p, 9)
    deadline = time.monotonic() + 10
    while True:
        ended = [x for x in box.processes.list() if x.id == p.id]
        if ended and not ended[0].running:
            break
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert ended[0].signal == 9 and ended[0].code is None
    with pytest.raises(hutch.FailedPreconditionError):
        box.processes.signal(p, 9)
    with pytest.raises(hutch.NotFoundError):
        box.processes.signal("no-such-process")
