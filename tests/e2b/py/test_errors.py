"""Errors the E2B Python SDK maps from the server's answers: unknown sandboxes, a wrong key,
another owner's sandbox, the envd plane without the sandbox's token."""

import json
import os
import urllib.error
import urllib.parse
import urllib.request

import pytest

from e2b import AuthenticationException, Sandbox, SandboxException, SandboxQuery

from support import KEY_B, RUN_ID, SandboxNotFound, create_sandbox, list_all

UNKNOWN = "no-such-sandbox-0123456789"


def test_unknown_sandbox():
    with pytest.raises(SandboxNotFound):
        Sandbox.connect(UNKNOWN)
    assert Sandbox.kill(UNKNOWN) is False
    with pytest.raises(SandboxNotFound):
        Sandbox.get_info(UNKNOWN)
    with pytest.raises(SandboxNotFound):
        Sandbox.set_timeout(UNKNOWN, 60)


def test_wrong_api_key():
    wrong = "e2b_" + "0" * 40
    with pytest.raises(AuthenticationException):
        Sandbox.create("base", timeout=60, api_key=wrong)
    with pytest.raises(AuthenticationException):
        list_all(api_key=wrong)


def test_unknown_template():
    with pytest.raises(SandboxException):
        Sandbox.create("no-such-template-hutch", timeout=60)


def test_another_owner_cannot_see_or_touch_it():
    assert KEY_B, "E2B_TEST_KEY_B is not set (run.sh makes a second key with hutch key create)"
    mine = create_sandbox(metadata={"kind": "owner-a"})
    with pytest.raises(SandboxNotFound):
        Sandbox.connect(mine.sandbox_id, api_key=KEY_B)
    assert Sandbox.kill(mine.sandbox_id, api_key=KEY_B) is False
    with pytest.raises(SandboxNotFound):
        Sandbox.get_info(mine.sandbox_id, api_key=KEY_B)
    with pytest.raises(SandboxNotFound):
        Sandbox.set_timeout(mine.sandbox_id, 5, api_key=KEY_B)
    assert mine.sandbox_id not in [s.sandbox_id for s in list_all(api_key=KEY_B)]
    assert list_all(api_key=KEY_B, query=SandboxQuery(metadata={"run": RUN_ID})) == []
    assert mine.is_running() is True
    assert mine.commands.run("echo still mine").stdout == "still mine\n"
    listed = list_all(query=SandboxQuery(metadata={"kind": "owner-a", "run": RUN_ID}))
    assert [s.sandbox_id for s in listed] == [mine.sandbox_id]
    theirs = Sandbox.create("base", timeout=120, api_key=KEY_B,
                            metadata={"run": RUN_ID, "kind": "owner-b"})
    try:
        assert theirs.commands.run("whoami").stdout == "user\n"
        assert list_all(query=SandboxQuery(metadata={"kind": "owner-b", "run": RUN_ID})) == []
        assert Sandbox.kill(theirs.sandbox_id) is False
    finally:
        assert Sandbox.kill(theirs.sandbox_id, api_key=KEY_B) is True


def _status(req):
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.status, res.read()[:200]
    except urllib.error.HTTPError as e:
        return e.code, e.read()[:200]


def test_envd_plane_needs_the_access_token():
    sbx = create_sandbox(metadata={"kind": "token"})
    base = os.environ["E2B_SANDBOX_URL"].rstrip("/")
    routing = {"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "49983"}
    assert sbx.files.get_info("/home/user").name == "user"
    # Two refusals, not four: hutchd counts a wrong token toward its 10-failures-a-minute limit
    # per client address, and the suites run one after the other from 127.0.0.1.
    req = urllib.request.Request(
        f"{base}/filesystem.Filesystem/Stat", data=json.dumps({"path": "/home/user"}).encode(),
        method="POST", headers={**routing, "Content-Type": "application/json",
                                "Connect-Protocol-Version": "1"})
    status, body = _status(req)
    assert status == 401, f"Stat without a token: {status} {body!r}"
    req = urllib.request.Request(f"{base}/files?path={urllib.parse.quote('/etc/hostname')}",
                                 headers={**routing, "X-Access-Token": "wrong-token"})
    status, body = _status(req)
    assert status == 401, f"GET /files with a wrong token: {status} {body!r}"
