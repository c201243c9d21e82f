"""Where hutchd is and how to talk to it: host or unix socket, key, TLS and certificate pinning.

No I/O here besides loading a CA file; the transports (sync and async) take a
:class:`Connection` and build their httpx / websockets objects from it.
"""

from __future__ import annotations

import hashlib
import os
import re
import ssl
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlsplit

from ._errors import FingerprintMismatchError, InvalidArgumentError

DEFAULT_SOCKET = "/run/hutch/hutchd.sock"
_UNIX_BASE = "http://hutchd"


def normalize_fingerprint(value: str) -> str:
    """``AB:CD:...`` (any case, colons optional, an optional ``sha256:`` prefix) -> 64 hex digits."""
    text = value.strip().lower()
    if text.startswith("sha256:") or text.startswith("sha256="):
        text = text[7:]
    text = text.replace(":", "").replace(" ", "")
    if not re.fullmatch(r"[0-9a-f]{64}", text):
        raise InvalidArgumentError(
            f"fingerprint {value!r} is not a SHA-256 fingerprint: give 32 colon-separated hex "
            f"bytes as GET /v1/info prints them (tls.fingerprint_sha256)")
    return text


def format_fingerprint(hex64: str) -> str:
    return ":".join(hex64[i:i + 2] for i in range(0, len(hex64), 2)).upper()


def certificate_fingerprint(der: bytes) -> str:
    """The SHA-256 of a DER certificate as colon-separated upper-case hex."""
    return format_fingerprint(hashlib.sha256(der).hexdigest())


def _check_pin(ssl_obj: ssl.SSLObject | ssl.SSLSocket) -> None:
    expected = getattr(ssl_obj.context, "hutch_pin", None)
    if expected is None:
        return
    der = ssl_obj.getpeercert(binary_form=True)
    actual = hashlib.sha256(der).hexdigest() if der else ""
    if actual != expected:
        raise _PinMismatch(format_fingerprint(expected),
                           format_fingerprint(actual) if actual else "(no certificate)")


class _PinMismatch(ssl.SSLError):
    """Raised inside the TLS handshake; mapped to FingerprintMismatchError by the transports."""

    def __init__(self, expected: str, actual: str) -> None:
        super().__init__(f"certificate fingerprint {actual} is not the pinned {expected}")
        self.error = FingerprintMismatchError(expected, actual)


class _PinnedSSLObject(ssl.SSLObject):
    # anyio (httpx async) and asyncio (websockets) drive an SSLObject: the check runs when the
    # handshake completes, before a byte of the request (and its key) is sent.
    def do_handshake(self) -> None:
        super().do_handshake()
        _check_pin(self)


class _PinnedSSLSocket(ssl.SSLSocket):
    # httpcore's sync backend and websockets' sync client wrap a blocking socket.
    def do_handshake(self, block: bool = False) -> None:
        super().do_handshake(block)
        _check_pin(self)


class _PinnedContext(ssl.SSLContext):
    hutch_pin: str | None = None


def make_ssl_context(ca_cert: str | None, fingerprint: str | None) -> ssl.SSLContext:
    """The TLS client context: system CAs, or only ``ca_cert``, and/or a pinned certificate.

    With a fingerprint and no CA file the chain and host name are not checked (hutchd's own
    certificate is self-signed): the pin is the check, made on every handshake.
    """
    if fingerprint is None:
        ctx = ssl.create_default_context(cafile=ca_cert)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        return ctx
    pinned = _PinnedContext(ssl.PROTOCOL_TLS_CLIENT)
    pinned.minimum_version = ssl.TLSVersion.TLSv1_2
    if ca_cert:
        pinned.load_verify_locations(cafile=ca_cert)
        pinned.check_hostname = True
        pinned.verify_mode = ssl.CERT_REQUIRED
    else:
        pinned.check_hostname = False
        pinned.verify_mode = ssl.CERT_NONE
    pinned.hutch_pin = normalize_fingerprint(fingerprint)
    pinned.sslobject_class = _PinnedSSLObject
    pinned.sslsocket_class = _PinnedSSLSocket
    return pinned



