// The MCP Inspector's CLI (npx @modelcontextprotocol/inspector --cli), as a person would run
// it against hutchd: over Streamable HTTP with a key, and over stdio through `hutch mcp`.
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { HUTCH, KEY_A, KEY_B, LONG, MCP_URL, SOCKET, boxName } from "./helpers.mjs";

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));

// The Inspector pinned in package-lock.json, through its own bin (npx would take --cli and
// the rest for npm's options with npm 11, and start the web inspector instead).
const INSPECTOR = path.join(here, "node_modules", ".bin", "mcp-inspector");

async function inspector(target, args, { key = KEY_A() } = {}) {
  const argv = ["--cli", ...target, ...args];
  if (target[0].startsWith("http")) {
    argv.push("--transport", "http", "--header", `Authorization: Bearer ${key}`);
  }
  // The Inspector hands its environment to a stdio server: `hutch mcp` finds the socket there.
  const { stdout } = await run(INSPECTOR, argv, {
    cwd: here, timeout: 300_000, maxBuffer: 16 << 20,
    env: { ...process.env, HUTCH_SOCKET: SOCKET() },
  });
  return JSON.parse(stdout.slice(stdout.indexOf("{")));
}

const http = () => [MCP_URL()];
const stdio = () => [HUTCH(), "mcp"];

// tools/call's result: its JSON (after any note).
function structured(result) {
  const text = result.content[0].text;
  return JSON.parse(text.slice(text.indexOf("{")));
}

describe("MCP Inspector CLI", () => {
  const name = boxName("inspector");
  let created = false;
  after(async () => {
    if (created) {
      await inspector(http(), ["--method", "tools/call", "--tool-name", "remove_box",
        "--tool-arg", `box=${name}`, "--tool-arg", "force=true"]).catch(() => {});
    }
  });

  test("tools/list over HTTP and over stdio", LONG, async () => {
    for (const target of [http(), stdio()]) {
      const listed = await inspector(target, ["--method", "tools/list"]);
      const names = listed.tools.map((t) => t.name);
      assert.ok(names.includes("run_command") && names.includes("create_box"), names.join());
    }
  });

  test("create a box, uname -a, write and read a file, remove it", LONG, async () => {
    const call = (tool, ...args) => inspector(http(), ["--method", "tools/call",
      "--tool-name", tool, ...args.flatMap((a) => ["--tool-arg", a])]);
    const box = structured(await call("create_box", `name=${name}`));
    created = true;
    assert.equal(box.state, "running");
    const uname = await call("run_command", `box=${name}`, "command=uname -a");
    assert.ok(!uname.isError);
    assert.match(structured(uname).stdout, /^Linux /);
    await call("write_file", `box=${name}`, "path=/tmp/inspector.txt", "content=from the inspector");
    const read = structured(await call("read_file", `box=${name}`, "path=/tmp/inspector.txt"));
    assert.equal(read.content, "from the inspector");
    // (Not "command=false": the Inspector reads a --tool-arg value as JSON when it can.)
    const failing = await call("run_command", `box=${name}`, "command=exit 3");
    assert.equal(structured(failing).exit_code, 3);
    // Another key's inspector cannot see it.
    const hidden = await inspector(http(), ["--method", "tools/call", "--tool-name", "list_boxes"],
      { key: KEY_B() });
    assert.ok(!structured(hidden).boxes.some((b) => b.name === name));
    const removed = await call("remove_box", `box=${name}`, "force=true");
    assert.ok(!removed.isError);
    created = false;
    const gone = await call("run_command", `box=${name}`, "command=echo");
    assert.equal(gone.isError, true);
    assert.equal(structured(gone).error.code, "not_found");
  });

  test("a wrong key is refused", async () => {
    await assert.rejects(inspector(http(), ["--method", "tools/list"],
      { key: "e2b_2222222222222222222222222222222222222222" }), /unauthenticated/);
  });
});
