"""The asyncio client against the real daemon (the same code as the sync one, generated)."""

from __future__ import annotations

import asyncio

import pytest

import hutch
from conftest import unique


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def aclient(daemon, admin):
    made = []

    def options():
        return dict(host=daemon.https_url, api_key=daemon.key, fingerprint=daemon.fingerprint)
    yield options, made
    for box_id in made:
        try:
            admin.boxes.get(box_id).remove(force=True)
        except hutch.NotFoundError:
            pass


def test_async_box_end_to_end(aclient):
    options, made = aclient

    async def go():
        async with hutch.AsyncClient(**options()) as c:
            info = await c.info()
            assert info.caller.name == "test-user"
            box = await c.boxes.create(name=unique("async"), memory=512, env={"X": "y"})
            made.append(box.id)
            r = await box.exec("echo $X; exit 4")
            assert (r.stdout, r.exit_code) == ("y\n", 4)
            chunks = []

            async def on_out(data):
                chunks.append(data)
            r = await box.exec(["sh", "-c", "echo a; sleep 0.3; echo b"], on_stdout=on_out)
            assert b"".join(chunks) == b"a\nb\n" and r.exit_code == 0
            async with await box.exec_session(["cat"], stdin=True) as s:
                await s.write("ping\n")
                assert await s.read_until("ping\n", timeout=10) == b"ping\n"
                await s.close_stdin()
                assert (await s.wait(10)).exit_code == 0
            pty = await box.pty()
            await pty.write("echo $((2+3))x\n")
            assert b"5x" in await pty.read_until("5x", timeout=20)
            await pty.write("exit\n")
            assert (await pty.wait(20)).exit_code == 0
            # Concurrency: several commands at once on one client.
            results = await asyncio.gather(*(box.exec(["echo", str(i)]) for i in range(8)))
            assert [r.stdout for r in results] == [f"{i}\n" for i in range(8)]
            await box.remove(force=True)
            with pytest.raises(hutch.NotFoundError):
                await c.boxes.get(box.id)
    run(go())


@pytest.mark.files_api
def test_async_files(aclient, tmp_path):
    options, made = aclient

    async def go():
        async with hutch.AsyncClient(**options()) as c:
            box = await c.boxes.create(name=unique("afiles"))
            made.append(box.id)
            await box.files.write("/tmp/a", b"async bytes")
            assert await box.files.read("/tmp/a") == b"async bytes"
            assert [e.name for e in await box.files.list("/tmp") if e.name == "a"] == ["a"]
            (tmp_path / "tree" / "d").mkdir(parents=True)
            (tmp_path / "tree" / "d" / "f").write_bytes(b"F" * 500_000)
            await box.files.upload(tmp_path / "tree", "/tmp/tree")
            assert (await box.files.stat("/tmp/tree/d/f")).size == 500_000
            await box.files.download("/tmp/tree", tmp_path / "back")
            assert (tmp_path / "back" / "d" / "f").read_bytes() == b"F" * 500_000
            async with box.files.stream("/tmp/tree/d/f") as f:
                total = 0
                async for chunk in f:
                    total += len(chunk)
            assert total == 500_000
    run(go())


def test_async_box_create_classmethod_owns_its_client(aclient, monkeypatch, daemon):
    options, made = aclient
    monkeypatch.setenv("HUTCH_HOST", daemon.https_url)
    monkeypatch.setenv("HUTCH_API_KEY", daemon.key)
    monkeypatch.setenv("HUTCH_FINGERPRINT", daemon.fingerprint)

    async def go():
        async with await hutch.AsyncBox.create(name=unique("own")) as box:
            made.append(box.id)
            assert (await box.exec(["true"])).ok
            box_id = box.id
        async with hutch.AsyncClient(**options()) as c:
            with pytest.raises(hutch.NotFoundError):
                await c.boxes.get(box_id)
    run(go())
