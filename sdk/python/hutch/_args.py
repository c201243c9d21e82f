"""Checks and conversions of the SDK's arguments into the API's fields (no I/O)."""

from __future__ import annotations

import re
from typing import Mapping, Sequence, Union

from ._errors import InvalidArgumentError

#: A command: a list of strings is the argv; a string is run by ``/bin/sh -c``.
Command = Union[str, Sequence[str]]
#: Environment: ``{"K": "V"}`` or ``["K=V", ...]``.
Env = Union[Mapping[str, str], Sequence[str]]

_SIZE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")
_UNITS = {"": 1, "m": 1, "mb": 1, "mib": 1, "g": 1024, "gb": 1024, "gib": 1024,
          "t": 1024 * 1024, "tb": 1024 * 1024, "tib": 1024 * 1024}


def parse_mib(value: int | str, what: str = "size") -> int:
    """A size in MiB: an int is MiB, a string is ``"512"``, ``"512M"``, ``"2G"`` (or MiB, GiB, T)."""
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{what} must be MiB (an int) or a size like '512M', not a bool")
    if isinstance(value, int):
        if value < 0:
            raise InvalidArgumentError(f"{what} must not be negative, got {value}")
        return value
    if isinstance(value, str):
        m = _SIZE.match(value)
        if m and m.group(2).lower() in _UNITS:
            return int(m.group(1)) * _UNITS[m.group(2).lower()]
        raise InvalidArgumentError(
            f"Invalid {what} {value!r}: use a number of MiB or a size like '512M' or '2G'")
    raise InvalidArgumentError(f"{what} must be MiB (an int) or a string like '2G', "
                               f"not {type(value).__name__}")


def to_argv(cmd: Command) -> list[str]:
    """The argv of a command: a string is ``["/bin/sh", "-c", cmd]``, a list is taken as is."""
    if isinstance(cmd, str):
        if not cmd:
            raise InvalidArgumentError("The command is empty")
        return ["/bin/sh", "-c", cmd]
    if isinstance(cmd, (bytes, bytearray)):
        raise InvalidArgumentError("A command is a string or a list of strings, not bytes")
    argv = list(cmd)
    if not argv:
        raise InvalidArgumentError("The command (argv) is empty")
    for arg in argv:
        if not isinstance(arg, str):
            raise InvalidArgumentError(
                f"Every argument of a command must be a string, got {type(arg).__name__}: {arg!r}")
        if "\0" in arg:
            raise InvalidArgumentError("A command argument contains a NUL byte")
    return argv


def env_list(env: Env | None) -> list[str]:
    """``["K=V", ...]`` from a mapping or a list of ``K=V`` strings, checked."""
    if env is None:
        return []
    if isinstance(env, Mapping):
        items = []
        for key, value in env.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InvalidArgumentError(f"Environment names and values are strings: {key!r}")
            if not key or "=" in key:
                raise InvalidArgumentError(
                    f"Environment variable name {key!r} must be non-empty and have no '='")
            items.append(f"{key}={value}")
    elif isinstance(env, (str, bytes)):
        raise InvalidArgumentError("env is a mapping or a list of 'K=V' strings, not a string")
    else:
        items = list(env)
        for entry in items:
            if not isinstance(entry, str) or "=" not in entry or entry.startswith("="):
                raise InvalidArgumentError(f"Environment entry {entry!r} must have the form K=V")
    for entry in items:
        if "\0" in entry:
            raise InvalidArgumentError("An environment entry contains a NUL byte")
    return items


def env_dict(env: Env | None) -> dict[str, str]:
    """``{"K": "V"}`` from either form (the box environment of ``POST /v1/boxes``)."""
    out: dict[str, str] = {}
    for entry in env_list(env):
        key, _, value = entry.partition("=")
        out[key] = value
    return out


def timeout_ms(timeout: float | None) -> int:
    """Seconds (None: no deadline) as the API's ``timeout_ms`` (0: none)."""
    if timeout is None:
        return 0
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise InvalidArgumentError(f"timeout is a positive number of seconds, got {timeout!r}")
    return max(1, int(round(timeout * 1000)))


def to_bytes(data: str | bytes | bytearray | memoryview) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    return bytes(data)
