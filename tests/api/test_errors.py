"""The typical errors of every endpoint, over the unix socket and TCP: unknown box, bad JSON,
unknown field, wrong type, box not running, wrong method, unknown path. Each answer is
validated against the spec by the client; the tests check the code the contract promises."""

from __future__ import annotations

import json

import pytest

from conftest import VALIDATOR
from hutch_api.upgrade import UPGRADE_HEADERS

NO_BOX = "no-such-box-9c1e"
JSON = {"Content-Type": "application/json"}

# (method, path with {box}, a valid body, the same with a wrong type, headers)
BODY_OPS = [
    ("POST", "/v1/boxes", None, {"cpus": "2"}, {}),
    ("POST", "/v1/boxes/{box}/fork", {"count": 1}, {"count": "1"}, {}),
    ("POST", "/v1/boxes/{box}/checkpoints", {"name": "cp"}, {"name": 7}, {}),
    ("POST", "/v1/boxes/{box}/rollback", {"checkpoint": "cp"}, {"checkpoint": 7}, {}),
    ("POST", "/v1/boxes/{box}/exec", {"argv": ["true"]}, {"argv": "true"}, UPGRADE_HEADERS),
    ("POST", "/v1/boxes/{box}/exec", {"argv": ["true"]}, {"argv": "true"}, {}),
    ("POST", "/v1/boxes/{box}/ports", {"host_port": 1, "box_port": 1},
     {"host_port": "80", "box_port": 80}, {}),
    ("POST", "/v1/boxes/{box}/processes", {"argv": ["true"]}, {"argv": "true"}, {}),
    ("POST", "/v1/boxes/{box}/processes/p1/signal", {"signal": 15}, {"signal": "15"}, {}),
    ("PUT", "/v1/boxes/{box}/policy", {"policy": "none"}, {"policy": 7}, {}),
    ("POST", "/v1/boxes/{box}/files/mkdir", {"path": "/tmp/x"}, {"path": 7}, {}),
    ("POST", "/v1/boxes/{box}/files/move", {"from": "/tmp/a", "to": "/tmp/b"},
     {"from": 7, "to": "/tmp/b"}, {}),
    ("PUT", "/v1/secrets/API_TEST", None, {"value": 7, "domains": ["api.example.com"]}, {}),
    ("POST", "/v1/templates", None, {"name": 7}, {}),
    ("POST", "/v1/keys", None, {"name": 7}, {}),
]
def op_id(op):
    method, path, _, _, headers = op
    return f"{method} {path}{' (upgrade)' if headers else ''}"


def path_for(path: str, box: str) -> str:
    return path.replace("{box}", box)


def not_json_exec(r):
    """Today's hutchd answers the exec path without Upgrade with 'exec needs an upgraded
    connection' whatever the body: the JSON exec of the contract is not served yet."""
    if r.status_code == 400 and "upgraded connection" in r.json()["error"]["message"]:
        pytest.xfail("hutchd has no JSON exec (POST /v1/boxes/{box}/exec without Upgrade) yet")


def send(api, method, path, headers, content):
    r = api.request(method, path, headers={**JSON, **headers}, content=content)
    if r.status_code == 101:
        r.extensions["network_stream"].close()
    return r


def expect(r, status, code):
    assert r.status_code == status, f"{r.status_code}: {r.text}"
    if status != 101:
        assert r.json()["error"]["code"] == code, r.text


@pytest.mark.parametrize("op", BODY_OPS, ids=op_id)
def test_bad_json_is_invalid_argument(api, box, op):
    method, path, _, _, headers = op
    r = send(api, method, path_for(path, box["name"]), headers, b'{"argv": [')
    if path.endswith("/exec") and not headers:
        not_json_exec(r)
    expect(r, 400, "invalid_argument")


@pytest.mark.parametrize("op", BODY_OPS, ids=op_id)
def test_a_body_that_is_not_an_object_is_invalid_argument(api, box, op):
    method, path, _, _, headers = op
    r = send(api, method, path_for(path, box["name"]), headers, b'["argv"]')
    if path.endswith("/exec") and not headers:
        not_json_exec(r)
    expect(r, 400, "invalid_argument")


