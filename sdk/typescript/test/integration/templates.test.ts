// Templates from a Dockerfile, an image archive and a registry on loopback, against the real
// hutchd. Builds and boxes cost 15-30 s each under TCG, so there are few: one Dockerfile build
// (COPY and RUN) and a box of it; an import of the busybox test image as an OCI image layout
// directory (tests/registry/images.sh), tarred on the fly; a pull of the same image from Debian's
// docker-registry on 127.0.0.1 (tests/registry/registry.sh). Bad input costs no VM.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";

import { type Client, InvalidArgumentError, NotFoundError, PermissionDeniedError } from "../../src/index.js";
import { admin, boxName, user, withBox } from "./daemon.js";

// build-test/test/integration -> the repository.
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../../..");
const registryScripts = path.join(repo, "tests", "registry");
const scratch = mkdtempSync(path.join(tmpdir(), "hutch-ts-tpl-"));
let busybox = "";
let registryDir = "";
let registry = "";

function run(argv: string[], what: string): string {
  const done = spawnSync(argv[0]!, argv.slice(1), { encoding: "utf8", timeout: 10 * 60 * 1000 });
  assert.equal(done.status, 0, `${what} failed: ${done.stdout}${done.stderr}`);
  return done.stdout;
}

before(() => {
  const images = run(["bash", path.join(registryScripts, "images.sh"), path.join(scratch, "images"), "busybox"], "images.sh");
  busybox = images.split("\n").find((l) => l.startsWith("busybox "))?.slice("busybox ".length) ?? "";
  assert.ok(busybox !== "", `images.sh printed no busybox layout: ${images}`);
  registryDir = path.join(scratch, "registry");
  const started = run(["bash", path.join(registryScripts, "registry.sh"), "start", registryDir, "--plain-http", "--no-auth"], "registry.sh start");
  registry = /^REGISTRY=(\S+)$/m.exec(started)?.[1] ?? "";
  assert.ok(registry !== "", started);
  run(["bash", path.join(registryScripts, "registry.sh"), "push", registryDir, `${busybox}:latest`, "test/busybox:latest"], "registry.sh push");
});

after(() => {
  if (registryDir !== "") spawnSync("bash", [path.join(registryScripts, "registry.sh"), "stop", registryDir], { timeout: 120_000 });
  rmSync(scratch, { recursive: true, force: true });
});

async function removeTemplate(c: Client, name: string): Promise<void> {
  await c.templates.remove(name).catch((e: unknown) => {
    if (!(e instanceof NotFoundError)) throw e;
  });
}

let counter = 0;
function templateName(what: string): string {
  counter++;
  return `ts-${what}-${process.pid}-${counter}`;
}

test("a Dockerfile build copies the context, runs a step, and boots", { timeout: 15 * 60 * 1000 }, async () => {
  const a = admin();
  const ctx = path.join(scratch, "context");
  mkdirSync(path.join(ctx, "app"), { recursive: true });
  mkdirSync(path.join(ctx, "docker"), { recursive: true });
  writeFileSync(path.join(ctx, "app", "hello.txt"), "hello from the ts sdk\n");
  writeFileSync(path.join(ctx, "app", "ignored.txt"), "left out by .dockerignore\n");
  writeFileSync(path.join(ctx, ".dockerignore"), "app/ignored.txt\n");
  writeFileSync(
    path.join(ctx, "docker", "app.Dockerfile"),
    [
      "FROM base",
      "ARG GREETING=unset",
      "COPY app /opt/ts/",
      'RUN test ! -e /opt/ts/ignored.txt && echo "$GREETING" > /opt/ts/greeting',
      "WORKDIR /opt/ts",
      "",
    ].join("\n"),
  );
  const name = templateName("build");
  const lines: string[] = [];
  try {
    const t = await a.templates.build(name, {
      context: ctx,
      dockerfile: path.join(ctx, "docker", "app.Dockerfile"),
      buildArgs: { GREETING: "built-by-run" },
      memory: "512M",
      cpus: 1,
      onProgress: (l) => void lines.push(l),
    });
    assert.equal(t.name, name);
    assert.equal(t.source, "build");
    assert.equal(t.build?.baseTemplate, "base");
    assert.ok((t.build?.steps ?? 0) >= 2, JSON.stringify(t.build));
    assert.ok(lines.some((l) => l.includes("RUN")), lines.join("\n"));
    assert.equal((await a.templates.get(name)).build?.key, t.build?.key);

    await withBox(
      user(),
      async (box) => {
        assert.equal((await box.exec("cat hello.txt")).stdout, "hello from the ts sdk\n"); // WORKDIR
        assert.equal((await box.exec("cat /opt/ts/greeting")).stdout, "built-by-run\n");
        assert.equal((await box.exec("test -e /opt/ts/ignored.txt")).exitCode, 1);
      },
      { name: boxName("built"), template: name },
    );
  } finally {
    await removeTemplate(a, name);
  }
});

test("a Dockerfile with a syntax error is an InvalidArgumentError naming the line", async () => {
  await assert.rejects(
    admin().templates.build(templateName("bad"), { dockerfileContent: "FROM base\nRUN true\nFROBNICATE now\n" }),
    (e: unknown) => e instanceof InvalidArgumentError && /Dockerfile line 3/.test(e.message) && /FROBNICATE/.test(e.message),
  );
});

test("a missing context is refused here; a plain key may not build or import", async () => {
  const missing = path.join(scratch, "nope");
  await assert.rejects(admin().templates.build(templateName("bad"), { context: missing }), (e: unknown) => e instanceof InvalidArgumentError && e.message.includes(missing));
  await assert.rejects(user().templates.build(templateName("mine"), { dockerfileContent: "FROM base\n" }), PermissionDeniedError);
  await assert.rejects(user().templates.createFromImage(templateName("mine"), `${registry}/test/busybox:latest`), PermissionDeniedError);
});

test("an OCI image layout directory is imported as a template", { timeout: 10 * 60 * 1000 }, async () => {
  const a = admin();
  const name = templateName("layout");
  const lines: string[] = [];
  try {
    const t = await a.templates.createFromArchive(name, busybox, { onProgress: (l) => void lines.push(l) });
    assert.equal(t.source, "image");
    assert.equal(t.image?.archive, "oci-archive");
    assert.match(t.image?.digest ?? "", /^sha256:/);
    assert.equal(t.defaults?.user, "app");
    assert.equal(t.defaults?.workdir, "/home/app");
    assert.ok(lines.length > 0, "no progress lines");
  } finally {
    await removeTemplate(a, name);
  }
});

test("an image pulled from a registry on loopback; a missing tag is NotFoundError", { timeout: 10 * 60 * 1000 }, async () => {
  const a = admin();
  const name = templateName("pulled");
  const ref = `${registry}/test/busybox:latest`;
  const lines: string[] = [];
  try {
    const t = await a.templates.createFromImage(name, ref, { onProgress: (l) => void lines.push(l) });
    assert.equal(t.source, "image");
    assert.equal(t.image?.ref, ref);
    assert.equal(t.image?.archive, "");
    assert.equal(t.image?.platform, "linux/amd64");
    assert.deepEqual(t.defaults?.exposedPorts, ["8080/tcp"]);
    assert.ok(lines.length > 0, "no progress lines");
  } finally {
    await removeTemplate(a, name);
  }
  await assert.rejects(a.templates.createFromImage(templateName("pulled"), `${registry}/test/missing:1`), (e: unknown) => e instanceof NotFoundError && /test\/missing/.test(e.message));
});
