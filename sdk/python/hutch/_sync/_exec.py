# Generated from hutch/_async/_exec.py by scripts/unasync.py: edit that file, then run the script.
"""A command running in a box over the WebSocket exec (``GET /v1/boxes/{box}/exec/ws``)."""

from __future__ import annotations

import time
from typing import Any, Callable

from websockets.exceptions import ConnectionClosed, ConnectionClosedOK

from .. import _exec_proto as proto
from .._args import to_bytes
from .._errors import (
    FailedPreconditionError,
    HutchError,
    HutchTimeoutError,
    ProtocolError,
    UnavailableError,
    error_for,
)
from .._models import ExecError, ExecResult
from . import _backend

#: A callback for output: gets the bytes of each chunk as it arrives (the async client also takes a
#: coroutine function and awaits it).
OutputCallback = Callable[[bytes], Any]

_END = object()
DEFAULT_MAX_OUTPUT = 1 << 20


class ExecSession:
    """A running command: write its stdin, signal it, resize its terminal, read its output, wait
    for its exit.

    Output goes to ``on_stdout``/``on_stderr`` when they are given (called from the session's
    reader as chunks arrive); otherwise :meth:`read` and :meth:`read_until` return it. Either
    way :meth:`wait` returns an :class:`ExecResult` with up to ``max_output_bytes`` of each
    stream. Without callbacks, output not yet read waits in memory (as with a pipe that is
    never drained, read it or use callbacks for big outputs); with callbacks, a slow callback
    slows the command down (hutchd reads from the box only as fast as the client reads). Closing the session (or leaving its ``with`` block) before the command exits kills
    the command.
    """

    def __init__(self, ws: _backend.ClientConnection, *, tty: bool, stdin: bool,
                 on_stdout: OutputCallback | None, on_stderr: OutputCallback | None,
                 max_output_bytes: int | None) -> None:
        self._ws = ws
        self.tty = tty
        self._stdin_open = stdin
        self._on = {proto.STDOUT: on_stdout, proto.STDERR: on_stderr}
        self._buffers = {proto.STDOUT: bytearray(), proto.STDERR: bytearray()}
        self._limit = DEFAULT_MAX_OUTPUT if max_output_bytes is None else max_output_bytes
        self._truncated = False
        self._chunks = _backend.Channel() if on_stdout is None and on_stderr is None else None
        self._pending = b""
        self._reader_done = False
        self._done = _backend.Flag()
        self._worker: _backend.Worker | None = None
        self._started = time.monotonic()
        self._exit: proto.Exit | None = None
        self._start_error: ExecError | None = None
        self._failure: BaseException | None = None
        #: The command's pid in the box (0 until hutchd said ``started``).
        self.pid = 0

    def _begin(self, request: dict[str, Any]) -> None:
        try:
            self._ws.send(proto.request_message(request))
            first = self._ws.recv()
        except ConnectionClosed as e:
            self._ws.close()
            raise UnavailableError(f"hutchd closed the exec WebSocket before the command "
                                   f"started ({e})") from e
        event = proto.parse(first)
        if isinstance(event, proto.Started):
            self.pid = event.pid
            self._worker = _backend.Worker(self._pump)
            return
        self._ws.close()
        if isinstance(event, proto.Failed) and event.code in proto.START_FAILURES:
            # The command could not start: reported as POST .../exec reports it (127 or 126).
            self._start_error = ExecError(event.code, event.message)
            self._exit = proto.Exit(proto.START_FAILURES[event.code], None)
            # The same words in stderr as POST .../exec puts there.
            self._buffers[proto.STDERR] += f"hutch: {event.message}\n".encode()
            self._finish()
            return
        if isinstance(event, proto.Failed):
            raise error_for(event.code, event.message)
        raise ProtocolError(f"hutchd's first exec message was {first!r}, not 'started'")

    def _finish(self) -> None:
        if self._chunks is not None:
            self._chunks.put(_END)
        self._done.set()

    def _deliver(self, event: proto.Output) -> None:
        buf = self._buffers[event.stream]
        room = self._limit - len(buf)
        if room >= len(event.data):
            buf += event.data
        else:
            buf += event.data[:max(room, 0)]
            self._truncated = True
        callback = self._on[event.stream]
        if callback is not None:
            _backend.call_back(callback, event.data)
        if self._chunks is not None:
            self._chunks.put(event.data)

    def _pump(self) -> None:
        try:
            while True:
                try:
                    message = self._ws.recv()
                except ConnectionClosed as e:
                    if not isinstance(e, ConnectionClosedOK) or self._exit is None:
                        self._failure = UnavailableError(
                            f"The exec connection closed before the command's exit ({e})")
                    return
                event = proto.parse(message)
                if isinstance(event, proto.Output):
                    self._deliver(event)
                elif isinstance(event, proto.Exit):
                    self._exit = event
                    return
                elif isinstance(event, proto.Failed):
                    self._failure = error_for(event.code, event.message)
                    return
        except BaseException as e:  # a callback raised, or the protocol broke
            self._failure = e
            if not isinstance(e, Exception):
                raise
        finally:
            self._finish()
            try:
                self._ws.close()
            except Exception:
                pass

    # --- input ---------------------------------------------------------------------------

    def _send(self, message: str | bytes) -> None:
        if self._done.is_set():
            raise FailedPreconditionError("The command has ended")
        try:
            self._ws.send(message)
        except ConnectionClosed as e:
            raise UnavailableError(f"The exec connection is closed ({e})") from e

    def write(self, data: str | bytes | bytearray | memoryview) -> None:
        """Sends bytes (or UTF-8 text) to the command's stdin (its terminal with a PTY)."""
        if not self._stdin_open:
            raise FailedPreconditionError("This command's stdin is closed (start it with "
                                          "stdin=True to write to it)")
        for message in proto.stdin_messages(to_bytes(data)):
            self._send(message)

    def close_stdin(self) -> None:
        """Ends the command's stdin (EOF)."""
        if self._stdin_open:
            self._stdin_open = False
            self._send(proto.control("stdin_eof"))

    def signal(self, signal: int) -> None:
        """Sends a signal (a number: 15 is SIGTERM) to the command."""
        self._send(proto.control("signal", signal=int(signal)))

    def kill(self) -> None:
        self.signal(9)

    def resize(self, rows: int, cols: int) -> None:
        """Resizes the command's terminal (tty sessions)."""
        self._send(proto.control("resize", rows=int(rows), cols=int(cols)))

    # --- output --------------------------------------------------------------------------

    def read(self, timeout: float | None = None) -> bytes:
        """The next chunk of output (stdout and stderr as they arrive; a PTY has one stream);
        ``b""`` once the command ended and everything was read. Raises HutchTimeoutError when
        nothing comes within ``timeout`` seconds."""
        if self._pending:
            data, self._pending = self._pending, b""
            return data
        if self._chunks is None:
            raise FailedPreconditionError("Output goes to the callbacks; read() has none")
        if self._reader_done:
            return b""
        item = self._chunks.get(timeout)
        if item is _END:
            self._reader_done = True
            return b""
        return item  # type: ignore[no-any-return]

    def read_until(self, marker: str | bytes, timeout: float | None = None) -> bytes:
        """Output up to and including ``marker``; what follows stays for the next read. At the
        end of the output, returns what there was (without the marker)."""
        pattern = to_bytes(marker)
        deadline = None if timeout is None else time.monotonic() + timeout
        data = b""
        while True:
            index = data.find(pattern)
            if index >= 0:
                end = index + len(pattern)
                self._pending = data[end:] + self._pending
                return data[:end]
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                chunk = self.read(left)
            except HutchTimeoutError:
                self._pending = data + self._pending
                raise HutchTimeoutError(
                    f"{pattern!r} did not appear within {timeout} s; the output so far: "
                    f"{data[-500:]!r}") from None
            if not chunk:
                return data
            data += chunk

    @property
    def exited(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> ExecResult:
        """Waits for the exit. Raises HutchTimeoutError after ``timeout`` seconds (the command
        keeps running), or the error hutchd reported."""
        if not self._done.wait(timeout):
            raise HutchTimeoutError(f"The command (pid {self.pid}) did not exit within "
                                    f"{timeout} s")
        if self._worker is not None:
            self._worker.join()
        if self._failure is not None:
            raise self._failure
        assert self._exit is not None
        return ExecResult(
            stdout_bytes=bytes(self._buffers[proto.STDOUT]),
            stderr_bytes=bytes(self._buffers[proto.STDERR]),
            exit_code=self._exit.exit_code, signal=self._exit.signal,
            duration_ms=int((time.monotonic() - self._started) * 1000),
            truncated=self._truncated, pid=self.pid, error=self._start_error)

    def close(self) -> None:
        """Closes the connection; a command still running is killed by hutchd."""
        try:
            self._ws.close()
        except Exception:
            pass
        if self._worker is not None:
            self._worker.join(10)

    def __enter__(self) -> ExecSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_session(session: ExecSession, stdin: Any,
                      timeout: float | None) -> ExecResult:
    """Feeds ``stdin`` (bytes, text, a binary file or an iterable of bytes), closes it and waits;
    past ``timeout`` the command is killed and the result says ``timed_out``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        if stdin is not None and not session.exited:
            try:
                if isinstance(stdin, (str, bytes, bytearray, memoryview)):
                    session.write(stdin)
                elif hasattr(stdin, "read"):
                    while True:
                        chunk = _backend.run_blocking(stdin.read, proto.CHUNK)
                        if not chunk:
                            break
                        session.write(chunk)
                else:
                    for chunk in stdin:
                        session.write(chunk)
                session.close_stdin()
            except FailedPreconditionError:
                if not session.exited:
                    raise
                # The command ended before reading all of its stdin, as a pipe would allow.
            except UnavailableError:
                if not session.exited:
                    raise
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            return session.wait(left)
        except HutchTimeoutError:
            pass
        killed = False
        if not session.exited:
            try:
                session.kill()
                killed = True
            except HutchError:
                pass
        result = session.wait(10)
        result.timed_out = killed
        return result
    finally:
        session.close()
