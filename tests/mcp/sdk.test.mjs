// The MCP TypeScript SDK's own Client, over Streamable HTTP with an API key, against a real
// hutchd booting real boxes.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError, ErrorCode } from "@modelcontextprotocol/sdk/types.js";
import { KEY_A, KEY_B, LONG, MCP_URL, boxName, call, createBox, httpClient } from "./helpers.mjs";

const TOOLS = [
  "list_boxes", "create_box", "run_command", "read_file", "write_file", "list_files", "fork_box",
  "checkpoint_box", "list_checkpoints", "rollback_box", "publish_port", "stop_box", "start_box",
  "remove_box",
];

describe("MCP over Streamable HTTP (SDK client)", () => {
  let client;
  let box;

  before(async () => {
    client = await httpClient();
  });
  after(async () => {
    await client?.close();
  });

  test("initialize negotiates the SDK's latest version and says who we are", () => {
    const server = client.getServerVersion();
    assert.equal(server.name, "hutch");
    assert.ok(client.getServerCapabilities().tools);
    assert.match(client.getInstructions(), /create_box/);
  });

  test("lists the tools, each with an input schema", async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), TOOLS);
    for (const t of tools) {
      assert.equal(t.inputSchema.type, "object", t.name);
      assert.ok(t.description.length > 20, t.name);
      assert.equal(typeof t.annotations.readOnlyHint, "boolean");
    }
    const run = tools.find((t) => t.name === "run_command");
    assert.deepEqual(run.inputSchema.required, ["box"]);
    assert.ok(run.inputSchema.properties.timeout_seconds);
  });

  test("creates a box and runs uname -a in it", LONG, async () => {
    box = await createBox(client, boxName("sdk"));
    const listed = await call(client, "list_boxes");
    assert.ok(listed.boxes.some((b) => b.id === box.id));
    const run = await call(client, "run_command", { box: box.name, command: "uname -a" });
    assert.equal(run.exit_code, 0, run._text);
    assert.match(run.stdout, /^Linux /);
    assert.equal(run.timed_out, false);
  });

  test("writes, reads and lists files", LONG, async () => {
    const written = await call(client, "write_file", {
      box: box.id, path: "/home/hutch/work/hello.txt", content: "hello from MCP\n",
    });
    assert.equal(written.size, 15);
    const read = await call(client, "read_file", { box: box.id, path: "/home/hutch/work/hello.txt" });
    assert.equal(read.content, "hello from MCP\n");
    assert.equal(read.encoding, "utf-8");
    assert.equal(read.truncated, false);
    const listed = await call(client, "list_files", { box: box.id, path: "/home/hutch/work" });
    assert.deepEqual(listed.entries.map((e) => e.path), ["/home/hutch/work/hello.txt"]);
    // Bytes that are not text come back as base64.
    await call(client, "write_file", {
      box: box.id, path: "/home/hutch/work/bytes.bin", content: "AP8=", encoding: "base64",
    });
    const bytes = await call(client, "read_file", { box: box.id, path: "work/bytes.bin" });
    assert.equal(bytes.encoding, "base64");
    assert.equal(bytes.content, "AP8=");
    // The command sees what the tools wrote.
    const cat = await call(client, "run_command", { box: box.id, argv: ["cat", "work/hello.txt"] });
    assert.equal(cat.stdout, "hello from MCP\n");
  });

  test("a failing command is a result with its exit code and stderr", LONG, async () => {
    const failed = await call(client, "run_command", {
      box: box.id, command: "echo oops >&2; exit 3",
    });
    assert.equal(failed.exit_code, 3);
    assert.equal(failed.stderr, "oops\n");
    const missing = await call(client, "run_command", { box: box.id, argv: ["no-such-program"] },
      { expectError: true });
    assert.equal(missing.exit_code, 127);
  });

  test("a command past its timeout is killed", LONG, async () => {
    const slow = await call(client, "run_command", {
      box: box.id, command: "sleep 30", timeout_seconds: 2,
    });
    assert.equal(slow.timed_out, true);
    assert.equal(slow.signal, 9);
    assert.match(slow._text, /killed after 2 s/);
  });

  test("output past the limit is cut with a note", LONG, async () => {
    const big = await call(client, "run_command", { box: box.id, command: "head -c 200000 /dev/zero | tr '\\0' x" });
    assert.equal(big.truncated, true);
    assert.equal(big.stdout.length, 65536);
    assert.match(big._text, /cut at 64 KiB/);
  });

  test("errors say what to do", LONG, async () => {
    const unknown = await call(client, "run_command", { box: "no-such-box", command: "true" },
      { expectError: true });
    assert.equal(unknown.error.code, "not_found");
    assert.match(unknown.error.message, /list_boxes/);
    const bad = await call(client, "run_command", { box: box.id }, { expectError: true });
    assert.equal(bad.error.code, "invalid_argument");
    assert.match(bad.error.message, /"command"/);
    const notFile = await call(client, "read_file", { box: box.id, path: "/home/hutch" },
      { expectError: true });
    assert.match(notFile.error.message, /directory/);
    const running = await call(client, "remove_box", { box: box.id }, { expectError: true });
    assert.match(running.error.message, /force: true/);
    // An unknown tool is a protocol error.
    await assert.rejects(client.callTool({ name: "nope", arguments: {} }), (e) => {
      assert.ok(e instanceof McpError);
      assert.equal(e.code, ErrorCode.InvalidParams);
      return true;
    });
  });

  test("checkpoint and rollback", LONG, async () => {
    const cp = await call(client, "checkpoint_box", { box: box.id, name: "before" });
    assert.equal(cp.name, "before");
    await call(client, "write_file", { box: box.id, path: "later.txt", content: "x" });
    const listed = await call(client, "list_checkpoints", { box: box.id });
    assert.deepEqual(listed.checkpoints.map((c) => c.name), ["before"]);
    const rolled = await call(client, "rollback_box", { box: box.id, checkpoint: "before" });
    assert.equal(rolled.state, "running");
    const gone = await call(client, "read_file", { box: box.id, path: "later.txt" },
      { expectError: true });
    assert.equal(gone.error.code, "not_found");
  });

  test("another key does not see the box; a wrong key is refused", LONG, async () => {
    const other = await httpClient(KEY_B());
    try {
      const listed = await call(other, "list_boxes");
      assert.ok(!listed.boxes.some((b) => b.id === box.id));
      const hidden = await call(other, "run_command", { box: box.id, command: "true" },
        { expectError: true });
      assert.equal(hidden.error.code, "not_found");
      const removed = await call(other, "remove_box", { box: box.name, force: true },
        { expectError: true });
      assert.equal(removed.error.code, "not_found");
    } finally {
      await other.close();
    }
    const wrong = new Client({ name: "wrong-key", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(MCP_URL()), {
      requestInit: { headers: { Authorization: "Bearer e2b_0000000000000000000000000000000000000000" } },
    });
    // The SDK's error carries the HTTP status as its code, hutchd's message as its text.
    await assert.rejects(wrong.connect(transport), (e) => {
      assert.equal(e.code, 401, String(e));
      assert.match(e.message, /unauthenticated/);
      return true;
    });
  });

  test("removes the box", LONG, async () => {
    const removed = await call(client, "remove_box", { box: box.id, force: true });
    assert.equal(removed.removed, box.id);
    const listed = await call(client, "list_boxes");
    assert.ok(!listed.boxes.some((b) => b.id === box.id));
  });
});
