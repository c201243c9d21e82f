// Boxes: create with options, list, get, refresh, stop and start, remove; the errors a user
// meets; owners (a key sees only its own boxes).

import assert from "node:assert/strict";
import { test } from "node:test";

import { AlreadyExistsError, Box, FailedPreconditionError, InvalidArgumentError, NotFoundError } from "../../src/index.js";
import { admin, boxName, local, user, withBox } from "./daemon.js";

test("create with sizes as strings, env and a name; the Box says so", async () => {
  const c = admin();
  const name = boxName("create");
  await withBox(
    c,
    async (box) => {
      assert.equal(box.name, name);
      assert.equal(box.state, "running");
      assert.equal(box.info.memoryMib, 768);
      assert.equal(box.info.cpus, 1);
      assert.deepEqual(box.info.env, { PROJECT: "hutch", EMPTY: "" });
      assert.match(box.id, /^[0-9a-f]{12}$/);
      assert.ok(box.info.createdAt > 1_700_000_000);
      const r = await box.exec(["sh", "-c", 'echo "$PROJECT" && free -m | awk "/Mem:/{print \\$2}"']);
      const [project, mem] = r.stdout.trim().split("\n");
      assert.equal(project, "hutch");
      assert.ok(Number(mem) > 500 && Number(mem) <= 768, `memory in the box: ${mem} MiB`);
    },
    { name, memory: "768M", cpus: 1, env: { PROJECT: "hutch", EMPTY: "" } },
  );
});

test("list, get by name, id and id prefix; refresh", async () => {
  const c = admin();
  await withBox(c, async (box) => {
    const listed = await c.boxes.list();
    assert.ok(listed.some((b) => b.id === box.id));
    assert.equal((await c.boxes.get(box.name)).id, box.id);
    assert.equal((await c.boxes.get(box.id)).name, box.name);
    assert.equal((await Box.get(box.id.slice(0, 8), { client: c })).id, box.id);
    const before = box.info.updatedAt;
    await box.refresh();
    assert.equal(box.state, "running");
    assert.ok(box.info.updatedAt >= before);
    assert.ok(box.info.pid > 0);
  });
});

test("stop and start: files survive, the state follows", async () => {
  const c = admin();
  await withBox(c, async (box) => {
    await box.exec("echo persisted > /home/hutch/p.txt && sync");
    await box.stop({ shutdown: true });
    assert.equal(box.state, "stopped");
    assert.equal(box.info.pid, 0);
    await assert.rejects(box.exec(["true"]), FailedPreconditionError);
    await box.start();
    assert.equal(box.state, "running");
    assert.equal((await box.exec(["cat", "/home/hutch/p.txt"])).stdout, "persisted\n");
  });
});

test("stop suspends, start resumes: a process and memory survive", async () => {
  const c = admin();
  await withBox(c, async (box) => {
    await box.exec("echo in-memory > /dev/shm/m");
    const pid = (await box.exec("sleep 1000 >/dev/null 2>&1 & echo $!")).stdout.trim();
    await box.stop();
    assert.equal(box.state, "suspended");
    await assert.rejects(box.exec(["true"]), FailedPreconditionError);
    await box.start();
    assert.equal(box.state, "running");
    assert.equal(box.info.boot, "resumed from its suspended state");
    assert.equal((await box.exec(["cat", "/dev/shm/m"])).stdout, "in-memory\n");
    assert.equal((await box.exec(["kill", "-0", pid])).exitCode, 0);
  });
});

test("a running box is removed only with force; then it is gone", async () => {
  const c = admin();
  const box = await c.boxes.create({ name: boxName("rm") });
  await assert.rejects(box.remove(), (e: unknown) => {
    assert.ok(e instanceof FailedPreconditionError, String(e));
    assert.equal(e.status, 409);
    return true;
  });
  await box.remove({ force: true });
  await assert.rejects(c.boxes.get(box.id), NotFoundError);
  await assert.rejects(box.refresh(), NotFoundError);
});

test("errors: a taken name, a bad size, an unknown template", async () => {
  const c = admin();
  await withBox(c, async (box) => {
    await assert.rejects(c.boxes.create({ name: box.name }), AlreadyExistsError);
  });
  await assert.rejects(c.boxes.create({ memory: "64M" }), (e: unknown) => {
    assert.ok(e instanceof InvalidArgumentError, String(e));
    assert.equal(e.status, 400);
    assert.match(e.message, /memory/);
    return true;
  });
  await assert.rejects(c.boxes.create({ template: "no-such-template" }), NotFoundError);
  // Found on this side, nothing sent.
  await assert.rejects(c.boxes.create({ memory: "lots" }), (e: unknown) => e instanceof InvalidArgumentError && e.status === 0);
});

test("owners: a key sees its own boxes; another's box is not found", async () => {
  const mine = user();
  const root = local();
  await withBox(mine, async (box) => {
    assert.ok(box.info.owner !== "", "a box made with a key has its owner");
    assert.ok((await mine.boxes.list()).some((b) => b.id === box.id));
    // The host administrator sees it too.
    assert.equal((await root.boxes.get(box.id)).info.owner, box.info.owner);
  });
  await withBox(root, async (box) => {
    assert.equal(box.info.owner, "");
    await assert.rejects(mine.boxes.get(box.id), NotFoundError);
    assert.ok(!(await mine.boxes.list()).some((b) => b.id === box.id));
    const foreign = new Box(mine, box.info);
    await assert.rejects(foreign.exec(["true"]), NotFoundError);
    await assert.rejects(foreign.files.read("/etc/hostname"), NotFoundError);
    await assert.rejects(foreign.exec(["true"], { onStdout: () => undefined }), NotFoundError);
    await assert.rejects(foreign.remove({ force: true }), NotFoundError);
  });
});

test("logs and stats of a running box", async () => {
  const c = admin();
  await withBox(c, async (box) => {
    const console = await box.logs();
    assert.ok(console.length > 0);
    const stats = await box.stats();
    assert.equal(stats.id, box.id);
    assert.ok(stats.memory.bytes > 0);
    assert.ok(stats.pids.current > 0);
  });
});
