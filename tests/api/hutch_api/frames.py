"""The hutch frame (docs/protocol.md): 12-byte header (u32 LE payload length, u8 type, u8 flags,
u16 reserved, u32 LE stream), then the payload. Used on the upgraded exec connection."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

HEADER = struct.Struct("<IBBHI")
MAX_PAYLOAD = 1 << 20

STDIN = 0x12
STDIN_EOF = 0x13
STDOUT = 0x14
STDERR = 0x15
EXIT = 0x16
SIGNAL = 0x17
RESIZE = 0x19
ERROR = 0x7F
EXEC_STREAM = 1


@dataclass
class Frame:
    type: int
    stream: int
    payload: bytes

    def json(self):
        return json.loads(self.payload)


def encode(type_: int, payload: bytes = b"", stream: int = EXEC_STREAM) -> bytes:
    if len(payload) > MAX_PAYLOAD:
        raise ValueError("frame payload too large")
    return HEADER.pack(len(payload), type_, 0, 0, stream) + payload


class Decoder:
    def __init__(self):
        self.buf = b""

    def feed(self, data: bytes) -> None:
        self.buf += data

    def next(self):
        if len(self.buf) < HEADER.size:
            return None
        length, type_, _flags, _reserved, stream = HEADER.unpack_from(self.buf)
        if length > MAX_PAYLOAD:
            raise ValueError(f"frame payload of {length} bytes")
        if len(self.buf) < HEADER.size + length:
            return None
        payload = self.buf[HEADER.size:HEADER.size + length]
        self.buf = self.buf[HEADER.size + length:]
        return Frame(type_, stream, payload)