@pytest.mark.parametrize("op", BODY_OPS, ids=op_id)
def test_unknown_field_is_invalid_argument(api, box, op):
    method, path, valid, wrong, headers = op
    body = dict(valid if valid is not None else wrong)
    if valid is None:
        body = {}
    body["no_such_field"] = 1
    r = send(api, method, path_for(path, box["name"]), headers, json.dumps(body).encode())
    if path.endswith("/exec") and not headers:
        not_json_exec(r)
    expect(r, 400, "invalid_argument")
    assert "no_such_field" in r.json()["error"]["message"], "the message names the field"


@pytest.mark.parametrize("op", BODY_OPS, ids=op_id)
def test_wrong_type_is_invalid_argument(api, box, op):
    method, path, _, wrong, headers = op
    r = send(api, method, path_for(path, box["name"]), headers, json.dumps(wrong).encode())
    if path.endswith("/exec") and not headers:
        not_json_exec(r)
    expect(r, 400, "invalid_argument")


def box_operations():
    for method, template in sorted(VALIDATOR.operations()):
        if "{box}" in template:
            yield method, template


def fill(template: str, box: str) -> str:
    return (template.replace("{box}", box).replace("{checkpoint}", "cp-none")
            .replace("{host_port}", "8080").replace("{id}", "p-none"))


VALID_BODY = {op[1]: op[2] for op in BODY_OPS if op[2] is not None and op[4] == {}}
QUERY = {"/files": {"path": "/tmp/x"}, "/files/stat": {"path": "/tmp"},
         "/files/list": {"path": "/tmp"}, "/files/archive": {"path": "/tmp"}}


def request_for(api, method, template, box, headers=None):
    path = fill(template, box)
    suffix = template.split("{box}")[1]
    kwargs = {"params": QUERY.get(suffix, {}), "headers": dict(headers or {})}
    if template.endswith("/exec/ws"):
        kwargs["headers"].update({"Upgrade": "websocket", "Connection": "Upgrade",
                                  "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                  "Sec-WebSocket-Version": "13",
                                  "Sec-WebSocket-Protocol": "hutch.exec.v1"})
    if method in ("POST", "PUT"):
        if template in VALID_BODY:
            kwargs["json"] = VALID_BODY[template]
        elif suffix in ("/files", "/files/archive"):
            kwargs["content"] = b""
    r = api.request(method, path, **kwargs)
    if r.status_code == 101:
        r.extensions["network_stream"].close()
    return r


@pytest.mark.parametrize("method,template", list(box_operations()),
                         ids=[f"{m} {t}" for m, t in box_operations()])
def test_unknown_box_is_not_found(api, method, template):
    headers = UPGRADE_HEADERS if template.endswith("/exec") else {}
    r = request_for(api, method, template, NO_BOX, headers)
    expect(r, 404, "not_found")
    assert NO_BOX in r.json()["error"]["message"]


NEEDS_RUNNING = [
    ("POST", "/v1/boxes/{box}/exec"), ("GET", "/v1/boxes/{box}/exec/ws"),
    ("GET", "/v1/boxes/{box}/stats"), ("POST", "/v1/boxes/{box}/fork"),
    ("POST", "/v1/boxes/{box}/checkpoints"), ("POST", "/v1/boxes/{box}/stop"),
    ("POST", "/v1/boxes/{box}/processes"), ("GET", "/v1/boxes/{box}/processes"),
    ("POST", "/v1/boxes/{box}/processes/{id}/signal"), ("GET", "/v1/boxes/{box}/services"),
    ("GET", "/v1/boxes/{box}/files"), ("PUT", "/v1/boxes/{box}/files"),
    ("DELETE", "/v1/boxes/{box}/files"), ("GET", "/v1/boxes/{box}/files/stat"),
    ("GET", "/v1/boxes/{box}/files/list"), ("POST", "/v1/boxes/{box}/files/mkdir"),
    ("POST", "/v1/boxes/{box}/files/move"), ("GET", "/v1/boxes/{box}/files/archive"),
    ("PUT", "/v1/boxes/{box}/files/archive"),
]


@pytest.mark.parametrize("method,template", NEEDS_RUNNING, ids=[f"{m} {t}" for m, t in
                                                                NEEDS_RUNNING])
