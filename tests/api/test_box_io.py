"""Exec (both forms and the WebSocket), ports, detached processes, services, with a real box."""

from __future__ import annotations

import base64
import json
import socket
import time

import pytest

from conftest import VALIDATOR
from hutch_api.upgrade import exec_upgraded


def test_upgraded_exec(api, box):
    r = exec_upgraded(api, box["name"], {"argv": ["sh", "-c", "echo out; echo err >&2; exit 3"]})
    assert r.status == 101
    assert r.stdout == b"out\n" and r.stderr == b"err\n"
    assert r.exit == {"code": 3}


def test_upgraded_exec_with_stdin(api, box):
    r = exec_upgraded(api, box["name"], {"argv": ["cat"], "stdin": True}, stdin=b"hello\n")
    assert r.stdout == b"hello\n" and r.exit == {"code": 0}


def test_upgraded_exec_of_a_missing_program_is_an_error_frame(api, box):
    r = exec_upgraded(api, box["name"], {"argv": ["/no/such/program"]})
    assert r.status == 101
    assert r.exit is None and r.error is not None
    VALIDATOR.check_schema("ErrorCode", r.error["code"])


def test_upgraded_exec_refuses_a_bad_request_before_the_upgrade(api, box):
    for body in ({"argv": []}, {"argv": ["ls"], "cwd": "relative"}, {"argv": ["ls"],
                                                                       "env": ["NOEQUALS"]}):
        r = exec_upgraded(api, box["name"], body)
        assert r.status == 400, body
        assert r.body["error"]["code"] == "invalid_argument"


def json_exec(api, box, body):
    r = api.post(f"/v1/boxes/{box}/exec", json=body)
    if r.status_code == 400 and "upgraded connection" in r.json()["error"]["message"]:
        pytest.xfail("hutchd has no JSON exec (POST /v1/boxes/{box}/exec without Upgrade) yet")
    return r


def test_json_exec(api, box):
    r = json_exec(api, box["name"], {"argv": ["sh", "-c", "echo hi; echo err >&2; exit 3"],
                                     "env": {"K": "V"}})
    assert r.status_code == 200
    res = r.json()
    assert res["stdout"] == "hi\n" and res["stderr"] == "err\n"
    assert res["exit_code"] == 3 and res["signal"] is None and res["error"] is None


def test_json_exec_stdin_env_binary_and_limits(api, box):
    r = json_exec(api, box["name"], {"argv": ["sh", "-c", "cat; printf '\\377'; echo $K"],
                                     "stdin": "fed\n", "env": ["K=list"]})
    res = r.json()
    assert res["stdout_encoding"] == "base64"
    assert base64.b64decode(res["stdout"]) == b"fed\n\xfflist\n"
    r = json_exec(api, box["name"], {"argv": ["cat"], "stdin_base64":
                                     base64.b64encode(b"\x00\x01\xfe").decode()})
    assert r.json()["stdout_encoding"] == "base64"
    assert base64.b64decode(r.json()["stdout"]) == b"\x00\x01\xfe"
    r = json_exec(api, box["name"], {"argv": ["cat"], "stdin_base64":
                                     base64.b64encode("d\u00e9j\u00e0".encode()).decode()})
    assert r.json()["stdout_encoding"] == "utf-8" and r.json()["stdout"] == "d\u00e9j\u00e0"
    r = json_exec(api, box["name"], {"argv": ["sh", "-c", "head -c 5000 /dev/zero | tr '\\0' a"],
                                     "max_output_bytes": 100})
    assert r.json()["truncated"] is True and len(r.json()["stdout"]) == 100
    r = json_exec(api, box["name"], {"argv": ["sleep", "30"], "timeout_ms": 300})
    assert r.json()["timed_out"] is True and r.json()["signal"] == 9


def test_json_exec_errors(api, box):
    r = json_exec(api, box["name"], {"argv": ["/no/such/program"]})
    assert r.status_code == 200 and r.json()["exit_code"] == 127
    assert r.json()["error"]["code"] == "not_found"
    for body in ({}, {"argv": ["true"], "stdin": "a", "stdin_base64": "YQ=="},
                 {"argv": ["true"], "max_output_bytes": (64 << 20) + 1},
                 {"argv": ["true"], "timeout_ms": -1}):
        r = json_exec(api, box["name"], body)
        assert r.status_code == 400, (body, r.text)


def ws_connect(daemon, api, box, **kw):
    from websockets.sync.client import connect, unix_connect
    path = f"/v1/boxes/{box}/exec/ws"
    if api.base_url.host == "hutchd":
        return unix_connect(daemon.socket, uri=f"ws://hutchd{path}",
                            subprotocols=["hutch.exec.v1"], **kw)
    return connect(f"ws://{api.base_url.host}:{api.base_url.port}{path}",
                   subprotocols=["hutch.exec.v1"],
                   additional_headers={"Authorization": api.headers["Authorization"]}, **kw)


