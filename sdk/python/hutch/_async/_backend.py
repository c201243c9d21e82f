"""asyncio primitives the async client is written with (hand-written).

hutch/_sync/_backend.py has the same names built on threads; everything else in hutch/_sync is
generated from hutch/_async by scripts/unasync.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import os
import queue
from typing import (
    Any,
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
)

import httpx
from websockets.asyncio.client import ClientConnection, connect, unix_connect

from .._connection import Connection
from .._errors import HutchTimeoutError
from .._failures import map_transport_error
from .._tar import CHUNK, ChunkReader, extract
from .._version import USER_AGENT

__all__ = ["ClientConnection", "http_client", "ws_connect", "Worker", "Channel", "Flag",
           "call_back", "iterate_blocking", "body_source", "run_blocking", "extract_tar"]


def http_client(conn: Connection,
                transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    if transport is None:
        transport = httpx.AsyncHTTPTransport(uds=conn.socket, verify=conn.ssl_context or True,
                                             retries=0)
    headers = {"User-Agent": USER_AGENT, **conn.auth_headers()}
    return httpx.AsyncClient(base_url=conn.base_url, transport=transport, headers=headers,
                             timeout=httpx.Timeout(conn.timeout, connect=conn.connect_timeout))


async def ws_connect(conn: Connection, path: str, subprotocol: str) -> ClientConnection:
    options: dict[str, Any] = dict(
        subprotocols=[subprotocol], additional_headers=conn.auth_headers(), compression=None,
        max_size=16 * 2**20, open_timeout=conn.timeout, proxy=None,
        user_agent_header=USER_AGENT)
    url = conn.ws_base + path
    try:
        if conn.socket:
            return await unix_connect(conn.socket, url, **options)
        if conn.ssl_context is not None:
            return await connect(url, ssl=conn.ssl_context, **options)
        return await connect(url, **options)
    except Exception as e:  # websockets, OSError, ssl: all mapped
        raise map_transport_error(e, conn) from e


class Worker:
    """Runs ``fn`` (a coroutine function) as a task."""

    def __init__(self, fn: Callable[[], Awaitable[None]]) -> None:
        self._task = asyncio.ensure_future(fn())

    def done(self) -> bool:
        return self._task.done()

    async def join(self, timeout: float | None = None) -> bool:
        done, _ = await asyncio.wait({self._task}, timeout=timeout)
        return bool(done)


class Channel:
    """An unbounded queue between the reader task and the user."""

    def __init__(self) -> None:
        self._q: asyncio.Queue[Any] = asyncio.Queue()

    def put(self, item: Any) -> None:
        self._q.put_nowait(item)

    async def get(self, timeout: float | None = None) -> Any:
        try:
            return await asyncio.wait_for(self._q.get(), timeout)
        except asyncio.TimeoutError:
            raise HutchTimeoutError(f"Nothing arrived within {timeout} s") from None


class Flag:
    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self, timeout: float | None = None) -> bool:
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True


async def call_back(fn: Callable[..., Any], *args: Any) -> None:
    """Calls a user callback; one that returns an awaitable (``async def``) is awaited."""
    result = fn(*args)
    if inspect.isawaitable(result):
        await result


async def run_blocking(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


async def iterate_blocking(it: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Drives a blocking iterator (local disk reads) in a thread, one chunk at a time."""
    done = object()
    while True:
        chunk = await asyncio.to_thread(next, it, done)
        if chunk is done:
            return
        yield chunk  # type: ignore[misc]


def _file_chunks(path: str | os.PathLike[str]) -> Iterator[bytes]:
    with open(path, "rb") as f:
        yield from _read_chunks(f)


def _read_chunks(f: Any) -> Iterator[bytes]:
    while True:
        chunk = f.read(CHUNK)
        if not chunk:
            return
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8")
        yield chunk


def body_source(data: Any) -> bytes | AsyncIterator[bytes] | AsyncIterable[bytes]:
    """What ``files.write`` takes: bytes, str (the content), a local path (``pathlib.Path``), a
    readable binary file, an (async) iterable of bytes."""
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, os.PathLike):
        return iterate_blocking(_file_chunks(data))
    if hasattr(data, "read"):
        return iterate_blocking(_read_chunks(data))
    if hasattr(data, "__aiter__"):
        return data  # type: ignore[no-any-return]
    if isinstance(data, Iterable):
        return iterate_blocking(iter(data))
    raise TypeError(f"Cannot upload {type(data).__name__}: give bytes, str, a binary file or "
                    f"an iterable of bytes")


async def extract_tar(chunks: AsyncGenerator[bytes, None], dest: str | os.PathLike[str]) -> int:
    """Extracts a tar arriving as chunks into dest; tarfile runs in a thread, fed by a bounded
    queue (so a slow disk slows the download instead of filling memory)."""
    q: queue.Queue[bytes | None] = queue.Queue(maxsize=8)
    task = asyncio.ensure_future(asyncio.to_thread(
        extract, io.BufferedReader(ChunkReader(q.get), CHUNK), dest))

    async def feed(item: bytes | None) -> bool:
        while not task.done():
            try:
                await asyncio.to_thread(q.put, item, True, 0.2)
                return True
            except queue.Full:
                continue
        return False

    try:
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                if not await feed(chunk):
                    break
        await feed(None)
        return await task
    finally:
        if not task.done():  # we are failing: let the thread see the end and stop
            while True:
                try:
                    q.get_nowait()
                except queue.Empty:
                    break
            q.put_nowait(None)
            await asyncio.wait({task})
            if not task.cancelled():
                task.exception()  # retrieved, so asyncio does not log it
