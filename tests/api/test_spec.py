"""docs/openapi.yaml itself, and the validator that reads it: no hutchd needed."""

from __future__ import annotations

import json
import re

import pytest
from openapi_spec_validator import validate as validate_spec
from openapi_spec_validator.readers import read_from_filename

from hutch_api.validator import ERROR_STATUS, REPO, SPEC_PATH, SpecMismatch, SpecValidator

STATUS_RESPONSE = {
    "400": "BadRequest", "401": "Unauthenticated", "403": "PermissionDenied", "404": "NotFound",
    "409": "Conflict", "429": "TooManyRequests", "499": "Cancelled", "500": "Internal",
    "501": "Unsupported", "502": "Protocol", "503": "Unavailable", "504": "Timeout",
}
METHODS = ("get", "put", "post", "delete", "patch")


@pytest.fixture(scope="module")
def spec() -> dict:
    return SpecValidator().spec_dict


def test_spec_is_valid_openapi_3_1():
    doc, _ = read_from_filename(str(SPEC_PATH))
    assert doc["openapi"].startswith("3.1.")
    validate_spec(doc)  # raises on any violation of the OpenAPI 3.1 schema


def operations(spec):
    for template, item in spec["paths"].items():
        for method in METHODS:
            if method in item:
                yield method, template, item[method]


def resolve(spec, node):
    while isinstance(node, dict) and "$ref" in node:
        parts = node["$ref"].lstrip("#/").split("/")
        node = spec
        for p in parts:
            node = node[p]
    return node


def test_operation_ids_are_unique(spec):
    ids = [op.get("operationId") for _, _, op in operations(spec)]
    assert None not in ids
    assert len(ids) == len(set(ids))


def test_every_error_status_uses_the_response_of_its_code(spec):
    for method, template, op in operations(spec):
        for status, response in op["responses"].items():
            if int(status) >= 400:
                want = STATUS_RESPONSE[status]
                assert response == {"$ref": f"#/components/responses/{want}"}, \
                    f"{method.upper()} {template} {status}"
        # Every operation can meet a bad request, a missing key, the rate limit, a bug.
        for status in ("400", "401", "429", "500"):
            assert status in op["responses"], f"{method.upper()} {template} lacks {status}"


def test_error_codes_are_the_closed_set_of_the_server():
    source = (REPO / "src" / "base" / "error.cc").read_text()
    server_codes = set(re.findall(r'case Errc::k\w+: return "(\w+)";', source))
    spec_codes = set(SpecValidator().schema("ErrorCode")["enum"])
    assert server_codes == spec_codes == set(ERROR_STATUS)


def test_error_statuses_match_the_servers_table():
    """src/api/error_mapping.cc's table says the HTTP status of each code."""
    table = (REPO / "src" / "api" / "error_mapping.cc").read_text()
    rows = dict(re.findall(r"\{Errc::k(\w+), (\d+), \d+\}", table))
    names = {re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower(): int(v) for k, v in rows.items()}
    for code, status in names.items():
        assert status in ERROR_STATUS[code], f"{code}: server {status}, spec {ERROR_STATUS[code]}"
    missing = set(ERROR_STATUS) - set(names)
    if missing:
        pytest.xfail(f"src/api/error_mapping.cc has no row for {sorted(missing)} yet "
                     "(they map to 500 there)")


def test_request_bodies_refuse_unknown_fields(spec):
    def closed(schema, where):
        schema = resolve(spec, schema)
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in schema.get(key, []):
                sub = resolve(spec, sub)
                if sub.get("type") == "object" or "properties" in sub:
                    closed(sub, where)
        if schema.get("type") == "object":
            assert schema.get("additionalProperties") is False, where
    for method, template, op in operations(spec):
        body = op.get("requestBody")
        if body and "application/json" in body["content"]:
            closed(body["content"]["application/json"]["schema"], f"{method} {template}")


def test_response_objects_list_their_required_fields(spec):
    def check(schema, where, seen):
        schema = resolve(spec, schema)
        if id(schema) in seen:
            return
        seen.add(id(schema))
        if schema.get("type") == "object" and schema.get("properties"):
            alternatives = [resolve(spec, sub) for sub in schema.get("oneOf", [])]
            assert "required" in schema or (alternatives and all(
                a.get("required") for a in alternatives)), \
                f"{where}: an object without required fields"
            assert schema.get("additionalProperties") is False, f"{where}: open object"
            for name, sub in schema["properties"].items():
                check(sub, f"{where}.{name}", seen)
        for key in ("items",):
            if key in schema:
                check(schema[key], where + "[]", seen)
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in schema.get(key, []):
                check(sub, where, seen)
    for method, template, op in operations(spec):
        if template == "/v1/openapi.json":
            continue  # an OpenAPI document: open by nature
        for status, response in op["responses"].items():
            response = resolve(spec, response)
            for media, content in response.get("content", {}).items():
                if "json" in media:
                    check(content["schema"], f"{method} {template} {status}", set())


def test_security_schemes(spec):
    schemes = spec["components"]["securitySchemes"]
    assert schemes["bearer"] == {**schemes["bearer"], "type": "http", "scheme": "bearer"}
    assert schemes["apiKey"]["in"] == "header" and schemes["apiKey"]["name"] == "X-API-Key"


def test_streams_and_binary_media_types(spec):
    paths = spec["paths"]
    assert "application/x-ndjson" in paths["/v1/templates"]["post"]["responses"]["200"]["content"]
    files = paths["/v1/boxes/{box}/files"]
    assert "application/octet-stream" in files["get"]["responses"]["200"]["content"]
    assert "application/octet-stream" in files["put"]["requestBody"]["content"]
    archive = paths["/v1/boxes/{box}/files/archive"]
    assert "application/x-tar" in archive["get"]["responses"]["200"]["content"]
    assert "application/x-tar" in archive["put"]["requestBody"]["content"]
    assert "101" in paths["/v1/boxes/{box}/exec"]["post"]["responses"]
    assert "101" in paths["/v1/boxes/{box}/exec/ws"]["get"]["responses"]


