// The dashboard in a real browser (Debian's Chromium, headless, driven by playwright-core)
// against a real hutchd with real boxes (and a registry on loopback for New template). run.sh starts hutchd (tests/support/hutchd_daemon.py)
// and passes its endpoints in HUTCH_DAEMON_JSON; the CLI is HUTCH_CLI.
//
// The steps depend on each other (one box goes through log-in, terminal, checkpoint, fork,
// removal) and run in order, as node:test runs the tests of a file. Every wait is for a
// condition, with a generous deadline (boxes boot under TCG here); nothing is timed.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { chromium } from "playwright-core";

const run = promisify(execFile);
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const daemon = JSON.parse(readFileSync(process.env.HUTCH_DAEMON_JSON, "utf8"));
const base = daemon.http_url; // the loopback plain-HTTP listener
const images = process.env.HUTCH_DASHBOARD_SCREENSHOTS ?? path.join(repo, "docs", "images");
const BOX = "dash-web";
const LONG = 240_000; // a create from a template, a fork: minutes under TCG on a busy host
const SHORT = 30_000;

let browser;
let page;
let child; // the fork's name

// The CLI against the same hutchd, with the same (ordinary) key the page logs in with.
async function hutch(...args) {
  const env = { ...process.env, HUTCH_HOST: base, HUTCH_API_KEY: daemon.key };
  const { stdout } = await run(process.env.HUTCH_CLI, ["--json", ...args], {
    env,
    timeout: LONG,
  });
  return stdout;
}

async function api(pathname, key = daemon.key) {
  const res = await fetch(new URL(pathname, base), {
    headers: key ? { Authorization: `Bearer ${key}` } : {},
  });
  return { status: res.status, body: await res.json() };
}

// A port nothing listens on now (the kernel's pick, closed again).
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function boxRow(name) {
  return page
    .getByRole("table", { name: "Boxes" })
    .getByRole("row")
    .filter({ has: page.getByRole("link", { name, exact: true }) });
}

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM,
    headless: true,
    // Root in a container: Chromium's own sandbox needs user namespaces it may not get.
    args: ["--no-sandbox"],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on("pageerror", (e) => console.error(`page error: ${e.message}`));
  mkdirSync(images, { recursive: true });
});

after(async () => {
  await browser?.close();
});

test("the page is served without a key; the API it calls still needs one", async () => {
  const index = await fetch(new URL("/ui/", base));
  assert.equal(index.status, 200);
  assert.match(index.headers.get("content-type"), /^text\/html/);
  assert.equal((await api("/v1/boxes", null)).status, 401);
});

test("a wrong key is refused and does not log in", async () => {
  await page.goto(new URL("/ui/", base).href);
  await page.getByLabel("API key").fill(`e2b_${"0".repeat(40)}`);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("alert").filter({ hasText: "hutchd refused this key" }).waitFor({ timeout: SHORT });
  assert.equal(await page.getByRole("heading", { name: "Boxes" }).count(), 0);
  assert.equal(await page.evaluate(() => sessionStorage.getItem("hutch.apiKey")), null);
});

test("the right key logs in and is kept for the tab only", async () => {
  await page.getByLabel("API key").fill(daemon.key);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("heading", { name: "Boxes" }).waitFor({ timeout: SHORT });
  assert.equal(await page.evaluate(() => sessionStorage.getItem("hutch.apiKey")), daemon.key);
  await page.getByText("Key test-user").waitFor({ timeout: SHORT });
  // A reload stays logged in (sessionStorage).
  await page.reload();
  await page.getByRole("heading", { name: "Boxes" }).waitFor({ timeout: SHORT });
});

test("a box made with the CLI appears in the list, running, with its usage", { timeout: LONG + 60_000 }, async () => {
  const made = JSON.parse(await hutch("run", "--name", BOX));
  assert.equal(made.name ?? made, BOX);
  const row = boxRow(BOX);
  await row.filter({ hasText: "running" }).waitFor({ timeout: LONG });
  assert.match(await row.textContent(), /test-user/); // the owner: the key that made it
  // Memory comes from the box's stats: a number, not the placeholder.
  await row.filter({ hasText: /\d+(\.\d)? MiB \(box 512 MiB\)/ }).waitFor({ timeout: SHORT });
});

