"""A box and what it has: exec, files, processes, ports, policy, snapshots."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any, AsyncIterator, BinaryIO, List, Mapping, Sequence

import httpx

from .. import _api
from .._api import seg
from .._args import Command, Env, to_argv
from .._errors import InvalidArgumentError, NotFoundError
from .._exec_proto import SUBPROTOCOL
from .._models import (
    BoxInfo,
    Checkpoint,
    ExecResult,
    FileInfo,
    FileList,
    Policy,
    PolicyLog,
    Port,
    Process,
    Service,
)
from .._tar import tar_stream
from . import _backend
from ._exec import AsyncExecSession, OutputCallback, run_session

if TYPE_CHECKING:
    from ._client import AsyncClient


class AsyncBox:
    """A box. ``info`` is what hutchd said last (:meth:`refresh` asks again).

    Used as a context manager, the box is removed (forced) when the block ends.
    """

    def __init__(self, client: AsyncClient, info: BoxInfo, *, owns_client: bool = False) -> None:
        self.client = client
        self.info = info
        self._owns_client = owns_client
        self.files = AsyncFiles(self)
        self.processes = AsyncProcesses(self)
        self.ports = AsyncPorts(self)
        self.policy = AsyncBoxPolicy(self)

    # --- making and finding boxes (also as client.boxes.create/list/get) ----------------

    @classmethod
    async def create(cls, template: str | None = None, cpus: int | None = None,
                     memory: int | str | None = None, disk: int | str | None = None,
                     network_policy: str | Mapping[str, Any] | None = None,
                     secrets: Sequence[str] | None = None, env: Env | None = None,
                     name: str | None = None, *,
                     client: AsyncClient | None = None) -> AsyncBox:
        """Creates a box (see ``client.boxes.create``); without ``client``, one made from the
        environment (``HUTCH_HOST``, ``HUTCH_API_KEY``...), closed with the box's ``with``."""
        owns = client is None
        if client is None:
            from ._client import AsyncClient
            client = AsyncClient()
        try:
            box = await client.boxes.create(
                template=template, cpus=cpus, memory=memory, disk=disk,
                network_policy=network_policy, secrets=secrets, env=env, name=name)
        except BaseException:
            if owns:
                await client.close()
            raise
        box._owns_client = owns
        return box

    @classmethod
    async def get(cls, box: str, *, client: AsyncClient) -> AsyncBox:
        return await client.boxes.get(box)

    @classmethod
    async def list(cls, *, client: AsyncClient) -> List[AsyncBox]:
        return await client.boxes.list()

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def state(self) -> str:
        """The state when ``info`` was last fetched."""
        return self.info.state

    def __repr__(self) -> str:
        return f"AsyncBox(id={self.info.id!r}, name={self.info.name!r}, state={self.info.state!r})"

    async def __aenter__(self) -> AsyncBox:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.remove(force=True)
        except NotFoundError:
            pass
        finally:
            if self._owns_client:
                await self.client.close()

    # --- lifecycle -----------------------------------------------------------------------

    async def refresh(self) -> BoxInfo:
        self.info = await self.client._call(_api.get_box(self.id))
        return self.info

    async def start(self) -> BoxInfo:
        """Resumes a suspended box (every process as it was); boots a stopped (or failed) one
        from its own disk."""
        self.info = await self.client._call(_api.box_action(self.id, "start"))
        return self.info

    async def stop(self, shutdown: bool = False) -> BoxInfo:
        """Suspends the box: its memory and processes are kept on disk and ``start`` resumes
        them. With ``shutdown`` the guest powers off cleanly instead (the disk is kept)."""
        params = {"shutdown": "true"} if shutdown else None
        self.info = await self.client._call(_api.box_action(self.id, "stop", params))
        return self.info

    async def remove(self, force: bool = False) -> None:
        """Removes the box and its disk; a running box needs ``force``."""
        await self.client._call(_api.remove_box(self.id, force))

    async def fork(self, n: int = 1, names: Sequence[str] | None = None) -> List[AsyncBox]:
        """Copies the running box into ``n`` new boxes (memory, processes and disk)."""
        infos = await self.client._call(_api.fork(self.id, n, names))
        return [AsyncBox(self.client, info) for info in infos]

    async def checkpoint(self, name: str | None = None) -> Checkpoint:
        """Saves the running box's memory and disk."""
        return await self.client._call(_api.checkpoint(self.id, name))

    async def checkpoints(self) -> List[Checkpoint]:
        """The box's checkpoints, oldest first."""
        return await self.client._call(_api.list_checkpoints(self.id))

    async def remove_checkpoint(self, name: str) -> None:
        await self.client._call(_api.remove_checkpoint(self.id, name))

    async def rollback(self, checkpoint: str | Checkpoint) -> BoxInfo:
        """Restores the box to a checkpoint; it runs afterwards."""
        name = checkpoint.name if isinstance(checkpoint, Checkpoint) else checkpoint
        self.info = await self.client._call(_api.rollback(self.id, name))
        return self.info

    async def logs(self) -> str:
        """The box's serial console."""
        return await self.client._call(_api.box_logs(self.id))

    async def stats(self) -> dict[str, Any]:
        """What the box's VMM uses of the host (its cgroup), as hutchd reports it."""
        return await self.client._call(_api.box_stats(self.id))

    async def services(self) -> List[Service]:
        return await self.client._call(_api.list_services(self.id))

    # --- exec ----------------------------------------------------------------------------

    async def exec(self, cmd: Command, *, env: Env | None = None, cwd: str | None = None,
                   user: str | None = None, stdin: Any = None, timeout: float | None = None,
                   on_stdout: OutputCallback | None = None,
                   on_stderr: OutputCallback | None = None,
                   max_output_bytes: int | None = None) -> ExecResult:
        """Runs a command to its end: a list is the argv, a string runs with ``/bin/sh -c``.

        ``stdin`` is text or bytes (fed, then EOF), or a binary file or iterable of bytes
        (streamed). ``timeout`` seconds: the command's process group is killed when it passes
        and the result has ``timed_out``. With ``on_stdout``/``on_stderr`` (or streamed stdin)
        the command runs over the WebSocket and the callbacks get output as it comes;
        otherwise it is one ``POST /exec``. A command that cannot start (no such program,
        user or cwd) is a result with exit code 127 or 126 and ``error`` set, not an
        exception. Exit codes are not checked: look at ``result.exit_code``.
        """
        argv = to_argv(cmd)
        plain_stdin = stdin is None or isinstance(stdin, (str, bytes, bytearray, memoryview))
        if on_stdout is None and on_stderr is None and plain_stdin:
            return await self.client._call(_api.exec_run(
                self.id, argv, env=env, cwd=cwd, user=user, stdin=stdin, timeout=timeout,
                max_output_bytes=max_output_bytes))
        session = await self.exec_session(
            argv, env=env, cwd=cwd, user=user, stdin=stdin is not None, on_stdout=on_stdout,
            on_stderr=on_stderr, max_output_bytes=max_output_bytes)
        return await run_session(session, stdin, timeout)

    async def exec_session(self, cmd: Command, *, env: Env | None = None,
                           cwd: str | None = None, user: str | None = None,
                           stdin: bool = False, tty: bool = False, rows: int | None = None,
                           cols: int | None = None,
                           on_stdout: OutputCallback | None = None,
                           on_stderr: OutputCallback | None = None,
                           max_output_bytes: int | None = None) -> AsyncExecSession:
        """Starts a command over the WebSocket and returns its session once it started:
        ``write``/``close_stdin`` (with ``stdin=True``), ``signal``, ``resize``, ``read``,
        ``wait``. See :meth:`pty` for a terminal."""
        request = _api.exec_request(to_argv(cmd), env, cwd, user)
        return await self._open_session(request, stdin=stdin, tty=tty, rows=rows, cols=cols,
                                        on_stdout=on_stdout, on_stderr=on_stderr,
                                        max_output_bytes=max_output_bytes)

    async def pty(self, cmd: Command | None = None, *, rows: int = 24, cols: int = 80,
                  env: Env | None = None, cwd: str | None = None, user: str | None = None,
                  on_data: OutputCallback | None = None) -> AsyncExecSession:
        """A command on a terminal in the box; without ``cmd``, the user's login shell.

        Its output (one stream: what the terminal shows) goes to ``on_data`` or to
        :meth:`AsyncExecSession.read`; ``write`` types, ``resize`` changes the window.
        """
        if cmd is None:
            request = _api.exec_request([], env, cwd, user)
            request["login_shell"] = True
        else:
            request = _api.exec_request(to_argv(cmd), env, cwd, user)
        return await self._open_session(request, stdin=True, tty=True, rows=rows, cols=cols,
                                        on_stdout=on_data, on_stderr=None,
                                        max_output_bytes=None)

    async def _open_session(self, request: dict[str, Any], *, stdin: bool, tty: bool,
                            rows: int | None, cols: int | None,
                            on_stdout: OutputCallback | None, on_stderr: OutputCallback | None,
                            max_output_bytes: int | None) -> AsyncExecSession:
        request["stdin"] = bool(stdin)
        if tty:
            request["tty"] = True
            if rows:
                request["rows"] = int(rows)
            if cols:
                request["cols"] = int(cols)
        ws = await self.client._ws(f"/v1/boxes/{seg(self.id)}/exec/ws", SUBPROTOCOL)
        session = AsyncExecSession(ws, tty=tty, stdin=stdin, on_stdout=on_stdout,
                                   on_stderr=on_stderr, max_output_bytes=max_output_bytes)
        try:
            await session._begin(request)
        except BaseException:
            await session.close()
            raise
        return session


