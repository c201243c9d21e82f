"""The remote API: keys, authentication, owners, quotas, the rate limit, TLS (TCP only)."""

from __future__ import annotations

import time

import httpx
import pytest

from conftest import VALIDATOR, create_box, remove_box, unique
from hutch_api.client import tcp_client


def test_https_info_has_the_fingerprint_and_listeners(daemon, https):
    info = https.get("/v1/info").json()
    assert info["tls"]["fingerprint_sha256"].lower() == daemon.fingerprint.lower()
    assert any(x.startswith("https://") for x in info["listeners"])
    assert any(x.startswith("unix:") for x in info["listeners"])
    assert info["caller"]["admin"] is True


def test_unix_socket_caller_is_the_host_administrator(unix, daemon):
    if not getattr(daemon, "http_url", None):
        pytest.skip("a daemon without the remote API")
    caller = unix.get("/v1/info").json()["caller"]
    assert caller["name"] == "" and caller["admin"] is True


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer e2b_" + "0" * 40},
                                     {"X-API-Key": "nonsense"}, {"Authorization": "Basic eDp5"}])
def test_no_or_bad_key_is_unauthenticated(daemon, headers, tcp):
    # From its own loopback address, so that these failures do not count against the others.
    with tcp_client(daemon.http_url, VALIDATOR, local_address="127.0.0.3") as c:
        r = c.get("/v1/boxes", headers=headers)
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "unauthenticated"
    assert r.headers["www-authenticate"].startswith("Bearer")


def test_x_api_key_header(daemon, tcp):
    with tcp_client(daemon.http_url, VALIDATOR, key=daemon.key, key_header="x-api-key") as c:
        assert c.get("/v1/boxes").status_code == 200


def test_admin_only_endpoints_refuse_a_plain_key(tcp_user):
    for method, path, body in [("GET", "/v1/keys", None), ("POST", "/v1/keys", {"name": "x"}),
                               ("DELETE", "/v1/keys/x", None), ("GET", "/v1/system/df", None),
                               ("GET", "/v1/system/pool", None),
                               ("POST", "/v1/templates", {"name": "x"}),
                               ("DELETE", "/v1/templates/base", None)]:
        r = tcp_user.request(method, path, json=body)
        assert r.status_code == 403, (method, path, r.text)
        assert r.json()["error"]["code"] == "permission_denied"
    assert tcp_user.get("/v1/templates").status_code == 200  # shared


def test_another_owners_box_is_not_found(tcp_user, box):
    r = tcp_user.get(f"/v1/boxes/{box['name']}")
    assert r.status_code == 404
    assert box["id"] not in [b["id"] for b in tcp_user.get("/v1/boxes").json()["boxes"]]
    r = tcp_user.post(f"/v1/boxes/{box['name']}/exec", json={"argv": ["true"]})
    assert r.status_code == 404


def test_keys_quota_and_removal(daemon, tcp, unix):
    name = unique("key")
    r = tcp.post("/v1/keys", json={"name": name, "max_boxes": 1, "max_memory_mib": 1024})
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["name"] == name and made["admin"] is False and made["max_boxes"] == 1
    assert tcp.post("/v1/keys", json={"name": name}).status_code == 409
    assert tcp.post("/v1/keys", json={"name": "bad name!"}).status_code == 400
    listed = tcp.get("/v1/keys").json()["keys"]
    assert name in [k["name"] for k in listed] and made["key"] not in tcp.get("/v1/keys").text
    box_name = unique("api-quota")
    with tcp_client(daemon.http_url, VALIDATOR, key=made["key"]) as mine:
        try:
            r = mine.post("/v1/boxes", json={"memory_mib": 2048})
            assert r.status_code == 429 and "max_memory_mib" in r.json()["error"]["message"]
            b = create_box(mine, box_name)
            assert b["owner"] == name
            r = mine.post("/v1/boxes", json={"name": unique("api-quota")})
            assert r.status_code == 429, r.text
            assert r.json()["error"]["code"] == "resource_exhausted"
            assert "max_boxes" in r.json()["error"]["message"]
            assert tcp.delete(f"/v1/keys/{name}").status_code == 200
            r = mine.get("/v1/boxes")
            assert r.status_code == 401
        finally:
            remove_box(unix, box_name)
    assert tcp.delete(f"/v1/keys/{name}").status_code == 404


def test_failed_keys_are_rate_limited(daemon, tcp):
    with tcp_client(daemon.http_url, VALIDATOR, key="e2b_" + "1" * 40,
                    local_address="127.0.0.4") as c:
        statuses = [c.get("/v1/info").status_code for _ in range(12)]
        assert statuses[:10] == [401] * 10 and statuses[10:] == [429, 429], statuses
        r = c.get("/v1/info")
        assert int(r.headers["retry-after"]) > 0
    # A valid key from the same address still passes (one bad client must not lock out the
    # others behind one address), while the bad one stays limited.
    with tcp_client(daemon.http_url, VALIDATOR, key=daemon.admin_key,
                    local_address="127.0.0.4") as good:
        assert good.get("/v1/info").status_code == 200
    with tcp_client(daemon.http_url, VALIDATOR, key="e2b_" + "1" * 40,
                    local_address="127.0.0.4") as c:
        assert c.get("/v1/info").status_code == 429
    # Another address is not limited.
    assert tcp.get("/v1/info").status_code == 200


def test_openapi_json_is_this_spec(api):
    r = api.get("/v1/openapi.json")
    assert r.status_code == 200
    assert r.json()["paths"].keys() == VALIDATOR.spec_dict["paths"].keys()
