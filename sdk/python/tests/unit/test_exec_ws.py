"""The WebSocket exec (callbacks, stdin, PTY, signals, errors) against a fake server."""

from __future__ import annotations

import asyncio
import io
import os
import tempfile
import threading
import time

import pytest

import hutch
from conftest import Synced
from fake_exec import FakeExecServer


@pytest.fixture
def server():
    # A short path: unix socket paths are limited to 108 bytes.
    d = tempfile.mkdtemp(prefix="hx")
    with FakeExecServer(os.path.join(d, "s")) as s:
        yield s
    os.rmdir(d) if not os.listdir(d) else None


@pytest.fixture
def make_box(server, flavor):
    loop = asyncio.new_event_loop() if flavor == "async" else None
    clients = []

    def make(name: str = "dev"):
        info = hutch.BoxInfo(id=name, name=name, state="running")
        if loop is None:
            c = hutch.Client(socket=server.path, api_key="k1")
            clients.append(c)
            return hutch.Box(c, info)
        c = hutch.AsyncClient(socket=server.path, api_key="k1")
        clients.append(c)
        return Synced(hutch.AsyncBox(c, info), loop)

    yield make
    for c in clients:
        if loop is None:
            c.close()
        else:
            loop.run_until_complete(c.close())
    if loop is not None:
        loop.close()


def test_callbacks_get_output_and_result_has_it(make_box, server):
    box = make_box()
    out, err = [], []
    result = box.exec(["echo", "hello", "world"], env={"CODE": "3"}, on_stdout=out.append,
                      on_stderr=err.append)
    assert out == [b"hello world\n"] and err == [b"err\n"]
    assert result.stdout == "hello world\n" and result.stderr == "err\n"
    assert result.exit_code == 3 and result.pid == 42 and result.error is None
    assert server.requests[-1] == {"argv": ["echo", "hello", "world"], "env": ["CODE=3"],
                                   "stdin": False}
    assert server.headers[-1]["authorization"] == "Bearer k1"
    assert server.headers[-1]["sec-websocket-protocol"] == "hutch.exec.v1"


def test_stdin_bytes_then_eof(make_box, server):
    box = make_box()
    got = []
    result = box.exec(["cat"], stdin=b"\x00\x01binary" * 20000, on_stdout=got.append)
    assert server.requests[-1]["stdin"] is True
    assert b"".join(got) == b"\x00\x01binary" * 20000
    assert result.stdout_bytes == b"\x00\x01binary" * 20000 and result.exit_code == 0
    # Stdin went in messages of at most 64 KiB plus the stream byte.
    assert max(len(m) for m in server.received if isinstance(m, bytes)) <= 64 * 1024 + 1


def test_stdin_from_a_file_goes_over_the_websocket(make_box):
    box = make_box()
    result = box.exec(["cat"], stdin=io.BytesIO(b"from a file"))
    assert result.stdout == "from a file"


def test_writable_stdin_handle(make_box, server):
    box = make_box()
    session = box.exec_session(["cat"], stdin=True)
    assert session.pid == 42
    session.write("line 1\n")
    assert session.read_until(b"1\n", timeout=5) == b"line 1\n"
    session.write(b"line 2\n")
    session.close_stdin()
    result = session.wait(5)
    assert result.stdout == "line 1\nline 2\n" and result.exit_code == 0
    assert {"type": "stdin_eof"} in [__import__("json").loads(m) for m in server.received
                                     if isinstance(m, str)]


def test_write_without_stdin_is_refused(make_box):
    box = make_box()
    session = box.exec_session(["sleep"])
    with pytest.raises(hutch.FailedPreconditionError):
        session.write("x")
    session.signal(15)
    assert session.wait(5).signal == 15


def test_timeout_kills_and_says_so(make_box, server):
    box = make_box()
    start = time.monotonic()
    result = box.exec(["sleep"], timeout=0.3, on_stdout=lambda b: None)
    assert time.monotonic() - start < 5
    assert result.timed_out and result.signal == 9 and result.exit_code is None


def test_command_not_found_is_127_like_the_json_exec(make_box):
    box = make_box()
    result = box.exec(["missing"], on_stdout=lambda b: None)
    assert result.exit_code == 127 and result.error.code == "not_found"
    assert "command not found" in result.stderr


