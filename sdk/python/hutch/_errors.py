"""Errors: one class per API error code (docs/api.md, "Errors").

Every error the API answers is ``{"error": {"code", "message"}}`` with an HTTP status from one
table; each code has a class here, all subclasses of :class:`HutchError`. Errors that happen on
this side (the daemon cannot be reached, TLS fails) are subclasses too, so ``except HutchError``
catches everything this SDK raises on purpose.
"""

from __future__ import annotations

import builtins
import json
from typing import Any, Mapping


class HutchError(Exception):
    """Base of every error the SDK raises.

    ``code`` is the API's error code (``"not_found"``...), ``status`` the HTTP status (0 when no
    answer came, e.g. the daemon could not be reached), ``message`` what the server said.
    """

    code: str = "internal"

    def __init__(self, message: str, *, code: str | None = None, status: int = 0,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.status = status
        #: Seconds to wait, from ``Retry-After`` (429 answers); None otherwise.
        self.retry_after = retry_after

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status}, message={self.message!r})"


class InvalidArgumentError(HutchError):
    code = "invalid_argument"


class NotFoundError(HutchError):
    code = "not_found"


class AlreadyExistsError(HutchError):
    code = "already_exists"


class FailedPreconditionError(HutchError):
    code = "failed_precondition"


class UnavailableError(HutchError):
    code = "unavailable"


class HutchTimeoutError(HutchError, builtins.TimeoutError):
    """Code ``timeout``: a deadline passed. Also a builtin ``TimeoutError``."""

    code = "timeout"


class ProtocolError(HutchError):
    """Code ``protocol``: a peer broke the protocol (also: hutchd's answer made no sense)."""

    code = "protocol"


class UnsupportedError(HutchError):
    code = "unsupported"


class HutchCancelledError(HutchError):
    """Code ``cancelled``: the box was removed while the operation ran.

    Not related to ``asyncio.CancelledError`` (hence the prefix).
    """

    code = "cancelled"


class InternalError(HutchError):
    code = "internal"


class UnauthenticatedError(HutchError):
    code = "unauthenticated"


class PermissionDeniedError(HutchError):
    code = "permission_denied"


class ResourceExhaustedError(HutchError):
    code = "resource_exhausted"


class ConnectError(UnavailableError):
    """hutchd could not be reached (no socket, connection refused, DNS). ``status`` is 0."""


class TLSError(HutchError):
    """The TLS handshake with hutchd failed (untrusted certificate, wrong host name...)."""

    code = "tls"


class FingerprintMismatchError(TLSError):
    """The server's certificate is not the one pinned with ``fingerprint``."""

    code = "fingerprint_mismatch"

    def __init__(self, expected: str, actual: str) -> None:
        super().__init__(
            f"The server's certificate has SHA-256 fingerprint {actual}, not the pinned "
            f"{expected}: refusing to talk to it (check HUTCH_FINGERPRINT against "
            f"'hutch doctor' or GET /v1/info on the host)")
        self.expected = expected
        self.actual = actual


ERROR_CLASSES: dict[str, type[HutchError]] = {
    cls.code: cls
    for cls in (InvalidArgumentError, NotFoundError, AlreadyExistsError, FailedPreconditionError,
                UnavailableError, HutchTimeoutError, ProtocolError, UnsupportedError,
                HutchCancelledError, InternalError, UnauthenticatedError, PermissionDeniedError,
                ResourceExhaustedError)
}

# The code an answer without the error shape stands for (docs/api.md's table, read backwards).
_STATUS_CODES: dict[int, str] = {
    400: "invalid_argument",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    405: "unsupported",
    409: "failed_precondition",
    429: "resource_exhausted",
    499: "cancelled",
    500: "internal",
    501: "unsupported",
    502: "protocol",
    503: "unavailable",
    504: "timeout",
}


def error_for(code: str, message: str, *, status: int = 0,
              retry_after: float | None = None) -> HutchError:
    """The error object for an API code; an unknown code gives a plain HutchError with it."""
    cls = ERROR_CLASSES.get(code)
    if cls is None:
        return HutchError(message, code=code or "internal", status=status,
                          retry_after=retry_after)
    return cls(message, status=status, retry_after=retry_after)


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def error_from_response(status: int, body: bytes,
                        headers: Mapping[str, str] | None = None) -> HutchError:
    """Maps an error answer (status >= 400) to its class.

    The body should be ``{"error": {"code", "message"}}``; anything else is mapped by status and
    the message says what came back.
    """
    retry_after = _retry_after(headers)
    parsed: Any = None
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        err = parsed["error"]
        code = err.get("code") if isinstance(err.get("code"), str) else ""
        message = err.get("message") if isinstance(err.get("message"), str) else ""
        if not code:
            code = _STATUS_CODES.get(status, "internal")
        return error_for(code, message or f"hutchd answered HTTP {status}", status=status,
                         retry_after=retry_after)
    text = body[:300].decode("utf-8", "replace").strip()
    code = _STATUS_CODES.get(status, "internal" if status >= 500 else "invalid_argument")
    message = f"hutchd answered HTTP {status}" + (f": {text}" if text else " with no body")
    return error_for(code, message, status=status, retry_after=retry_after)
