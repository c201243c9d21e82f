import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { Readable } from "node:stream";
import { after, before, test } from "node:test";

import { Pack, Parser, type ReadEntry } from "tar";

import { Box, Client, InternalError, InvalidArgumentError, NotFoundError, ProtocolError } from "../../src/index.js";
import { boxInfoFromJson } from "../../src/models.js";
import { FakeHutchd, json, sampleBox } from "./fake_hutchd.js";

let fake: FakeHutchd;
let client: Client;
let box: Box;
const base = `/v1/boxes/${sampleBox.id}`;
const scratch = mkdtempSync(path.join(tmpdir(), "hutch-res-"));

const fileInfo = {
  name: "a.txt",
  path: "/home/hutch/a.txt",
  type: "file",
  size: 5,
  mode: 420,
  permissions: "-rw-r--r--",
  uid: 1000,
  gid: 1000,
  owner: "hutch",
  group: "hutch",
  mtime_ns: "MTIME",
  symlink_target: "",
};
function fileInfoText(extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ ...fileInfo, ...extra }).replace('"MTIME"', "1764400000123456789");
}

before(async () => {
  fake = await FakeHutchd.unix();
  client = new Client({ socketPath: fake.socketPath, env: {} });
  box = new Box(client, boxInfoFromJson(sampleBox));
});
after(async () => {
  client.close();
  await fake.close();
  rmSync(scratch, { recursive: true, force: true });
});

function last(method: string, p: string) {
  const found = [...fake.requests].reverse().find((r) => r.method === method && r.path === p);
  assert.ok(found, `no ${method} ${p}`);
  return found;
}

test("create: the body in the API's names, the answer a Box", async () => {
  fake.on("POST", "/v1/boxes", (req, res) => json(res, 201, { ...sampleBox, ...JSON.parse(req.body.toString()) }));
  const b = await client.boxes.create({ name: "dev", memory: "1G", disk: 4096, env: { A: "1" }, networkPolicy: "debian-mirrors" });
  assert.deepEqual(JSON.parse(last("POST", "/v1/boxes").body.toString()), {
    name: "dev",
    memory_mib: 1024,
    disk_mib: 4096,
    env: { A: "1" },
    network_policy: "debian-mirrors",
  });
  assert.equal(b.info.memoryMib, 1024);
  assert.ok(b instanceof Box);
  const b2 = await Box.create({ client, template: "docker" });
  assert.equal(b2.template, "docker");
});

test("lifecycle calls go to the box's id and update it", async () => {
  fake.on("POST", `${base}/stop`, (_q, res) => json(res, 200, { ...sampleBox, state: "stopped", pid: 0 }));
  fake.on("POST", `${base}/start`, (_q, res) => json(res, 200, sampleBox));
  fake.on("GET", base, (_q, res) => json(res, 200, { ...sampleBox, boot: "cold boot: test" }));
  fake.on("DELETE", base, (req, res) => json(res, 200, { removed: req.query.get("force") ?? "no" }));
  await box.stop();
  assert.equal(box.state, "stopped");
  assert.equal(box.info.pid, 0);
  await box.start();
  assert.equal(box.state, "running");
  await box.refresh();
  assert.equal(box.info.boot, "cold boot: test");
  await box.remove({ force: true });
  assert.equal(last("DELETE", base).query.get("force"), "true");
  await box.remove();
  assert.equal(last("DELETE", base).query.get("force"), null);
});

