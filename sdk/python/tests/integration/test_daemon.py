"""The daemon itself: reaching it three ways, TLS, keys, owners' secrets, templates."""

from __future__ import annotations

import ssl
from urllib.parse import urlsplit

import pytest

import hutch
from conftest import unique


def served_fingerprint(url: str) -> str:
    parts = urlsplit(url)
    pem = ssl.get_server_certificate((parts.hostname, parts.port))
    return hutch.certificate_fingerprint(ssl.PEM_cert_to_DER_cert(pem))


def test_info_on_every_listener(daemon, local, admin):
    over_socket = local.info()
    assert over_socket.caller is not None and over_socket.caller.admin
    assert over_socket.caller.name == ""
    over_tls = admin.info()
    assert over_tls.version == over_socket.version and over_tls.caller.admin
    assert over_tls.caller.name == "test-admin"
    with hutch.Client(host=daemon.http_url, api_key=daemon.key) as plain:
        info = plain.info()
    assert info.caller.name == "test-user" and not info.caller.admin
    assert any(listener.startswith("https://") for listener in over_socket.listeners)


def test_pinned_fingerprint_is_the_served_certificate(daemon, local):
    fingerprint = local.info().fingerprint_sha256
    assert fingerprint and fingerprint.upper() == served_fingerprint(daemon.https_url)
    assert fingerprint.upper() == daemon.fingerprint.upper()


def test_wrong_pin_is_refused(daemon):
    wrong = ":".join(["00"] * 32)
    with hutch.Client(host=daemon.https_url, api_key=daemon.key, fingerprint=wrong) as c:
        with pytest.raises(hutch.FingerprintMismatchError):
            c.info()


def test_self_signed_certificate_needs_a_pin_or_the_ca(daemon):
    with hutch.Client(host=daemon.https_url, api_key=daemon.key) as c:
        with pytest.raises(hutch.TLSError, match="not trusted"):
            c.info()
    with hutch.Client(host=daemon.https_url, api_key=daemon.key, ca_cert=daemon.ca_cert) as c:
        assert c.info().caller.name == "test-user"


def test_environment_configures_the_client(daemon, monkeypatch):
    monkeypatch.setenv("HUTCH_HOST", daemon.https_url)
    monkeypatch.setenv("HUTCH_API_KEY", daemon.key)
    monkeypatch.setenv("HUTCH_FINGERPRINT", daemon.fingerprint)
    with hutch.Client() as c:
        assert c.info().caller.name == "test-user"


def test_keys_are_needed_on_tcp(daemon):
    for key in (None, "e2b_" + "0" * 40):
        with hutch.Client(host=daemon.https_url, api_key=key,
                          fingerprint=daemon.fingerprint) as c:
            with pytest.raises(hutch.UnauthenticatedError) as e:
                c.boxes.list()
            assert e.value.status == 401


def test_keys_admin_only(admin, client, daemon):
    name = unique("key")
    key = admin.keys.create(name, max_boxes=3, max_memory="2G")
    try:
        assert key.key and key.key.startswith("e2b_") and len(key.key) == 44
        assert key.max_boxes == 3 and key.max_memory_mib == 2048
        listed = {k.name: k for k in admin.keys.list()}
        assert name in listed and listed[name].key is None
        with hutch.Client(host=daemon.https_url, api_key=key.key,
                          fingerprint=daemon.fingerprint) as theirs:
            assert theirs.info().caller.name == name
            with pytest.raises(hutch.PermissionDeniedError):
                theirs.keys.list()
        with pytest.raises(hutch.PermissionDeniedError):
            client.keys.create(unique("key"))
    finally:
        admin.keys.remove(name)
    with hutch.Client(host=daemon.https_url, api_key=key.key,
                      fingerprint=daemon.fingerprint) as gone:
        with pytest.raises(hutch.UnauthenticatedError):
            gone.info()


def test_secrets_never_come_back(client):
    name = unique("S").upper().replace("-", "_")
    made = client.secrets.set(name, "s3cret-value", ["api.example.com"],
                              header="Authorization", format="Bearer {value}")
    try:
        assert made.name == name and made.domains == ["api.example.com"]
        assert "s3cret-value" not in repr(made.raw)
        listed = [s for s in client.secrets.list() if s.name == name]
        assert listed and "s3cret-value" not in repr(listed[0].raw)
        with pytest.raises(hutch.InvalidArgumentError):
            client.secrets.set(unique("S").upper().replace("-", "_"), "v", ["*"])
    finally:
        client.secrets.remove(name)
    assert name not in [s.name for s in client.secrets.list()]


def test_registry_logins_keep_no_password(admin, client):
    # A login is kept, not checked against the registry: this host name needs no registry.
    host = f"{unique('reg')}.example:5000"
    made = admin.registries.login(host, "robot", "t0ken-value")
    try:
        assert (made.registry, made.username) == (host, "robot")
        listed = [r for r in admin.registries.list() if r.registry == host]
        assert listed and listed[0].username == "robot"
        assert "t0ken-value" not in repr(listed[0].raw)
        with pytest.raises(hutch.PermissionDeniedError):
            client.registries.list()
    finally:
        admin.registries.logout(host)
    assert host not in [r.registry for r in admin.registries.list()]
    with pytest.raises(hutch.NotFoundError):
        admin.registries.logout(host)


def test_templates(client, admin, boxes):
    names = [t.name for t in client.templates.list()]
    assert "base" in names
    assert client.templates.get("base").name == "base"
    with pytest.raises(hutch.NotFoundError):
        client.templates.get(unique("none"))
    source = boxes()
    source.exec(["sh", "-c", "echo frozen > /home/hutch/mark"])
    source.stop()
    with pytest.raises(hutch.PermissionDeniedError):
        client.templates.create(unique("tpl"), from_box=source)
    name = unique("tpl")
    template = admin.templates.create(name, from_box=source)
    try:
        assert template.name == name and template.source == "box"
        child = boxes(template=name)
        assert child.exec(["cat", "/home/hutch/mark"]).stdout == "frozen\n"
        with pytest.raises(hutch.FailedPreconditionError):
            admin.templates.remove(name)  # a box uses it
        child.remove(force=True)
    finally:
        try:
            admin.templates.remove(name)
        except hutch.NotFoundError:
            pass
    assert name not in [t.name for t in client.templates.list()]


def test_template_build_of_an_unknown_recipe_fails(admin):
    # A real recipe build takes minutes (debootstrap); the failure path is quick and goes
    # through the same NDJSON stream (or an error before it).
    progress = []
    with pytest.raises((hutch.NotFoundError, hutch.InvalidArgumentError)):
        admin.templates.build(unique("norecipe"), on_progress=progress.append)