@dataclass
class Connection:
    """Resolved connection settings (see :func:`resolve`)."""

    #: ``https://HOST:PORT``, ``http://127.0.0.1:PORT`` or ``http://hutchd`` on the unix socket.
    base_url: str
    #: The unix socket path, or None on TCP.
    socket: str | None = None
    api_key: str | None = None
    ssl_context: ssl.SSLContext | None = None
    #: Seconds to wait for an HTTP connection; answers themselves have no deadline (long
    #: operations).
    connect_timeout: float = 10.0
    #: Deadline of each request in seconds, and of a WebSocket's whole opening handshake
    #: (None: none; hutchd may be slow to answer an upgrade while it is busy).
    timeout: float | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def ws_base(self) -> str:
        if self.base_url.startswith("https://"):
            return "wss://" + self.base_url[len("https://"):]
        return "ws://" + self.base_url[len("http://"):]

    @property
    def where(self) -> str:
        """For messages: the socket path or the URL."""
        return self.socket if self.socket else self.base_url

    def auth_headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers


def _parse_host(host: str) -> str:
    text = host.strip()
    if "://" not in text:
        text = "https://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgumentError(
            f"host {host!r} is not https://HOST:PORT or http://127.0.0.1:PORT")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidArgumentError(f"host {host!r} has a path; give only https://HOST:PORT")
    if parts.username or parts.password:
        raise InvalidArgumentError("host must not carry credentials; use api_key")
    return f"{parts.scheme}://{parts.netloc}"


def resolve(host: str | None = None, api_key: str | None = None, socket: str | None = None,
            ca_cert: str | None = None, fingerprint: str | None = None,
            timeout: float | None = None, connect_timeout: float = 10.0,
            env: Mapping[str, str] | None = None) -> Connection:
    """Arguments first, then the environment.

    ``host`` (or ``HUTCH_HOST`` when no ``socket`` is given) selects TCP; otherwise the unix
    socket ``socket``, ``HUTCH_SOCKET`` or /run/hutch/hutchd.sock. The key is ``api_key`` or
    ``HUTCH_API_KEY``; the TLS options are ``ca_cert``/``HUTCH_CA_CERT`` and
    ``fingerprint``/``HUTCH_FINGERPRINT``.
    """
    environ: Mapping[str, Any] = os.environ if env is None else env
    if host is not None and socket is not None:
        raise InvalidArgumentError("Give host or socket, not both")
    if host is None and socket is None:
        host = environ.get("HUTCH_HOST") or None
    key = api_key if api_key is not None else (environ.get("HUTCH_API_KEY") or None)
    if host is None:
        if ca_cert is not None or fingerprint is not None:
            raise InvalidArgumentError("ca_cert and fingerprint are for https:// hosts, not the "
                                       "unix socket")
        path = socket or environ.get("HUTCH_SOCKET") or DEFAULT_SOCKET
        return Connection(base_url=_UNIX_BASE, socket=os.fspath(path), api_key=key,
                          timeout=timeout, connect_timeout=connect_timeout)
    base = _parse_host(host)
    if base.startswith("http://"):
        if ca_cert is not None or fingerprint is not None:
            raise InvalidArgumentError(f"ca_cert and fingerprint need an https:// host, not "
                                       f"{base}")
        return Connection(base_url=base, api_key=key, timeout=timeout,
                          connect_timeout=connect_timeout)
    ca = ca_cert if ca_cert is not None else (environ.get("HUTCH_CA_CERT") or None)
    pin = fingerprint if fingerprint is not None else (environ.get("HUTCH_FINGERPRINT") or None)
    if pin is not None:
        normalize_fingerprint(pin)  # refuse a malformed pin now, not at the first request
    if ca is not None and not os.path.isfile(ca):
        raise InvalidArgumentError(f"ca_cert {ca!r} is not a file (a PEM certificate)")
    return Connection(base_url=base, api_key=key, ssl_context=make_ssl_context(ca, pin),
                      timeout=timeout, connect_timeout=connect_timeout)


__all__ = ["Connection", "resolve", "make_ssl_context", "normalize_fingerprint",
           "certificate_fingerprint", "DEFAULT_SOCKET"]