test("its page makes a checkpoint, which is listed", { timeout: 180_000 }, async () => {
  await page.getByRole("link", { name: BOX, exact: true }).click();
  await page.getByRole("heading", { name: BOX, level: 2 }).waitFor({ timeout: SHORT });
  await page.getByLabel("Checkpoint name (optional)").fill("cp-dash");
  await page.getByRole("button", { name: "Create checkpoint" }).click();
  const table = page.getByRole("table", { name: "Checkpoints" });
  await table.getByRole("rowheader", { name: "cp-dash", exact: true }).waitFor({ timeout: 150_000 });
  const listed = JSON.parse(await hutch("checkpoint", "ls", BOX));
  const names = (Array.isArray(listed) ? listed : listed.checkpoints).map((c) => c.name);
  assert.ok(names.includes("cp-dash"), `hutch checkpoint ls: ${names}`);
});

test("rolling back from the page undoes what came after; a checkpoint is removed", { timeout: 300_000 }, async () => {
  await hutch("exec", BOX, "--", "touch", "/home/hutch/after-checkpoint");
  await page.getByRole("button", { name: "Roll back to cp-dash" }).click();
  await page
    .getByRole("dialog", { name: `Roll ${BOX} back to cp-dash?` })
    .getByRole("button", { name: "Roll back" })
    .click();
  await page.getByText(`${BOX} rolled back to cp-dash`).waitFor({ timeout: 150_000 });
  // exits 0 only if the file is gone
  await hutch("exec", BOX, "--", "test", "!", "-e", "/home/hutch/after-checkpoint");

  const table = page.getByRole("table", { name: "Checkpoints" });
  await page.getByLabel("Checkpoint name (optional)").fill("cp-extra");
  await page.getByRole("button", { name: "Create checkpoint" }).click();
  await table.getByRole("rowheader", { name: "cp-extra", exact: true }).waitFor({ timeout: 150_000 });
  await page.getByRole("button", { name: "Remove checkpoint cp-extra" }).click();
  await page
    .getByRole("dialog", { name: "Remove checkpoint cp-extra?" })
    .getByRole("button", { name: "Remove" })
    .click();
  await table.getByRole("rowheader", { name: "cp-extra", exact: true }).waitFor({ state: "detached", timeout: SHORT });
  const listed = JSON.parse(await hutch("checkpoint", "ls", BOX));
  const names = (Array.isArray(listed) ? listed : listed.checkpoints).map((c) => c.name);
  assert.deepEqual(names, ["cp-dash"]);
});

test("a port published from the page is listed and unpublished again", { timeout: 60_000 }, async () => {
  const hostPort = await freePort();
  await page.getByRole("button", { name: `Publish a port of ${BOX}` }).click();
  const dialog = page.getByRole("dialog", { name: `Publish a port of ${BOX}` });
  await dialog.getByLabel("Port in the box").fill("8000");
  await dialog.getByLabel("Port on the host").fill(String(hostPort));
  await dialog.getByRole("button", { name: "Publish" }).click();
  const where = `127.0.0.1:${hostPort}`;
  const table = page.getByRole("table", { name: "Published ports" });
  await table.getByRole("rowheader", { name: where }).waitFor({ timeout: SHORT });
  await page.getByRole("button", { name: `Unpublish ${where}` }).click();
  await table.getByRole("rowheader", { name: where }).waitFor({ state: "detached", timeout: SHORT });
  assert.deepEqual((await api(`/v1/boxes/${BOX}/ports`)).body.ports, []);
});

