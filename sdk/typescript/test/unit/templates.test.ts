// Templates from images, archives and Dockerfiles against the fake hutchd: what is sent (query,
// body, headers) and how the NDJSON stream is read.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { Readable } from "node:stream";
import { after, before, test } from "node:test";

import { Parser, type ReadEntry } from "tar";

import { AlreadyExistsError, Client, InvalidArgumentError, NotFoundError, UnavailableError } from "../../src/index.js";
import { FakeHutchd, type FakeRequest, json } from "./fake_hutchd.js";

let fake: FakeHutchd;
let client: Client;
const scratch = mkdtempSync(path.join(tmpdir(), "hutch-tpl-"));

const imageTemplate = {
  name: "py",
  source: "image",
  source_box: "",
  image_key: "k",
  kernel_version: "6.1",
  created: "2026-01-01T00:00:00Z",
  disk_bytes: 1048576,
  image: { ref: "127.0.0.1:5000/test/busybox:latest", archive: "oci-archive", digest: "sha256:aa", config_digest: "sha256:bb", platform: "linux/amd64", layers: 1, bytes: 4096 },
  defaults: { env: ["PATH=/bin"], workdir: "/home/app", user: "app", entrypoint: ["/bin/sh", "-c"], cmd: ["echo hello"], exposed_ports: ["8080/tcp"], labels: { a: "b" }, stop_signal: "" },
};
const buildTemplate = {
  name: "app",
  source: "build",
  build: { key: "sha256:cc", base_template: "base", base_image: "", steps: 3, cached_steps: 1 },
  start: { cmd: "python3 -m http.server", ready: "true" },
};

before(async () => {
  fake = await FakeHutchd.unix();
  client = new Client({ socketPath: fake.socketPath, env: {} });
});

after(async () => {
  client.close();
  await fake.close();
  rmSync(scratch, { recursive: true, force: true });
});

function stream(res: import("node:http").ServerResponse, ...objects: unknown[]): void {
  res.writeHead(200, { "Content-Type": "application/x-ndjson" });
  res.end(objects.map((o) => `${JSON.stringify(o)}\n`).join("") + "\n");
}

function last(): FakeRequest {
  const r = fake.requests[fake.requests.length - 1];
  assert.ok(r !== undefined);
  return r;
}

async function entries(body: Buffer): Promise<Map<string, { type: string; data: string; linkpath: string }>> {
  const out = new Map<string, { type: string; data: string; linkpath: string }>();
  const parser = new Parser();
  parser.on("entry", (e: ReadEntry) => {
    const chunks: Buffer[] = [];
    e.on("data", (c: Buffer) => chunks.push(c));
    e.on("end", () => out.set(e.path, { type: e.type, data: Buffer.concat(chunks).toString(), linkpath: e.linkpath ?? "" }));
  });
  await new Promise<void>((resolve, reject) => {
    parser.on("end", resolve);
    parser.on("error", reject);
    parser.end(body);
  });
  return out;
}

test("a template's source, image, build, start and defaults are read", async () => {
  fake.on("GET", "/v1/templates", (_req, res) => json(res, 200, { templates: [imageTemplate, buildTemplate] }));
  const [image, built] = await client.templates.list();
  assert.equal(image?.image?.digest, "sha256:aa");
  assert.equal(image?.image?.configDigest, "sha256:bb");
  assert.equal(image?.defaults?.user, "app");
  assert.deepEqual(image?.defaults?.exposedPorts, ["8080/tcp"]);
  assert.equal(image?.build, undefined);
  assert.equal(built?.build?.cachedSteps, 1);
  assert.equal(built?.start?.cmd, "python3 -m http.server");
});

test("createFromImage sends the reference and streams progress; an error line is typed", async () => {
  fake.on("POST", "/v1/templates", (req, res) => {
    const body = JSON.parse(req.body.toString()) as { name: string; from_image: string };
    if (body.from_image.includes("missing")) stream(res, { progress: "x" }, { error: { code: "not_found", message: "No image test/missing" } });
    else stream(res, { progress: "Copying blob" }, { progress: "done" }, { template: imageTemplate });
  });
  const lines: string[] = [];
  const t = await client.templates.createFromImage("py", "127.0.0.1:5000/test/busybox:latest", { onProgress: (l) => void lines.push(l) });
  assert.deepEqual(lines, ["Copying blob", "done"]);
  assert.equal(t.source, "image");
  assert.deepEqual(JSON.parse(last().body.toString()), { name: "py", from_image: "127.0.0.1:5000/test/busybox:latest" });
  assert.equal(last().headers["accept"], "application/x-ndjson");
  await assert.rejects(client.templates.createFromImage("py", "127.0.0.1:5000/test/missing:1"), (e: unknown) => e instanceof NotFoundError && /test\/missing/.test(e.message));
  await assert.rejects(client.templates.createFromImage("py", " "), InvalidArgumentError);
});