test("fork, checkpoints and rollback", async () => {
  fake.on("POST", `${base}/fork`, (req, res) => {
    const { count } = JSON.parse(req.body.toString()) as { count: number };
    json(res, 201, { boxes: Array.from({ length: count }, (_, i) => ({ ...sampleBox, id: `child${i}`, name: `dev-${i}` })) });
  });
  const kids = await box.fork(2);
  assert.deepEqual(kids.map((k) => k.name), ["dev-0", "dev-1"]);
  assert.equal(kids[0]?.client, client);
  const cp = { id: "c1", kind: "checkpoint", box_id: sampleBox.id, name: "cp-1", size_bytes: 1000, created_at: 5 };
  fake.on("POST", `${base}/checkpoints`, (_q, res) => json(res, 201, cp));
  fake.on("GET", `${base}/checkpoints`, (_q, res) => json(res, 200, { checkpoints: [cp] }));
  fake.on("POST", `${base}/rollback`, (_q, res) => json(res, 200, { ...sampleBox, boot: "rolled back to checkpoint cp-1" }));
  fake.on("DELETE", `${base}/checkpoints/cp-1`, (_q, res) => json(res, 200, { removed: "cp-1" }));
  assert.equal((await box.checkpoint()).name, "cp-1");
  assert.deepEqual(JSON.parse(last("POST", `${base}/checkpoints`).body.toString()), {});
  await box.checkpoint("named");
  assert.deepEqual(JSON.parse(last("POST", `${base}/checkpoints`).body.toString()), { name: "named" });
  assert.deepEqual((await box.checkpoints()).map((c) => c.sizeBytes), [1000]);
  await box.rollback("cp-1");
  assert.deepEqual(JSON.parse(last("POST", `${base}/rollback`).body.toString()), { checkpoint: "cp-1" });
  assert.equal(box.info.boot, "rolled back to checkpoint cp-1");
  await box.removeCheckpoint("cp-1");
});

test("exec without callbacks is one POST with the ExecRun body", async () => {
  fake.on("POST", `${base}/exec`, (_q, res) =>
    json(res, 200, {
      stdout: "hi\n",
      stderr: "",
      stdout_encoding: "utf-8",
      stderr_encoding: "utf-8",
      exit_code: 0,
      signal: null,
      duration_ms: 3,
      truncated: false,
      timed_out: false,
      pid: 9,
      error: null,
    }),
  );
  const r = await box.exec("echo hi", { stdin: "x", timeoutMs: 1000, env: { A: "b" } });
  assert.equal(r.stdout, "hi\n");
  assert.equal(r.exitCode, 0);
  assert.deepEqual(JSON.parse(last("POST", `${base}/exec`).body.toString()), {
    argv: ["/bin/sh", "-c", "echo hi"],
    env: ["A=b"],
    stdin: "x",
    timeout_ms: 1000,
  });
});

test("processes: start, list, signal", async () => {
  fake.on("POST", `${base}/processes`, (_q, res) =>
    json(res, 201, { id: "p1", pid: 77, argv: ["sleep", "9"], user: "hutch", running: true, log: "/var/log/hutch/p1.log" }),
  );
  fake.on("GET", `${base}/processes`, (_q, res) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end('{"processes":[{"id":"p1","pid":77,"argv":["sleep","9"],"user":"hutch","started_ns":1764400000123456789,"running":false,"log":"/l","signal":15}]}');
  });
  fake.on("POST", `${base}/processes/p1/signal`, (req, res) => json(res, 200, { signalled: "p1", signal: JSON.parse(req.body.toString()).signal }));
  const p = await box.processes.start(["sleep", "9"], { cwd: "/", env: { X: "1" } });
  assert.equal(p.id, "p1");
  assert.deepEqual(JSON.parse(last("POST", `${base}/processes`).body.toString()), { argv: ["sleep", "9"], env: ["X=1"], cwd: "/" });
  const [listed] = await box.processes.list();
  assert.equal(listed?.startedNs, 1764400000123456789n);
  assert.equal(listed?.signal, 15);
  assert.equal(listed?.running, false);
  await box.processes.signal("p1");
  assert.deepEqual(JSON.parse(last("POST", `${base}/processes/p1/signal`).body.toString()), { signal: 15 });
  await box.processes.kill("p1");
  assert.deepEqual(JSON.parse(last("POST", `${base}/processes/p1/signal`).body.toString()), { signal: 9 });
  await assert.rejects(box.processes.get("p2"), NotFoundError);
});