test("the box page has a terminal: echo hi comes back, and resizes reach the PTY", { timeout: 180_000 }, async () => {
  await page.getByRole("button", { name: "Open terminal" }).click();
  await page.getByText(/Connected \(shell pid \d+\)/).waitFor({ timeout: 120_000 });
  const input = page.getByRole("textbox", { name: "Terminal input" });
  await input.focus();
  await page.keyboard.type("echo hi");
  await page.keyboard.press("Enter");
  await page.waitForFunction(
    () => window.hutchDashboard.terminalText().split("\n").some((l) => l.trim() === "hi"),
    null,
    { timeout: 60_000 },
  );

  // A smaller window: the terminal is fitted again and the PTY told (stty size prints it).
  await page.setViewportSize({ width: 900, height: 800 });
  await page.waitForFunction(() => window.hutchDashboard.terminalSize().cols < 100, null, { timeout: SHORT });
  const { rows, cols } = await page.evaluate(() => window.hutchDashboard.terminalSize());
  await input.focus();
  await page.keyboard.type("stty size");
  await page.keyboard.press("Enter");
  await page.waitForFunction(
    (want) => window.hutchDashboard.terminalText().split("\n").some((l) => l.trim() === want),
    `${rows} ${cols}`,
    { timeout: 60_000 },
  );
  await page.setViewportSize({ width: 1280, height: 900 });
});

test("a fork made from the page shows in the fork tree and in the list", { timeout: LONG + 60_000 }, async () => {
  await page.getByRole("button", { name: `Fork ${BOX}` }).click();
  const tree = page.getByRole("list", { name: "Fork tree" });
  const childLink = tree.getByRole("link");
  await childLink.first().waitFor({ timeout: LONG });
  child = (await childLink.first().textContent()).trim();
  assert.notEqual(child, BOX);
  const boxes = (await api("/v1/boxes")).body.boxes;
  const made = boxes.find((b) => b.name === child);
  assert.ok(made, `${child} is not in GET /v1/boxes`);
  assert.match(made.boot, new RegExp(`a fork of ${BOX}`));
  // Usage charts have samples by now; the page is worth a picture.
  await page.getByRole("img", { name: /^CPU: now \d/ }).waitFor({ timeout: SHORT });
  await page.screenshot({ path: path.join(images, "dashboard-box.png"), fullPage: true });

  await page.getByRole("link", { name: "← All boxes" }).click();
  await boxRow(child).filter({ hasText: `fork of ${BOX}` }).waitFor({ timeout: SHORT });
  await boxRow(child).filter({ hasText: "running" }).waitFor({ timeout: LONG });
  await boxRow(BOX).filter({ hasText: "%" }).waitFor({ timeout: SHORT }); // CPU from two samples
  await page.screenshot({ path: path.join(images, "dashboard-list.png") });
});

test("over HTTPS the same: log in, open the box, a terminal over wss", { timeout: 180_000 }, async () => {
  // hutchd's self-signed certificate; a user compares its fingerprint (hutch doctor) instead.
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 900 } });
  try {
    const secure = await context.newPage();
    await secure.goto(new URL("/ui/", daemon.https_url).href);
    await secure.getByLabel("API key").fill(daemon.key);
    await secure.getByRole("button", { name: "Log in" }).click();
    await secure.getByRole("link", { name: BOX, exact: true }).click();
    await secure.getByRole("button", { name: "Open terminal" }).click();
    await secure.getByText(/Connected \(shell pid \d+\)/).waitFor({ timeout: 120_000 });
    await secure.getByRole("textbox", { name: "Terminal input" }).focus();
    await secure.keyboard.type("echo over-$((40 + 2))");
    await secure.keyboard.press("Enter");
    await secure.waitForFunction(
      () => window.hutchDashboard.terminalText().split("\n").some((l) => l.trim() === "over-42"),
      null,
      { timeout: 60_000 },
    );
  } finally {
    await context.close();
  }
});

test("stop and start from the list", { timeout: LONG + 60_000 }, async () => {
  await page.getByRole("button", { name: `Stop ${child}` }).click();
  // Stop suspends: the memory is kept on disk, start resumes the processes.
  await boxRow(child).filter({ hasText: "suspended" }).waitFor({ timeout: 150_000 });
  assert.equal((await api(`/v1/boxes/${child}`)).body.state, "suspended");
  await page.getByRole("button", { name: `Start ${child}` }).click();
  await boxRow(child).filter({ hasText: "running" }).waitFor({ timeout: LONG });
  assert.equal((await api(`/v1/boxes/${child}`)).body.state, "running");
});

