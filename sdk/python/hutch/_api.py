"""The API's requests and answers, without I/O: what both clients (sync and async) send and how
they read what comes back. Each call is a :class:`Call`: method, path, query, JSON body and the
function that turns the answer's JSON into the SDK's objects."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, List, Mapping, Sequence, TypeVar
from urllib.parse import quote

from ._args import env_dict, env_list, parse_mib, timeout_ms, to_bytes
from ._errors import InvalidArgumentError, ProtocolError, error_for, error_from_response
from ._models import (
    BoxInfo,
    Checkpoint,
    ExecResult,
    FileInfo,
    FileList,
    Info,
    Key,
    Policy,
    PolicyLog,
    Port,
    Process,
    RegistryLogin,
    Secret,
    Service,
    Template,
    from_json,
    list_from_json,
)

T = TypeVar("T")


def seg(value: str) -> str:
    """One path segment, escaped (box names, ids and prefixes, template and key names)."""
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"Expected a non-empty name, got {value!r}")
    return quote(value, safe="")


def _ignore(_: Any) -> None:
    return None


@dataclass
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[Any], T]
    params: dict[str, str] | None = None
    json: Any = None
    #: The answer is text, not JSON (``parse`` gets a str).
    text: bool = False
    headers: dict[str, str] = field(default_factory=dict)


def finish(call: Call[T], status: int, body: bytes, headers: Mapping[str, str]) -> T:
    """Reads an answer: an error status raises its class, a success is parsed."""
    if status >= 400:
        raise error_from_response(status, body, headers)
    if call.text:
        return call.parse(body.decode("utf-8", "replace"))
    try:
        data = json.loads(body) if body else None
    except ValueError as e:
        raise ProtocolError(f"hutchd answered {call.method} {call.path} with HTTP {status} and "
                            f"a body that is not JSON: {body[:200]!r}", status=status) from e
    return call.parse(data)


def _params(**values: Any) -> dict[str, str]:
    out = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def _box(box: str) -> str:
    return f"/v1/boxes/{seg(box)}"


# --- daemon, boxes -------------------------------------------------------------------------

def info() -> Call[Info]:
    return Call("GET", "/v1/info", Info.from_json)


def list_boxes() -> Call[List[BoxInfo]]:
    return Call("GET", "/v1/boxes", lambda d: list_from_json(BoxInfo, d, "boxes"))


def get_box(box: str) -> Call[BoxInfo]:
    return Call("GET", _box(box), lambda d: from_json(BoxInfo, d))


def create_box(template: str | None = None, cpus: int | None = None,
               memory: int | str | None = None, disk: int | str | None = None,
               network_policy: str | Mapping[str, Any] | None = None,
               secrets: Sequence[str] | None = None,
               env: Mapping[str, str] | Sequence[str] | None = None,
               name: str | None = None) -> Call[BoxInfo]:
    body: dict[str, Any] = {}
    if name is not None:
        body["name"] = name
    if template is not None:
        body["template"] = template
    if cpus is not None:
        if isinstance(cpus, bool) or not isinstance(cpus, int):
            raise InvalidArgumentError(f"cpus is an int, got {cpus!r}")
        body["cpus"] = cpus
    if memory is not None:
        body["memory_mib"] = parse_mib(memory, "memory")
    if disk is not None:
        body["disk_mib"] = parse_mib(disk, "disk")
    if network_policy is not None:
        if not isinstance(network_policy, (str, Mapping)):
            raise InvalidArgumentError("network_policy is a preset name (none, allow-all, "
                                       "debian-mirrors, npm, pypi) or a policy dict")
        body["network_policy"] = (network_policy if isinstance(network_policy, str)
                                  else dict(network_policy))
    if secrets is not None:
        if isinstance(secrets, str):
            raise InvalidArgumentError("secrets is a list of secret names, not a string")
        body["secrets"] = list(secrets)
    if env is not None:
        body["env"] = env_dict(env)
    return Call("POST", "/v1/boxes", lambda d: from_json(BoxInfo, d), json=body)


def box_action(box: str, action: str, params: dict | None = None) -> Call[BoxInfo]:
    return Call("POST", f"{_box(box)}/{action}", lambda d: from_json(BoxInfo, d), params=params)


def remove_box(box: str, force: bool = False) -> Call[None]:
    return Call("DELETE", _box(box), _ignore, params=_params(force=True) if force else None)


def box_logs(box: str) -> Call[str]:
    return Call("GET", f"{_box(box)}/logs", lambda s: s, text=True)


def box_stats(box: str) -> Call[dict[str, Any]]:
    return Call("GET", f"{_box(box)}/stats", lambda d: d)


def fork(box: str, count: int = 1, names: Sequence[str] | None = None) -> Call[List[BoxInfo]]:
    body: dict[str, Any] = {"count": count}
    if names is not None:
        body["names"] = list(names)
    return Call("POST", f"{_box(box)}/fork", lambda d: list_from_json(BoxInfo, d, "boxes"),
                json=body)


def checkpoint(box: str, name: str | None = None) -> Call[Checkpoint]:
    return Call("POST", f"{_box(box)}/checkpoints", lambda d: from_json(Checkpoint, d),
                json={"name": name} if name else {})


def list_checkpoints(box: str) -> Call[List[Checkpoint]]:
    return Call("GET", f"{_box(box)}/checkpoints",
                lambda d: list_from_json(Checkpoint, d, "checkpoints"))


def remove_checkpoint(box: str, name: str) -> Call[None]:
    return Call("DELETE", f"{_box(box)}/checkpoints/{seg(name)}", _ignore)


def rollback(box: str, checkpoint_name: str) -> Call[BoxInfo]:
    if not checkpoint_name:
        raise InvalidArgumentError("rollback needs the checkpoint's name")
    return Call("POST", f"{_box(box)}/rollback", lambda d: from_json(BoxInfo, d),
                json={"checkpoint": checkpoint_name})


# --- exec and processes --------------------------------------------------------------------

def exec_request(argv: list[str], env: Any = None, cwd: str | None = None,
                 user: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"argv": argv}
    entries = env_list(env)
    if entries:
        body["env"] = entries
    if cwd:
        body["cwd"] = cwd
    if user:
        body["user"] = user
    return body


def exec_run(box: str, argv: list[str], env: Any = None, cwd: str | None = None,
             user: str | None = None, stdin: str | bytes | None = None,
             timeout: float | None = None,
             max_output_bytes: int | None = None) -> Call[ExecResult]:
    body = exec_request(argv, env, cwd, user)
    if stdin is not None:
        data = to_bytes(stdin)
        try:
            body["stdin"] = data.decode("utf-8")
        except UnicodeDecodeError:
            body["stdin_base64"] = base64.b64encode(data).decode("ascii")
    if timeout is not None:
        body["timeout_ms"] = timeout_ms(timeout)
    if max_output_bytes is not None:
        body["max_output_bytes"] = max_output_bytes
    return Call("POST", f"{_box(box)}/exec", ExecResult.from_json, json=body)


def start_process(box: str, argv: list[str], env: Any = None, cwd: str | None = None,
                  user: str | None = None) -> Call[Process]:
    return Call("POST", f"{_box(box)}/processes", lambda d: from_json(Process, d),
                json=exec_request(argv, env, cwd, user))


def list_processes(box: str) -> Call[List[Process]]:
    return Call("GET", f"{_box(box)}/processes",
                lambda d: list_from_json(Process, d, "processes"))


def signal_process(box: str, process_id: str, signal: int = 15) -> Call[None]:
    return Call("POST", f"{_box(box)}/processes/{seg(process_id)}/signal", _ignore,
                json={"signal": int(signal)})


def list_services(box: str) -> Call[List[Service]]:
    return Call("GET", f"{_box(box)}/services", lambda d: list_from_json(Service, d, "services"))


# --- ports, policy -------------------------------------------------------------------------

def publish_port(box: str, box_port: int, host_port: int,
                 address: str | None = None) -> Call[Port]:
    body: dict[str, Any] = {"host_port": host_port, "box_port": box_port}
    if address is not None:
        body["address"] = address
    return Call("POST", f"{_box(box)}/ports", lambda d: from_json(Port, d), json=body)


def list_ports(box: str) -> Call[List[Port]]:
    return Call("GET", f"{_box(box)}/ports", lambda d: list_from_json(Port, d, "ports"))


def remove_port(box: str, host_port: int, address: str | None = None) -> Call[None]:
    return Call("DELETE", f"{_box(box)}/ports/{int(host_port)}", _ignore,
                params=_params(address=address) or None)


def get_policy(box: str) -> Call[Policy]:
    return Call("GET", f"{_box(box)}/policy", lambda d: from_json(Policy, d))


def set_policy(box: str, policy: str | Mapping[str, Any]) -> Call[Policy]:
    if not isinstance(policy, (str, Mapping)):
        raise InvalidArgumentError("A policy is a preset name (none, allow-all, debian-mirrors, "
                                   "npm, pypi) or a policy dict")
    return Call("PUT", f"{_box(box)}/policy", lambda d: from_json(Policy, d),
                json={"policy": policy if isinstance(policy, str) else dict(policy)})


def policy_log(box: str, after: int = 0, limit: int | None = None) -> Call[PolicyLog]:
    return Call("GET", f"{_box(box)}/policy/log", PolicyLog.from_json,
                params=_params(after=after, limit=limit))


# --- files ---------------------------------------------------------------------------------

def _file_info(data: Any) -> FileInfo:
    return from_json(FileInfo, data)


def _file_list(data: Any) -> FileList:
    entries = FileList(list_from_json(FileInfo, data, "entries"))
    entries.truncated = bool(data.get("truncated"))
    return entries


def file_params(path: str, user: str | None = None, **extra: Any) -> dict[str, str]:
    if not isinstance(path, str) or not path:
        raise InvalidArgumentError(f"A path in the box is a non-empty string, got {path!r}")
    return _params(path=path, user=user, **extra)


def stat_file(box: str, path: str, user: str | None = None) -> Call[FileInfo]:
    return Call("GET", f"{_box(box)}/files/stat", _file_info, params=file_params(path, user))


def list_files(box: str, path: str, depth: int = 1, user: str | None = None) -> Call[FileList]:
    return Call("GET", f"{_box(box)}/files/list", _file_list,
                params=file_params(path, user, depth=depth))


def mkdir(box: str, path: str, mode: int | None = None, parents: bool = True,
          user: str | None = None) -> Call[FileInfo]:
    body: dict[str, Any] = {"path": path, "parents": parents}
    if mode is not None:
        body["mode"] = mode
    if user:
        body["user"] = user
    return Call("POST", f"{_box(box)}/files/mkdir", _file_info, json=body)


def move(box: str, src: str, dst: str, overwrite: bool = False,
         user: str | None = None) -> Call[FileInfo]:
    body: dict[str, Any] = {"from": src, "to": dst, "overwrite": overwrite}
    if user:
        body["user"] = user
    return Call("POST", f"{_box(box)}/files/move", _file_info, json=body)


def remove_file(box: str, path: str, recursive: bool = False,
                user: str | None = None) -> Call[None]:
    return Call("DELETE", f"{_box(box)}/files", _ignore,
                params=file_params(path, user, recursive=True if recursive else None))


def file_mode(mode: int | str | None) -> str | None:
    """``0o644``, ``420`` or ``"0644"`` as the octal text the write endpoint takes."""
    if mode is None:
        return None
    if isinstance(mode, str):
        try:
            mode = int(mode, 8)
        except ValueError as e:
            raise InvalidArgumentError(f"mode {mode!r} is not an octal number") from e
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
        raise InvalidArgumentError(f"mode must be 0 to 0o7777, got {mode!r}")
    return f"{mode:04o}"


def write_params(path: str, mode: int | str | None = None, owner: str | None = None,
                 group: str | None = None, user: str | None = None) -> dict[str, str]:
    return file_params(path, user, mode=file_mode(mode), owner=owner, group=group)


def parse_archive_put(data: Any) -> int:
    if not isinstance(data, dict) or not isinstance(data.get("entries"), int):
        raise ProtocolError(f"hutchd's answer to an archive upload has no 'entries': {data!r}")
    return int(data["entries"])


# --- templates, secrets, keys --------------------------------------------------------------

def list_templates() -> Call[List[Template]]:
    return Call("GET", "/v1/templates", lambda d: list_from_json(Template, d, "templates"))


def create_template(name: str, from_box: str | None = None,
                    from_image: str | None = None, systemd: bool = False) -> Call[Template]:
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"A template needs a non-empty name, got {name!r}")
    if from_box is not None and from_image is not None:
        raise InvalidArgumentError("Give from_box or from_image, not both: a template comes "
                                   "from one source")
    _check_systemd(systemd, from_image is not None)
    body: dict[str, Any] = {"name": name}
    if systemd:
        body["systemd"] = True
    if from_box is not None:
        body["from_box"] = from_box
    if from_image is not None:
        if not isinstance(from_image, str) or not from_image.strip():
            raise InvalidArgumentError(f"from_image is an image reference such as "
                                       f"'python:3.12-slim', got {from_image!r}")
        body["from_image"] = from_image
    return Call("POST", "/v1/templates", lambda d: from_json(Template, d), json=body)


def template_archive_path(name: str) -> str:
    return f"/v1/templates/{seg(name)}/archive"


def _check_systemd(systemd: Any, from_an_image: bool) -> None:
    if not isinstance(systemd, bool):
        raise InvalidArgumentError(f"systemd is True or False, got {systemd!r}")
    if systemd and not from_an_image:
        raise InvalidArgumentError("systemd is for a template from an image (from_image or "
                                   "from_archive): a box's disk keeps the init it has")


def archive_params(image: str | None, systemd: bool = False) -> dict[str, str] | None:
    _check_systemd(systemd, True)
    params: dict[str, str] = {}
    if image is not None:
        if not isinstance(image, str) or not image:
            raise InvalidArgumentError(f"image names one image of the archive (a tag, or "
                                       f"'@N'), got {image!r}")
        params["image"] = image
    if systemd:
        params["systemd"] = "true"
    return params or None


def build_params(name: str, dockerfile: str, *, build_args: Mapping[str, str] | None = None,
                 target: str | None = None, no_cache: bool = False,
                 start_cmd: str | None = None, ready_cmd: str | None = None,
                 network_policy: str | Mapping[str, Any] | None = None,
                 secrets: Sequence[str] | None = None,
                 cpus: int | None = None, memory: int | str | None = None,
                 disk: int | str | None = None,
                 step_timeout: float | None = None) -> dict[str, str]:
    """The query of ``POST /v1/builds`` (the body is the context's tar)."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"A template needs a non-empty name, got {name!r}")
    params: dict[str, str] = {"name": name, "dockerfile": dockerfile}
    if build_args is not None:
        if not isinstance(build_args, Mapping):
            raise InvalidArgumentError("build_args is a dict of ARG names to string values")
        for key, value in build_args.items():
            if not isinstance(key, str) or not key or not isinstance(value, str):
                raise InvalidArgumentError(f"build_args maps names to strings, got "
                                           f"{key!r}: {value!r}")
        params["build_args"] = json.dumps(dict(build_args))
    for key, text in (("target", target), ("start_cmd", start_cmd), ("ready_cmd", ready_cmd)):
        if text is not None:
            if not isinstance(text, str) or not text:
                raise InvalidArgumentError(f"{key} is a non-empty string, got {text!r}")
            params[key] = text
    if no_cache:
        params["no_cache"] = "true"
    if network_policy is not None:
        if isinstance(network_policy, str):
            params["network_policy"] = network_policy
        elif isinstance(network_policy, Mapping):
            params["network_policy"] = json.dumps(dict(network_policy))
        else:
            raise InvalidArgumentError("network_policy is a preset name (none, allow-all, "
                                       "debian-mirrors, npm, pypi) or a policy dict")
    if secrets is not None:
        if isinstance(secrets, str) or any(not isinstance(s, str) or not s or "," in s
                                           for s in secrets):
            raise InvalidArgumentError("secrets is a list of secret names, not a string")
        if secrets:
            params["secrets"] = ",".join(secrets)
    if cpus is not None:
        if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1:
            raise InvalidArgumentError(f"cpus is a positive int, got {cpus!r}")
        params["cpus"] = str(cpus)
    if memory is not None:
        params["memory_mib"] = str(parse_mib(memory, "memory"))
    if disk is not None:
        params["disk_mib"] = str(parse_mib(disk, "disk"))
    if step_timeout is not None:
        if isinstance(step_timeout, bool) or not isinstance(step_timeout, (int, float)) \
                or step_timeout < 1:
            raise InvalidArgumentError(f"step_timeout is seconds (1 or more), got "
                                       f"{step_timeout!r}")
        params["step_timeout_s"] = str(int(step_timeout))
    return params


def remove_template(name: str) -> Call[None]:
    return Call("DELETE", f"/v1/templates/{seg(name)}", _ignore)


def build_line(line: bytes | str) -> tuple[str, Any]:
    """One line of a template build's NDJSON stream: ("progress", text), ("template", Template)
    or raises the error it carries."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise ProtocolError(f"A template build sent a line that is not JSON: {text[:200]!r}") from e
    if not isinstance(obj, dict):
        raise ProtocolError(f"A template build sent {text[:200]!r}, not an object")
    if "progress" in obj:
        return "progress", str(obj["progress"])
    if "template" in obj:
        return "template", from_json(Template, obj["template"])
    if isinstance(obj.get("error"), dict):
        err = obj["error"]
        raise error_for(str(err.get("code") or "internal"),
                        str(err.get("message") or "The template build failed"), status=200)
    raise ProtocolError(f"A template build sent an unknown line: {text[:200]!r}")


def list_registries() -> Call[List[RegistryLogin]]:
    return Call("GET", "/v1/registries",
                lambda d: list_from_json(RegistryLogin, d, "registries"))


def login_registry(registry: str, username: str, password: str) -> Call[RegistryLogin]:
    if not registry or not username or not password:
        raise InvalidArgumentError("registry, username and password are all needed")
    return Call("PUT", f"/v1/registries/{seg(registry)}", lambda d: from_json(RegistryLogin, d),
                json={"username": username, "password": password})


def logout_registry(registry: str) -> Call[None]:
    return Call("DELETE", f"/v1/registries/{seg(registry)}", _ignore)


def list_secrets() -> Call[List[Secret]]:
    return Call("GET", "/v1/secrets", lambda d: list_from_json(Secret, d, "secrets"))


def set_secret(name: str, value: str, domains: Sequence[str], header: str | None = None,
               format: str | None = None) -> Call[Secret]:
    if isinstance(domains, str):
        raise InvalidArgumentError("domains is a list of domain names, not a string")
    body: dict[str, Any] = {"value": value, "domains": list(domains)}
    if header is not None:
        body["header"] = header
    if format is not None:
        body["format"] = format
    return Call("PUT", f"/v1/secrets/{seg(name)}", lambda d: from_json(Secret, d), json=body)


def remove_secret(name: str) -> Call[None]:
    return Call("DELETE", f"/v1/secrets/{seg(name)}", _ignore)


def create_key(name: str, admin: bool = False, max_boxes: int | None = None,
               max_cpus: int | None = None, max_memory: int | str | None = None,
               max_disk: int | str | None = None) -> Call[Key]:
    body: dict[str, Any] = {"name": name, "admin": admin}
    if max_boxes is not None:
        body["max_boxes"] = max_boxes
    if max_cpus is not None:
        body["max_cpus"] = max_cpus
    if max_memory is not None:
        body["max_memory_mib"] = parse_mib(max_memory, "max_memory")
    if max_disk is not None:
        body["max_disk_mib"] = parse_mib(max_disk, "max_disk")
    return Call("POST", "/v1/keys", lambda d: from_json(Key, d), json=body)


def list_keys() -> Call[List[Key]]:
    return Call("GET", "/v1/keys", lambda d: list_from_json(Key, d, "keys"))


def remove_key(name: str) -> Call[None]:
    return Call("DELETE", f"/v1/keys/{seg(name)}", _ignore)


def json_body(value: Any) -> bytes:
    return json.dumps(value).encode("utf-8")
