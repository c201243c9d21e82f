"""Tar streams for ``files.upload``/``files.download`` (the /files/archive endpoints) and for
the context of ``templates.build`` (``POST /v1/builds``).

Both directions stream: the writer yields a header, the file's bytes in chunks and the padding,
one file at a time; the reader extracts from a non-seekable stream (``tarfile`` mode ``r|``).
Nothing holds a whole file in memory.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from ._errors import InvalidArgumentError, ProtocolError

CHUNK = 256 * 1024
_BLOCK = tarfile.BLOCKSIZE


def _header(info: tarfile.TarInfo) -> bytes:
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def _info(name: str, st: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = stat.S_IMODE(st.st_mode)
    info.mtime = int(st.st_mtime)
    # Owners are the box's business: the entries belong to the user the upload runs as.
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _file_entry(path: str, name: str, st: os.stat_result) -> Iterator[bytes]:
    info = _info(name, st)
    info.type = tarfile.REGTYPE
    info.size = st.st_size
    with open(path, "rb") as f:
        yield _header(info)
        left = st.st_size
        while left > 0:
            chunk = f.read(min(CHUNK, left))
            if not chunk:
                raise OSError(f"{path} shrank while it was being uploaded")
            left -= len(chunk)
            yield chunk
    if st.st_size % _BLOCK:
        yield b"\0" * (_BLOCK - st.st_size % _BLOCK)


def _entry(path: str, name: str) -> Iterator[bytes]:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        info = _info(name, st)
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(path)
        yield _header(info)
    elif stat.S_ISDIR(st.st_mode):
        info = _info(name, st)
        info.type = tarfile.DIRTYPE
        yield _header(info)
    elif stat.S_ISREG(st.st_mode):
        yield from _file_entry(path, name, st)
    # Sockets, FIFOs and devices are not copied (as cp -r of a tree into a box would not).


def _tree(root: str) -> Iterator[bytes]:
    """The entries of directory ``root``'s contents, named relative to it (no end blocks)."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        for name in sorted(filenames) + [d for d in dirnames
                                         if os.path.islink(os.path.join(dirpath, d))]:
            yield from _entry(os.path.join(dirpath, name),
                              name if rel == "." else f"{rel}/{name}")
        real_dirs = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = real_dirs
        for name in real_dirs:
            yield from _entry(os.path.join(dirpath, name),
                              name if rel == "." else f"{rel}/{name}")


def tar_stream(local_path: str | os.PathLike[str]) -> Iterator[bytes]:
    """A tar of ``local_path``: a directory's contents (names relative to it), or one file
    (named after it)."""
    root = os.fspath(local_path)
    st = os.lstat(root)
    if stat.S_ISDIR(st.st_mode):
        yield from _tree(root)
    elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
        yield from _entry(root, os.path.basename(root.rstrip("/")))
    else:
        raise InvalidArgumentError(f"{root} is neither a file nor a directory")
    yield b"\0" * (2 * _BLOCK)


#: The name a Dockerfile from outside the context (or given as text) gets in the context's tar,
#: as the CLI names it.
OUTSIDE_DOCKERFILE = ".hutch-dockerfile"


@dataclass
class BuildContext:
    """What ``POST /v1/builds`` is sent: the context directory's contents (None: no context,
    the Dockerfile alone) and the Dockerfile, named ``dockerfile`` in the tar. ``extra`` is the
    Dockerfile's text or its local path when it is not already inside the context."""

    directory: str | None
    dockerfile: str
    extra: bytes | str | None

    def stream(self) -> Iterator[bytes]:
        """The tar, made as it is sent. The server applies the context's .dockerignore itself."""
        if self.directory is not None:
            try:
                yield from _tree(self.directory)
            except OSError as e:
                raise InvalidArgumentError(f"Cannot read the build context {self.directory}: "
                                           f"{e}") from e
        if isinstance(self.extra, bytes):
            info = tarfile.TarInfo(self.dockerfile)
            info.type = tarfile.REGTYPE
            info.mode = 0o644
            info.size = len(self.extra)
            info.mtime = int(time.time())
            info.uname = info.gname = ""
            yield _header(info)
            yield self.extra
            if len(self.extra) % _BLOCK:
                yield b"\0" * (_BLOCK - len(self.extra) % _BLOCK)
        elif isinstance(self.extra, str):
            yield from _file_entry(self.extra, self.dockerfile, os.stat(self.extra))
        yield b"\0" * (2 * _BLOCK)