test("removing from the page asks first, then the box is gone", { timeout: 180_000 }, async () => {
  // Cancel keeps it.
  await page.getByRole("button", { name: `Remove ${child}` }).click();
  const dialog = page.getByRole("dialog", { name: `Remove ${child}?` });
  await dialog.getByRole("button", { name: "Cancel" }).click();
  await dialog.waitFor({ state: "detached", timeout: SHORT });
  assert.equal(await boxRow(child).count(), 1);

  for (const name of [child, BOX]) {
    await page.getByRole("button", { name: `Remove ${name}` }).click();
    await page.getByRole("dialog", { name: `Remove ${name}?` }).getByRole("button", { name: "Remove" }).click();
    await boxRow(name).waitFor({ state: "detached", timeout: 150_000 });
    const res = await api(`/v1/boxes/${name}`);
    assert.equal(res.status, 404, `${name} still exists: ${JSON.stringify(res.body)}`);
  }
  await page.getByText("No boxes yet").waitFor({ timeout: SHORT });
});

test("the templates view lists them; an ordinary key may not make one", async () => {
  await page.getByRole("navigation", { name: "Views" }).getByRole("link", { name: "Templates" }).click();
  const table = page.getByRole("table", { name: "Templates" });
  await table.getByRole("rowheader", { name: "base", exact: true }).waitFor({ timeout: SHORT });
  const button = page.getByRole("button", { name: "New template" });
  assert.equal(await button.isDisabled(), true);
  assert.equal(await button.getAttribute("title"), "Only admin keys make templates");
});

// A registry on loopback (Debian's docker-registry, tests/registry) with the busybox test image;
// hutchd pulls plain HTTP from loopback.
async function startRegistry() {
  registryDir = path.join(daemon.dir, "registry");
  const scripts = path.join(repo, "tests", "registry");
  const images = (await run("bash", [path.join(scripts, "images.sh"), path.join(daemon.dir, "images"), "busybox"], { timeout: LONG })).stdout;
  const busybox = /^busybox (\S+)$/m.exec(images)?.[1];
  assert.ok(busybox, `images.sh printed no busybox layout: ${images}`);
  const started = (await run("bash", [path.join(scripts, "registry.sh"), "start", registryDir, "--plain-http", "--no-auth"], { timeout: LONG })).stdout;
  const registry = /^REGISTRY=(\S+)$/m.exec(started)?.[1];
  assert.ok(registry, started);
  await run("bash", [path.join(scripts, "registry.sh"), "push", registryDir, `${busybox}:latest`, "test/busybox:latest"], { timeout: LONG });
  return registry;
}
let registryDir;
after(async () => {
  if (registryDir) await run("bash", [path.join(repo, "tests", "registry", "registry.sh"), "stop", registryDir]).catch(() => undefined);
});