# -- the validator must fail on drift ---------------------------------------------------------

JSON = {"Content-Type": "application/json"}
BOX = {"id": "3f2a9c01d4e5", "name": "dev", "template": "base", "cpus": 1, "memory_mib": 512,
       "disk_mib": 0, "max_exec_ms": 0, "idle_pause_ms": -1, "expires_at": 0, "on_timeout": "",
       "state": "running", "reason": "", "accel": "kvm", "pid": 12345,
       "boot": "cold boot: no snapshot", "secrets": [], "created_at": 1764400000,
       "updated_at": 1764400004}


def err(code, message="Something"):
    return json.dumps({"error": {"code": code, "message": message}}).encode()


@pytest.fixture(scope="module")
def v() -> SpecValidator:
    return SpecValidator()


def test_validator_accepts_what_the_server_sends(v):
    v.validate("GET", "/v1/boxes/dev", 200, JSON, json.dumps(BOX).encode())
    v.validate("GET", "/v1/boxes/nope", 404, JSON, err("not_found", "No box named nope"))
    v.validate("PATCH", "/v1/boxes/dev", 405, JSON, err("unsupported", "Method PATCH ..."))
    v.validate("GET", "/v1/nothing", 404, JSON, err("not_found", "No API endpoint /v1/nothing"))


@pytest.mark.parametrize("change", [
    lambda b: b.pop("boot"),                       # a field the spec requires is missing
    lambda b: b.update(ports=[]),                  # a field the spec does not have
    lambda b: b.update(cpus="1"),                  # a wrong type
    lambda b: b.update(state="exploded"),          # a value outside the enum
    lambda b: b.update(id="XYZ"),                  # a bad id
])
def test_validator_refuses_a_drifted_box(v, change):
    body = dict(BOX)
    change(body)
    with pytest.raises(SpecMismatch):
        v.validate("GET", "/v1/boxes/dev", 200, JSON, json.dumps(body).encode())


@pytest.mark.parametrize("status,body,headers", [
    (409, err("not_found"), JSON),                 # the code does not go with the status
    (404, b'{"message": "no"}', JSON),             # not the error shape
    (404, err("not_found"), {"Content-Type": "text/plain"}),
    (418, err("internal"), JSON),                  # a status the operation does not have
    (200, b"not json", JSON),
])
def test_validator_refuses_bad_answers(v, status, body, headers):
    with pytest.raises(SpecMismatch):
        v.validate("GET", "/v1/boxes/dev", status, headers, body)


def test_validator_refuses_answers_to_paths_the_spec_lacks(v):
    with pytest.raises(SpecMismatch):
        v.validate("GET", "/v1/nothing", 200, JSON, b"{}")
    with pytest.raises(SpecMismatch):
        v.validate("PATCH", "/v1/boxes/dev", 404, JSON, err("not_found"))


def test_validator_checks_the_101_of_an_upgrade(v):
    v.validate("POST", "/v1/boxes/dev/exec", 101,
               {"Connection": "Upgrade", "Upgrade": "hutch-exec"}, b"")
    with pytest.raises(SpecMismatch):
        v.validate("POST", "/v1/boxes/dev/exec", 101, {"Connection": "Upgrade"}, b"")
    with pytest.raises(SpecMismatch):
        v.validate("GET", "/v1/boxes", 101, {"Connection": "Upgrade", "Upgrade": "x"}, b"")


def test_validator_checks_ndjson_line_by_line(v):
    nd = {"Content-Type": "application/x-ndjson"}
    template = {"name": "t", "source": "recipe", "source_box": "", "dir": "/x", "image_key": "k",
                "kernel_version": "6.1", "created": "2026-01-01", "disk_bytes": 1, "used_by": []}
    good = b'{"progress": "step 1"}\n{"progress": "step 2"}\n' + \
        json.dumps({"template": template}).encode() + b"\n"
    v.validate("POST", "/v1/templates", 200, nd, good)
    v.validate("POST", "/v1/templates", 200, nd, b'{"progress": "x"}\n' + err("not_found") + b"\n")
    with pytest.raises(SpecMismatch):
        v.validate("POST", "/v1/templates", 200, nd, b'{"progress": 3}\n')
    with pytest.raises(SpecMismatch):
        v.validate("POST", "/v1/templates", 200, nd, b'{"progress": "x"}\nnot json\n')


def test_validator_checks_binary_and_header_answers(v):
    headers = {"Content-Type": "application/octet-stream", "Content-Length": "3",
               "X-Hutch-File-Mode": "420", "X-Hutch-File-Mtime-Ns": "1764400000123456789"}
    v.validate("GET", "/v1/boxes/dev/files", 200, headers, b"abc", query="path=/etc/hostname")
    bad = dict(headers)
    del bad["X-Hutch-File-Mode"]
    with pytest.raises(SpecMismatch):
        v.validate("GET", "/v1/boxes/dev/files", 200, bad, b"abc", query="path=/etc/hostname")


def test_validator_checks_requests_meant_to_be_valid(v):
    v.validate_request("POST", "/v1/boxes", headers=JSON, body=b'{"name": "dev", "cpus": 2}')
    with pytest.raises(SpecMismatch):
        v.validate_request("POST", "/v1/boxes", headers=JSON, body=b'{"nmae": "dev"}')
    with pytest.raises(SpecMismatch):
        v.validate_request("POST", "/v1/boxes", headers=JSON, body=b'{"cpus": 0}')