class AsyncProcesses:
    """``box.processes``: detached processes; their output goes to a log file in the box."""

    def __init__(self, box: AsyncBox) -> None:
        self._box = box

    async def start(self, cmd: Command, *, env: Env | None = None, cwd: str | None = None,
                    user: str | None = None) -> Process:
        return await self._box.client._call(
            _api.start_process(self._box.id, to_argv(cmd), env, cwd, user))

    async def list(self) -> List[Process]:
        """Running ones and the last 100 that ended."""
        return await self._box.client._call(_api.list_processes(self._box.id))

    async def signal(self, process: str | Process, signal: int = 15) -> None:
        pid = process.id if isinstance(process, Process) else process
        await self._box.client._call(_api.signal_process(self._box.id, pid, signal))

    async def log(self, process: str | Process) -> bytes:
        """The process's output so far (its log file, read as root)."""
        if isinstance(process, Process):
            path = process.log
        else:
            found = [p for p in await self.list() if p.id == process]
            if not found:
                raise NotFoundError(f"No detached process {process!r} in box {self._box.name}")
            path = found[0].log
        return await self._box.files.read(path, user="root")


class AsyncPorts:
    """``box.ports``: box ports published on the host."""

    def __init__(self, box: AsyncBox) -> None:
        self._box = box

    async def publish(self, box_port: int, host_port: int, address: str | None = None) -> Port:
        """Relays ``address:host_port`` on the host (default 127.0.0.1) to ``box_port``."""
        return await self._box.client._call(
            _api.publish_port(self._box.id, box_port, host_port, address))

    async def list(self) -> List[Port]:
        return await self._box.client._call(_api.list_ports(self._box.id))

    async def remove(self, host_port: int, address: str | None = None) -> None:
        await self._box.client._call(_api.remove_port(self._box.id, host_port, address))


