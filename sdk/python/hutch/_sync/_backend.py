"""Thread-based primitives the sync client is written with (hand-written).

Same names as hutch/_async/_backend.py; the rest of hutch/_sync is generated from hutch/_async
by scripts/unasync.py.
"""

from __future__ import annotations

import io
import os
import queue
import threading
from typing import Any, Callable, Generator, Iterable, Iterator

import httpx
from websockets.sync.client import ClientConnection, connect, unix_connect

from .._connection import Connection
from .._errors import HutchTimeoutError
from .._failures import map_transport_error
from .._tar import CHUNK, ChunkReader, extract
from .._version import USER_AGENT

__all__ = ["ClientConnection", "http_client", "ws_connect", "Worker", "Channel", "Flag",
           "call_back", "iterate_blocking", "body_source", "run_blocking", "extract_tar"]


def http_client(conn: Connection,
                transport: httpx.BaseTransport | None = None) -> httpx.Client:
    if transport is None:
        transport = httpx.HTTPTransport(uds=conn.socket, verify=conn.ssl_context or True,
                                        retries=0)
    headers = {"User-Agent": USER_AGENT, **conn.auth_headers()}
    return httpx.Client(base_url=conn.base_url, transport=transport, headers=headers,
                        timeout=httpx.Timeout(conn.timeout, connect=conn.connect_timeout))


def ws_connect(conn: Connection, path: str, subprotocol: str) -> ClientConnection:
    options: dict[str, Any] = dict(
        subprotocols=[subprotocol], additional_headers=conn.auth_headers(), compression=None,
        max_size=16 * 2**20, open_timeout=conn.timeout, proxy=None,
        user_agent_header=USER_AGENT)
    url = conn.ws_base + path
    try:
        if conn.socket:
            return unix_connect(conn.socket, url, **options)
        if conn.ssl_context is not None:
            return connect(url, ssl=conn.ssl_context, **options)
        return connect(url, **options)
    except Exception as e:  # websockets, OSError, ssl: all mapped
        raise map_transport_error(e, conn) from e


class Worker:
    """Runs ``fn`` in a daemon thread (the reader of an exec session; callbacks run there)."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self._thread = threading.Thread(target=fn, name="hutch-exec-reader", daemon=True)
        self._thread.start()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self, timeout: float | None = None) -> bool:
        if threading.current_thread() is self._thread:
            return False
        self._thread.join(timeout)
        return not self._thread.is_alive()


class Channel:
    """An unbounded queue between the reader thread and the user."""

    def __init__(self) -> None:
        self._q: queue.Queue[Any] = queue.Queue()

    def put(self, item: Any) -> None:
        self._q.put_nowait(item)

    def get(self, timeout: float | None = None) -> Any:
        try:
            return self._q.get(timeout=timeout)
        except queue.Empty:
            raise HutchTimeoutError(f"Nothing arrived within {timeout} s") from None


class Flag:
    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)


def call_back(fn: Callable[..., Any], *args: Any) -> None:
    fn(*args)


def run_blocking(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def iterate_blocking(it: Iterator[bytes]) -> Iterator[bytes]:
    return it


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


def body_source(data: Any) -> bytes | Iterator[bytes]:
    """What ``files.write`` takes: bytes, str (the content), a local path (``pathlib.Path``), a
    readable binary file, an iterable of bytes."""
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, os.PathLike):
        return _file_chunks(data)
    if hasattr(data, "read"):
        return _read_chunks(data)
    if isinstance(data, Iterable):
        return iter(data)
    raise TypeError(f"Cannot upload {type(data).__name__}: give bytes, str, a binary file or "
                    f"an iterable of bytes")


def extract_tar(chunks: Generator[bytes, None, None], dest: str | os.PathLike[str]) -> int:
    return extract(io.BufferedReader(ChunkReader(chunks), CHUNK), dest)
