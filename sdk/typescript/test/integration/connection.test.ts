// Reaching hutchd: the unix socket, plain HTTP on loopback, HTTPS pinned or through the CA,
// keys, and refusals that say what is wrong.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Client, FingerprintMismatchError, UnauthenticatedError, UnavailableError } from "../../src/index.js";
import { admin, client, daemon, local, plainHttp, user } from "./daemon.js";

test("info over the unix socket: the host administrator", async () => {
  const info = await local().info();
  assert.ok(info.version !== "");
  assert.ok(["kvm", "tcg"].includes(info.accel.name), info.accel.name);
  assert.equal(info.caller?.name ?? "", "");
  assert.equal(info.caller?.admin, true);
  assert.ok(info.listeners.some((l) => l.startsWith("unix:")), JSON.stringify(info.listeners));
});

test("info over HTTPS with the pinned fingerprint, as an admin key and as a plain key", async () => {
  const a = await admin().info();
  assert.equal(a.caller?.admin, true);
  assert.ok(a.caller?.name !== "");
  // The fingerprint the daemon reports is the one the client just checked.
  assert.equal(a.tls?.fingerprintSha256.toUpperCase(), daemon.fingerprint.toUpperCase());
  assert.ok(a.listeners.some((l) => l.startsWith("https://")), JSON.stringify(a.listeners));
  const u = await user().info();
  assert.equal(u.caller?.admin, false);
  assert.notEqual(u.caller?.name, a.caller?.name);
});

test("info over plain HTTP on loopback", async () => {
  const info = await plainHttp().info();
  assert.equal(info.caller?.admin, true);
});

test("HTTPS trusting the daemon's certificate as a CA file (no pin)", async () => {
  const ca = daemon.ca_cert.includes("-----BEGIN") ? daemon.ca_cert : readFileSync(daemon.ca_cert, "utf8");
  assert.match(ca, /BEGIN CERTIFICATE/);
  const info = await client({ host: daemon.https_url, apiKey: daemon.admin_key, caCert: daemon.ca_cert }).info();
  assert.equal(info.caller?.admin, true);
});

test("new Client() from the environment", async () => {
  const c = new Client({ env: { HUTCH_HOST: daemon.https_url, HUTCH_API_KEY: daemon.key, HUTCH_FINGERPRINT: daemon.fingerprint } });
  try {
    assert.equal((await c.info()).caller?.admin, false);
  } finally {
    c.close();
  }
  const viaSocket = new Client({ env: { HUTCH_SOCKET: daemon.socket } });
  try {
    assert.equal(viaSocket.endpoint, `unix:${daemon.socket}`);
    assert.equal((await viaSocket.info()).caller?.admin, true);
  } finally {
    viaSocket.close();
  }
});

test("a wrong fingerprint is refused before anything is sent", async () => {
  const wrong = daemon.fingerprint.replace(/[0-9A-Fa-f]/, (d) => (d === "0" ? "1" : "0"));
  await assert.rejects(client({ host: daemon.https_url, apiKey: daemon.admin_key, fingerprint: wrong }).info(), (e: unknown) => {
    assert.ok(e instanceof FingerprintMismatchError, String(e));
    assert.equal(e.actual.toUpperCase(), daemon.fingerprint.toUpperCase());
    return true;
  });
});

test("the daemon's self-signed certificate without a pin or CA is not trusted", async () => {
  await assert.rejects(client({ host: daemon.https_url, apiKey: daemon.admin_key }).info(), (e: unknown) => {
    assert.ok(e instanceof UnavailableError);
    assert.match(e.message, /not trusted/);
    return true;
  });
});

test("no key, or a key hutchd does not know: 401 unauthenticated", async () => {
  await assert.rejects(client({ host: daemon.https_url, fingerprint: daemon.fingerprint }).info(), (e: unknown) => {
    assert.ok(e instanceof UnauthenticatedError, String(e));
    assert.equal(e.status, 401);
    return true;
  });
  await assert.rejects(
    client({ host: daemon.http_url, apiKey: "e2b_" + "0".repeat(40) }).boxes.list(),
    UnauthenticatedError,
  );
});

test("the OpenAPI document is served", async () => {
  const doc = await admin().openapi();
  assert.ok(typeof doc["openapi"] === "string" && doc["openapi"].startsWith("3."), JSON.stringify(doc).slice(0, 200));
  assert.ok(typeof doc["paths"] === "object");
});
