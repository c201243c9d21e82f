# Generated from hutch/_async/_box.py by scripts/unasync.py: edit that file, then run the script.
"""A box and what it has: exec, files, processes, ports, policy, snapshots."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any, Iterator, BinaryIO, List, Mapping, Sequence

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
from ._exec import ExecSession, OutputCallback, run_session

if TYPE_CHECKING:
    from ._client import Client


class Box:
    """A box. ``info`` is what hutchd said last (:meth:`refresh` asks again).

    Used as a context manager, the box is removed (forced) when the block ends.
    """

    def __init__(self, client: Client, info: BoxInfo, *, owns_client: bool = False) -> None:
        self.client = client
        self.info = info
        self._owns_client = owns_client
        self.files = Files(self)
        self.processes = Processes(self)
        self.ports = Ports(self)
        self.policy = BoxPolicy(self)

    # --- making and finding boxes (also as client.boxes.create/list/get) ----------------

    @classmethod
    def create(cls, template: str | None = None, cpus: int | None = None,
                     memory: int | str | None = None, disk: int | str | None = None,
                     network_policy: str | Mapping[str, Any] | None = None,
                     secrets: Sequence[str] | None = None, env: Env | None = None,
                     name: str | None = None, *,
                     client: Client | None = None) -> Box:
        """Creates a box (see ``client.boxes.create``); without ``client``, one made from the
        environment (``HUTCH_HOST``, ``HUTCH_API_KEY``...), closed with the box's ``with``."""
        owns = client is None
        if client is None:
            from ._client import Client
            client = Client()
        try:
            box = client.boxes.create(
                template=template, cpus=cpus, memory=memory, disk=disk,
                network_policy=network_policy, secrets=secrets, env=env, name=name)
        except BaseException:
            if owns:
                client.close()
            raise
        box._owns_client = owns
        return box

    @classmethod
    def get(cls, box: str, *, client: Client) -> Box:
        return client.boxes.get(box)

    @classmethod
    def list(cls, *, client: Client) -> List[Box]:
        return client.boxes.list()

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
        return f"Box(id={self.info.id!r}, name={self.info.name!r}, state={self.info.state!r})"

    def __enter__(self) -> Box:
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.remove(force=True)
        except NotFoundError:
            pass
        finally:
            if self._owns_client:
                self.client.close()

    # --- lifecycle -----------------------------------------------------------------------

    def refresh(self) -> BoxInfo:
        self.info = self.client._call(_api.get_box(self.id))
        return self.info

    def start(self) -> BoxInfo:
        """Resumes a suspended box (every process as it was); boots a stopped (or failed) one
        from its own disk."""
        self.info = self.client._call(_api.box_action(self.id, "start"))
        return self.info

    def stop(self, shutdown: bool = False) -> BoxInfo:
        """Suspends the box: its memory and processes are kept on disk and ``start`` resumes
        them. With ``shutdown`` the guest powers off cleanly instead (the disk is kept)."""
        params = {"shutdown": "true"} if shutdown else None
        self.info = self.client._call(_api.box_action(self.id, "stop", params))
        return self.info

    def remove(self, force: bool = False) -> None:
        """Removes the box and its disk; a running box needs ``force``."""
        self.client._call(_api.remove_box(self.id, force))

    def fork(self, n: int = 1, names: Sequence[str] | None = None) -> List[Box]:
        """Copies the running box into ``n`` new boxes (memory, processes and disk)."""
        infos = self.client._call(_api.fork(self.id, n, names))
        return [Box(self.client, info) for info in infos]

    def checkpoint(self, name: str | None = None) -> Checkpoint:
        """Saves the running box's memory and disk."""
        return self.client._call(_api.checkpoint(self.id, name))

    def checkpoints(self) -> List[Checkpoint]:
        """The box's checkpoints, oldest first."""
        return self.client._call(_api.list_checkpoints(self.id))

    def remove_checkpoint(self, name: str) -> None:
        self.client._call(_api.remove_checkpoint(self.id, name))

    def rollback(self, checkpoint: str | Checkpoint) -> BoxInfo:
        """Restores the box to a checkpoint; it runs afterwards."""
        name = checkpoint.name if isinstance(checkpoint, Checkpoint) else checkpoint
        self.info = self.client._call(_api.rollback(self.id, name))
        return self.info

    def logs(self) -> str:
        """The box's serial console."""
        return self.client._call(_api.box_logs(self.id))

    def stats(self) -> dict[str, Any]:
        """What the box's VMM uses of the host (its cgroup), as hutchd reports it."""
        return self.client._call(_api.box_stats(self.id))

    def services(self) -> List[Service]:
        return self.client._call(_api.list_services(self.id))

    # --- exec ----------------------------------------------------------------------------

    def exec(self, cmd: Command, *, env: Env | None = None, cwd: str | None = None,
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
            return self.client._call(_api.exec_run(
                self.id, argv, env=env, cwd=cwd, user=user, stdin=stdin, timeout=timeout,
                max_output_bytes=max_output_bytes))
        session = self.exec_session(
            argv, env=env, cwd=cwd, user=user, stdin=stdin is not None, on_stdout=on_stdout,
            on_stderr=on_stderr, max_output_bytes=max_output_bytes)
        return run_session(session, stdin, timeout)

    def exec_session(self, cmd: Command, *, env: Env | None = None,
                           cwd: str | None = None, user: str | None = None,
                           stdin: bool = False, tty: bool = False, rows: int | None = None,
                           cols: int | None = None,
                           on_stdout: OutputCallback | None = None,
                           on_stderr: OutputCallback | None = None,
                           max_output_bytes: int | None = None) -> ExecSession:
        """Starts a command over the WebSocket and returns its session once it started:
        ``write``/``close_stdin`` (with ``stdin=True``), ``signal``, ``resize``, ``read``,
        ``wait``. See :meth:`pty` for a terminal."""
        request = _api.exec_request(to_argv(cmd), env, cwd, user)
        return self._open_session(request, stdin=stdin, tty=tty, rows=rows, cols=cols,
                                        on_stdout=on_stdout, on_stderr=on_stderr,
                                        max_output_bytes=max_output_bytes)

    def pty(self, cmd: Command | None = None, *, rows: int = 24, cols: int = 80,
                  env: Env | None = None, cwd: str | None = None, user: str | None = None,
                  on_data: OutputCallback | None = None) -> ExecSession:
        """A command on a terminal in the box; without ``cmd``, the user's login shell.

        Its output (one stream: what the terminal shows) goes to ``on_data`` or to
        :meth:`ExecSession.read`; ``write`` types, ``resize`` changes the window.
        """
        if cmd is None:
            request = _api.exec_request([], env, cwd, user)
            request["login_shell"] = True
        else:
            request = _api.exec_request(to_argv(cmd), env, cwd, user)
        return self._open_session(request, stdin=True, tty=True, rows=rows, cols=cols,
                                        on_stdout=on_data, on_stderr=None,
                                        max_output_bytes=None)

    def _open_session(self, request: dict[str, Any], *, stdin: bool, tty: bool,
                            rows: int | None, cols: int | None,
                            on_stdout: OutputCallback | None, on_stderr: OutputCallback | None,
                            max_output_bytes: int | None) -> ExecSession:
        request["stdin"] = bool(stdin)
        if tty:
            request["tty"] = True
            if rows:
                request["rows"] = int(rows)
            if cols:
                request["cols"] = int(cols)
        ws = self.client._ws(f"/v1/boxes/{seg(self.id)}/exec/ws", SUBPROTOCOL)
        session = ExecSession(ws, tty=tty, stdin=stdin, on_stdout=on_stdout,
                                   on_stderr=on_stderr, max_output_bytes=max_output_bytes)
        try:
            session._begin(request)
        except BaseException:
            session.close()
            raise
        return session


class Processes:
    """``box.processes``: detached processes; their output goes to a log file in the box."""

    def __init__(self, box: Box) -> None:
        self._box = box

    def start(self, cmd: Command, *, env: Env | None = None, cwd: str | None = None,
                    user: str | None = None) -> Process:
        return self._box.client._call(
            _api.start_process(self._box.id, to_argv(cmd), env, cwd, user))

    def list(self) -> List[Process]:
        """Running ones and the last 100 that ended."""
        return self._box.client._call(_api.list_processes(self._box.id))

    def signal(self, process: str | Process, signal: int = 15) -> None:
        pid = process.id if isinstance(process, Process) else process
        self._box.client._call(_api.signal_process(self._box.id, pid, signal))

    def log(self, process: str | Process) -> bytes:
        """The process's output so far (its log file, read as root)."""
        if isinstance(process, Process):
            path = process.log
        else:
            found = [p for p in self.list() if p.id == process]
            if not found:
                raise NotFoundError(f"No detached process {process!r} in box {self._box.name}")
            path = found[0].log
        return self._box.files.read(path, user="root")


class Ports:
    """``box.ports``: box ports published on the host."""

    def __init__(self, box: Box) -> None:
        self._box = box

    def publish(self, box_port: int, host_port: int, address: str | None = None) -> Port:
        """Relays ``address:host_port`` on the host (default 127.0.0.1) to ``box_port``."""
        return self._box.client._call(
            _api.publish_port(self._box.id, box_port, host_port, address))

    def list(self) -> List[Port]:
        return self._box.client._call(_api.list_ports(self._box.id))

    def remove(self, host_port: int, address: str | None = None) -> None:
        self._box.client._call(_api.remove_port(self._box.id, host_port, address))


class BoxPolicy:
    """``box.policy``: the box's egress policy and what it allowed or refused."""

    def __init__(self, box: Box) -> None:
        self._box = box

    def get(self) -> Policy:
        return self._box.client._call(_api.get_policy(self._box.id))

    def set(self, policy: str | Mapping[str, Any]) -> Policy:
        """A preset (``"none"``, ``"allow-all"``, ``"debian-mirrors"``) or a policy dict; live
        for a running box."""
        return self._box.client._call(_api.set_policy(self._box.id, policy))

    def log(self, after: int = 0, limit: int | None = None) -> PolicyLog:
        """Entries after line ``after``; pass the page's ``next`` back to follow."""
        return self._box.client._call(_api.policy_log(self._box.id, after, limit))


class FileStream:
    """An open download (``box.files.stream``): the file's mode and mtime, then its bytes."""

    def __init__(self, client: Client, response: httpx.Response) -> None:
        self._client = client
        self._response = response
        headers = response.headers
        length = headers.get("content-length")
        self.size: int | None = int(length) if length and length.isdigit() else None
        mode = headers.get("x-hutch-file-mode")
        self.mode: int | None = _parse_mode(mode)
        mtime = headers.get("x-hutch-file-mtime-ns")
        self.mtime_ns: int | None = int(mtime) if mtime and mtime.isdigit() else None

    def __iter__(self) -> Iterator[bytes]:
        return self._client._chunks(self._response)


def _parse_mode(text: str | None) -> int | None:
    if not text:
        return None
    try:
        return int(text, 8) if text.startswith("0") else int(text)
    except ValueError:
        return None


class Files:
    """``box.files``: files in a running box, without exec. ``user`` (default: the box's
    default user) is who the operation runs as; relative paths are relative to its home."""

    def __init__(self, box: Box) -> None:
        self._box = box

    def _path(self, suffix: str = "") -> str:
        return f"/v1/boxes/{seg(self._box.id)}/files{suffix}"

    @contextlib.contextmanager
    def stream(self, path: str, *, user: str | None = None
                     ) -> Iterator[FileStream]:
        """Opens a file for reading as a stream of chunks (``for chunk in f``)."""
        with self._box.client._stream(
                "GET", self._path(), params=_api.file_params(path, user)) as response:
            yield FileStream(self._box.client, response)

    def read(self, path: str, *, user: str | None = None) -> bytes:
        """The whole file (use :meth:`stream` or :meth:`read_to` for big ones)."""
        data = bytearray()
        with self.stream(path, user=user) as f:
            for chunk in f:
                data += chunk
        return bytes(data)

    def read_text(self, path: str, *, encoding: str = "utf-8",
                        user: str | None = None) -> str:
        return (self.read(path, user=user)).decode(encoding)

    def read_to(self, path: str, dest: str | os.PathLike[str] | BinaryIO, *,
                      user: str | None = None) -> int:
        """Streams a file of the box into a local path or a writable binary file; returns the
        number of bytes."""
        count = 0
        with self.stream(path, user=user) as f:
            if isinstance(dest, (str, os.PathLike)):
                out = _backend.run_blocking(open, os.fspath(dest), "wb")
                try:
                    for chunk in f:
                        _backend.run_blocking(out.write, chunk)
                        count += len(chunk)
                finally:
                    _backend.run_blocking(out.close)
            else:
                for chunk in f:
                    _backend.run_blocking(dest.write, chunk)
                    count += len(chunk)
        return count

    def write(self, path: str, data: Any, *, mode: int | str | None = None,
                    owner: str | None = None, group: str | None = None,
                    user: str | None = None) -> FileInfo:
        """Writes a file (parents are made): ``data`` is bytes, text (the content), a local
        file's path (a ``pathlib.Path``, not a str), a binary file or an iterable of bytes,
        streamed. The new content replaces the old one when complete; an
        existing file keeps its mode and owner unless ``mode`` (``0o644``) or ``owner`` say
        otherwise."""
        content = _backend.body_source(data)
        with self._box.client._stream(
                "PUT", self._path(), params=_api.write_params(path, mode, owner, group, user),
                headers={"Content-Type": "application/octet-stream"},
                content=content) as response:
            body = response.read()
            return _api.finish(_api.Call("PUT", self._path(), _api._file_info),
                               response.status_code, body, response.headers)

    def stat(self, path: str, *, user: str | None = None) -> FileInfo:
        """The file (a symlink itself, not its target)."""
        return self._box.client._call(_api.stat_file(self._box.id, path, user))

    def exists(self, path: str, *, user: str | None = None) -> bool:
        try:
            self.stat(path, user=user)
        except NotFoundError:
            return False
        return True

    def list(self, path: str, *, depth: int = 1, user: str | None = None) -> FileList:
        """What is in directory ``path``, down to ``depth`` levels, sorted by path
        (``.truncated`` when hutchd stopped at its 10 000 entries)."""
        return self._box.client._call(_api.list_files(self._box.id, path, depth, user))

    def mkdir(self, path: str, *, mode: int | None = None, parents: bool = True,
                    user: str | None = None) -> FileInfo:
        """Makes a directory (``created`` is False when it was there)."""
        return self._box.client._call(_api.mkdir(self._box.id, path, mode, parents, user))

    def move(self, src: str, dst: str, *, overwrite: bool = False,
                   user: str | None = None) -> FileInfo:
        return self._box.client._call(_api.move(self._box.id, src, dst, overwrite, user))

    def remove(self, path: str, *, recursive: bool = False,
                     user: str | None = None) -> None:
        self._box.client._call(_api.remove_file(self._box.id, path, recursive, user))

    def upload(self, local_path: str | os.PathLike[str], box_dir: str, *,
                     user: str | None = None) -> int:
        """Copies a local directory's contents into ``box_dir`` (made if missing), or a local
        file to ``box_dir/NAME``, as one tar stream; returns hutchd's count of entries."""
        if not os.path.lexists(local_path):
            raise InvalidArgumentError(f"{os.fspath(local_path)} does not exist")
        content = _backend.iterate_blocking(tar_stream(local_path))
        with self._box.client._stream(
                "PUT", self._path("/archive"), params=_api.file_params(box_dir, user),
                headers={"Content-Type": "application/x-tar"}, content=content) as response:
            body = response.read()
            return _api.finish(_api.Call("PUT", self._path("/archive"), _api.parse_archive_put),
                               response.status_code, body, response.headers)

    def download(self, box_path: str, local_dir: str | os.PathLike[str], *,
                       user: str | None = None) -> int:
        """Copies a box directory's contents into ``local_dir`` (made if missing), or a box
        file to ``local_dir/NAME``, streamed through tar; returns the number of entries."""
        with self._box.client._stream(
                "GET", self._path("/archive"),
                params=_api.file_params(box_path, user)) as response:
            return _backend.extract_tar(self._box.client._chunks(response), local_dir)
