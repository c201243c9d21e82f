import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { after, test } from "node:test";

import {
  Client,
  FingerprintMismatchError,
  NotFoundError,
  PermissionDeniedError,
  UnauthenticatedError,
  UnavailableError,
} from "../../src/index.js";
import { FakeHutchd, fixture, json, sampleBox } from "./fake_hutchd.js";

const selfFingerprint = "CF:9F:8F:BF:79:16:20:BB:22:41:EF:FC:DD:86:B4:8F:A3:EC:59:16:80:0F:5A:7C:F7:C6:E9:BF:91:1E:AE:4F";
const fakes: FakeHutchd[] = [];
const clients: Client[] = [];
after(async () => {
  for (const c of clients) c.close();
  for (const f of fakes) await f.close();
});

function track<T extends FakeHutchd>(f: T): T {
  fakes.push(f);
  return f;
}
function client(options: ConstructorParameters<typeof Client>[0]): Client {
  const c = new Client({ env: {}, ...options });
  clients.push(c);
  return c;
}

function infoRoute(fake: FakeHutchd): FakeHutchd {
  return fake.on("GET", "/v1/info", (_req, res) =>
    json(res, 200, {
      version: "0.1.0",
      backend: "qemu",
      state_dir: "/var/lib/hutch",
      accel: { name: "kvm", reason: "" },
      tls: { fingerprint_sha256: selfFingerprint },
      listeners: ["unix:/run/hutch/hutchd.sock", "https://0.0.0.0:8443"],
      caller: { name: "alice", admin: false, max_boxes: 2, max_cpus: 0, max_memory_mib: 0, max_disk_mib: 0 },
    }),
  );
}

test("over the unix socket: no key is sent, JSON comes back typed", async () => {
  const fake = track(infoRoute(await FakeHutchd.unix()));
  const c = client({ socketPath: fake.socketPath, apiKey: "e2b_unused" });
  const info = await c.info();
  assert.equal(info.version, "0.1.0");
  assert.equal(info.accel.name, "kvm");
  assert.equal(info.tls?.fingerprintSha256, selfFingerprint);
  assert.deepEqual(info.listeners, ["unix:/run/hutch/hutchd.sock", "https://0.0.0.0:8443"]);
  assert.equal(info.caller?.maxBoxes, 2);
  assert.equal(fake.requests[0]?.headers["authorization"], undefined);
  assert.match(String(fake.requests[0]?.headers["user-agent"]), /^hutch-sdk-typescript\//);
});

test("over TCP the key goes in Authorization: Bearer", async () => {
  const fake = track(await FakeHutchd.tcp());
  fake.on("GET", "/v1/boxes/dev", (req, res) => {
    if (req.headers["authorization"] !== "Bearer e2b_secret") {
      json(res, 401, { error: { code: "unauthenticated", message: "No key" } }, { "WWW-Authenticate": "Bearer" });
      return;
    }
    json(res, 200, sampleBox);
  });
  const box = await client({ host: fake.httpUrl, apiKey: "e2b_secret" }).boxes.get("dev");
  assert.equal(box.name, "dev");
  assert.equal(box.info.memoryMib, 512);
  await assert.rejects(client({ host: fake.httpUrl }).boxes.get("dev"), UnauthenticatedError);
  await assert.rejects(client({ host: fake.httpUrl, apiKey: "wrong" }).boxes.get("dev"), (e: unknown) => {
    assert.ok(e instanceof UnauthenticatedError);
    assert.equal(e.status, 401);
    return true;
  });
});

test("path segments are encoded; query values too", async () => {
  const fake = track(await FakeHutchd.unix());
  fake.on("GET", "/v1/boxes/a%2Fb%20c", (_req, res) => json(res, 200, { ...sampleBox, name: "a/b c" }));
  const box = await client({ socketPath: fake.socketPath }).boxes.get("a/b c");
  assert.equal(box.name, "a/b c");
});

test("errors come back as their classes", async () => {
  const fake = track(await FakeHutchd.unix());
  const c = client({ socketPath: fake.socketPath });
  await assert.rejects(c.boxes.get("nope"), (e: unknown) => {
    assert.ok(e instanceof NotFoundError);
    assert.equal(e.status, 404);
    assert.match(e.message, /No route GET \/v1\/boxes\/nope/);
    return true;
  });
});

test("no daemon at the socket: unavailable, saying how to start one", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "hutch-none-"));
  const c = client({ socketPath: path.join(dir, "missing.sock") });
  await assert.rejects(c.info(), (e: unknown) => {
    assert.ok(e instanceof UnavailableError);
    assert.match(e.message, /hutchd is not running at .*missing\.sock \(ENOENT\)/);
    return true;
  });
});

test("a socket we may not open: permission denied, saying why", { skip: process.getuid?.() === 0 ? "root opens any socket" : false }, async () => {
  const fake = track(await FakeHutchd.unix());
  const { chmodSync } = await import("node:fs");
  chmodSync(fake.socketPath, 0o000);
  await assert.rejects(client({ socketPath: fake.socketPath }).info(), PermissionDeniedError);
});

