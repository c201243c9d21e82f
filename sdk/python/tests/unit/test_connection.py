import pytest

import hutch
from hutch._connection import DEFAULT_SOCKET, normalize_fingerprint, resolve

FP = ":".join(["AB"] * 32)


def test_nothing_set_is_the_default_socket():
    conn = resolve(env={})
    assert conn.socket == DEFAULT_SOCKET and conn.base_url == "http://hutchd"
    assert conn.api_key is None and conn.auth_headers() == {}


def test_socket_from_env_and_argument():
    assert resolve(env={"HUTCH_SOCKET": "/tmp/h.sock"}).socket == "/tmp/h.sock"
    assert resolve(socket="/x.sock", env={"HUTCH_SOCKET": "/tmp/h.sock"}).socket == "/x.sock"


def test_host_and_key_from_env():
    conn = resolve(env={"HUTCH_HOST": "https://10.0.0.5:8443", "HUTCH_API_KEY": "e2b_k",
                        "HUTCH_FINGERPRINT": FP})
    assert conn.base_url == "https://10.0.0.5:8443" and conn.socket is None
    assert conn.ws_base == "wss://10.0.0.5:8443"
    assert conn.auth_headers() == {"Authorization": "Bearer e2b_k"}
    assert conn.ssl_context is not None and conn.ssl_context.hutch_pin == "ab" * 32


def test_explicit_socket_beats_host_env():
    conn = resolve(socket="/s.sock", env={"HUTCH_HOST": "https://h:1"})
    assert conn.socket == "/s.sock"


def test_arguments_beat_env():
    conn = resolve(host="http://127.0.0.1:9000", api_key="mine",
                   env={"HUTCH_HOST": "https://h:1", "HUTCH_API_KEY": "theirs"})
    assert conn.base_url == "http://127.0.0.1:9000" and conn.api_key == "mine"
    assert conn.ws_base == "ws://127.0.0.1:9000" and conn.ssl_context is None


def test_bare_host_means_https():
    assert resolve(host="example.org:8443", env={}).base_url == "https://example.org:8443"


@pytest.mark.parametrize("host", ["ftp://h:1", "https://h:1/v1", "https://user:pw@h:1", "https://"])
def test_bad_hosts(host):
    with pytest.raises(hutch.InvalidArgumentError):
        resolve(host=host, env={})


def test_tls_options_need_https():
    with pytest.raises(hutch.InvalidArgumentError):
        resolve(host="http://127.0.0.1:1", fingerprint=FP, env={})
    with pytest.raises(hutch.InvalidArgumentError):
        resolve(socket="/s", fingerprint=FP, env={})
    # From the environment they are simply not used for plain HTTP.
    assert resolve(host="http://127.0.0.1:1", env={"HUTCH_FINGERPRINT": FP}).ssl_context is None


def test_missing_ca_file_is_refused_up_front(tmp_path):
    with pytest.raises(hutch.InvalidArgumentError, match="not a file"):
        resolve(host="https://h:1", ca_cert=str(tmp_path / "none.pem"), env={})


@pytest.mark.parametrize("text", [FP, FP.lower(), FP.replace(":", ""), "sha256:" + FP,
                                  " " + FP + " "])
def test_fingerprint_forms(text):
    assert normalize_fingerprint(text) == "ab" * 32


@pytest.mark.parametrize("text", ["AB:CD", "zz" * 32, "", FP + ":00"])
def test_bad_fingerprints(text):
    with pytest.raises(hutch.InvalidArgumentError):
        normalize_fingerprint(text)
    with pytest.raises(hutch.InvalidArgumentError):
        resolve(host="https://h:1", fingerprint=text, env={})
