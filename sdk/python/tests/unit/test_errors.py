import builtins
import json

import pytest

import hutch
from hutch._errors import ERROR_CLASSES, error_for, error_from_response

# docs/api.md's table: code -> (HTTP status, class).
TABLE = [
    ("invalid_argument", 400, hutch.InvalidArgumentError),
    ("not_found", 404, hutch.NotFoundError),
    ("already_exists", 409, hutch.AlreadyExistsError),
    ("failed_precondition", 409, hutch.FailedPreconditionError),
    ("unavailable", 503, hutch.UnavailableError),
    ("timeout", 504, hutch.HutchTimeoutError),
    ("protocol", 502, hutch.ProtocolError),
    ("unsupported", 501, hutch.UnsupportedError),
    ("cancelled", 499, hutch.HutchCancelledError),
    ("internal", 500, hutch.InternalError),
    ("unauthenticated", 401, hutch.UnauthenticatedError),
    ("permission_denied", 403, hutch.PermissionDeniedError),
    ("resource_exhausted", 429, hutch.ResourceExhaustedError),
]


def body(code, message):
    return json.dumps({"error": {"code": code, "message": message}}).encode()


@pytest.mark.parametrize("code,status,cls", TABLE)
def test_each_code_maps_to_its_class(code, status, cls):
    err = error_from_response(status, body(code, "Box web is stopped"))
    assert type(err) is cls
    assert err.code == code and err.status == status
    assert err.message == "Box web is stopped" == str(err)
    assert isinstance(err, hutch.HutchError)


def test_every_code_has_a_class():
    assert sorted(ERROR_CLASSES) == sorted(code for code, _, _ in TABLE)


def test_code_wins_over_status():
    # 409 is two codes: the body says which.
    assert type(error_from_response(409, body("already_exists", "x"))) is hutch.AlreadyExistsError
    assert type(error_from_response(409, body("failed_precondition", "x"))) is \
        hutch.FailedPreconditionError


@pytest.mark.parametrize("status,cls", [(404, hutch.NotFoundError), (401, hutch.UnauthenticatedError),
                                        (502, hutch.ProtocolError), (503, hutch.UnavailableError),
                                        (405, hutch.UnsupportedError), (418, hutch.InvalidArgumentError),
                                        (599, hutch.InternalError)])
def test_body_without_error_shape_maps_by_status(status, cls):
    err = error_from_response(status, b"<html>Bad Gateway</html>")
    assert type(err) is cls
    assert f"HTTP {status}" in err.message and "Bad Gateway" in err.message


def test_empty_body():
    err = error_from_response(500, b"")
    assert type(err) is hutch.InternalError and "no body" in err.message


def test_unknown_code_keeps_the_code():
    err = error_from_response(400, body("quota_smell", "new"))
    assert type(err) is hutch.HutchError and err.code == "quota_smell" and err.status == 400


def test_retry_after():
    err = error_from_response(429, body("resource_exhausted", "slow down"), {"retry-after": "42"})
    assert isinstance(err, hutch.ResourceExhaustedError) and err.retry_after == 42.0
    assert error_from_response(429, body("resource_exhausted", "x"), {}).retry_after is None


def test_timeout_is_also_the_builtin_but_not_shadowed():
    err = error_for("timeout", "deadline")
    assert isinstance(err, builtins.TimeoutError)
    assert hutch.HutchTimeoutError is not builtins.TimeoutError
    assert not hasattr(hutch, "TimeoutError") and not hasattr(hutch, "CancelledError")


def test_client_side_errors_are_hutch_errors():
    assert issubclass(hutch.ConnectError, hutch.UnavailableError)
    assert issubclass(hutch.FingerprintMismatchError, hutch.TLSError)
    assert issubclass(hutch.TLSError, hutch.HutchError)
    e = hutch.FingerprintMismatchError("AA:BB", "CC:DD")
    assert "CC:DD" in str(e) and "AA:BB" in str(e) and e.code == "fingerprint_mismatch"
