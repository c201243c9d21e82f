"""Remote use: the same SDK over HTTPS to hutchd's TLS listener, trusting hutchd's self-signed
certificate with SSL_CERT_FILE (httpx in older SDKs, pyqwest/rustls in newer ones read it).
A child process, so that the variable is seen before any client is made."""

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json
from e2b import Sandbox
sbx = Sandbox.create("base", timeout=120, metadata={"kind": "tls"})
try:
    r = sbx.commands.run("echo over-tls")
    sbx.files.write("/home/user/tls.txt", "tls file")
    print(json.dumps({"stdout": r.stdout, "back": sbx.files.read("/home/user/tls.txt"),
                      "running": sbx.is_running()}))
finally:
    sbx.kill()
"""


def _env():
    url = os.environ.get("E2B_TEST_HTTPS_URL")
    assert url, "E2B_TEST_HTTPS_URL is not set (run.sh sets it)"
    return {**os.environ, "E2B_API_URL": url, "E2B_SANDBOX_URL": url}


def test_https_with_ssl_cert_file():
    ca = os.environ.get("E2B_TEST_CA_CERT")
    assert ca, "E2B_TEST_CA_CERT is not set (run.sh sets it)"
    child = subprocess.run([sys.executable, "-c", SCRIPT], env={**_env(), "SSL_CERT_FILE": ca},
                           capture_output=True, text=True, timeout=180)
    assert child.returncode == 0, child.stderr[-3000:]
    out = json.loads(child.stdout.strip().splitlines()[-1])
    assert out == {"stdout": "over-tls\n", "back": "tls file", "running": True}


def test_https_without_trusting_the_certificate_is_refused():
    env = _env()
    env.pop("SSL_CERT_FILE", None)
    child = subprocess.run([sys.executable, "-c",
                            "from e2b import Sandbox; Sandbox.create('base', timeout=60)"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode != 0
    assert any(w in child.stderr.lower() for w in ("certificate", "ssl", "tls")), child.stderr[-2000:]
