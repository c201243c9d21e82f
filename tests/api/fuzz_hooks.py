"""Schemathesis hooks for fuzz.py (loaded through SCHEMATHESIS_HOOKS)."""

from __future__ import annotations

import io
import json
import tarfile

import schemathesis


@schemathesis.serializer("application/x-tar")
def tar_serializer(ctx, value):
    """A real tar archive holding the generated value, so archive uploads reach hutchd's own
    checks (a schema-less binary body has nothing else to generate from)."""
    if isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    else:
        data = json.dumps(value, default=str).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("fuzz/value.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return {"data": buf.getvalue()}


@schemathesis.hook
def before_call(context, case, kwargs):
    """The upgraded exec speaks hutch frames after its 101: a blind HTTP client cannot follow
    it (tests/api/test_box_io.py does). Without the Upgrade header the same operation is the
    JSON exec, which is fuzzed."""
    if case.operation.path == "/v1/boxes/{box}/exec" and case.headers:
        case.headers.pop("Upgrade", None)
        case.headers.pop("upgrade", None)
    # GET /v1/events with follow (or Accept: text/event-stream) never ends by design, and its
    # keep-alives keep the request timeout from ending it: the run would hang. The page form is
    # fuzzed; the streams are tested in test_observability.py.
    if case.operation.path == "/v1/events":
        if case.query:
            case.query.pop("follow", None)
        if case.headers:
            for name in [h for h in case.headers if h.lower() == "accept"]:
                if "event-stream" in str(case.headers[name]):
                    case.headers[name] = "application/json"