test("nothing listening on TCP: unavailable naming the address", async () => {
  const fake = track(await FakeHutchd.tcp());
  const url = fake.httpUrl;
  await fake.close();
  fakes.pop();
  await assert.rejects(client({ host: url }).info(), (e: unknown) => {
    assert.ok(e instanceof UnavailableError);
    assert.match(e.message, new RegExp(`Cannot reach hutchd at ${url.replace(/\./g, "\\.")}`));
    return true;
  });
});

test("TLS pinned to the right fingerprint: connects to a self-signed server", async () => {
  const fake = track(infoRoute(await FakeHutchd.tls("self")));
  const c = client({ host: fake.httpsUrl, apiKey: "e2b_k", fingerprint: selfFingerprint });
  const info = await c.info();
  assert.equal(info.version, "0.1.0");
  assert.equal(fake.requests[0]?.headers["authorization"], "Bearer e2b_k");
  // The lowercase form without colons pins the same certificate.
  const c2 = client({ host: fake.httpsUrl, fingerprint: selfFingerprint.replace(/:/g, "").toLowerCase() });
  assert.equal((await c2.info()).backend, "qemu");
});

test("TLS pinned to another fingerprint: refused before the request (and the key) is sent", async () => {
  const fake = track(infoRoute(await FakeHutchd.tls("self")));
  const wrong = "AA:".repeat(31) + "AA";
  const c = client({ host: fake.httpsUrl, apiKey: "e2b_k", fingerprint: wrong });
  await assert.rejects(c.info(), (e: unknown) => {
    assert.ok(e instanceof FingerprintMismatchError, String(e));
    assert.ok(e instanceof UnavailableError);
    assert.equal(e.expected, wrong);
    assert.equal(e.actual, selfFingerprint);
    assert.match(e.message, /presented a certificate with SHA-256 fingerprint CF:9F:8F/);
    assert.match(e.message, /not the pinned AA:AA/);
    return true;
  });
  assert.equal(fake.requests.length, 0, "the server got no request");
});

test("TLS to a self-signed server without a pin: refused, saying to pin it", async () => {
  const fake = track(infoRoute(await FakeHutchd.tls("self")));
  await assert.rejects(client({ host: fake.httpsUrl }).info(), (e: unknown) => {
    assert.ok(e instanceof UnavailableError);
    assert.match(e.message, /not trusted \(DEPTH_ZERO_SELF_SIGNED_CERT/);
    assert.match(e.message, /HUTCH_FINGERPRINT/);
    return true;
  });
  assert.equal(fake.requests.length, 0);
});

test("TLS with a CA: trusted through the CA (PEM text), hostname checked", async () => {
  const fake = track(infoRoute(await FakeHutchd.tls("leaf")));
  const c = client({ host: fake.httpsUrl, caCert: fixture("ca-cert.pem") });
  assert.equal((await c.info()).version, "0.1.0");
  // The same CA does not vouch for the self-signed server.
  const other = track(infoRoute(await FakeHutchd.tls("self")));
  await assert.rejects(client({ host: other.httpsUrl, caCert: fixture("ca-cert.pem") }).info(), UnavailableError);
});

test("TLS with a CA and a pin: both must hold", async () => {
  const fake = track(infoRoute(await FakeHutchd.tls("leaf")));
  const wrong = "BB:".repeat(31) + "BB";
  await assert.rejects(client({ host: fake.httpsUrl, caCert: fixture("ca-cert.pem"), fingerprint: wrong }).info(), FingerprintMismatchError);
  assert.equal(fake.requests.length, 0);
});

test("the WebSocket pins too: a wrong fingerprint never upgrades", async () => {
  const fake = track(await FakeHutchd.tls("self"));
  fake.on("GET", "/v1/boxes/dev", (_req, res) => json(res, 200, sampleBox));
  let upgraded = 0;
  fake.onWs("/v1/boxes/3f2a9c01d4e5/exec/ws", (ws) => {
    upgraded++;
    ws.close();
  });
  const good = client({ host: fake.httpsUrl, fingerprint: selfFingerprint });
  const box = await good.boxes.get("dev");
  const bad = client({ host: fake.httpsUrl, fingerprint: "CC:".repeat(31) + "CC" });
  const { Box } = await import("../../src/index.js");
  const badBox = new Box(bad, box.info);
  const before = fake.requests.length;
  await assert.rejects(badBox.exec(["true"], { onStdout: () => undefined }), FingerprintMismatchError);
  assert.equal(upgraded, 0);
  assert.equal(fake.requests.length, before);
});

test("connections are kept alive between requests", async () => {
  const fake = track(infoRoute(await FakeHutchd.tls("self")));
  const c = client({ host: fake.httpsUrl, fingerprint: selfFingerprint });
  await c.info();
  await c.info();
  await c.info();
  assert.equal(fake.requests.length, 3);
  assert.equal(fake.tlsConnections, 1);
});
