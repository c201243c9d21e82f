"""The API's objects as dataclasses (docs/api.md, "Objects" and the sections after it).

Parsing is lenient on purpose: fields the SDK does not know yet are kept in ``raw`` (and
ignored otherwise), fields an older hutchd does not send get their default. A value that is not
a JSON object where one is expected is a :class:`~hutch.ProtocolError`.
"""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ._errors import ProtocolError

T = TypeVar("T")


def _obj(data: Any, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ProtocolError(f"hutchd sent {type(data).__name__} where {what} (a JSON object) "
                            f"was expected")
    return data


def _items(data: Any, key: str, what: str) -> list[Any]:
    obj = _obj(data, f"an answer with '{key}'")
    items = obj.get(key)
    if not isinstance(items, list):
        raise ProtocolError(f"hutchd's answer has no list '{key}' of {what}")
    return items


def from_json(cls: type[T], data: Any) -> T:
    """Builds dataclass ``cls`` from a JSON object: known fields are taken, all of it is ``raw``."""
    obj = _obj(data, cls.__name__)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs = {k: v for k, v in obj.items() if k in names and k != "raw"}
    return cls(**kwargs, raw=obj)  # type: ignore[call-arg]


def list_from_json(cls: type[T], data: Any, key: str) -> list[T]:
    return [from_json(cls, item) for item in _items(data, key, cls.__name__)]


def _raw() -> Any:
    return field(default_factory=dict, repr=False, compare=False)


@dataclass
class BoxShare:
    """A host folder shared into a box (``hutch run -v HOSTDIR:BOXDIR[:ro]``)."""

    host_dir: str = ""
    box_dir: str = ""
    read_only: bool = False
    raw: dict[str, Any] = _raw()


@dataclass
class BoxInfo:
    """A box as ``GET /v1/boxes/{box}`` describes it."""

    id: str = ""
    name: str = ""
    template: str = ""
    cpus: int = 0
    memory_mib: int = 0
    disk_mib: int = 0
    #: ``creating``, ``running``, ``paused`` (idle; woken by the next call), ``stopping``,
    #: ``suspended`` (memory kept on disk), ``stopped`` or ``failed``.
    state: str = ""
    reason: str = ""
    accel: str = ""
    pid: int = 0
    boot: str = ""
    secrets: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    owner: str = ""
    created_at: int = 0
    updated_at: int = 0
    #: Commands running longer are killed (0: no limit; detached processes are not limited).
    max_exec_ms: int = 0
    #: Paused after this long without work (-1: the daemon's default, 0: never).
    idle_pause_ms: int = -1
    #: When its lifetime ends, unix seconds (0: never); then ``on_timeout`` happens.
    expires_at: int = 0
    #: ``stop``, ``suspend``, ``remove``, or ``""`` when it has no lifetime.
    on_timeout: str = ""
    #: Host folders shared into it.
    shares: list[BoxShare] = field(default_factory=list)
    raw: dict[str, Any] = _raw()

    def __post_init__(self) -> None:
        self.shares = [s if isinstance(s, BoxShare) else from_json(BoxShare, s)
                       for s in self.shares or []]


@dataclass
class Checkpoint:
    id: str = ""
    kind: str = ""
    box_id: str = ""
    name: str = ""
    size_bytes: int = 0
    created_at: int = 0
    raw: dict[str, Any] = _raw()


@dataclass
class Port:
    box_id: str = ""
    address: str = ""
    host_port: int = 0
    box_port: int = 0
    listening: bool = False
    error: str = ""
    connections: int = 0
    accepted: int = 0
    created_at: int = 0
    raw: dict[str, Any] = _raw()


@dataclass
class Process:
    """A detached process (``POST /v1/boxes/{box}/processes``); ``code``/``signal`` once it ended."""

    id: str = ""
    pid: int = 0
    argv: list[str] = field(default_factory=list)
    user: str = ""
    started_ns: int = 0
    running: bool = False
    log: str = ""
    code: int | None = None
    signal: int | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class Service:
    name: str = ""
    state: str = ""
    pid: int = 0
    restarts: int = 0
    started_ns: int = 0
    last_exit: Any = None
    error: str = ""
    log: str = ""
    raw: dict[str, Any] = _raw()


@dataclass
class TemplateImage:
    """Which image a template was made of (``source`` ``image``), pinned by digest."""

    #: The reference pulled, or the image's name in its archive (empty when it had none).
    ref: str = ""
    #: ``docker-archive`` or ``oci-archive`` for an uploaded archive, empty for a pull.
    archive: str = ""
    digest: str = ""
    config_digest: str = ""
    platform: str = ""
    layers: int = 0
    #: The layers' unpacked size.
    bytes: int = 0
    raw: dict[str, Any] = _raw()


@dataclass
class TemplateBuild:
    """How a template was built from a Dockerfile (``source`` ``build``)."""

    #: The cache key of its last step.
    key: str = ""
    base_template: str = ""
    #: The Dockerfile's ``FROM`` when it named an image (empty for a template base).
    base_image: str = ""
    steps: int = 0
    #: Steps that came from the build cache.
    cached_steps: int = 0
    raw: dict[str, Any] = _raw()


@dataclass
class TemplateStart:
    """The start command and ready check the template's snapshot runs."""

    cmd: str = ""
    ready: str = ""
    raw: dict[str, Any] = _raw()


@dataclass
class TemplateDefaults:
    """What an image's config (or a Dockerfile) gives the template's boxes: an exec gets the
    environment, the user and the working directory, as ``docker run`` would."""

    env: list[str] = field(default_factory=list)
    workdir: str = ""
    user: str = ""
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    exposed_ports: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    stop_signal: str = ""
    raw: dict[str, Any] = _raw()


def _nested(cls: type[T], value: Any) -> T | None:
    if value is None or isinstance(value, cls):
        return value
    return from_json(cls, value)


@dataclass
class Template:
    name: str = ""
    #: ``recipe``, ``box``, ``image`` (a registry or an archive) or ``build`` (a Dockerfile).
    source: str = ""
    source_box: str = ""
    dir: str = ""
    image_key: str = ""
    kernel_version: str = ""
    #: When it was made (UTC, ISO 8601).
    created: str = ""
    disk_bytes: int = 0
    used_by: list[str] = field(default_factory=list)
    #: Set for ``source`` ``image``: which image, by digest.
    image: TemplateImage | None = None
    #: Set for ``source`` ``build``: the base and the cache.
    build: TemplateBuild | None = None
    #: The start command and ready check, when the template has them.
    start: TemplateStart | None = None
    #: The image's (or Dockerfile's) ENV, USER, WORKDIR, ... for images and builds.
    defaults: TemplateDefaults | None = None
    #: PID 1 when it is not hutch-agent: the image's systemd (made with ``systemd=True``).
    init: str | None = None
    raw: dict[str, Any] = _raw()

    def __post_init__(self) -> None:
        self.image = _nested(TemplateImage, self.image)
        self.build = _nested(TemplateBuild, self.build)
        self.start = _nested(TemplateStart, self.start)
        self.defaults = _nested(TemplateDefaults, self.defaults)


@dataclass
class RegistryLogin:
    """A registry hutchd pulls images from with credentials it keeps (never the password)."""

    registry: str = ""
    username: str = ""
    raw: dict[str, Any] = _raw()


@dataclass
class Secret:
    """A stored secret, never with its value."""

    name: str = ""
    domains: list[str] = field(default_factory=list)
    header: str = ""
    format: str = ""
    updated_at: int = 0
    raw: dict[str, Any] = _raw()


@dataclass
class Key:
    """An API key. ``key`` (the secret itself) is set only in the answer that made it."""

    name: str = ""
    id: str = ""
    admin: bool = False
    max_boxes: int = 0
    max_cpus: int = 0
    max_memory_mib: int = 0
    max_disk_mib: int = 0
    created_at: int = 0
    last_used_at: int = 0
    key: str | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class Accel:
    name: str = ""
    reason: str = ""
    raw: dict[str, Any] = _raw()


@dataclass
class Caller:
    """Who a request was authenticated as (``""`` and admin: the unix socket's administrator)."""

    name: str = ""
    admin: bool = False
    max_boxes: int = 0
    max_cpus: int = 0
    max_memory_mib: int = 0
    max_disk_mib: int = 0
    raw: dict[str, Any] = _raw()


@dataclass
class Info:
    """``GET /v1/info``."""

    version: str = ""
    backend: str = ""
    state_dir: str = ""
    accel: Accel = field(default_factory=Accel)
    #: The TLS certificate's SHA-256 fingerprint when a TLS listener runs, else None.
    fingerprint_sha256: str | None = None
    listeners: list[str] = field(default_factory=list)
    caller: Caller | None = None
    raw: dict[str, Any] = _raw()

    @classmethod
    def from_json(cls, data: Any) -> Info:
        obj = _obj(data, "info")
        tls: dict[str, Any] = obj["tls"] if isinstance(obj.get("tls"), dict) else {}
        caller = obj.get("caller")
        return cls(version=obj.get("version", ""), backend=obj.get("backend", ""),
                   state_dir=obj.get("state_dir", ""),
                   accel=from_json(Accel, obj.get("accel") or {}),
                   fingerprint_sha256=tls.get("fingerprint_sha256") or None,
                   listeners=list(obj.get("listeners") or []),
                   caller=from_json(Caller, caller) if isinstance(caller, dict) else None,
                   raw=obj)


@dataclass
class FileInfo:
    """A file in a box (``/v1/boxes/{box}/files/...``)."""

    name: str = ""
    path: str = ""
    #: ``file``, ``dir``, ``symlink`` or ``other``.
    type: str = ""
    size: int = 0
    #: Permission bits (with setuid, setgid, sticky) as a number: 0o644 is 420.
    mode: int = 0
    permissions: str = ""
    uid: int = 0
    gid: int = 0
    owner: str = ""
    group: str = ""
    mtime_ns: int = 0
    symlink_target: str = ""
    #: Only in mkdir's answer: False when the directory was there already.
    created: bool | None = None
    raw: dict[str, Any] = _raw()

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"


class FileList(list[FileInfo]):
    """The entries of ``files.list()``; ``truncated`` is True when hutchd stopped at its limit."""

    truncated: bool = False


@dataclass
class Policy:
    """A box's egress policy: ``policy`` is the policy object (docs/network.md)."""

    id: str = ""
    name: str = ""
    policy: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = _raw()


@dataclass
class PolicyLogEntry:
    box: str = ""
    time_ms: int = 0
    proto: str = ""
    host: str = ""
    port: int = 0
    address: str = ""
    #: ``allow`` or ``deny``.
    decision: str = ""
    reason: str = ""
    bytes_up: int = 0
    bytes_down: int = 0
    secrets: list[str] = field(default_factory=list)
    raw: dict[str, Any] = _raw()


@dataclass
class PolicyLog:
    """A page of the policy log; pass ``next`` back as ``after`` to follow it."""

    entries: list[PolicyLogEntry] = field(default_factory=list)
    next: int = 0

    @classmethod
    def from_json(cls, data: Any) -> PolicyLog:
        obj = _obj(data, "a policy log page")
        return cls(entries=list_from_json(PolicyLogEntry, obj, "entries"),
                   next=int(obj.get("next", 0)))


@dataclass
class ExecError:
    """Why a command could not be started (``error`` in an ExecResult)."""

    code: str = ""
    message: str = ""


@dataclass
class ExecResult:
    """What a finished command did. ``stdout``/``stderr`` are text; ``*_bytes`` the raw bytes."""

    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""
    #: The exit status, or None when a signal ended the command (then ``signal`` is set).
    exit_code: int | None = None
    signal: int | None = None
    duration_ms: int = 0
    #: Output beyond ``max_output_bytes`` was dropped.
    truncated: bool = False
    #: The command ran past ``timeout`` and was killed (SIGKILL to its process group).
    timed_out: bool = False
    pid: int = 0
    #: Set when the command could not be started (exit_code is then 127 or 126).
    error: ExecError | None = None

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0."""
        return self.exit_code == 0

    @classmethod
    def from_json(cls, data: Any) -> ExecResult:
        obj = _obj(data, "an exec result")

        def stream(name: str) -> bytes:
            text = obj.get(name) or ""
            if not isinstance(text, str):
                raise ProtocolError(f"Exec result field '{name}' is not a string")
            if obj.get(f"{name}_encoding", "utf-8") == "base64":
                try:
                    return base64.b64decode(text, validate=True)
                except ValueError as e:
                    raise ProtocolError(f"Exec result field '{name}' is not valid base64") from e
            return text.encode("utf-8")

        err = obj.get("error")
        return cls(stdout_bytes=stream("stdout"), stderr_bytes=stream("stderr"),
                   exit_code=obj.get("exit_code"), signal=obj.get("signal"),
                   duration_ms=int(obj.get("duration_ms") or 0),
                   truncated=bool(obj.get("truncated")), timed_out=bool(obj.get("timed_out")),
                   pid=int(obj.get("pid") or 0),
                   error=ExecError(code=str(err.get("code", "")),
                                   message=str(err.get("message", "")))
                   if isinstance(err, dict) else None)
