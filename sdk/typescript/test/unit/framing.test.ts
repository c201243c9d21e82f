import assert from "node:assert/strict";
import { test } from "node:test";

import { ProtocolError } from "../../src/index.js";
import { ndjson } from "../../src/ndjson.js";
import { parseControl, parseData, stdinFrame } from "../../src/ws_exec.js";

test("stdin goes out as one binary message: byte 0, then the data", () => {
  assert.deepEqual([...stdinFrame(new Uint8Array([104, 105]))], [0, 104, 105]);
  assert.deepEqual([...stdinFrame(new Uint8Array(0))], [0]);
  const big = new Uint8Array(70000).fill(7);
  const frame = stdinFrame(big.subarray(5, 10));
  assert.deepEqual([...frame], [0, 7, 7, 7, 7, 7]);
});

test("output comes in as binary messages: 1 stdout, 2 stderr", () => {
  assert.deepEqual(parseData(Buffer.from([1, 65, 66])), { stream: 1, bytes: Buffer.from("AB") });
  assert.deepEqual(parseData(Buffer.from([2])), { stream: 2, bytes: Buffer.alloc(0) });
  assert.throws(() => parseData(Buffer.from([0, 65])), ProtocolError);
  assert.throws(() => parseData(Buffer.from([3, 65])), /stream 3/);
  assert.throws(() => parseData(Buffer.alloc(0)), /empty/);
});

test("control messages: started, exit (code or signal), error", () => {
  assert.deepEqual(parseControl('{"type":"started","pid":42}'), { type: "started", pid: 42 });
  assert.deepEqual(parseControl('{"type":"exit","exit_code":3,"signal":null}'), { type: "exit", exitCode: 3, signal: null });
  assert.deepEqual(parseControl('{"type":"exit","signal":9}'), { type: "exit", exitCode: null, signal: 9 });
  assert.deepEqual(parseControl('{"type":"error","code":"not_found","message":"No such program"}'), {
    type: "error",
    code: "not_found",
    message: "No such program",
  });
  assert.throws(() => parseControl('{"type":"exit","exit_code":null,"signal":null}'), /neither/);
  assert.throws(() => parseControl('{"type":"exit","exit_code":1,"signal":9}'), /both/);
  assert.throws(() => parseControl('{"type":"bogus"}'), /unknown type 'bogus'/);
  assert.throws(() => parseControl("not json"), ProtocolError);
  assert.throws(() => parseControl('{"type":"started","pid":"x"}'), ProtocolError);
});

test("NDJSON lines split across chunks, blank lines skipped, last line without newline", async () => {
  async function* chunks() {
    yield Buffer.from('{"progress":"one"}\n{"prog');
    yield Buffer.from('ress":"t\xc3'.replace("\xc3", ""), "latin1");
    yield Buffer.from([0xc3]);
    yield Buffer.from([0xa9]);
    yield Buffer.from('"}\n\n{"template":{"name":"x"}}');
  }
  const lines: unknown[] = [];
  for await (const line of ndjson(chunks(), "a line")) lines.push(line);
  assert.deepEqual(lines, [{ progress: "one" }, { progress: "té" }, { template: { name: "x" } }]);
  async function* bad() {
    yield Buffer.from("{nope}\n");
  }
  await assert.rejects(async () => {
    for await (const _ of ndjson(bad(), "a line")) void _;
  }, ProtocolError);
});
