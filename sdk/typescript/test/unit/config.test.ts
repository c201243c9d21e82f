import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { test } from "node:test";

import { normalizeFingerprint, resolveEndpoint } from "../../src/config.js";
import { Client, InvalidArgumentError } from "../../src/index.js";
import { fixture } from "./fake_hutchd.js";

const fp = "CF:9F:8F:BF:79:16:20:BB:22:41:EF:FC:DD:86:B4:8F:A3:EC:59:16:80:0F:5A:7C:F7:C6:E9:BF:91:1E:AE:4F";

test("no options and no environment: the default unix socket", () => {
  assert.deepEqual(resolveEndpoint({ env: {} }), { kind: "unix", socketPath: "/run/hutch/hutchd.sock" });
  assert.equal(new Client({ env: {} }).endpoint, "unix:/run/hutch/hutchd.sock");
});

test("HUTCH_SOCKET names another socket; a key without a host does not leave the socket", () => {
  assert.deepEqual(resolveEndpoint({ env: { HUTCH_SOCKET: "/tmp/h.sock", HUTCH_API_KEY: "e2b_x" } }), {
    kind: "unix",
    socketPath: "/tmp/h.sock",
  });
});

test("HUTCH_HOST with a key, a fingerprint and a CA file", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "hutch-config-"));
  const caFile = path.join(dir, "ca.pem");
  writeFileSync(caFile, fixture("ca-cert.pem"));
  const e = resolveEndpoint({
    env: { HUTCH_HOST: "https://box-host.example:8443", HUTCH_API_KEY: "e2b_k", HUTCH_FINGERPRINT: fp, HUTCH_CA_CERT: caFile },
  });
  assert.equal(e.kind, "tcp");
  if (e.kind !== "tcp") return;
  assert.equal(e.secure, true);
  assert.equal(e.hostname, "box-host.example");
  assert.equal(e.port, 8443);
  assert.equal(e.apiKey, "e2b_k");
  assert.equal(e.fingerprint, fp.replace(/:/g, "").toLowerCase());
  assert.match(e.ca ?? "", /BEGIN CERTIFICATE/);
});

test("options win over the environment, and socketPath wins over HUTCH_HOST", () => {
  const env = { HUTCH_HOST: "https://a:1", HUTCH_API_KEY: "from-env" };
  const e = resolveEndpoint({ host: "http://127.0.0.1:8080", apiKey: "from-option", env });
  assert.equal(e.kind === "tcp" && e.apiKey, "from-option");
  assert.equal(e.kind === "tcp" && e.secure, false);
  assert.deepEqual(resolveEndpoint({ socketPath: "/x.sock", env }), { kind: "unix", socketPath: "/x.sock" });
});

test("a bare HOST:PORT means https; IPv6 literals work", () => {
  const e = resolveEndpoint({ host: "10.0.0.5:8443", env: {} });
  assert.equal(e.kind === "tcp" && e.secure, true);
  const v6 = new Client({ host: "https://[::1]:8443", env: {} });
  assert.equal(v6.endpoint, "https://[::1]:8443");
  const v6http = resolveEndpoint({ host: "http://[::1]:8080", env: {} });
  assert.equal(v6http.kind === "tcp" && v6http.hostname, "::1");
});

test("plain HTTP is refused off loopback (the key would travel in clear)", () => {
  assert.throws(() => resolveEndpoint({ host: "http://192.0.2.1:8080", env: {} }), InvalidArgumentError);
  assert.throws(() => resolveEndpoint({ host: "http://example.com", env: {} }), /in clear/);
  for (const host of ["http://127.0.0.1:1", "http://127.1.2.3:1", "http://localhost:1", "http://[::1]:1"]) {
    assert.equal(resolveEndpoint({ host, env: {} }).kind, "tcp", host);
  }
});

test("bad hosts, fingerprints and CA paths are refused with what to do", () => {
  assert.throws(() => resolveEndpoint({ host: "ftp://x", env: {} }), /https:\/\/ or http:\/\//);
  assert.throws(() => resolveEndpoint({ host: "https://user:pw@x:1", env: {} }), InvalidArgumentError);
  assert.throws(() => resolveEndpoint({ host: "https://x:1", fingerprint: "AB:CD", env: {} }), /not a SHA-256 fingerprint/);
  assert.throws(() => resolveEndpoint({ host: "https://x:1", caCert: "/nonexistent/ca.pem", env: {} }), /neither PEM text nor a readable file/);
  assert.throws(() => resolveEndpoint({ host: "http://127.0.0.1:1", fingerprint: fp, env: {} }), /plain HTTP/);
});

test("fingerprints are read in any case, with or without colons or a sha256 prefix", () => {
  const hex = fp.replace(/:/g, "").toLowerCase();
  assert.equal(normalizeFingerprint(fp), hex);
  assert.equal(normalizeFingerprint(fp.toLowerCase()), hex);
  assert.equal(normalizeFingerprint(hex), hex);
  assert.equal(normalizeFingerprint(`sha256:${fp}`), hex);
  assert.equal(normalizeFingerprint(`SHA256=${hex}`), hex);
});
