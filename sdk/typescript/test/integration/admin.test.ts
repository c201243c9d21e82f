// What admins do: keys and quotas, secrets, templates (from a box, built from a recipe with its
// log streamed). And what a plain key may not do.

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  AlreadyExistsError,
  NotFoundError,
  PermissionDeniedError,
  ResourceExhaustedError,
  UnauthenticatedError,
} from "../../src/index.js";
import { admin, boxName, client, daemon, user, withBox } from "./daemon.js";

test("keys: make one with a quota, use it, see it listed, remove it", async () => {
  const a = admin();
  const name = `ts-key-${process.pid}`;
  const made = await a.keys.create({ name, maxBoxes: 1, maxMemoryMib: 4096 });
  try {
    assert.match(made.key, /^e2b_[0-9a-f]{40}$/);
    assert.equal(made.name, name);
    assert.equal(made.admin, false);
    assert.equal(made.maxBoxes, 1);
    const listed = (await a.keys.list()).find((k) => k.name === name);
    assert.ok(listed);
    assert.equal(listed.key, undefined, "a listed key has no secret");
    assert.equal(listed.maxMemoryMib, 4096);

    const limited = client({ host: daemon.https_url, apiKey: made.key, fingerprint: daemon.fingerprint });
    assert.equal((await limited.info()).caller?.name, name);
    await withBox(limited, async (box) => {
      assert.equal(box.info.owner, name);
      await assert.rejects(limited.boxes.create({ name: boxName("over") }), (e: unknown) => {
        assert.ok(e instanceof ResourceExhaustedError, String(e));
        assert.equal(e.status, 429);
        assert.match(e.message, /max_boxes/);
        return true;
      });
    });
    await a.keys.remove(name);
    await assert.rejects(limited.info(), UnauthenticatedError);
  } finally {
    await a.keys.remove(name).catch(() => undefined);
  }
});

test("a plain key may not manage keys, templates or the system", async () => {
  const u = user();
  await assert.rejects(u.keys.list(), (e: unknown) => {
    assert.ok(e instanceof PermissionDeniedError, String(e));
    assert.equal(e.status, 403);
    return true;
  });
  await assert.rejects(u.keys.create({ name: "nope" }), PermissionDeniedError);
  await assert.rejects(u.templates.remove("base"), PermissionDeniedError);
  await assert.rejects(u.system.df(), PermissionDeniedError);
  // Templates are shared: listing is fine.
  assert.ok((await u.templates.list()).some((t) => t.name === "base"));
});

test("registries: a login is kept without its password, for admins only, and forgotten", async () => {
  const a = admin();
  // A login is kept, not checked against the registry: this host name needs no registry.
  const host = `ts-${process.pid}.example:5000`;
  const made = await a.registries.login(host, "robot", "t0ken-value");
  try {
    assert.deepEqual(made, { registry: host, username: "robot" });
    const listed = await a.registries.list();
    assert.ok(listed.some((r) => r.registry === host && r.username === "robot"), JSON.stringify(listed));
    assert.ok(!JSON.stringify(listed).includes("t0ken-value"));
    await assert.rejects(user().registries.list(), PermissionDeniedError);
  } finally {
    await a.registries.logout(host);
  }
  assert.ok(!(await a.registries.list()).some((r) => r.registry === host));
  await assert.rejects(a.registries.logout(host), NotFoundError);
});

test("secrets: set (the value never comes back), list, use in a box, remove", async () => {
  const a = admin();
  const name = `TS_SECRET_${process.pid}`;
  const set = await a.secrets.set(name, { value: "s3cr3t-value", domains: ["api.example.com"], format: "Bearer {value}" });
  try {
    assert.equal(set.name, name);
    assert.deepEqual(set.domains, ["api.example.com"]);
    assert.equal(set.format, "Bearer {value}");
    const listed = (await a.secrets.list()).find((s) => s.name === name);
    assert.ok(listed);
    assert.ok(!JSON.stringify(await a.secrets.list()).includes("s3cr3t-value"));
    await withBox(
      a,
      async (box) => {
        assert.deepEqual(box.info.secrets, [name]);
        const seen = (await box.exec(`printenv ${name}`)).stdout.trim();
        assert.ok(seen.startsWith("hutch-secret-"), `the box sees a placeholder: ${seen}`);
        assert.ok(!seen.includes("s3cr3t"));
      },
      { secrets: [name] },
    );
  } finally {
    await a.secrets.remove(name);
  }
  assert.ok(!(await a.secrets.list()).some((s) => s.name === name));
});

test("templates: freeze a stopped box, boot a box from it, remove it", async () => {
  const a = admin();
  const name = `ts-tpl-${process.pid}`;
  await withBox(a, async (source) => {
    await source.exec("echo baked into the template > /home/hutch/baked.txt && sync");
    await source.stop();
    const t = await a.templates.createFromBox(name, source);
    try {
      assert.equal(t.name, name);
      assert.equal(t.source, "box");
      assert.equal(t.sourceBox, source.name);
      assert.ok(t.diskBytes > 0);
      await assert.rejects(a.templates.createFromBox(name, source), AlreadyExistsError);
      await withBox(
        a,
        async (child) => {
          assert.equal(child.template, name);
          assert.equal((await child.exec(["cat", "/home/hutch/baked.txt"])).stdout, "baked into the template\n");
          assert.deepEqual((await a.templates.list()).find((x) => x.name === name)?.usedBy, [child.name]);
        },
        { template: name },
      );
    } finally {
      await a.templates.remove(name);
    }
    await assert.rejects(a.templates.get(name), NotFoundError);
  });
});

test("templates: a recipe build streams its log, then answers the template", { timeout: 30 * 60 * 1000 }, async () => {
  const a = admin();
  await assert.rejects(a.templates.build("no-such-recipe", { onProgress: () => undefined }), NotFoundError);
  const lines: string[] = [];
  const t = await a.templates.build("base", { onProgress: (line) => void lines.push(line) });
  assert.equal(t.name, "base");
  assert.equal(t.source, "recipe");
  assert.ok(lines.length > 0, "progress lines came");
  assert.ok(lines.every((l) => !l.includes("\n")));
});
