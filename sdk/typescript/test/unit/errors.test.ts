import assert from "node:assert/strict";
import { test } from "node:test";

import {
  AlreadyExistsError,
  CancelledError,
  FailedPreconditionError,
  HutchError,
  HutchTimeoutError,
  InternalError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  ProtocolError,
  ResourceExhaustedError,
  UnauthenticatedError,
  UnavailableError,
  UnsupportedError,
  errorFromResponse,
} from "../../src/index.js";

const table: [string, number, new (...args: never[]) => HutchError][] = [
  ["invalid_argument", 400, InvalidArgumentError],
  ["not_found", 404, NotFoundError],
  ["already_exists", 409, AlreadyExistsError],
  ["failed_precondition", 409, FailedPreconditionError],
  ["unavailable", 503, UnavailableError],
  ["timeout", 504, HutchTimeoutError],
  ["protocol", 502, ProtocolError],
  ["unsupported", 501, UnsupportedError],
  ["cancelled", 499, CancelledError],
  ["internal", 500, InternalError],
  ["unauthenticated", 401, UnauthenticatedError],
  ["permission_denied", 403, PermissionDeniedError],
  ["resource_exhausted", 429, ResourceExhaustedError],
];

test("every API error code becomes its class, with code, status and message", () => {
  for (const [code, status, cls] of table) {
    const body = JSON.stringify({ error: { code, message: `Message for ${code}` } });
    const e = errorFromResponse(status, body);
    assert.ok(e instanceof cls, `${code} -> ${e.constructor.name}`);
    assert.ok(e instanceof HutchError);
    assert.ok(e instanceof Error);
    assert.equal(e.code, code);
    assert.equal(e.status, status);
    assert.equal(e.message, `Message for ${code}`);
    assert.equal(e.name, cls.name);
  }
});

test("the code in the body wins over the status (409 is two codes)", () => {
  const e = errorFromResponse(409, '{"error":{"code":"failed_precondition","message":"Box web is stopped"}}');
  assert.ok(e instanceof FailedPreconditionError);
  const e2 = errorFromResponse(409, '{"error":{"code":"already_exists","message":"Name taken"}}');
  assert.ok(e2 instanceof AlreadyExistsError);
});

test("an unknown code is internal; a body without one falls back to the status", () => {
  const e = errorFromResponse(418, '{"error":{"code":"teapot","message":"short and stout"}}');
  assert.ok(e instanceof InternalError);
  assert.equal(e.message, "short and stout");
  assert.equal(e.status, 418);
  const e2 = errorFromResponse(404, '{"error":{"message":"gone"}}');
  assert.ok(e2 instanceof NotFoundError);
  assert.equal(e2.message, "gone");
});

test("a body that is not JSON keeps its first bytes in the message", () => {
  const e = errorFromResponse(502, "<html>Bad gateway</html>");
  assert.ok(e instanceof ProtocolError);
  assert.match(e.message, /HTTP 502: <html>Bad gateway<\/html>/);
  const long = errorFromResponse(500, "x".repeat(1000));
  assert.ok(long.message.length < 300);
  const empty = errorFromResponse(405, "");
  assert.ok(empty instanceof UnsupportedError);
  assert.equal(empty.message, "hutchd answered HTTP 405");
});

test("429 carries Retry-After", () => {
  const e = errorFromResponse(429, '{"error":{"code":"resource_exhausted","message":"Too many failed keys"}}', { "retry-after": "37" });
  assert.ok(e instanceof ResourceExhaustedError);
  assert.equal(e.retryAfterSeconds, 37);
  const quota = errorFromResponse(429, '{"error":{"code":"resource_exhausted","message":"Key alice may have at most 2 boxes"}}');
  assert.equal((quota as ResourceExhaustedError).retryAfterSeconds, undefined);
});