test("ports and policy", async () => {
  const port = { box_id: sampleBox.id, address: "127.0.0.1", host_port: 8080, box_port: 80, listening: true, error: "", connections: 0, accepted: 0, created_at: 1 };
  fake.on("POST", `${base}/ports`, (_q, res) => json(res, 201, port));
  fake.on("GET", `${base}/ports`, (_q, res) => json(res, 200, { ports: [port] }));
  fake.on("DELETE", `${base}/ports/8080`, (_q, res) => json(res, 200, { removed: 8080 }));
  assert.equal((await box.ports.publish({ hostPort: 8080, boxPort: 80 })).listening, true);
  assert.deepEqual(JSON.parse(last("POST", `${base}/ports`).body.toString()), { host_port: 8080, box_port: 80 });
  assert.equal((await box.ports.list())[0]?.hostPort, 8080);
  await box.ports.remove(8080, { address: "::1" });
  assert.equal(last("DELETE", `${base}/ports/8080`).query.get("address"), "::1");
  const policy = { allow: [{ domain: "deb.debian.org", ports: [80, 443] }], deny: [], allow_private: ["192.168.1.0/24"] };
  fake.on("GET", `${base}/policy`, (_q, res) => json(res, 200, { id: sampleBox.id, name: "dev", policy }));
  fake.on("PUT", `${base}/policy`, (req, res) => json(res, 200, { id: sampleBox.id, name: "dev", policy: JSON.parse(req.body.toString()).policy === "none" ? { allow: [], deny: [] } : policy }));
  fake.on("GET", `${base}/policy/log`, (_q, res) =>
    json(res, 200, { entries: [{ box: "dev", time_ms: 5, proto: "dns", host: "x.org", port: 53, address: "", decision: "deny", reason: "not allowed", bytes_up: 0, bytes_down: 0, secrets: [] }], next: 1 }),
  );
  const got = await box.policy.get();
  assert.deepEqual(got, { allow: [{ domain: "deb.debian.org", ports: [80, 443] }], deny: [], allowPrivate: ["192.168.1.0/24"] });
  assert.deepEqual(await box.policy.set("none"), { allow: [], deny: [] });
  assert.deepEqual(JSON.parse(last("PUT", `${base}/policy`).body.toString()), { policy: "none" });
  const log = await box.policy.log({ after: 0, limit: 10 });
  assert.equal(log.next, 1);
  assert.equal(log.entries[0]?.decision, "deny");
  assert.equal(last("GET", `${base}/policy/log`).query.get("limit"), "10");
});

test("templates: a build streams its log lines, then the template", async () => {
  fake.on("POST", "/v1/templates", (req, res) => {
    const body = JSON.parse(req.body.toString()) as { name: string; from_box?: string };
    if (body.from_box !== undefined) {
      json(res, 201, { name: body.name, source: "box", source_box: body.from_box, used_by: [] });
      return;
    }
    assert.equal(req.headers["accept"], "application/x-ndjson");
    res.writeHead(200, { "Content-Type": "application/x-ndjson" });
    res.write('{"progress":"step 1"}\n{"progress":"step 2"}\n');
    setTimeout(() => {
      if (body.name === "broken") res.end('{"error":{"code":"internal","message":"mmdebstrap failed"}}\n');
      else res.end(`{"template":{"name":"${body.name}","source":"recipe","disk_bytes":1024,"used_by":["a"]}}\n`);
    }, 10);
  });
  const lines: string[] = [];
  const t = await client.templates.build("docker", { onProgress: (l) => void lines.push(l) });
  assert.deepEqual(lines, ["step 1", "step 2"]);
  assert.equal(t.name, "docker");
  assert.equal(t.diskBytes, 1024);
  assert.deepEqual(t.usedBy, ["a"]);
  await assert.rejects(client.templates.build("broken"), (e: unknown) => {
    assert.ok(e instanceof InternalError);
    assert.equal(e.message, "mmdebstrap failed");
    return true;
  });
  const frozen = await client.templates.createFromBox("mine", box);
  assert.equal(frozen.sourceBox, sampleBox.id);
});

