// Published ports and the egress policy with its log.

import assert from "node:assert/strict";
import * as net from "node:net";
import { test } from "node:test";

import { AlreadyExistsError, InvalidArgumentError } from "../../src/index.js";
import { admin, eventually, withBox } from "./daemon.js";

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test("a published port reaches a server in the box; removing it closes it", async () => {
  await withBox(admin(), async (box) => {
    await box.exec("mkdir -p /tmp/www && echo served from the box > /tmp/www/index.html");
    await box.processes.start(["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"], { cwd: "/tmp/www" });
    const hostPort = await freePort();
    const port = await box.ports.publish({ hostPort, boxPort: 8000 });
    assert.equal(port.hostPort, hostPort);
    assert.equal(port.boxPort, 8000);
    assert.equal(port.address, "127.0.0.1");
    assert.equal(port.listening, true);
    const body = await eventually("the page through the port", async () => {
      const r = await fetch(`http://127.0.0.1:${hostPort}/index.html`).catch(() => undefined);
      return r?.ok ? await r.text() : undefined;
    });
    assert.equal(body, "served from the box\n");
    const [listed] = await box.ports.list();
    assert.equal(listed?.hostPort, hostPort);
    assert.ok((listed?.accepted ?? 0) >= 1);
    await assert.rejects(box.ports.publish({ hostPort, boxPort: 9000 }), AlreadyExistsError);
    await box.ports.remove(hostPort);
    assert.deepEqual(await box.ports.list(), []);
    await assert.rejects(fetch(`http://127.0.0.1:${hostPort}/`));
  });
});

test("policy: get, set a preset and rules, refuse a bad one; the log shows what was refused", async () => {
  await withBox(
    admin(),
    async (box) => {
      const initial = await box.policy.get();
      assert.deepEqual(initial.allow, [{ domain: "example.org", ports: [443] }]);
      const set = await box.policy.set({ allow: [{ domain: "*.debian.org", ports: [80, 443] }], deny: [{ domain: "evil.debian.org" }] });
      assert.deepEqual(set.allow, [{ domain: "*.debian.org", ports: [80, 443] }]);
      assert.equal(set.deny[0]?.domain, "evil.debian.org");
      assert.deepEqual((await box.policy.get()).deny.map((r) => r.domain), ["evil.debian.org"]);
      await assert.rejects(box.policy.set({ allow: [{ domain: "" }], deny: [] }), InvalidArgumentError);
      const none = await box.policy.set("none");
      assert.deepEqual(none.allow, []);

      // A name the policy does not allow: the resolver refuses it, and says so in the log.
      await box.exec(["getent", "hosts", "refused.example.com"], { timeoutMs: 20_000 });
      const log = await eventually("a deny entry", async () => {
        const l = await box.policy.log();
        return l.entries.some((e) => e.decision === "deny" && e.host.includes("refused.example.com")) ? l : undefined;
      });
      const entry = log.entries.find((e) => e.host.includes("refused.example.com"))!;
      assert.ok([box.id, box.name].includes(entry.box), `the entry names the box: ${entry.box}`);
      assert.ok(entry.timeMs > 1_700_000_000_000);
      assert.ok(log.next >= log.entries.length);
      const after = await box.policy.log({ after: log.next });
      assert.ok(after.entries.length === 0 || after.next > log.next);
      const limited = await box.policy.log({ limit: 1 });
      assert.ok(limited.entries.length <= 1);
    },
    { networkPolicy: { allow: [{ domain: "example.org", ports: [443] }], deny: [] } },
  );
});