test("systemd: true asks for the image's systemd as PID 1, from an image or an archive", async () => {
  fake.on("POST", "/v1/templates", (_req, res) => stream(res, { template: { ...imageTemplate, init: "/usr/lib/systemd/systemd" } }));
  const t = await client.templates.createFromImage("sd", "reg:5000/test/systemd", { systemd: true });
  assert.deepEqual(JSON.parse(last().body.toString()), { name: "sd", from_image: "reg:5000/test/systemd", systemd: true });
  assert.equal(t.init, "/usr/lib/systemd/systemd");
  fake.on("POST", "/v1/templates/sd/archive", (_req, res) => stream(res, { template: imageTemplate }));
  const plain = await client.templates.createFromArchive("sd", new Uint8Array([1]), { systemd: true });
  assert.equal(last().query.get("systemd"), "true");
  assert.equal(plain.init, undefined);
  const before = fake.requests.length;
  await assert.rejects(client.templates.createFromImage("sd", "x", { systemd: "yes" as unknown as boolean }), InvalidArgumentError);
  assert.equal(fake.requests.length, before);
});

test("a stream that ends without a result is an error", async () => {
  fake.on("POST", "/v1/templates", (_req, res) => stream(res, { progress: "x" }));
  await assert.rejects(client.templates.createFromImage("py", "busybox"), (e: unknown) => e instanceof UnavailableError && /without a result/.test(e.message));
});

test("createFromArchive streams a file with its length, a layout directory as a tar, bytes and streams", async () => {
  fake.on("POST", "/v1/templates/py/archive", (req, res) => {
    if (req.body.length === 0) json(res, 400, { error: { code: "invalid_argument", message: "empty" } });
    else stream(res, { progress: "Copying" }, { template: imageTemplate });
  });
  const file = path.join(scratch, "image.tar");
  writeFileSync(file, Buffer.alloc(300_000, 65));
  const t = await client.templates.createFromArchive("py", file, { image: "app:1" });
  assert.equal(t.image?.archive, "oci-archive");
  assert.equal(last().headers["content-length"], "300000");
  assert.equal(last().headers["content-type"], "application/x-tar");
  assert.equal(last().query.get("image"), "app:1");
  assert.equal(last().body.length, 300_000);

  await client.templates.createFromArchive("py", Readable.from([Buffer.from("abc"), Buffer.from("def")]));
  assert.equal(last().body.toString(), "abcdef");
  assert.equal(last().headers["transfer-encoding"], "chunked");
  assert.equal(last().query.get("image"), null);
  await client.templates.createFromArchive("py", new Uint8Array([1, 2, 3]));
  assert.deepEqual([...last().body], [1, 2, 3]);

  const layout = path.join(scratch, "layout");
  mkdirSync(path.join(layout, "blobs", "sha256"), { recursive: true });
  writeFileSync(path.join(layout, "index.json"), "{}");
  writeFileSync(path.join(layout, "blobs", "sha256", "ab"), "blob");
  await client.templates.createFromArchive("py", layout);
  const got = await entries(last().body);
  assert.equal(got.get("index.json")?.data, "{}");
  assert.equal(got.get("blobs/sha256/ab")?.data, "blob");

  const before = fake.requests.length;
  await assert.rejects(client.templates.createFromArchive("py", path.join(scratch, "missing.tar")), /Cannot read the image archive/);
  await assert.rejects(client.templates.createFromArchive("py", scratch), /without index.json/);
  await assert.rejects(client.templates.createFromArchive("py", 42 as unknown as string), InvalidArgumentError);
  assert.equal(fake.requests.length, before);
});

test("createFromArchive: a refusal before the stream is the API's error", async () => {
  fake.on("POST", "/v1/templates/taken/archive", (_req, res) => json(res, 409, { error: { code: "already_exists", message: "Template taken exists" } }));
  await assert.rejects(client.templates.createFromArchive("taken", new Uint8Array([1])), AlreadyExistsError);
});