test("an admin makes a template of a registry image in New template, with its progress; errors are shown", { timeout: LONG }, async () => {
  const registry = await startRegistry();
  await page.getByRole("button", { name: "Log out" }).click();
  await page.getByLabel("API key").fill(daemon.admin_key);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByText("Key test-admin (admin)").waitFor({ timeout: SHORT });
  await page.getByRole("link", { name: "Templates" }).click();
  await page.getByRole("button", { name: "New template" }).click();
  const dialog = page.getByRole("dialog", { name: "New template" });

  // A tag the registry does not have: hutchd's error, in the dialog, which stays open.
  await dialog.getByLabel("Name").fill("dash-busybox");
  await dialog.getByLabel("Image").fill(`${registry}/test/missing:1`);
  await dialog.getByRole("button", { name: "Create" }).click();
  const alert = dialog.getByRole("alert");
  await alert.filter({ hasText: "Cannot make template dash-busybox" }).waitFor({ timeout: SHORT });
  assert.match(await alert.textContent(), /test\/missing/);

  // A Dockerfile hutchd cannot read: the error names its line (no VM is started for it).
  await dialog.getByLabel("Source").selectOption("dockerfile");
  await dialog.getByLabel(/^Dockerfile/).fill("FROM base\nFROBNICATE now\n");
  await dialog.getByRole("button", { name: "Create" }).click();
  await alert.filter({ hasText: "Dockerfile line 2" }).waitFor({ timeout: SHORT });

  // systemd as PID 1 asked of an image without systemd: refused, saying so.
  await dialog.getByLabel("Source").selectOption("image");
  await dialog.getByLabel("Image").fill(`${registry}/test/busybox:latest`);
  await dialog.getByLabel(/systemd as PID 1/).check();
  await dialog.getByRole("button", { name: "Create" }).click();
  await alert.filter({ hasText: "has no systemd" }).waitFor({ timeout: LONG });
  await dialog.getByLabel(/systemd as PID 1/).uncheck();

  // The image that is there: progress lines as the pull goes, then the template.
  await dialog.getByRole("button", { name: "Create" }).click();
  await dialog.getByRole("status").filter({ hasText: "Template dash-busybox made (image)" }).waitFor({ timeout: LONG });
  assert.notEqual((await dialog.getByRole("log", { name: "Progress" }).textContent()).trim(), "");
  assert.equal(await alert.count(), 0); // the earlier error is gone
  await page.screenshot({ path: path.join(images, "dashboard-new-template.png") });
  await dialog.getByRole("button", { name: "Close" }).click();
  await dialog.waitFor({ state: "detached", timeout: SHORT });
  const row = page.getByRole("table", { name: "Templates" }).getByRole("row").filter({ hasText: "dash-busybox" });
  await row.filter({ hasText: `${registry}/test/busybox:latest` }).waitFor({ timeout: SHORT });

  const listed = (await api("/v1/templates", daemon.admin_key)).body.templates.find((t) => t.name === "dash-busybox");
  assert.equal(listed?.source, "image");
  assert.equal(listed?.image?.ref, `${registry}/test/busybox:latest`);
  const removed = await fetch(new URL("/v1/templates/dash-busybox", base), {
    method: "DELETE",
    headers: { Authorization: `Bearer ${daemon.admin_key}` },
  });
  assert.equal(removed.status, 200);
  await page.getByRole("link", { name: "Boxes", exact: true }).click();
  await page.getByRole("heading", { name: "Boxes" }).waitFor({ timeout: SHORT });
});

test("log out forgets the key", async () => {
  await page.getByRole("button", { name: "Log out" }).click();
  await page.getByLabel("API key").waitFor({ timeout: SHORT });
  assert.equal(await page.evaluate(() => sessionStorage.getItem("hutch.apiKey")), null);
});

test("a key removed while logged in logs the page out, saying why", { timeout: 60_000 }, async () => {
  const admin = { Authorization: `Bearer ${daemon.admin_key}`, "Content-Type": "application/json" };
  const made = await fetch(new URL("/v1/keys", base), {
    method: "POST",
    headers: admin,
    body: JSON.stringify({ name: "dash-short-lived" }),
  });
  assert.equal(made.status, 201);
  const { key } = await made.json();
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("heading", { name: "Boxes" }).waitFor({ timeout: SHORT });
  const gone = await fetch(new URL("/v1/keys/dash-short-lived", base), { method: "DELETE", headers: admin });
  assert.equal(gone.status, 200);
  // The next poll is refused: back to the log-in form, with the reason.
  await page.getByRole("alert").filter({ hasText: "no longer accepts the key" }).waitFor({ timeout: SHORT });
  await page.getByLabel("API key").waitFor({ timeout: SHORT });
  assert.equal(await page.evaluate(() => sessionStorage.getItem("hutch.apiKey")), null);
});

test("hutchd refused only what the tests sent wrong (no stray request counts as a failed login)", async () => {
  // Every refusal counts against the client's address (10 a minute and it is locked out), so
  // the page itself must never cause one: not for its icon, not while polling.
  const refused = readFileSync(daemon.log, "utf8")
    .split("\n")
    .filter((l) => l.includes("api: refused"))
    .map((l) => l.replace(/.*api: refused (\S+ \S+) from .*/, "$1"));
  // The key-less fetch, the wrong key, and the one poll after the key was removed.
  assert.deepEqual(refused, ["GET /v1/boxes", "GET /v1/info", "GET /v1/boxes"]);
});
