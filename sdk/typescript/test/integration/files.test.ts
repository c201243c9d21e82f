// Files without exec: read and write (text, bytes, streams), stat, list, mkdir, move, remove,
// and whole trees both ways as tar.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { Readable } from "node:stream";
import { after, before, test } from "node:test";

import {
  AlreadyExistsError,
  Box,
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
} from "../../src/index.js";
import { admin, boxName } from "./daemon.js";

let box: Box;
const scratch = mkdtempSync(path.join(tmpdir(), "hutch-ts-files-"));
before(async () => {
  box = await admin().boxes.create({ name: boxName("files") });
});
after(async () => {
  await box?.remove({ force: true });
  rmSync(scratch, { recursive: true, force: true });
});

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

test("write and read text; a relative path is under the user's home", async () => {
  const info = await box.files.write("hello.txt", "héllo, box\n");
  assert.equal(info.path, "/home/hutch/hello.txt");
  assert.equal(info.name, "hello.txt");
  assert.equal(info.type, "file");
  assert.equal(info.size, Buffer.byteLength("héllo, box\n"));
  assert.equal(info.owner, "hutch");
  assert.equal(info.uid, 1000);
  assert.ok(info.mtimeNs > 1_700_000_000_000_000_000n);
  assert.equal(await box.files.read("hello.txt"), "héllo, box\n");
  assert.equal(await box.files.read("/home/hutch/hello.txt"), "héllo, box\n");
  // What exec sees is the same file.
  assert.equal((await box.exec(["cat", "/home/hutch/hello.txt"])).stdout, "héllo, box\n");
});

test("bytes both ways, exactly; parents are made; mode and owner as asked", async () => {
  const bytes = new Uint8Array(randomBytes(70_000));
  const info = await box.files.write("/tmp/deep/er/blob.bin", bytes, { mode: 0o600 });
  assert.equal(info.size, 70_000);
  assert.equal(info.mode & 0o777, 0o600);
  assert.equal(info.permissions, "-rw-------");
  const back = await box.files.read("/tmp/deep/er/blob.bin", { format: "bytes" });
  assert.equal(sha(back), sha(bytes));
  const rootOwned = await box.files.write("/tmp/root-file", "x", { user: "root", owner: "root", mode: "0640" });
  assert.equal(rootOwned.owner, "root");
  assert.equal(rootOwned.permissions, "-rw-r-----");
});

test("streams: 20 MiB written from a generator and read back as a stream, never whole", async () => {
  const chunk = randomBytes(1 << 20);
  const hash = createHash("sha256");
  async function* source() {
    for (let i = 0; i < 20; i++) {
      hash.update(chunk);
      yield chunk;
    }
  }
  const info = await box.files.write("/tmp/big.bin", source());
  assert.equal(info.size, 20 << 20);
  const expected = hash.digest("hex");
  const stream = await box.files.read("/tmp/big.bin", { format: "stream" });
  assert.equal(stream.size, 20 << 20);
  const readHash = createHash("sha256");
  let n = 0;
  for await (const c of stream) {
    readHash.update(c as Buffer);
    n += (c as Buffer).length;
  }
  assert.equal(n, 20 << 20);
  assert.equal(readHash.digest("hex"), expected);
  assert.equal((await box.exec(["sha256sum", "/tmp/big.bin"])).stdout.split(" ")[0], expected);
  // A Node Readable works as the source too.
  await box.files.write("/tmp/from-readable", Readable.from(["a", "b", "c"]));
  assert.equal(await box.files.read("/tmp/from-readable"), "abc");
});

test("stat, exists, list (depth), mkdir, move, remove", async () => {
  const made = await box.files.mkdir("work/a/b");
  assert.equal(made.created, true);
  assert.equal(made.type, "dir");
  assert.equal((await box.files.mkdir("work/a/b")).created, false);
  await box.files.write("work/a/one.txt", "1");
  await box.files.write("work/a/b/two.txt", "22");
  await box.exec(["ln", "-s", "one.txt", "/home/hutch/work/a/link"]);
  const link = await box.files.stat("work/a/link");
  assert.equal(link.type, "symlink");
  assert.equal(link.symlinkTarget, "one.txt");
  assert.equal(await box.files.exists("work/a/one.txt"), true);
  assert.equal(await box.files.exists("work/a/none.txt"), false);

  const shallow = await box.files.list("work/a");
  assert.deepEqual(shallow.entries.map((e) => e.name), ["b", "link", "one.txt"]);
  assert.equal(shallow.truncated, false);
  const deep = await box.files.list("/home/hutch/work", { depth: 3 });
  assert.deepEqual(
    deep.entries.map((e) => e.path),
    ["/home/hutch/work/a", "/home/hutch/work/a/b", "/home/hutch/work/a/b/two.txt", "/home/hutch/work/a/link", "/home/hutch/work/a/one.txt"],
  );

  const moved = await box.files.move("work/a/one.txt", "work/uno.txt");
  assert.equal(moved.path, "/home/hutch/work/uno.txt");
  await box.files.write("work/dos.txt", "2");
  await assert.rejects(box.files.move("work/uno.txt", "work/dos.txt"), AlreadyExistsError);
  await box.files.move("work/uno.txt", "work/dos.txt", { overwrite: true });
  assert.equal(await box.files.read("work/dos.txt"), "1");

  await assert.rejects(box.files.remove("work/a"), FailedPreconditionError);
  await box.files.remove("work/a", { recursive: true });
  await box.files.remove("work/dos.txt");
  assert.deepEqual((await box.files.list("work")).entries, []);
});

