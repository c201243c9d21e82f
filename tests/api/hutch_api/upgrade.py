"""The upgraded exec (POST /v1/boxes/{box}/exec, Upgrade: hutch-exec) through a validating
httpx client: the 101 is validated by the transport, then frames flow on the raw stream."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

import httpx

from . import frames


@dataclass
class UpgradedResult:
    status: int
    stdout: bytes = b""
    stderr: bytes = b""
    exit: Optional[dict] = None
    error: Optional[dict] = None
    body: Optional[dict] = None  # the JSON error answer when there was no upgrade
    other_frames: list = field(default_factory=list)


UPGRADE_HEADERS = {"Connection": "Upgrade", "Upgrade": "hutch-exec"}


def exec_upgraded(client: httpx.Client, box: str, request: dict, stdin: bytes = b"",
                  timeout: float = 120.0) -> UpgradedResult:
    with client.stream("POST", f"/v1/boxes/{box}/exec", headers=UPGRADE_HEADERS,
                       content=json.dumps(request).encode()) as response:
        if response.status_code != 101:
            response.read()
            return UpgradedResult(response.status_code, body=response.json())
        stream = response.extensions["network_stream"]
        try:
            if stdin:
                stream.write(frames.encode(frames.STDIN, stdin))
            if request.get("stdin"):
                stream.write(frames.encode(frames.STDIN_EOF))
            result = UpgradedResult(101)
            decoder = frames.Decoder()
            while True:
                frame = decoder.next()
                if frame is None:
                    data = stream.read(65536, timeout=timeout)
                    if not data:
                        break
                    decoder.feed(data)
                    continue
                if frame.type == frames.STDOUT:
                    result.stdout += frame.payload
                elif frame.type == frames.STDERR:
                    result.stderr += frame.payload
                elif frame.type == frames.EXIT:
                    result.exit = frame.json()
                elif frame.type == frames.ERROR:
                    result.error = frame.json()
                else:
                    result.other_frames.append(frame)
            return result
        finally:
            stream.close()