def test_box_not_running_is_failed_precondition(api, stopped_box, method, template):
    headers = UPGRADE_HEADERS if template.endswith("/exec") else {}
    r = request_for(api, method, template, stopped_box["name"], headers)
    expect(r, 409, "failed_precondition")


def test_exec_json_form_in_a_stopped_box(api, stopped_box):
    r = api.post(f"/v1/boxes/{stopped_box['name']}/exec", json={"argv": ["true"]})
    not_json_exec(r)
    expect(r, 409, "failed_precondition")


def all_paths():
    for template, item in VALIDATOR.spec_dict["paths"].items():
        methods = {m.upper() for m in item if m in ("get", "put", "post", "delete")}
        yield template, methods


@pytest.mark.parametrize("template,methods", list(all_paths()), ids=[t for t, _ in all_paths()])
def test_wrong_method_is_unsupported_405(api, template, methods):
    wrong = next(m for m in ("PATCH", "PUT", "DELETE", "POST", "GET") if m not in methods)
    r = api.request(wrong, fill(template, NO_BOX).replace("{name}", "X").replace(
        "{template}", "t"))
    expect(r, 405, "unsupported")


@pytest.mark.parametrize("path", ["/", "/v1", "/v2/boxes", "/v1/nothing", "/v1/boxes/x/y/z",
                                  "/v1/boxes/x/exec/ws/more", "/v1/system"])
def test_unknown_path_is_not_found(api, path):
    r = api.get(path)
    expect(r, 404, "not_found")


def test_a_body_over_8_mib_is_refused(api):
    r = api.post("/v1/boxes", content=b"{" + b" " * (9 << 20) + b"}", headers=JSON)
    expect(r, 400, "invalid_argument")


def test_malformed_http_is_invalid_argument(daemon):
    """Below the client: bytes that are not HTTP get the error shape, validated by hand."""
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(daemon.socket)
    s.sendall(b"GET /v1/info HTTP/1.1\r\nHost: hutchd\r\nContent-Length: nope\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    headers = dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:])
    VALIDATOR.validate("GET", "/v1/info", status,
                       {k.decode(): v.decode() for k, v in headers.items()}, body)
    assert status == 400
    assert json.loads(body)["error"]["code"] == "invalid_argument"


# Error messages that quote the request byte by byte: a multi-byte UTF-8 character cut in two
# (egress nameProblem's "it contains 'X'" names one char of it) or a percent-decoded %FF in a
# query parameter made the JSON dump of the error throw, and the answer was a 500 instead of the
# 400. Found by the schemathesis run (tests/api/fuzz.py) on main at 353b940.
UTF8_CASES = [
    ("PUT", "/v1/boxes/{box}/policy", {"policy": {"allow": [{"domain": "\u00e9.com"}]}}, ""),
    ("POST", "/v1/boxes", {"network_policy": {"allow": [{"domain": "\u00e9.com"}]}}, ""),
    ("PUT", "/v1/secrets/UTF8_TEST", {"value": "v", "domains": ["\u00e9.com"]}, ""),
    ("GET", "/v1/boxes/{box}/policy/log", None, "after=%FF"),
    ("DELETE", "/v1/boxes/{box}/ports/1", None, "address=%FF"),
]


@pytest.mark.parametrize("method,path,body,query", UTF8_CASES,
                         ids=[f"{m} {p}{'?' + q if q else ''}" for m, p, _, q in UTF8_CASES])
def test_non_ascii_input_is_a_400_not_a_500(unix, box, method, path, body, query):
    url = path_for(path, box["name"]) + (f"?{query}" if query else "")
    r = unix.request(method, url, json=body)
    assert r.status_code in (400, 404), r.text


def test_head_is_get_without_a_body_and_keeps_the_connection_in_step(daemon):
    """HEAD is GET without the body (RFC 9110): the headers, Content-Length included, and no
    bytes after them, so the next answer on the connection starts where a client expects it."""
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(daemon.socket)
    s.sendall(b"HEAD /v1/info HTTP/1.1\r\nHost: hutchd\r\n\r\n"
              b"GET /v1/info HTTP/1.1\r\nHost: hutchd\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"content-length:" in head.lower() and b"content-length: 0" not in head.lower()
    # A HEAD answer has no body: the next bytes are the GET's status line.
    assert rest.startswith(b"HTTP/1.1 200"), rest[:120]