test("secrets and keys", async () => {
  fake.on("PUT", "/v1/secrets/API_KEY", (req, res) => {
    const b = JSON.parse(req.body.toString());
    json(res, 200, { name: "API_KEY", domains: b.domains, header: b.header ?? "Authorization", format: b.format ?? "{value}", updated_at: 3 });
  });
  const s = await client.secrets.set("API_KEY", { value: "v", domains: ["api.example.com"], format: "Bearer {value}" });
  assert.equal(s.format, "Bearer {value}");
  assert.deepEqual(JSON.parse(last("PUT", "/v1/secrets/API_KEY").body.toString()), { value: "v", domains: ["api.example.com"], format: "Bearer {value}" });
  fake.on("POST", "/v1/keys", (req, res) => {
    const b = JSON.parse(req.body.toString());
    json(res, 201, { ...b, id: "k1", admin: b.admin ?? false, created_at: 1, last_used_at: 0, key: "e2b_" + "0".repeat(40) });
  });
  const k = await client.keys.create({ name: "alice", maxBoxes: 2, maxMemoryMib: 2048 });
  assert.equal(k.key, "e2b_" + "0".repeat(40));
  assert.equal(k.maxBoxes, 2);
  assert.deepEqual(JSON.parse(last("POST", "/v1/keys").body.toString()), { name: "alice", max_boxes: 2, max_memory_mib: 2048 });
});

test("registries: login, list, logout", async () => {
  fake.on("PUT", "/v1/registries/registry.example%3A5000", (req, res) => {
    json(res, 200, { registry: "registry.example:5000", username: JSON.parse(req.body.toString()).username });
  });
  const made = await client.registries.login("registry.example:5000", "robot", "t0ken");
  assert.deepEqual(made, { registry: "registry.example:5000", username: "robot" });
  assert.deepEqual(JSON.parse(last("PUT", "/v1/registries/registry.example%3A5000").body.toString()), { username: "robot", password: "t0ken" });
  fake.on("GET", "/v1/registries", (_req, res) => json(res, 200, { registries: [{ registry: "docker.io", username: "me" }] }));
  assert.deepEqual(await client.registries.list(), [{ registry: "docker.io", username: "me" }]);
  fake.on("DELETE", "/v1/registries/docker.io", (_req, res) => json(res, 200, { removed: "docker.io" }));
  await client.registries.logout("docker.io");
  await assert.rejects(client.registries.login("docker.io", "me", ""), InvalidArgumentError);
});

test("files: read as text, bytes and a stream with its headers", async () => {
  fake.on("GET", `${base}/files`, (req, res) => {
    if (req.query.get("path") === "missing") {
      json(res, 404, { error: { code: "not_found", message: "No such file missing" } });
      return;
    }
    res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": "4", "X-Hutch-File-Mode": "0640", "X-Hutch-File-Mtime-Ns": "1764400000123456789" });
    res.end(Buffer.from([0x68, 0xc3, 0xa9, 0xff]));
  });
  assert.equal(await box.files.read("a.txt"), "h\u00e9\ufffd");
  assert.deepEqual([...(await box.files.read("a.txt", { format: "bytes" }))], [0x68, 0xc3, 0xa9, 0xff]);
  assert.equal(last("GET", `${base}/files`).query.get("path"), "a.txt");
  const stream = await box.files.read("/etc/x", { format: "stream", user: "root" });
  assert.equal(stream.size, 4);
  assert.equal(stream.mode, 0o640);
  assert.equal(stream.mtimeNs, 1764400000123456789n);
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  assert.equal(Buffer.concat(chunks).length, 4);
  assert.equal(last("GET", `${base}/files`).query.get("user"), "root");
  await assert.rejects(box.files.read("missing"), NotFoundError);
});