class AsyncBoxPolicy:
    """``box.policy``: the box's egress policy and what it allowed or refused."""

    def __init__(self, box: AsyncBox) -> None:
        self._box = box

    async def get(self) -> Policy:
        return await self._box.client._call(_api.get_policy(self._box.id))

    async def set(self, policy: str | Mapping[str, Any]) -> Policy:
        """A preset (``"none"``, ``"allow-all"``, ``"debian-mirrors"``) or a policy dict; live
        for a running box."""
        return await self._box.client._call(_api.set_policy(self._box.id, policy))

    async def log(self, after: int = 0, limit: int | None = None) -> PolicyLog:
        """Entries after line ``after``; pass the page's ``next`` back to follow."""
        return await self._box.client._call(_api.policy_log(self._box.id, after, limit))


class AsyncFileStream:
    """An open download (``box.files.stream``): the file's mode and mtime, then its bytes."""

    def __init__(self, client: AsyncClient, response: httpx.Response) -> None:
        self._client = client
        self._response = response
        headers = response.headers
        length = headers.get("content-length")
        self.size: int | None = int(length) if length and length.isdigit() else None
        mode = headers.get("x-hutch-file-mode")
        self.mode: int | None = _parse_mode(mode)
        mtime = headers.get("x-hutch-file-mtime-ns")
        self.mtime_ns: int | None = int(mtime) if mtime and mtime.isdigit() else None

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._client._chunks(self._response)


def _parse_mode(text: str | None) -> int | None:
    if not text:
        return None
    try:
        return int(text, 8) if text.startswith("0") else int(text)
    except ValueError:
        return None