def test_websocket_exec(daemon, api, box):
    from websockets.exceptions import InvalidStatus
    try:
        ws = ws_connect(daemon, api, box["name"])
    except InvalidStatus as e:
        res = e.response
        VALIDATOR.validate("GET", f"/v1/boxes/{box['name']}/exec/ws", res.status_code,
                           dict(res.headers.raw_items()), res.body or b"")
        raise
    with ws:
        VALIDATOR.validate("GET", f"/v1/boxes/{box['name']}/exec/ws", ws.response.status_code,
                           dict(ws.response.headers.raw_items()), b"")
        assert ws.subprotocol == "hutch.exec.v1"
        ws.send(json.dumps({"argv": ["sh", "-c", "cat; echo err >&2; exit 4"], "stdin": True}))
        ws.send(b"\x00typed\n")
        ws.send(json.dumps({"type": "stdin_eof"}))
        out, err, control = b"", b"", []
        for message in ws:
            if isinstance(message, bytes):
                if message[0] == 1:
                    out += message[1:]
                elif message[0] == 2:
                    err += message[1:]
            else:
                doc = json.loads(message)
                VALIDATOR.check_schema("ExecWsServerMessage", doc)
                control.append(doc)
        assert control[0]["type"] == "started"
        assert control[-1] == {"type": "exit", "exit_code": 4, "signal": None}
        assert out == b"typed\n" and err == b"err\n"
        assert ws.close_code == 1000


def test_websocket_exec_in_a_stopped_box_is_refused_before_the_upgrade(daemon, api,
                                                                       stopped_box):
    from websockets.exceptions import InvalidStatus
    with pytest.raises(InvalidStatus) as caught:
        ws_connect(daemon, api, stopped_box["name"])
    res = caught.value.response
    VALIDATOR.validate("GET", f"/v1/boxes/{stopped_box['name']}/exec/ws", res.status_code,
                       dict(res.headers.raw_items()), res.body or b"")
    assert res.status_code == 409


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_ports(api, box):
    name = box["name"]
    port = free_port()
    r = api.post(f"/v1/boxes/{name}/ports", json={"host_port": port, "box_port": 8000})
    assert r.status_code == 201, r.text
    assert r.json()["host_port"] == port and r.json()["address"] == "127.0.0.1"
    try:
        r = api.post(f"/v1/boxes/{name}/ports", json={"host_port": port, "box_port": 8001})
        assert r.status_code == 409 and r.json()["error"]["code"] == "already_exists"
        listed = api.get(f"/v1/boxes/{name}/ports").json()["ports"]
        assert [p["host_port"] for p in listed] == [port] and listed[0]["listening"] is True
        for body in ({"host_port": 0, "box_port": 80}, {"host_port": 70000, "box_port": 80},
                     {"box_port": 80}, {"host_port": port + 1, "box_port": 80,
                                        "address": "not-an-address"}):
            r = api.post(f"/v1/boxes/{name}/ports", json=body)
            assert r.status_code == 400, (body, r.text)
        assert api.delete(f"/v1/boxes/{name}/ports/notaport").status_code == 400
        assert api.delete(f"/v1/boxes/{name}/ports/{port + 1}").status_code == 404
    finally:
        r = api.delete(f"/v1/boxes/{name}/ports/{port}")
    assert r.status_code == 200 and r.json() == {"removed": port}


def test_detached_processes(api, box):
    name = box["name"]
    r = api.post(f"/v1/boxes/{name}/processes", json={"argv": ["sleep", "300"]})
    assert r.status_code == 201, r.text
    sleeper = r.json()
    assert sleeper["running"] is True and sleeper["argv"] == ["sleep", "300"]
    r = api.post(f"/v1/boxes/{name}/processes", json={"argv": ["sh", "-c", "exit 7"]})
    quick = r.json()
    r = api.post(f"/v1/boxes/{name}/processes/{sleeper['id']}/signal", json={"signal": 9})
    assert r.status_code == 200 and r.json() == {"signalled": sleeper["id"], "signal": 9}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        procs = {p["id"]: p for p in api.get(f"/v1/boxes/{name}/processes").json()["processes"]}
        if not procs[sleeper["id"]]["running"] and not procs[quick["id"]]["running"]:
            break
        time.sleep(0.2)
    assert procs[sleeper["id"]]["signal"] == 9
    assert procs[quick["id"]]["code"] == 7
    r = api.post(f"/v1/boxes/{name}/processes/{quick['id']}/signal")  # empty body: SIGTERM
    assert r.status_code == 409, r.text
    r = api.post(f"/v1/boxes/{name}/processes/no-such-process/signal")
    assert r.status_code == 404, r.text
    for body in ({"argv": ["cat"], "stdin": True}, {"argv": ["sh"], "tty": True}, {"argv": []}):
        r = api.post(f"/v1/boxes/{name}/processes", json=body)
        assert r.status_code == 400, (body, r.text)


def test_services(api, box):
    r = api.get(f"/v1/boxes/{box['name']}/services")
    assert r.status_code == 200
    assert isinstance(r.json()["services"], list)