test("files: write text with Content-Length, a stream chunked", async () => {
  fake.on("PUT", `${base}/files`, (req, res) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(fileInfoText({ size: req.body.length, path: req.query.get("path") }));
  });
  const info = await box.files.write("a.txt", "hello", { mode: 0o600, owner: "root" });
  assert.equal(info.mtimeNs, 1764400000123456789n);
  let req = last("PUT", `${base}/files`);
  assert.equal(req.headers["content-length"], "5");
  assert.equal(req.query.get("mode"), "0600");
  assert.equal(req.query.get("owner"), "root");
  assert.equal(req.body.toString(), "hello");
  const big = Buffer.alloc(300_000, 7);
  const streamed = await box.files.write("/tmp/big", Readable.from([big.subarray(0, 100_000), big.subarray(100_000)]));
  req = last("PUT", `${base}/files`);
  assert.equal(req.headers["transfer-encoding"], "chunked");
  assert.equal(req.body.length, 300_000);
  assert.equal(streamed.size, 300_000);
  await assert.rejects(box.files.write("x", "y", { mode: "rwx" }), InvalidArgumentError);
});

test("files: a source stream that fails rejects with its own error", async () => {
  async function* failing() {
    yield Buffer.from("start");
    throw new Error("disk read failed");
  }
  await assert.rejects(box.files.write("/tmp/f", failing()), /disk read failed/);
});

test("files: stat, list, mkdir, move, remove, exists", async () => {
  fake.on("GET", `${base}/files/stat`, (req, res) => {
    if (req.query.get("path") === "nope") return json(res, 404, { error: { code: "not_found", message: "No such file" } });
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(fileInfoText());
  });
  fake.on("GET", `${base}/files/list`, (_q, res) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(`{"entries":[${fileInfoText()},${fileInfoText({ name: "d", type: "dir" })}],"truncated":false}`);
  });
  fake.on("POST", `${base}/files/mkdir`, (req, res) => {
    const b = JSON.parse(req.body.toString());
    res.writeHead(b.path === "exists" ? 200 : 201, { "Content-Type": "application/json" });
    res.end(fileInfoText({ type: "dir", ...(b.path === "exists" ? { created: false } : {}) }));
  });
  fake.on("POST", `${base}/files/move`, (_q, res) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(fileInfoText({ path: "/home/hutch/b.txt" }));
  });
  fake.on("DELETE", `${base}/files`, (req, res) => json(res, 200, { removed: req.query.get("path") }));
  assert.equal((await box.files.stat("a.txt")).permissions, "-rw-r--r--");
  assert.equal(await box.files.exists("a.txt"), true);
  assert.equal(await box.files.exists("nope"), false);
  const listing = await box.files.list("/home/hutch", { depth: 2 });
  assert.deepEqual(listing.entries.map((e) => e.type), ["file", "dir"]);
  assert.equal(last("GET", `${base}/files/list`).query.get("depth"), "2");
  await assert.rejects(box.files.list("/", { depth: 40 }), /depth must be 1 to 32/);
  assert.equal((await box.files.mkdir("new", { mode: 0o700 })).created, true);
  assert.deepEqual(JSON.parse(last("POST", `${base}/files/mkdir`).body.toString()), { path: "new", mode: 448 });
  assert.equal((await box.files.mkdir("exists")).created, false);
  assert.equal((await box.files.move("a.txt", "b.txt", { overwrite: true })).path, "/home/hutch/b.txt");
  assert.deepEqual(JSON.parse(last("POST", `${base}/files/move`).body.toString()), { from: "a.txt", to: "b.txt", overwrite: true });
  await box.files.remove("/tmp/d", { recursive: true });
  assert.equal(last("DELETE", `${base}/files`).query.get("recursive"), "true");
});

function makeTree(root: string): void {
  mkdirSync(path.join(root, "src/deep"), { recursive: true });
  writeFileSync(path.join(root, "src/a.txt"), "alpha");
  writeFileSync(path.join(root, "src/deep/b.bin"), Buffer.alloc(200_000, 3));
  writeFileSync(path.join(root, "@weird"), "at-name");
  symlinkSync("src/a.txt", path.join(root, "link"));
}

async function tarEntries(body: Buffer): Promise<{ path: string; type: string; size: number }[]> {
  const entries: { path: string; type: string; size: number }[] = [];
  const parser = new Parser({ onReadEntry: (e: ReadEntry) => { entries.push({ path: e.path, type: e.type, size: e.size }); e.resume(); } });
  await new Promise<void>((resolve, reject) => {
    parser.on("end", () => resolve());
    parser.on("error", reject);
    parser.end(body);
  });
  return entries;
}