class AsyncFiles:
    """``box.files``: files in a running box, without exec. ``user`` (default: the box's
    default user) is who the operation runs as; relative paths are relative to its home."""

    def __init__(self, box: AsyncBox) -> None:
        self._box = box

    def _path(self, suffix: str = "") -> str:
        return f"/v1/boxes/{seg(self._box.id)}/files{suffix}"

    @contextlib.asynccontextmanager
    async def stream(self, path: str, *, user: str | None = None
                     ) -> AsyncIterator[AsyncFileStream]:
        """Opens a file for reading as a stream of chunks (``async for chunk in f``)."""
        async with self._box.client._stream(
                "GET", self._path(), params=_api.file_params(path, user)) as response:
            yield AsyncFileStream(self._box.client, response)

    async def read(self, path: str, *, user: str | None = None) -> bytes:
        """The whole file (use :meth:`stream` or :meth:`read_to` for big ones)."""
        data = bytearray()
        async with self.stream(path, user=user) as f:
            async for chunk in f:
                data += chunk
        return bytes(data)

    async def read_text(self, path: str, *, encoding: str = "utf-8",
                        user: str | None = None) -> str:
        return (await self.read(path, user=user)).decode(encoding)

    async def read_to(self, path: str, dest: str | os.PathLike[str] | BinaryIO, *,
                      user: str | None = None) -> int:
        """Streams a file of the box into a local path or a writable binary file; returns the
        number of bytes."""
        count = 0
        async with self.stream(path, user=user) as f:
            if isinstance(dest, (str, os.PathLike)):
                out = await _backend.run_blocking(open, os.fspath(dest), "wb")
                try:
                    async for chunk in f:
                        await _backend.run_blocking(out.write, chunk)
                        count += len(chunk)
                finally:
                    await _backend.run_blocking(out.close)
            else:
                async for chunk in f:
                    await _backend.run_blocking(dest.write, chunk)
                    count += len(chunk)
        return count

    async def write(self, path: str, data: Any, *, mode: int | str | None = None,
                    owner: str | None = None, group: str | None = None,
                    user: str | None = None) -> FileInfo:
        """Writes a file (parents are made): ``data`` is bytes, text (the content), a local
        file's path (a ``pathlib.Path``, not a str), a binary file or an iterable of bytes,
        streamed. The new content replaces the old one when complete; an
        existing file keeps its mode and owner unless ``mode`` (``0o644``) or ``owner`` say
        otherwise."""
        content = _backend.body_source(data)
        async with self._box.client._stream(
                "PUT", self._path(), params=_api.write_params(path, mode, owner, group, user),
                headers={"Content-Type": "application/octet-stream"},
                content=content) as response:
            body = await response.aread()
            return _api.finish(_api.Call("PUT", self._path(), _api._file_info),
                               response.status_code, body, response.headers)

    async def stat(self, path: str, *, user: str | None = None) -> FileInfo:
        """The file (a symlink itself, not its target)."""
        return await self._box.client._call(_api.stat_file(self._box.id, path, user))

    async def exists(self, path: str, *, user: str | None = None) -> bool:
        try:
            await self.stat(path, user=user)
        except NotFoundError:
            return False
        return True

    async def list(self, path: str, *, depth: int = 1, user: str | None = None) -> FileList:
        """What is in directory ``path``, down to ``depth`` levels, sorted by path
        (``.truncated`` when hutchd stopped at its 10 000 entries)."""
        return await self._box.client._call(_api.list_files(self._box.id, path, depth, user))

    async def mkdir(self, path: str, *, mode: int | None = None, parents: bool = True,
                    user: str | None = None) -> FileInfo:
        """Makes a directory (``created`` is False when it was there)."""
        return await self._box.client._call(_api.mkdir(self._box.id, path, mode, parents, user))

    async def move(self, src: str, dst: str, *, overwrite: bool = False,
                   user: str | None = None) -> FileInfo:
        return await self._box.client._call(_api.move(self._box.id, src, dst, overwrite, user))

    async def remove(self, path: str, *, recursive: bool = False,
                     user: str | None = None) -> None:
        await self._box.client._call(_api.remove_file(self._box.id, path, recursive, user))

    async def upload(self, local_path: str | os.PathLike[str], box_dir: str, *,
                     user: str | None = None) -> int:
        """Copies a local directory's contents into ``box_dir`` (made if missing), or a local
        file to ``box_dir/NAME``, as one tar stream; returns hutchd's count of entries."""
        if not os.path.lexists(local_path):
            raise InvalidArgumentError(f"{os.fspath(local_path)} does not exist")
        content = _backend.iterate_blocking(tar_stream(local_path))
        async with self._box.client._stream(
                "PUT", self._path("/archive"), params=_api.file_params(box_dir, user),
                headers={"Content-Type": "application/x-tar"}, content=content) as response:
            body = await response.aread()
            return _api.finish(_api.Call("PUT", self._path("/archive"), _api.parse_archive_put),
                               response.status_code, body, response.headers)

    async def download(self, box_path: str, local_dir: str | os.PathLike[str], *,
                       user: str | None = None) -> int:
        """Copies a box directory's contents into ``local_dir`` (made if missing), or a box
        file to ``local_dir/NAME``, streamed through tar; returns the number of entries."""
        async with self._box.client._stream(
                "GET", self._path("/archive"),
                params=_api.file_params(box_path, user)) as response:
            return await _backend.extract_tar(self._box.client._chunks(response), local_dir)