test("a Dockerfile build sends the context as a tar and the options as the query", async () => {
  fake.on("POST", "/v1/builds", (_req, res) => stream(res, { progress: "Step 1/2 : FROM base" }, { progress: "Step 2/2 : COPY" }, { template: buildTemplate }));
  const ctx = path.join(scratch, "ctx");
  mkdirSync(path.join(ctx, "src"), { recursive: true });
  writeFileSync(path.join(ctx, "Dockerfile"), "FROM base\nCOPY src /app\n");
  writeFileSync(path.join(ctx, "src", "main.py"), "print(1)\n");
  writeFileSync(path.join(ctx, ".dockerignore"), "secret\n");
  writeFileSync(path.join(ctx, "secret"), "hutchd leaves it out\n");
  symlinkSync("src/main.py", path.join(ctx, "link"));
  const lines: string[] = [];
  const t = await client.templates.build("app", {
    context: ctx,
    buildArgs: { V: "2" },
    target: "final",
    noCache: true,
    startCmd: "python3 -m http.server",
    readyCmd: "true",
    networkPolicy: { allow: [{ domain: "*" }], deny: [] },
    secrets: ["NPM_TOKEN", "PIP_TOKEN"],
    cpus: 1,
    memory: "512M",
    disk: "4G",
    stepTimeoutS: 600,
    onProgress: (l) => void lines.push(l),
  });
  assert.equal(t.build?.steps, 3);
  assert.deepEqual(lines, ["Step 1/2 : FROM base", "Step 2/2 : COPY"]);
  assert.deepEqual(Object.fromEntries(last().query), {
    name: "app",
    dockerfile: "Dockerfile",
    build_args: '{"V":"2"}',
    target: "final",
    no_cache: "true",
    start_cmd: "python3 -m http.server",
    ready_cmd: "true",
    network_policy: '{"allow":[{"domain":"*"}],"deny":[]}',
    secrets: "NPM_TOKEN,PIP_TOKEN",
    cpus: "1",
    memory_mib: "512",
    disk_mib: "4096",
    step_timeout_s: "600",
  });
  assert.equal(last().headers["content-type"], "application/x-tar");
  const got = await entries(last().body);
  assert.equal(got.get("Dockerfile")?.data, "FROM base\nCOPY src /app\n");
  assert.equal(got.get("src/main.py")?.data, "print(1)\n");
  assert.ok(got.has("secret") && got.has(".dockerignore")); // hutchd applies .dockerignore
  assert.equal(got.get("link")?.type, "SymbolicLink");
  assert.equal(got.get("link")?.linkpath, "src/main.py");
});

test("a Dockerfile inside the context, outside it, or as text", async () => {
  fake.on("POST", "/v1/builds", (_req, res) => json(res, 201, buildTemplate));
  const ctx = path.join(scratch, "ctx2");
  mkdirSync(path.join(ctx, "docker"), { recursive: true });
  writeFileSync(path.join(ctx, "docker", "app.Dockerfile"), "FROM base\n");
  await client.templates.build("app", { context: ctx, dockerfile: path.join(ctx, "docker", "app.Dockerfile") });
  assert.equal(last().query.get("dockerfile"), "docker/app.Dockerfile");

  const outside = path.join(scratch, "Dockerfile.other");
  writeFileSync(outside, "FROM base\nRUN true\n");
  await client.templates.build("app", { context: ctx, dockerfile: outside });
  assert.equal(last().query.get("dockerfile"), ".hutch-dockerfile");
  let got = await entries(last().body);
  assert.equal(got.get(".hutch-dockerfile")?.data, "FROM base\nRUN true\n");
  assert.ok(got.has("docker/app.Dockerfile"));

  await client.templates.build("app", { dockerfileContent: "FROM base\nRUN echo hi\n" });
  got = await entries(last().body);
  assert.deepEqual([...got.keys()], [".hutch-dockerfile"]);
  assert.equal(got.get(".hutch-dockerfile")?.data, "FROM base\nRUN echo hi\n");
});

test("bad build input is refused before anything is sent", async () => {
  const before = fake.requests.length;
  await assert.rejects(client.templates.build("app", { context: path.join(scratch, "nope") }), /does not exist/);
  writeFileSync(path.join(scratch, "file"), "x");
  await assert.rejects(client.templates.build("app", { context: path.join(scratch, "file") }), /is not a directory/);
  const empty = path.join(scratch, "empty");
  mkdirSync(empty, { recursive: true });
  await assert.rejects(client.templates.build("app", { context: empty }), /no such Dockerfile/);
  await assert.rejects(client.templates.build("app", { dockerfile: "x", dockerfileContent: "FROM base" }), /not both/);
  await assert.rejects(client.templates.build("app", { target: "final" }), /apply to Dockerfile builds/);
  await assert.rejects(client.templates.build("app", { dockerfileContent: "FROM base", cpus: 0 }), /cpus/);
  await assert.rejects(client.templates.build("app", { dockerfileContent: "FROM base", buildArgs: { A: 1 as unknown as string } }), /buildArgs/);
  await assert.rejects(client.templates.build("app", { dockerfileContent: "FROM base", nope: 1 } as never), /Unknown option 'nope'/);
  for (const bad of ["NPM_TOKEN", ["A,B"], [""]]) {
    await assert.rejects(client.templates.build("app", { dockerfileContent: "FROM base", secrets: bad as string[] }), /secrets/);
  }
  assert.equal(fake.requests.length, before);
});

test("a Dockerfile hutchd cannot read is an InvalidArgumentError naming the line", async () => {
  fake.on("POST", "/v1/builds", (_req, res) => json(res, 400, { error: { code: "invalid_argument", message: "Dockerfile line 2: unknown instruction 'FROBNICATE'" } }));
  await assert.rejects(client.templates.build("app", { dockerfileContent: "FROM base\nFROBNICATE\n" }), (e: unknown) => e instanceof InvalidArgumentError && /line 2/.test(e.message));
});