test("files: upload packs a directory's contents as tar, streamed", async () => {
  let received: Buffer = Buffer.alloc(0);
  fake.on("PUT", `${base}/files/archive`, (req, res) => {
    received = req.body;
    json(res, 200, { path: req.query.get("path"), entries: 6 });
  });
  const local = path.join(scratch, "up");
  makeTree(local);
  const result = await box.files.upload(local, "/home/hutch/proj");
  assert.deepEqual(result, { path: "/home/hutch/proj", entries: 6 });
  const req = last("PUT", `${base}/files/archive`);
  assert.equal(req.headers["content-type"], "application/x-tar");
  assert.equal(req.headers["transfer-encoding"], "chunked");
  const entries = await tarEntries(received);
  const byPath = Object.fromEntries(entries.map((e) => [e.path.replace(/\/$/, ""), e]));
  assert.deepEqual(Object.keys(byPath).sort(), ["@weird", "link", "src", "src/a.txt", "src/deep", "src/deep/b.bin"]);
  assert.equal(byPath["link"]?.type, "SymbolicLink");
  assert.equal(byPath["src/deep/b.bin"]?.size, 200_000);
  assert.ok(entries.every((e) => !e.path.startsWith("/") && !e.path.startsWith("..")));
  const empty = path.join(scratch, "empty");
  mkdirSync(empty);
  await box.files.upload(empty, "/tmp/e");
  assert.deepEqual(await tarEntries(received), []);
  await assert.rejects(box.files.upload(path.join(local, "src/a.txt"), "/tmp/x"), /not a directory/);
});

test("files: download unpacks the box's directory into the local one", async () => {
  const remote = path.join(scratch, "remote-root");
  mkdirSync(path.join(remote, "proj"), { recursive: true });
  makeTree(path.join(remote, "proj"));
  fake.on("GET", `${base}/files/stat`, (_q, res) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(fileInfoText({ type: "dir", name: "proj" }));
  });
  fake.on("GET", `${base}/files/archive`, (_q, res) => {
    res.writeHead(200, { "Content-Type": "application/x-tar" });
    const pack = new Pack({ cwd: remote, portable: true });
    pack.add("proj");
    pack.end();
    Readable.from(pack as unknown as AsyncIterable<Buffer>).pipe(res);
  });
  const local = path.join(scratch, "down/nested");
  const result = await box.files.download("/home/hutch/proj", local);
  assert.equal(result.path, local);
  assert.equal(result.entries, 6);
  assert.equal(readFileSync(path.join(local, "src/a.txt"), "utf8"), "alpha");
  assert.equal(statSync(path.join(local, "src/deep/b.bin")).size, 200_000);
  assert.equal(readlinkSync(path.join(local, "link")), "src/a.txt");
  assert.equal(readFileSync(path.join(local, "@weird"), "utf8"), "at-name");
});

test("files: a download whose archive escapes the directory is refused", async () => {
  fake.on("GET", `${base}/files/archive`, (_q, res) => {
    res.writeHead(200, { "Content-Type": "application/x-tar" });
    // A hand-made header: proj/../../escaped.txt
    const header = Buffer.alloc(512);
    header.write("proj/../../escaped.txt", 0);
    header.write("0000644\0", 100);
    header.write("0000000\0", 108);
    header.write("0000000\0", 116);
    header.write("00000000004\0", 124);
    header.write("00000000000\0", 136);
    header.write("        ", 148);
    header.write("0", 156);
    header.write("ustar\0" + "00", 257);
    let sum = 0;
    for (const b of header) sum += b;
    header.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
    const data = Buffer.alloc(512);
    data.write("evil");
    res.end(Buffer.concat([header, data, Buffer.alloc(1024)]));
  });
  const local = path.join(scratch, "victim/inside");
  await assert.rejects(box.files.download("/home/hutch/proj", local), ProtocolError);
  assert.equal(existsSync(path.join(scratch, "escaped.txt")), false);
  assert.equal(existsSync(path.join(scratch, "victim/escaped.txt")), false);
});