def build_context(context: str | os.PathLike[str] | None,
                  dockerfile: str | os.PathLike[str] | None,
                  dockerfile_content: str | bytes | None) -> BuildContext:
    """Checks a build's inputs on this side (before anything is sent) and says what to send,
    as ``hutch template build -f FILE CONTEXT`` does."""
    if dockerfile is not None and dockerfile_content is not None:
        raise InvalidArgumentError("Give dockerfile (a path) or dockerfile_content (its text), "
                                   "not both")
    directory: str | None = None
    if context is not None:
        directory = os.fspath(context)
        if not os.path.isdir(directory):
            what = "does not exist" if not os.path.lexists(directory) else "is not a directory"
            raise InvalidArgumentError(f"The build context {directory} {what}: give a "
                                       f"directory (or no context, with the Dockerfile alone)")
    if dockerfile_content is not None:
        text = (dockerfile_content.encode("utf-8") if isinstance(dockerfile_content, str)
                else bytes(dockerfile_content))
        if not text.strip():
            raise InvalidArgumentError("dockerfile_content is empty")
        return BuildContext(directory, OUTSIDE_DOCKERFILE, text)
    if dockerfile is None:
        if directory is None:
            raise InvalidArgumentError("A build needs a context directory, a dockerfile path or "
                                       "dockerfile_content")
        path = os.path.join(directory, "Dockerfile")
        if not os.path.isfile(path):
            raise InvalidArgumentError(f"{path}: no such Dockerfile (give one with dockerfile=)")
        return BuildContext(directory, "Dockerfile", None)
    path = os.fspath(dockerfile)
    if not os.path.isfile(path):
        raise InvalidArgumentError(f"{path}: no such Dockerfile")
    if directory is not None:
        rel = os.path.relpath(os.path.realpath(path), os.path.realpath(directory))
        if rel != "." and rel != ".." and not rel.startswith(".." + os.sep):
            return BuildContext(directory, rel.replace(os.sep, "/"), None)
    return BuildContext(directory, OUTSIDE_DOCKERFILE, path)


class ChunkReader(io.RawIOBase):
    """A readable, non-seekable file over an iterator of byte chunks."""

    def __init__(self, chunks: Iterable[bytes] | Callable[[], bytes | None]) -> None:
        self._next: Callable[[], bytes | None]
        if callable(chunks):
            self._next = chunks
        else:
            it = iter(chunks)
            self._next = lambda: next(it, None)
        self._buf = b""
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._buf and not self._eof:
            chunk = self._next()
            if chunk is None:
                self._eof = True
            else:
                self._buf = bytes(chunk)
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def _parts(name: str) -> list[str]:
    if name.startswith("/") or "\0" in name:
        raise ProtocolError(f"The archive from the box has an absolute name {name!r}: refused")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ProtocolError(f"The archive from the box has a name with '..' ({name!r}): refused")
    return parts


def _safe_parent(dest: str, target: str) -> None:
    """The directories from dest down to target's parent exist and none is a symlink, so a write
    to target cannot land outside dest (a symlink in the archive cannot redirect it)."""
    parent = os.path.dirname(target)
    rel = os.path.relpath(parent, dest)
    cur = dest
    if rel != ".":
        for part in rel.split(os.sep):
            cur = os.path.join(cur, part)
            if os.path.islink(cur):
                raise ProtocolError(f"The archive writes through the symlink {cur}: refused")
            if not os.path.isdir(cur):
                os.mkdir(cur, 0o755)


def extract(fileobj: io.RawIOBase | io.BufferedIOBase, dest: str | os.PathLike[str]) -> int:
    """Extracts a tar stream into ``dest`` (made if missing); returns the number of entries.

    A first entry that is a directory stands for ``dest`` itself (its contents land in dest, as
    ``upload`` sends them); a first entry that is a file lands as ``dest/NAME``. Names that are
    absolute, contain ``..`` or would be written through a symlink are refused; symlinks are
    made as they are; devices and FIFOs are skipped; setuid bits are dropped.
    """
    root = os.path.abspath(os.fspath(dest))
    os.makedirs(root, exist_ok=True)
    count = 0
    strip: str | None = None
    first = True
    dir_modes: list[tuple[str, int]] = []
    with tarfile.open(fileobj=fileobj, mode="r|") as tar:
        for member in tar:
            parts = _parts(member.name)
            if first:
                first = False
                if member.isdir() and len(parts) == 1:
                    strip = parts[0]
            if strip is not None:
                if not parts or parts[0] != strip:
                    raise ProtocolError(f"The archive entry {member.name!r} is not under "
                                        f"{strip}/")
                parts = parts[1:]
            count += 1
            target = os.path.join(root, *parts) if parts else root
            if member.isdir():
                if target != root:
                    _safe_parent(root, target)
                    if os.path.islink(target):
                        os.unlink(target)
                    os.makedirs(target, exist_ok=True)
                dir_modes.append((target, member.mode & 0o777))
                continue
            if not parts:
                raise ProtocolError(f"The archive entry {member.name!r} has no name")
            _safe_parent(root, target)
            if os.path.islink(target) or (os.path.exists(target) and not os.path.isdir(target)):
                os.unlink(target)
            if member.issym():
                os.symlink(member.linkname, target)
            elif member.islnk():
                link_parts = _parts(member.linkname)
                if strip is not None and link_parts and link_parts[0] == strip:
                    link_parts = link_parts[1:]
                source = os.path.join(root, *link_parts)
                _safe_parent(root, source)
                os.link(source, target, follow_symlinks=False)
            elif member.isfile():
                src = tar.extractfile(member)
                assert src is not None
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600)
                with os.fdopen(fd, "wb") as out:
                    while True:
                        chunk = src.read(CHUNK)
                        if not chunk:
                            break
                        out.write(chunk)
                os.chmod(target, member.mode & 0o777)
                os.utime(target, (member.mtime, member.mtime))
            else:
                count -= 1  # devices and FIFOs are not made
    for path, mode in reversed(dir_modes):
        if path != root:  # dest keeps its own mode
            os.chmod(path, mode)
    return count