def test_error_after_start_raises(make_box):
    box = make_box()
    with pytest.raises(hutch.UnavailableError, match="stopped answering"):
        box.exec(["fail"], on_stdout=lambda b: None)


def test_connection_lost_before_exit_raises(make_box):
    box = make_box()
    with pytest.raises(hutch.UnavailableError, match="before the command's exit"):
        box.exec(["die"], on_stdout=lambda b: None)


def test_http_error_before_upgrade_is_mapped(make_box):
    box = make_box("stopped")
    with pytest.raises(hutch.FailedPreconditionError, match="exec needs a running box") as e:
        box.exec(["echo"], on_stdout=lambda b: None)
    assert e.value.status == 409


def test_pty_login_shell_resize_and_read(make_box, server):
    box = make_box()
    pty = box.pty(rows=30, cols=100)
    assert server.requests[-1] == {"argv": [], "login_shell": True, "stdin": True, "tty": True,
                                   "rows": 30, "cols": 100}
    assert pty.read_until("$ ", timeout=5) == b"$ "
    pty.resize(50, 120)
    assert pty.read_until(b"\n", timeout=5) == b"size 50x120\n"
    pty.write("exit\n")
    assert pty.read_until("exit\n", timeout=5) == b"exit\n"
    assert pty.read(timeout=5) == b""
    assert pty.wait(5).exit_code == 0


def test_pty_with_command_and_callback(make_box, server):
    box = make_box()
    seen = []
    pty = box.pty(["tty"], on_data=seen.append)
    assert server.requests[-1]["argv"] == ["tty"] and server.requests[-1]["tty"] is True
    pty.write("exit\n")
    assert pty.wait(5).exit_code == 0
    assert b"".join(seen) == b"$ exit\n"
    with pytest.raises(hutch.FailedPreconditionError):
        pty.read()


def test_read_timeout(make_box):
    box = make_box()
    session = box.exec_session(["sleep"], stdin=True)
    with pytest.raises(hutch.HutchTimeoutError):
        session.read(timeout=0.2)
    with pytest.raises(hutch.HutchTimeoutError):
        session.wait(0.2)
    session.kill()
    assert session.wait(5).signal == 9


def test_output_beyond_the_limit_is_truncated_but_delivered(make_box):
    box = make_box()
    seen = []
    result = box.exec(["flood", "50"], on_stdout=seen.append, max_output_bytes=10_000)
    assert len(result.stdout_bytes) == 10_000 and result.truncated
    assert sum(len(c) for c in seen) == 50_000


def test_closing_the_session_ends_the_connection(make_box, server):
    box = make_box()
    session = box.exec_session(["sleep"], stdin=True)
    session.close()
    assert server.closed_early.wait(5)


def test_callback_exception_surfaces_in_wait(make_box):
    box = make_box()

    def boom(_):
        raise ValueError("callback broke")
    with pytest.raises(ValueError, match="callback broke"):
        box.exec(["echo", "x"], on_stdout=boom)


def test_async_callbacks_are_awaited(server):
    async def go():
        async with hutch.AsyncClient(socket=server.path) as c:
            box = hutch.AsyncBox(c, hutch.BoxInfo(id="dev", name="dev"))
            seen = []

            async def on_out(data):
                await asyncio.sleep(0)
                seen.append(data)
            result = await box.exec(["echo", "a"], on_stdout=on_out)
            return seen, result
    seen, result = asyncio.run(go())
    assert seen == [b"a\n"] and result.exit_code == 0


def test_sync_callbacks_run_while_the_caller_writes(server):
    # The reader runs in its own thread: output arrives while the main thread is writing.
    with hutch.Client(socket=server.path) as c:
        box = hutch.Box(c, hutch.BoxInfo(id="dev", name="dev"))
        threads = set()
        session = box.exec_session(["cat"], stdin=True,
                                   on_stdout=lambda b: threads.add(threading.get_ident()))
        for _ in range(50):
            session.write(b"y" * 10000)
        session.close_stdin()
        result = session.wait(10)
        assert len(result.stdout_bytes) == 500_000
        assert threads and threading.get_ident() not in threads
