"""Egress policy, its log, and secrets."""

from __future__ import annotations

import pytest

from conftest import unique


def test_policy_get_and_set(api, box):
    name = box["name"]
    r = api.get(f"/v1/boxes/{name}/policy")
    assert r.status_code == 200 and r.json()["id"] == box["id"]
    r = api.put(f"/v1/boxes/{name}/policy", json={"policy": "allow-all"})
    assert r.status_code == 200, r.text
    assert r.json()["policy"]["allow"] == [{"domain": "*"}]
    doc = {"allow": [{"domain": "*.example.com", "ports": [443]}], "deny": [],
           "allow_private": ["192.168.1.0/24"]}
    r = api.put(f"/v1/boxes/{name}/policy", json={"policy": doc})
    assert r.status_code == 200, r.text
    assert r.json()["policy"]["allow"] == doc["allow"]
    assert r.json()["policy"]["allow_private"] == ["192.168.1.0/24"]
    r = api.put(f"/v1/boxes/{name}/policy", json={"policy": "none"})
    assert r.status_code == 200 and r.json()["policy"]["allow"] == []


@pytest.mark.parametrize("policy", ["everything", "", {"allow": "x"}, {"bogus": []},
                                    {"allow": [{"domain": "a.com", "ports": [0]}]},
                                    {"allow_private": ["8.8.8.0/24"]}])
def test_bad_policy_is_invalid_argument(api, box, policy):
    r = api.put(f"/v1/boxes/{box['name']}/policy", json={"policy": policy})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_argument"


def test_policy_log(api, box):
    r = api.get(f"/v1/boxes/{box['name']}/policy/log", params={"after": 0, "limit": 10})
    assert r.status_code == 200
    assert isinstance(r.json()["entries"], list) and r.json()["next"] >= 0
    r = api.get(f"/v1/boxes/{box['name']}/policy/log", params={"after": "x"})
    assert r.status_code == 400
    r = api.get(f"/v1/boxes/{box['name']}/policy/log", params={"limit": "-1"})
    assert r.status_code == 400


def test_secrets(api):
    name = "API_" + unique("T").upper().replace("-", "_")
    r = api.put(f"/v1/secrets/{name}", json={"value": "s3cr3t", "domains": ["api.example.com"],
                                              "header": "Authorization",
                                              "format": "Bearer {value}"})
    assert r.status_code == 200, r.text
    assert r.json()["name"] == name and "value" not in r.json()
    listed = api.get("/v1/secrets").json()["secrets"]
    assert name in [s["name"] for s in listed]
    assert "s3cr3t" not in api.get("/v1/secrets").text
    r = api.delete(f"/v1/secrets/{name}")
    assert r.status_code == 200 and r.json() == {"removed": name}
    assert api.delete(f"/v1/secrets/{name}").status_code == 404


@pytest.mark.parametrize("name,body", [
    ("lower", {"value": "v", "domains": ["api.example.com"]}),
    ("OK_NAME", {"value": "v", "domains": ["*"]}),
    ("OK_NAME", {"value": "v", "domains": ["*.com"]}),
    ("OK_NAME", {"value": "v", "domains": []}),
    ("OK_NAME", {"value": "", "domains": ["api.example.com"]}),
    ("OK_NAME", {"value": "a\nb", "domains": ["api.example.com"]}),
    ("OK_NAME", {"value": "v", "domains": ["api.example.com"], "format": "no placeholder"}),
    ("OK_NAME", {"value": "v", "domains": ["api.example.com"], "header": "Bad Header"}),
])
def test_bad_secret_is_invalid_argument(api, name, body):
    r = api.put(f"/v1/secrets/{name}", json=body)
    assert r.status_code == 400, r.text
