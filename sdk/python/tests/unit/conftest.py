"""Unit-test helpers: a fake hutchd behind httpx.MockTransport, and a way to run one test body
against both clients (the async one driven by an event loop)."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any, Callable

import httpx
import pytest

import hutch


class Synced:
    """Wraps an object of the async client so a test can call it like the sync client."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if callable(value) and not isinstance(value, type):
            def call(*args: Any, **kwargs: Any) -> Any:
                args = tuple(a._target if isinstance(a, Synced) else a for a in args)
                kwargs = {k: v._target if isinstance(v, Synced) else v
                          for k, v in kwargs.items()}
                result = value(*args, **kwargs)
                if inspect.isawaitable(result):
                    result = self._loop.run_until_complete(result)
                return wrap(result, self._loop)
            return call
        return wrap(value, self._loop)

    def __repr__(self) -> str:
        return f"Synced({self._target!r})"


def wrap(value: Any, loop: asyncio.AbstractEventLoop) -> Any:
    if isinstance(value, list) and not isinstance(value, hutch.FileList):
        return [wrap(v, loop) for v in value]
    if type(value).__module__.startswith("hutch._async"):
        return Synced(value, loop)
    return value


class FakeHutchd:
    """Routes requests to handlers; records every request with its body."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Callable[[httpx.Request], httpx.Response]] = {}
        self.requests: list[httpx.Request] = []
        self.bodies: list[bytes] = []

    def on(self, method: str, path: str, status: int = 200, body: Any = None,
           handler: Callable[[httpx.Request], httpx.Response] | None = None,
           headers: dict[str, str] | None = None) -> None:
        if handler is None:
            def handler(request: httpx.Request) -> httpx.Response:
                if isinstance(body, (bytes, str)):
                    return httpx.Response(status, content=body, headers=headers)
                return httpx.Response(status, json=body, headers=headers)
        self.routes[(method, path)] = handler

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.bodies.append(request.content)
        handler = self.routes.get((request.method, request.url.path))
        if handler is None:
            return httpx.Response(404, json={"error": {"code": "not_found", "message":
                                                       f"No route {request.url.path}"}})
        return handler(request)

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]

    def last_json(self) -> Any:
        return json.loads(self.bodies[-1]) if self.bodies[-1] else None


class _Transport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    def __init__(self, fake: FakeHutchd) -> None:
        self.fake = fake

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        return self.fake.handle(request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        return self.fake.handle(request)


@pytest.fixture
def fake() -> FakeHutchd:
    return FakeHutchd()


@pytest.fixture(params=["sync", "async"])
def flavor(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_client(fake: FakeHutchd, flavor: str):
    """make_client(**options) -> a Client, or an AsyncClient driven synchronously."""
    loop = asyncio.new_event_loop() if flavor == "async" else None
    made: list[Any] = []

    def make(**options: Any) -> Any:
        options.setdefault("host", "http://127.0.0.1:8080")
        if flavor == "sync":
            client = hutch.Client(transport=_Transport(fake), **options)
            made.append(client)
            return client
        client = hutch.AsyncClient(transport=_Transport(fake), **options)
        made.append(client)
        return Synced(client, loop)

    yield make
    for client in made:
        if loop is not None:
            loop.run_until_complete(client.close())
        else:
            client.close()
    if loop is not None:
        loop.close()


@pytest.fixture
def client(make_client):
    return make_client(api_key="e2b_" + "a" * 40)


BOX = {"id": "3f2a9c01d4e5", "name": "dev", "template": "base", "cpus": 1, "memory_mib": 512,
       "disk_mib": 0, "state": "running", "reason": "", "accel": "tcg", "pid": 12345,
       "boot": "cold boot: test", "secrets": [], "env": {"A": "1"}, "owner": "alice",
       "created_at": 1764400000, "updated_at": 1764400004, "future_field": {"x": 1}}
