"""The asyncio API of the E2B Python SDK (AsyncSandbox): create, commands, files, the
streamed watch_dir, pty and kill. Each test runs its own event loop (no pytest plugin)."""

import asyncio

import pytest

from e2b import AsyncSandbox, CommandExitException, FilesystemEventType, PtySize

from support import RUN_ID, TEMPLATE, SandboxNotFound, track


async def _wait_for(what, fn, timeout=20.0, interval=0.1):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await fn() if asyncio.iscoroutinefunction(fn) else fn()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)


def test_async_sandbox_end_to_end():
    asyncio.run(_end_to_end())


async def _end_to_end():
    sbx = await AsyncSandbox.create(TEMPLATE, timeout=300, metadata={"run": RUN_ID, "kind": "async"},
                                    envs={"ASYNC_VAR": "yes"})
    track(sbx.sandbox_id)
    try:
        info = await sbx.get_info()
        assert info.sandbox_id == sbx.sandbox_id
        assert info.metadata["kind"] == "async"

        r = await sbx.commands.run('echo "$ASYNC_VAR"; whoami')
        assert r.stdout == "yes\nuser\n"
        chunks = []
        r = await sbx.commands.run("for i in 1 2 3; do echo $i; sleep 0.3; done",
                                   on_stdout=chunks.append)
        assert r.stdout == "1\n2\n3\n"
        assert "".join(chunks) == "1\n2\n3\n" and len(chunks) >= 2
        with pytest.raises(CommandExitException) as exc:
            await sbx.commands.run("echo o; exit 4")
        assert exc.value.exit_code == 4 and exc.value.stdout == "o\n"

        h = await sbx.commands.run("head -n1", background=True, stdin=True)
        await sbx.commands.send_stdin(h.pid, "async stdin\n")
        assert (await h.wait()).stdout == "async stdin\n"

        data = b"\x00\xffasync\x00"
        await sbx.files.write("/home/user/async.bin", data)
        assert bytes(await sbx.files.read("/home/user/async.bin", format="bytes")) == data
        assert await sbx.files.exists("/home/user/async.bin") is True
        assert [e.name for e in await sbx.files.list("/home/user") if e.name == "async.bin"] == ["async.bin"]

        # The streamed watcher (WatchDir), unlike the sync API's polling.
        await sbx.files.make_dir("/home/user/aw")
        events = []
        watch = await sbx.files.watch_dir("/home/user/aw", on_event=events.append, timeout=60)
        try:
            await sbx.files.write("/home/user/aw/made.txt", "x")
            await _wait_for("a create event for made.txt", lambda: any(
                e.name == "made.txt" and e.type == FilesystemEventType.CREATE for e in events))
        finally:
            await watch.stop()

        out = bytearray()
        term = await sbx.pty.create(PtySize(rows=24, cols=80), on_data=out.extend, timeout=60)
        await sbx.pty.send_stdin(term.pid, b"echo hi-$((40+2))\n")
        await _wait_for('"hi-42" on the terminal', lambda: "hi-42" in out.decode("utf-8", "replace"))
        await sbx.pty.resize(term.pid, PtySize(rows=33, cols=101))
        await sbx.pty.send_stdin(term.pid, b"stty size\n")
        await _wait_for('"33 101"', lambda: "33 101" in out.decode("utf-8", "replace"))
        assert await sbx.pty.kill(term.pid) is True

        other = await AsyncSandbox.connect(sbx.sandbox_id)
        assert (await other.files.read("/home/user/async.bin", format="bytes")) == bytearray(data)
        assert await sbx.is_running() is True
    finally:
        assert await sbx.kill() is True
    assert await sbx.is_running() is False
    assert await AsyncSandbox.kill(sbx.sandbox_id) is False
    with pytest.raises(SandboxNotFound):
        await AsyncSandbox.connect(sbx.sandbox_id)
