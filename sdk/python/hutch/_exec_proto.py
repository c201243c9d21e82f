"""The WebSocket exec protocol (docs/api.md, "Streaming: GET /v1/boxes/{box}/exec/ws"), no I/O.

Binary messages: first byte 0 stdin (client to hutchd), 1 stdout, 2 stderr. Text messages: JSON
control messages, ``started`` first, then exactly one of ``exit`` and ``error``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Union

from ._errors import ProtocolError

SUBPROTOCOL = "hutch.exec.v1"
STDIN, STDOUT, STDERR = 0, 1, 2
#: Stdin is sent in messages of at most this many bytes.
CHUNK = 64 * 1024


@dataclass
class Output:
    stream: int
    data: bytes


@dataclass
class Started:
    pid: int


@dataclass
class Exit:
    exit_code: int | None
    signal: int | None


@dataclass
class Failed:
    code: str
    message: str


Event = Union[Output, Started, Exit, Failed, None]


def request_message(request: dict[str, Any]) -> str:
    return json.dumps(request)


def stdin_messages(data: bytes) -> list[bytes]:
    return [bytes([STDIN]) + data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]


def control(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, **fields})


def parse(message: str | bytes) -> Event:
    """One message from hutchd; None for a control message this SDK does not know (ignored)."""
    if isinstance(message, (bytes, bytearray, memoryview)):
        data = bytes(message)
        if not data or data[0] not in (STDOUT, STDERR):
            raise ProtocolError(f"hutchd sent an exec data message for stream "
                                f"{data[0] if data else '(empty)'}; expected 1 or 2")
        return Output(data[0], data[1:])
    try:
        obj = json.loads(message)
    except ValueError as e:
        raise ProtocolError(f"hutchd sent an exec control message that is not JSON: "
                            f"{message[:200]!r}") from e
    if not isinstance(obj, dict):
        raise ProtocolError(f"hutchd sent an exec control message that is not an object: "
                            f"{message[:200]!r}")
    kind = obj.get("type")
    if kind == "started":
        return Started(int(obj.get("pid") or 0))
    if kind == "exit":
        code, sig = obj.get("exit_code"), obj.get("signal")
        if code is None and sig is None:
            raise ProtocolError(f"An exec exit message has neither exit_code nor signal: {obj}")
        return Exit(code, sig)
    if kind == "error":
        return Failed(str(obj.get("code") or "internal"), str(obj.get("message") or ""))
    return None


#: Start failures that are the command's, not the API call's: the exit code POST .../exec
#: reports for them (no such program, user or cwd: 127; not executable: 126).
START_FAILURES = {"not_found": 127, "permission_denied": 126, "failed_precondition": 126}
