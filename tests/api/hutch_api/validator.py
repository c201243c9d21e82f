"""Checks an API exchange (request + response) against docs/openapi.yaml with openapi-core.

The spec cannot list answers to paths and methods it does not have; hutchd answers those with
404 not_found and 405 unsupported in the error shape, and that is what is checked for them.
Media types openapi-core does not parse (application/x-ndjson) are checked line by line against
the media type's schema with the spec's own JSON Schema dialect (OAS 3.1).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional
from urllib.parse import parse_qs

import yaml
from jsonschema_path import SchemaPath
from openapi_core import OpenAPI
from openapi_core.datatypes import RequestParameters
from openapi_core.templating.paths.exceptions import OperationNotFound, PathNotFound
from openapi_core.templating.paths.finders import APICallPathFinder
from openapi_schema_validator import OAS31Validator
from werkzeug.datastructures import Headers, ImmutableMultiDict

REPO = Path(__file__).resolve().parents[3]
SPEC_PATH = REPO / "docs" / "openapi.yaml"
# The spec's first server: requests are matched by path, whichever transport carried them.
HOST_URL = "http://hutchd"

# The one table of docs/api.md: error code -> HTTP status (405 is `unsupported` for a method).
ERROR_STATUS = {
    "invalid_argument": {400},
    "unauthenticated": {401},
    "permission_denied": {403},
    "not_found": {404},
    "already_exists": {409},
    "failed_precondition": {409},
    "resource_exhausted": {429},
    "cancelled": {499},
    "internal": {500},
    "unsupported": {501, 405},
    "protocol": {502},
    "unavailable": {503},
    "timeout": {504},
}


class SpecMismatch(AssertionError):
    """A response (or a request meant to be valid) that docs/openapi.yaml does not describe."""


class EndpointMissing(SpecMismatch):
    """The spec has this operation and the daemon answers it with its router's 404 (or 405):
    a daemon that does not serve that part of the contract yet. Tests report it as an xfail."""


@dataclasses.dataclass
class Exchange:
    """What was checked: kept so a run can say which operations it exercised."""

    method: str
    path: str
    template: Optional[str]  # the spec's path template, None for paths the spec does not have
    status: int


class _Request:
    """openapi_core.protocols.Request (with path_pattern when the caller knows the template)."""

    def __init__(self, method: str, path: str, query: str, headers: Mapping[str, str],
                 body: Optional[bytes], path_pattern: Optional[str]):
        self.host_url = HOST_URL
        self.path = path
        self.method = method.lower()
        self.body = body
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(parse_qs(query, keep_blank_values=True)),
            header=Headers(dict(headers)),
            cookie=ImmutableMultiDict(),
        )
        self.content_type = str(headers.get("content-type") or headers.get("Content-Type") or "")
        if path_pattern is not None:
            self.path_pattern = path_pattern


class _Response:
    def __init__(self, status: int, headers: Mapping[str, str], body: bytes):
        self.status_code = status
        self.headers = Headers(dict(headers))
        self.data = body
        self.content_type = self.headers.get("content-type", "")


def _lower(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    items = headers.items() if hasattr(headers, "items") else headers
    out: dict[str, str] = {}
    for k, v in items:
        k = k.decode() if isinstance(k, bytes) else k
        v = v.decode("latin-1") if isinstance(v, bytes) else v
        out[k.lower()] = v
    return out


class SpecValidator:
    def __init__(self, spec_path: Path = SPEC_PATH):
        self.spec_path = Path(spec_path)
        with open(self.spec_path) as f:
            self.spec_dict = yaml.safe_load(f)
        self.openapi = OpenAPI.from_dict(self.spec_dict)
        self._schema_path = SchemaPath.from_dict(self.spec_dict)
        self._finder = APICallPathFinder(self._schema_path, base_url=None)
        self._lock = threading.Lock()
        self.exchanges: list[Exchange] = []

    # -- the spec itself ---------------------------------------------------------------------

    def operations(self) -> set[tuple[str, str]]:
        """(METHOD, template) of every operation in the spec."""
        out = set()
        for template, item in self.spec_dict["paths"].items():
            for method in item:
                if method in ("get", "put", "post", "delete", "patch", "head", "options"):
                    out.add((method.upper(), template))
        return out

    def schema(self, name: str) -> dict:
        return self.spec_dict["components"]["schemas"][name]

    def check_schema(self, name: str, instance: Any) -> None:
        """Validates `instance` against components/schemas/NAME (refs resolved in the spec)."""
        self._check(self._component_ref(name), instance, f"#/components/schemas/{name}")

    def _component_ref(self, name: str) -> dict:
        return {"$ref": f"#/components/schemas/{name}"}

    def _check(self, schema: dict, instance: Any, what: str) -> None:
        # Resolve refs against the whole document: wrap the schema in it.
        root = dict(self.spec_dict)
        root = {**root, **schema}
        validator = OAS31Validator(root)
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
        if errors:
            detail = "; ".join(
                f"at {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
                for e in errors[:5])
            raise SpecMismatch(f"{what}: {detail}\ninstance: {_short(instance)}")

    def find_template(self, method: str, path: str) -> Optional[str]:
        """The spec's template for METHOD PATH; None for a path the spec does not have.

        Raises OperationNotFound for a path it has without that method."""
        try:
            found = self._finder.find(method.lower(), HOST_URL + path)
        except PathNotFound:
            return None
        return found.path.parts[-1] if hasattr(found.path, "parts") else str(found.path)

    # -- exchanges ---------------------------------------------------------------------------

    def validate_request(self, method: str, path: str, *, query: str = "",
                         headers: Mapping[str, str] | None = None, body: bytes | None = None,
                         template: str | None = None) -> None:
        """For requests a test means to be valid: they must be what the spec allows."""
        req = _Request(method, path, query, _lower(headers or {}), body, template)
        result = self.openapi.unmarshal_request(req)
        if result.errors:
            raise SpecMismatch(f"request {method} {path}: " + "; ".join(
                _describe(e) for e in result.errors))

    def validate(self, method: str, path: str, status: int, headers: Mapping[str, str] | Any,
                 body: bytes, *, query: str = "", request_headers: Mapping[str, str] | None = None,
                 request_body: bytes | None = None, template: str | None = None) -> Exchange:
        """Checks one response; raises SpecMismatch when the spec does not describe it."""
        headers = _lower(headers)
        req = _Request(method, path, query, _lower(request_headers or {}), request_body, template)
        where = f"{method} {path}{'?' + query if query else ''} -> {status}"
        try:
            found_template = self.find_template(method, path)
        except OperationNotFound:
            self._check_unrouted(where, status, headers, body, 405, "unsupported")
            return self._record(method, path, None, status)
        if found_template is None:
            self._check_unrouted(where, status, headers, body, 404, "not_found")
            return self._record(method, path, None, status)
        if status in (404, 405) and _router_refusal(body):
            self._record(method, path, None, status)
            raise EndpointMissing(f"{where}: hutchd does not serve {method} {found_template} "
                                  f"(it answered {_short(body)})")
        if template is not None and template != found_template:
            raise SpecMismatch(f"{where}: the path is {found_template} in the spec, not {template}")

        content_type = headers.get("content-type", "").split(";")[0].strip()
        if content_type == "application/x-ndjson":
            self._check_ndjson(where, method, found_template, status, body)
        else:
            result = self.openapi.unmarshal_response(req, _Response(status, headers, body))
            if result.errors:
                raise SpecMismatch(where + ": " + "; ".join(_describe(e) for e in result.errors)
                                   + f"\nbody: {_short(body)}")
        if status >= 400:
            self._check_error_body(where, status, content_type, body)
        return self._record(method, path, found_template, status)

    def _record(self, method: str, path: str, template: Optional[str], status: int) -> Exchange:
        ex = Exchange(method.upper(), path, template, status)
        with self._lock:
            self.exchanges.append(ex)
        return ex

    def _check_error_body(self, where: str, status: int, content_type: str, body: bytes) -> None:
        """Every error is the one shape, and its code goes with its status (docs/api.md)."""
        if content_type != "application/json":
            raise SpecMismatch(f"{where}: an error answer must be application/json, not "
                               f"{content_type!r}: {_short(body)}")
        try:
            doc = json.loads(body)
        except ValueError as e:
            raise SpecMismatch(f"{where}: error body is not JSON ({e}): {_short(body)}")
        self._check(self._component_ref("Error"), doc, where)
        code = doc["error"]["code"]
        if status not in ERROR_STATUS[code]:
            raise SpecMismatch(f"{where}: code {code} goes with HTTP "
                               f"{sorted(ERROR_STATUS[code])}, not {status}")

    def _check_unrouted(self, where: str, status: int, headers: dict, body: bytes,
                        want_status: int, want_code: str) -> None:
        if status in (401, 429):
            # Authentication comes before routing on TCP.
            self._check_error_body(where, status, headers.get("content-type", "").split(";")[0],
                                   body)
            return
        if status == 404 and want_status == 405 and _router_refusal(body):
            raise EndpointMissing(f"{where}: hutchd has no route for this path at all")
        if status != want_status:
            raise SpecMismatch(f"{where}: the spec has no such "
                               f"{'path' if want_status == 404 else 'method'}: hutchd should "
                               f"answer {want_status} {want_code}, or the spec lacks it")
        self._check_error_body(where, status, headers.get("content-type", "").split(";")[0], body)
        code = json.loads(body)["error"]["code"]
        if code != want_code:
            raise SpecMismatch(f"{where}: code {code}, expected {want_code}")

    def _check_ndjson(self, where: str, method: str, template: str, status: int,
                      body: bytes) -> None:
        op = self.spec_dict["paths"][template][method.lower()]
        response = op["responses"].get(str(status))
        if response is None:
            raise SpecMismatch(f"{where}: status {status} is not in the spec")
        if "$ref" in response:
            response = self.spec_dict["components"]["responses"][response["$ref"].split("/")[-1]]
        media = response.get("content", {}).get("application/x-ndjson")
        if media is None:
            raise SpecMismatch(f"{where}: the spec has no application/x-ndjson for {status}")
        lines = [line for line in body.split(b"\n") if line.strip()]
        if not lines:
            raise SpecMismatch(f"{where}: empty NDJSON stream")
        for i, line in enumerate(lines):
            try:
                doc = json.loads(line)
            except ValueError as e:
                raise SpecMismatch(f"{where}: NDJSON line {i + 1} is not JSON ({e}): "
                                   f"{_short(line)}")
            self._check(media["schema"], doc, f"{where} line {i + 1}")

    # -- coverage ----------------------------------------------------------------------------

    def covered(self) -> dict[tuple[str, str], set[int]]:
        out: dict[tuple[str, str], set[int]] = {}
        with self._lock:
            for ex in self.exchanges:
                if ex.template is not None:
                    out.setdefault((ex.method, ex.template), set()).add(ex.status)
        return out


def _router_refusal(body: bytes) -> bool:
    """hutchd's router answers "No API endpoint PATH" (404) and "Method M is not allowed on
    PATH" (405) for what it has no route for."""
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(message, str) and (message.startswith("No API endpoint ")
                                         or (message.startswith("Method ")
                                             and " is not allowed on " in message))


def _describe(error: Exception) -> str:
    """The error and, down its cause chain, the JSON Schema errors that say what is wrong."""
    parts = [str(error).split(" not valid for schema")[0][:200]]
    seen = set()
    e: Optional[BaseException] = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for se in getattr(e, "schema_errors", None) or []:
            path = "/".join(map(str, getattr(se, "absolute_path", []))) or "(root)"
            parts.append(f"at {path}: {getattr(se, 'message', se)}")
        e = e.__cause__ or e.__context__
    return "; ".join(parts)


def _short(value: Any, limit: int = 600) -> str:
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "replace")
    elif not isinstance(value, str):
        value = json.dumps(value)
    return value if len(value) <= limit else value[:limit] + "..."
