"""An in-process stand-in for hutchd's WebSocket exec (docs/api.md), on a unix socket.

The "commands" are scripted by argv[0]; everything is sent the way the contract says.
"""

from __future__ import annotations

import asyncio
import http
import json
import threading
from typing import Any

from websockets.asyncio.server import ServerConnection, unix_serve


class FakeExecServer:
    def __init__(self, path: str) -> None:
        self.path = path
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.received: list[Any] = []
        self.closed_early = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Future[None] | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> FakeExecServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._loop.call_soon_threadsafe(self._stop.set_result, None)  # type: ignore[union-attr]
        self._thread.join(10)
        self._loop.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = self._loop.create_future()
        async with unix_serve(self._handler, self.path, subprotocols=["hutch.exec.v1"],
                              process_request=self._check):
            self._ready.set()
            await self._stop

    def _check(self, connection: ServerConnection, request: Any) -> Any:
        if "/boxes/stopped/" in request.path:
            return connection.respond(http.HTTPStatus.CONFLICT, json.dumps(
                {"error": {"code": "failed_precondition",
                           "message": "Box stopped is stopped; exec needs a running box"}}))
        return None

    async def _handler(self, ws: ServerConnection) -> None:
        self.headers.append({k.lower(): v for k, v in ws.request.headers.raw_items()})
        request = json.loads(await ws.recv())
        self.requests.append(request)
        argv = request.get("argv") or ["login-shell"]
        cmd = argv[0]

        async def out(stream: int, data: bytes) -> None:
            await ws.send(bytes([stream]) + data)

        async def exit_(code: int | None = 0, signal: int | None = None) -> None:
            await ws.send(json.dumps({"type": "exit", "exit_code": code, "signal": signal}))
            await ws.close()

        if cmd == "missing":
            await ws.send(json.dumps({"type": "error", "code": "not_found",
                                      "message": "missing: command not found"}))
            await ws.close()
            return
        await ws.send(json.dumps({"type": "started", "pid": 42}))
        if cmd == "echo":
            await out(1, " ".join(argv[1:]).encode() + b"\n")
            await out(2, b"err\n")
            await exit_(int(request.get("env", ["CODE=0"])[0].split("=")[1])
                        if request.get("env") else 0)
        elif cmd == "flood":
            for i in range(int(argv[1])):
                await out(1, b"x" * 1000)
            await exit_(0)
        elif cmd in ("cat", "sleep", "login-shell", "tty"):
            if cmd in ("login-shell", "tty"):
                await out(1, b"$ ")
            try:
                async for message in ws:
                    self.received.append(message)
                    if isinstance(message, bytes):
                        assert message[0] == 0
                        if cmd == "sleep":
                            continue
                        await out(1, message[1:])
                        if message[1:] == b"exit\n":
                            await exit_(0)
                            return
                        continue
                    ctl = json.loads(message)
                    if ctl["type"] == "stdin_eof" and cmd == "cat":
                        await exit_(0)
                        return
                    if ctl["type"] == "signal":
                        await exit_(None, ctl["signal"])
                        return
                    if ctl["type"] == "resize":
                        await out(1, f"size {ctl['rows']}x{ctl['cols']}\n".encode())
            except Exception:
                pass
            self.closed_early.set()
        elif cmd == "die":
            await out(1, b"partial")
            await ws.close(1011, "agent went away")
        elif cmd == "fail":
            await ws.send(json.dumps({"type": "error", "code": "unavailable",
                                      "message": "The guest agent stopped answering"}))
            await ws.close()