test("errors: missing, wrong type, not allowed", async () => {
  await assert.rejects(box.files.read("/no/such/file"), (e: unknown) => {
    assert.ok(e instanceof NotFoundError, String(e));
    assert.equal(e.status, 404);
    return true;
  });
  await assert.rejects(box.files.stat("/no/such/file"), NotFoundError);
  await assert.rejects(box.files.read("/etc"), InvalidArgumentError);
  await assert.rejects(box.files.list("/etc/hostname"), InvalidArgumentError);
  await assert.rejects(box.files.read("/etc/shadow"), PermissionDeniedError);
  await assert.rejects(box.files.write("/root/nope.txt", "x"), PermissionDeniedError);
  // As root it works.
  assert.match(await box.files.read("/etc/shadow", { user: "root" }), /^root:/);
  await box.files.write("/tmp/file-in-the-way", "x");
  await assert.rejects(box.files.mkdir("/tmp/file-in-the-way"), (e: unknown) => (e as { status?: number }).status === 409);
});

function makeTree(root: string): Record<string, string> {
  mkdirSync(path.join(root, "src/nested/deeper"), { recursive: true });
  mkdirSync(path.join(root, "empty-dir"));
  const files: Record<string, string> = {
    "README.md": "# project\n",
    "src/main.py": "print('hi')\n",
    "src/nested/data.bin": randomBytes(3 << 20).toString("base64"),
    "src/nested/deeper/x.txt": "x",
    "with space & ünicode.txt": "odd name",
  };
  for (const [p, text] of Object.entries(files)) writeFileSync(path.join(root, p), text);
  symlinkSync("src/main.py", path.join(root, "main-link"));
  return files;
}

test("upload a tree, see it in the box, download it back the same", async () => {
  const local = path.join(scratch, "tree");
  const files = makeTree(local);
  const up = await box.files.upload(local, "/home/hutch/project");
  assert.equal(up.path, "/home/hutch/project");
  assert.ok(up.entries >= Object.keys(files).length + 4, `entries: ${up.entries}`);
  const inBox = await box.exec("cd project && find . | sort && sha256sum src/nested/data.bin && readlink main-link && stat -c %U src/main.py");
  const lines = inBox.stdout.trim().split("\n");
  for (const p of Object.keys(files)) assert.ok(lines.includes(`./${p}`), `${p} in ${lines.join(", ")}`);
  assert.ok(lines.includes("./empty-dir"));
  assert.ok(lines.includes("src/main.py"));
  assert.equal(lines[lines.length - 1], "hutch");
  assert.ok(lines.some((l) => l.startsWith(sha(Buffer.from(files["src/nested/data.bin"]!)))));

  await box.exec("echo made in the box > project/src/new.txt");
  const back = path.join(scratch, "back");
  const down = await box.files.download("/home/hutch/project", back);
  assert.equal(down.path, back);
  for (const [p, text] of Object.entries(files)) assert.equal(readFileSync(path.join(back, p), "utf8"), text, p);
  assert.equal(readFileSync(path.join(back, "src/new.txt"), "utf8"), "made in the box\n");
  assert.ok(lstatSync(path.join(back, "main-link")).isSymbolicLink());
  assert.equal(readlinkSync(path.join(back, "main-link")), "src/main.py");
  assert.ok(lstatSync(path.join(back, "empty-dir")).isDirectory());
});

test("upload into an existing directory merges; an empty directory uploads fine", async () => {
  const a = path.join(scratch, "merge-a");
  mkdirSync(a);
  writeFileSync(path.join(a, "first.txt"), "1");
  await box.files.upload(a, "/tmp/merged");
  const b = path.join(scratch, "merge-b");
  mkdirSync(b);
  writeFileSync(path.join(b, "second.txt"), "2");
  await box.files.upload(b, "/tmp/merged");
  assert.deepEqual((await box.files.list("/tmp/merged")).entries.map((e) => e.name), ["first.txt", "second.txt"]);
  const empty = path.join(scratch, "empty");
  mkdirSync(empty);
  const up = await box.files.upload(empty, "/tmp/empty-upload");
  assert.equal(up.entries, 0);
  assert.equal((await box.files.stat("/tmp/empty-upload")).type, "dir");
});

test("download of a file or a missing path is refused clearly", async () => {
  await assert.rejects(box.files.download("/etc/hostname", path.join(scratch, "x")), /not a directory/);
  await assert.rejects(box.files.download("/no/such/dir", path.join(scratch, "y")), NotFoundError);
});
