"""Turns what httpx, websockets and ssl raise into the SDK's errors (shared by sync and async)."""

from __future__ import annotations

import ssl

import httpx
import websockets.exceptions as wsx

from ._connection import Connection, _PinMismatch
from ._errors import (
    ConnectError,
    HutchError,
    HutchTimeoutError,
    ProtocolError,
    TLSError,
    UnavailableError,
    error_from_response,
)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    # httpcore keeps the original exception as the argument of its own.
    for e in list(seen):
        for arg in getattr(e, "args", ()):
            if isinstance(arg, BaseException) and arg not in seen:
                seen.extend(_chain(arg))
    return seen


def _tls_error(exc: BaseException, conn: Connection) -> HutchError | None:
    for e in _chain(exc):
        if isinstance(e, _PinMismatch):
            return e.error
    for e in _chain(exc):
        if isinstance(e, ssl.SSLCertVerificationError):
            return TLSError(
                f"The certificate of {conn.base_url} is not trusted ({e.verify_message}): "
                f"hutchd's own certificate is self-signed, so pass ca_cert= (HUTCH_CA_CERT, the "
                f"PEM file) or fingerprint= (HUTCH_FINGERPRINT; the host's 'hutch doctor' and "
                f"GET /v1/info print tls.fingerprint_sha256)")
        if isinstance(e, ssl.CertificateError):
            return TLSError(f"TLS with {conn.base_url} failed: {e}")
        if isinstance(e, ssl.SSLError):
            return TLSError(f"TLS with {conn.base_url} failed: {e.reason or e}")
    return None


def _os_reason(exc: BaseException) -> str:
    for e in _chain(exc):
        if isinstance(e, OSError) and e.strerror:
            return e.strerror
    return str(exc) or type(exc).__name__


def map_transport_error(exc: BaseException, conn: Connection) -> HutchError:
    """An httpx or websockets failure (no HTTP answer) as a HutchError."""
    if isinstance(exc, HutchError):
        return exc
    tls = _tls_error(exc, conn)
    if tls is not None:
        return tls
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, ConnectionRefusedError,
                        FileNotFoundError, PermissionError)) or (
            isinstance(exc, OSError) and not isinstance(exc, (TimeoutError, ssl.SSLError))):
        reason = _os_reason(exc)
        if conn.socket:
            hint = ("is hutchd running? Start it with 'hutchd &' or scripts/quickstart.sh; the "
                    "socket is root's (mode 0660)")
            return ConnectError(f"Cannot reach hutchd on {conn.socket}: {reason}; {hint}")
        return ConnectError(f"Cannot reach hutchd at {conn.base_url}: {reason}")
    if isinstance(exc, (httpx.TimeoutException, TimeoutError)):
        return HutchTimeoutError(f"hutchd at {conn.where} did not answer in time ({exc or 'timeout'})")
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.DecodingError)):
        return ProtocolError(f"hutchd at {conn.where} broke the HTTP protocol: {exc}")
    if isinstance(exc, httpx.TransportError):
        return UnavailableError(f"The connection to hutchd at {conn.where} failed: {exc}")
    if isinstance(exc, wsx.InvalidStatus):
        response = exc.response
        headers = {k.lower(): v for k, v in response.headers.raw_items()}
        return error_from_response(response.status_code, bytes(response.body or b""), headers)
    if isinstance(exc, wsx.InvalidHandshake):
        return ProtocolError(f"The WebSocket handshake with hutchd at {conn.where} failed: {exc}")
    if isinstance(exc, wsx.ConnectionClosed):
        return UnavailableError(f"The WebSocket to hutchd at {conn.where} closed: {exc}")
    if isinstance(exc, wsx.WebSocketException):
        return ProtocolError(f"WebSocket error with hutchd at {conn.where}: {exc}")
    return UnavailableError(f"The connection to hutchd at {conn.where} failed: {exc!r}")
