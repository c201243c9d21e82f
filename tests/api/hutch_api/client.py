"""httpx clients for hutchd whose every response is checked against docs/openapi.yaml.

ValidatingTransport wraps the real transport (unix socket or TCP): it reads each response in
full, validates it with SpecValidator and raises SpecMismatch (an AssertionError) when the spec
does not describe it, so that any test using such a client fails on drift. 101 answers (the
upgraded exec) are validated on their status and headers and handed back unread, with the
connection in `response.extensions["network_stream"]`.
"""

from __future__ import annotations

from typing import Optional

import httpx

from .validator import SpecValidator


class ValidatingTransport(httpx.BaseTransport):
    def __init__(self, inner: httpx.BaseTransport, validator: SpecValidator):
        self.inner = inner
        self.validator = validator

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if response.status_code == 101:
            body = b""
        else:
            try:
                body = response.read()
            finally:
                response.close()
        request_body = request.content if not isinstance(request.stream, httpx.SyncByteStream) \
            or request.stream.__class__.__name__ == "ByteStream" else None
        self.validator.validate(
            request.method,
            request.url.path,
            response.status_code,
            response.headers.multi_items(),
            body,
            query=request.url.query.decode() if isinstance(request.url.query, bytes)
            else str(request.url.query),
            request_headers=dict(request.headers),
            request_body=request_body,
        )
        return response

    def close(self) -> None:
        self.inner.close()


def validating_hook(validator: SpecValidator):
    """An httpx response event hook doing the same, for clients built elsewhere."""

    def hook(response: httpx.Response) -> None:
        if response.status_code != 101:
            response.read()
        req = response.request
        validator.validate(req.method, req.url.path, response.status_code,
                           response.headers.multi_items(),
                           b"" if response.status_code == 101 else response.content,
                           query=req.url.query.decode(), request_headers=dict(req.headers))

    return hook


def unix_client(socket_path: str, validator: SpecValidator, *, timeout: float = 300.0,
                headers: Optional[dict] = None) -> httpx.Client:
    inner = httpx.HTTPTransport(uds=socket_path)
    return httpx.Client(transport=ValidatingTransport(inner, validator), base_url="http://hutchd",
                        timeout=timeout, headers=headers or {})


def tcp_client(base_url: str, validator: SpecValidator, *, key: Optional[str] = None,
               key_header: str = "bearer", verify=True, timeout: float = 300.0,
               local_address: Optional[str] = None) -> httpx.Client:
    """A client of a TCP listener. key_header: "bearer" (Authorization) or "x-api-key"."""
    headers = {}
    if key is not None:
        if key_header == "bearer":
            headers["Authorization"] = f"Bearer {key}"
        else:
            headers["X-API-Key"] = key
    inner = httpx.HTTPTransport(verify=verify, local_address=local_address)
    return httpx.Client(transport=ValidatingTransport(inner, validator), base_url=base_url,
                        timeout=timeout, headers=headers)
