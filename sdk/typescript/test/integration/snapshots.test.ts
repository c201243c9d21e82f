// Fork, checkpoints and rollback on real boxes.

import assert from "node:assert/strict";
import { test } from "node:test";

import { AlreadyExistsError, Box, NotFoundError } from "../../src/index.js";
import { admin, boxName } from "./daemon.js";

// State through exec (the files API has its own tests).
async function put(box: Box, file: string, text: string): Promise<void> {
  const r = await box.exec(["sh", "-c", 'printf %s "$1" > "$2"', "put", text, file]);
  assert.equal(r.exitCode, 0, r.stderr);
}
async function get(box: Box, file: string): Promise<string> {
  return (await box.exec(["cat", file])).stdout;
}

test("fork: children start from the parent's state and go their own way", async () => {
  const c = admin();
  const parent = await c.boxes.create({ name: boxName("parent"), env: { INHERITED: "yes" } });
  const boxes: Box[] = [parent];
  try {
    await put(parent, "state.txt", "parent");
    const children = await parent.fork(2);
    boxes.push(...children);
    assert.equal(children.length, 2);
    for (const child of children) {
      assert.equal(child.state, "running");
      assert.notEqual(child.id, parent.id);
      assert.equal(await get(child, "state.txt"), "parent");
      assert.equal((await child.exec("echo $INHERITED")).stdout, "yes\n");
      assert.deepEqual(child.info.env, { INHERITED: "yes" });
    }
    await put(children[0]!, "state.txt", "child");
    assert.equal(await get(parent, "state.txt"), "parent");
    const named = await parent.fork({ names: [boxName("named-child")] });
    boxes.push(...named);
    assert.equal(named.length, 1);
    assert.match(named[0]!.name, /^ts-named-child-/);
  } finally {
    for (const b of boxes) await b.remove({ force: true });
  }
});

test("checkpoint, list, rollback, remove a checkpoint", async () => {
  const c = admin();
  const box = await c.boxes.create({ name: boxName("cp") });
  try {
    await put(box, "v.txt", "one");
    const first = await box.checkpoint("first");
    assert.equal(first.name, "first");
    assert.equal(first.boxId, box.id);
    assert.equal(first.kind, "checkpoint");
    await put(box, "v.txt", "two");
    const second = await box.checkpoint();
    assert.ok(second.name !== "");
    await assert.rejects(box.checkpoint("first"), AlreadyExistsError);
    assert.deepEqual((await box.checkpoints()).map((cp) => cp.name), ["first", second.name]);
    await put(box, "v.txt", "three");
    await box.rollback("first");
    assert.equal(box.state, "running");
    assert.match(box.info.boot, /first/);
    assert.equal(await get(box, "v.txt"), "one");
    await box.rollback(second.name);
    assert.equal(await get(box, "v.txt"), "two");
    await box.removeCheckpoint("first");
    assert.deepEqual((await box.checkpoints()).map((cp) => cp.name), [second.name]);
    await assert.rejects(box.rollback("first"), NotFoundError);
  } finally {
    await box.remove({ force: true });
  }
});
