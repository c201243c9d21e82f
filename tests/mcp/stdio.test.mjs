// `hutch mcp` spawned by the SDK's StdioClientTransport, as Claude Code or Codex start it: over
// the unix socket (the host administrator) and over TCP with a key (--host, HUTCH_API_KEY).
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { HTTP_URL, KEY_A, KEY_B, LONG, boxName, call, createBox, stdioClient } from "./helpers.mjs";

describe("hutch mcp (stdio)", () => {
  test("over the unix socket: tools, a box, a command, files", LONG, async () => {
    const client = await stdioClient();
    try {
      const { tools } = await client.listTools();
      assert.equal(tools.length, 14);
      const box = await createBox(client, boxName("stdio"));
      assert.equal(box.owner, "");  // the host administrator's box
      // A ping and a command in flight together: the relay does not serialize them.
      const [run] = await Promise.all([
        call(client, "run_command", { box: box.id, command: "sleep 1; uname -s" }),
        client.ping(),
      ]);
      assert.equal(run.stdout, "Linux\n");
      await call(client, "write_file", { box: box.id, path: "/tmp/s.txt", content: "stdio" });
      const read = await call(client, "read_file", { box: box.id, path: "/tmp/s.txt" });
      assert.equal(read.content, "stdio");
      const removed = await call(client, "remove_box", { box: box.id, force: true });
      assert.equal(removed.removed, box.id);
    } finally {
      await client.close();
    }
  });

  test("over TCP with a key: the key's boxes only", LONG, async () => {
    const withKey = (key) => stdioClient({
      args: ["--host", HTTP_URL()],
      env: { HUTCH_API_KEY: key, HUTCH_SOCKET: "/nonexistent" },
    });
    const a = await withKey(KEY_A());
    const b = await withKey(KEY_B());
    try {
      const box = await createBox(a, boxName("stdio-key"));
      assert.equal(box.owner, "test-user");
      const seen = await call(b, "list_boxes");
      assert.ok(!seen.boxes.some((x) => x.id === box.id));
      const hidden = await call(b, "read_file", { box: box.id, path: "/etc/hostname" },
        { expectError: true });
      assert.equal(hidden.error.code, "not_found");
      await call(a, "remove_box", { box: box.id, force: true });
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("a wrong key: every request is answered with the refusal", LONG, async () => {
    await assert.rejects(
      stdioClient({
        args: ["--host", HTTP_URL()],
        env: { HUTCH_API_KEY: "e2b_1111111111111111111111111111111111111111" },
      }),
      /key/i,
    );
  });
});
