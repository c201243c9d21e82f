"""Certificate pinning and CA files against local TLS servers (HTTPS and WSS), both clients."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import hutch
from hutch._connection import certificate_fingerprint

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="needs the openssl command to make a certificate")


def make_cert(d, san):
    key, crt = str(d / "key.pem"), str(d / "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", crt, "-days", "1",
                    "-subj", "/CN=hutchd", "-addext", f"subjectAltName={san}"],
                   check=True, capture_output=True)
    with open(crt) as f:
        der = ssl.PEM_cert_to_DER_cert(f.read())
    return {"key": key, "cert": crt, "fingerprint": certificate_fingerprint(der)}


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return make_cert(tmp_path_factory.mktemp("tls"), "IP:127.0.0.1,DNS:localhost")


@pytest.fixture(scope="module")
def other_cert(tmp_path_factory):
    return make_cert(tmp_path_factory.mktemp("tls-other"), "DNS:other.example")


class _Handler(BaseHTTPRequestHandler):
    seen: list = []

    def do_GET(self):  # noqa: N802
        type(self).seen.append(dict(self.headers))
        body = json.dumps({"version": "tls-test"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a refused handshake is what several tests want


def serve_https(cert):
    _Handler.seen = []
    server = _QuietServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert["cert"], cert["key"])
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


@pytest.fixture
def https(cert):
    server = serve_https(cert)
    yield f"https://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def https_other(other_cert):
    server = serve_https(other_cert)
    yield f"https://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def info(flavor, **options):
    if flavor == "sync":
        with hutch.Client(**options) as c:
            return c.info()

    async def go():
        async with hutch.AsyncClient(**options) as c:
            return await c.info()
    return asyncio.run(go())


WRONG = ":".join(["00"] * 32)


def test_pinned_fingerprint_is_accepted(https, cert, flavor):
    assert info(flavor, host=https, fingerprint=cert["fingerprint"], api_key="k").version == \
        "tls-test"
    assert _Handler.seen[-1]["Authorization"] == "Bearer k"


def test_lower_case_pin_without_colons(https, cert, flavor):
    pin = cert["fingerprint"].replace(":", "").lower()
    assert info(flavor, host=https, fingerprint=pin).version == "tls-test"


def test_wrong_pin_is_refused_before_the_key_is_sent(https, flavor):
    with pytest.raises(hutch.FingerprintMismatchError) as e:
        info(flavor, host=https, fingerprint=WRONG, api_key="secret")
    assert e.value.expected == WRONG and "not the pinned" in str(e.value)
    assert _Handler.seen == []


def test_self_signed_without_pin_or_ca_is_untrusted(https, flavor):
    with pytest.raises(hutch.TLSError, match="fingerprint=") as e:
        info(flavor, host=https)
    assert not isinstance(e.value, hutch.FingerprintMismatchError)
    assert _Handler.seen == []


def test_ca_file(https, cert, flavor):
    assert info(flavor, host=https, ca_cert=cert["cert"]).version == "tls-test"
    assert info(flavor, host=https, ca_cert=cert["cert"],
                fingerprint=cert["fingerprint"]).version == "tls-test"
    with pytest.raises(hutch.FingerprintMismatchError):
        info(flavor, host=https, ca_cert=cert["cert"], fingerprint=WRONG)


def test_ca_file_checks_the_host_name(https_other, other_cert, flavor):
    # The certificate names other.example, not 127.0.0.1: a CA file alone does not do.
    with pytest.raises(hutch.TLSError):
        info(flavor, host=https_other, ca_cert=other_cert["cert"])
    # A pin without a CA file is the check by itself (hutchd's certificate names its address,
    # but a pin should not depend on that).
    assert info(flavor, host=https_other, fingerprint=other_cert["fingerprint"]).version == \
        "tls-test"


def test_environment(https, cert, flavor, monkeypatch):
    monkeypatch.setenv("HUTCH_HOST", https)
    monkeypatch.setenv("HUTCH_FINGERPRINT", cert["fingerprint"])
    monkeypatch.setenv("HUTCH_API_KEY", "from-env")
    assert info(flavor).version == "tls-test"
    assert _Handler.seen[-1]["Authorization"] == "Bearer from-env"
    monkeypatch.setenv("HUTCH_FINGERPRINT", WRONG)
    with pytest.raises(hutch.FingerprintMismatchError):
        info(flavor)


@pytest.fixture
def wss(cert):
    """A WSS server that answers every exec with 'started' and exit 0."""
    from websockets.asyncio.server import serve
    loop = asyncio.new_event_loop()
    seen: list = []
    ready = threading.Event()
    state: dict = {}

    async def handler(ws):
        seen.append(dict(ws.request.headers.raw_items()))
        await ws.recv()
        await ws.send(json.dumps({"type": "started", "pid": 1}))
        await ws.send(json.dumps({"type": "exit", "exit_code": 0, "signal": None}))
        await ws.close()

    async def main():
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert["cert"], cert["key"])
        state["stop"] = loop.create_future()
        # No opening-handshake deadline: on a loaded CI host (TCG guests on every core) the
        # default 10 s once ran out and the server dropped the connection before answering.
        async with serve(handler, "127.0.0.1", 0, ssl=ctx, open_timeout=None,
                         subprotocols=["hutch.exec.v1"]) as server:
            state["port"] = list(server.sockets)[0].getsockname()[1]
            ready.set()
            await state["stop"]

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    ready.wait(10)
    yield f"https://127.0.0.1:{state['port']}", seen
    loop.call_soon_threadsafe(state["stop"].set_result, None)
    thread.join(10)
    loop.close()


def ws_exec(flavor, **options):
    info = hutch.BoxInfo(id="dev", name="dev")
    if flavor == "sync":
        with hutch.Client(**options) as c:
            return hutch.Box(c, info).exec(["true"], on_stdout=lambda b: None)

    async def go():
        async with hutch.AsyncClient(**options) as c:
            return await hutch.AsyncBox(c, info).exec(["true"], on_stdout=lambda b: None)
    return asyncio.run(go())


def test_websocket_pin(wss, cert, flavor):
    url, seen = wss
    assert ws_exec(flavor, host=url, fingerprint=cert["fingerprint"], api_key="k").exit_code == 0
    assert seen[-1]["Authorization"] == "Bearer k"
    count = len(seen)
    with pytest.raises(hutch.FingerprintMismatchError):
        ws_exec(flavor, host=url, fingerprint=WRONG, api_key="k")
    with pytest.raises(hutch.TLSError):
        ws_exec(flavor, host=url, api_key="k")
    assert len(seen) == count
