import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { after, before, test } from "node:test";

import type { WebSocket } from "ws";

import { Box, CancelledError, Client, InvalidArgumentError, NotFoundError, ProtocolError, UnavailableError } from "../../src/index.js";
import { boxInfoFromJson } from "../../src/models.js";
import { FakeHutchd, sampleBox } from "./fake_hutchd.js";

// The fake's commands, by argv[0]: what hutchd and the box would do with them.
interface Session {
  request: Record<string, unknown>;
  fromClient: (string | Buffer)[];
  closedByClient: boolean;
}
const sessions: Session[] = [];

function out(ws: WebSocket, stream: 1 | 2, data: string | Buffer): void {
  ws.send(Buffer.concat([Buffer.from([stream]), Buffer.isBuffer(data) ? data : Buffer.from(data)]));
}
function control(ws: WebSocket, message: unknown): void {
  ws.send(JSON.stringify(message));
}
function exit(ws: WebSocket, code: number | null, signal: number | null = null): void {
  control(ws, { type: "exit", exit_code: code, signal });
  ws.close(1000);
}

function serveExec(ws: WebSocket): void {
  const session: Session = { request: {}, fromClient: [], closedByClient: false };
  sessions.push(session);
  let started = false;
  ws.on("close", () => {
    session.closedByClient = true;
  });
  ws.on("message", (data: Buffer, isBinary: boolean) => {
    session.fromClient.push(isBinary ? Buffer.from(data) : data.toString());
    if (!started) {
      started = true;
      session.request = JSON.parse(data.toString());
      start(ws, session.request);
      return;
    }
    const argv0 = (session.request["argv"] as string[])[0] ?? (session.request["login_shell"] ? "login-shell" : "");
    if (isBinary) {
      assert.equal(data[0], 0, "client data is stdin (stream 0)");
      if (argv0 === "cat" || argv0 === "login-shell" || argv0 === "sh-tty") out(ws, 1, data.subarray(1));
      return;
    }
    const msg = JSON.parse(data.toString()) as { type: string; signal?: number; rows?: number; cols?: number };
    if (msg.type === "stdin_eof") exit(ws, 0);
    if (msg.type === "signal") exit(ws, null, msg.signal ?? 0);
    if (msg.type === "resize") out(ws, 1, `resized ${msg.rows}x${msg.cols}\r\n`);
  });
}

function start(ws: WebSocket, request: Record<string, unknown>): void {
  const argv = request["argv"] as string[];
  const argv0 = argv[0] ?? (request["login_shell"] ? "login-shell" : "");
  if (argv0 === "nope") {
    control(ws, { type: "error", code: "not_found", message: "No such program 'nope' in PATH" });
    ws.close(1000);
    return;
  }
  if (argv0 === "refused") {
    // A request hutchd refuses after the upgrade: the error, then a close that is not 1000.
    control(ws, { type: "error", code: "invalid_argument", message: "rows must be 1-10000" });
    ws.close(1008, "rows must be 1-10000");
    return;
  }
  control(ws, { type: "started", pid: 4242 });
  switch (argv0) {
    case "echo":
      out(ws, 1, `${argv.slice(1).join(" ")}\n`);
      out(ws, 2, "to stderr\n");
      exit(ws, 3);
      return;
    case "utf8": {
      const bytes = Buffer.from("héllo wörld\n");
      for (let i = 0; i < bytes.length; i++) out(ws, 1, bytes.subarray(i, i + 1));
      exit(ws, 0);
      return;
    }
    case "flood":
      for (let i = 0; i < 50; i++) out(ws, 1, `line ${i}\n`);
      exit(ws, 0);
      return;
    case "crash":
      out(ws, 1, "partial");
      ws.terminate();
      return;
    case "badframe":
      ws.send(Buffer.from([5, 65]));
      return;
    case "login-shell":
      out(ws, 1, "$ ");
      return;
    default:
      return; // cat, sleep: wait for the client
  }
}

let fake: FakeHutchd;
let box: Box;
let client: Client;
before(async () => {
  fake = await FakeHutchd.unix();
  fake.onWs(`/v1/boxes/${sampleBox.id}/exec/ws`, (ws) => serveExec(ws));
  client = new Client({ socketPath: fake.socketPath, env: {} });
  box = new Box(client, boxInfoFromJson(sampleBox));
});
after(async () => {
  client.close();
  await fake.close();
});

function lastSession(): Session {
  const s = sessions[sessions.length - 1];
  assert.ok(s);
  return s;
}

test("exec with callbacks streams output and returns the whole result", async () => {
  const seen: string[] = [];
  const result = await box.exec(["echo", "hi", "there"], {
    env: { K: "V" },
    cwd: "/tmp",
    user: "root",
    onStdout: (text) => void seen.push(`out:${text}`),
    onStderr: (text) => void seen.push(`err:${text}`),
  });
  assert.deepEqual(seen, ["out:hi there\n", "err:to stderr\n"]);
  assert.equal(result.stdout, "hi there\n");
  assert.equal(result.stderr, "to stderr\n");
  assert.equal(result.exitCode, 3);
  assert.equal(result.signal, null);
  assert.equal(result.pid, 4242);
  assert.equal(result.truncated, false);
  assert.deepEqual(lastSession().request, { argv: ["echo", "hi", "there"], env: ["K=V"], cwd: "/tmp", user: "root", stdin: false });
  assert.equal(lastSession().fromClient.length, 1, "only the request was sent");
  const req = fake.requests[fake.requests.length - 1];
  assert.equal(req?.headers["sec-websocket-protocol"], "hutch.exec.v1");
});

test("a stream as stdin is sent in order, then stdin_eof", async () => {
  const result = await box.exec(["cat"], { stdin: Readable.from([Buffer.from("one "), "two ", Buffer.from("three")]) });
  assert.equal(result.stdout, "one two three");
  assert.equal(result.exitCode, 0);
  const s = lastSession();
  assert.equal(s.request["stdin"], true);
  const sent = s.fromClient.slice(1);
  assert.deepEqual(sent.slice(0, 3).map((m) => (Buffer.isBuffer(m) ? [...m] : m)), [
    [0, ...Buffer.from("one ")],
    [0, ...Buffer.from("two ")],
    [0, ...Buffer.from("three")],
  ]);
  assert.deepEqual(JSON.parse(String(sent[3])), { type: "stdin_eof" });
});

test("a program that cannot start: exit 127 with the error, as the JSON exec answers", async () => {
  const result = await box.exec(["nope"], { onStdout: () => undefined });
  assert.equal(result.exitCode, 127);
  assert.deepEqual(result.error, { code: "not_found", message: "No such program 'nope' in PATH" });
  assert.equal(result.stderr, "No such program 'nope' in PATH\n");
});

test("a request refused after the upgrade (close 1008) is the API's error, not a result", async () => {
  await assert.rejects(box.exec(["refused"], { onStdout: () => undefined }), (e: unknown) => {
    assert.ok(e instanceof InvalidArgumentError, String(e));
    assert.equal(e.message, "rows must be 1-10000");
    return true;
  });
  await assert.rejects(box.spawn(["refused"]), InvalidArgumentError);
});

test("spawn: write to stdin, close it, wait for the result", async () => {
  const proc = await box.spawn(["cat"]);
  assert.equal(proc.pid, 4242);
  await proc.write("hello ");
  await proc.write(new Uint8Array(Buffer.from("world")));
  await proc.closeStdin();
  const result = await proc.wait();
  assert.equal(result.stdout, "hello world");
  assert.equal(result.exitCode, 0);
});

test("spawn: stdin as a Node Writable (pipe into it)", async () => {
  const proc = await box.spawn(["cat"]);
  Readable.from(["a", "b", "c"]).pipe(proc.stdin);
  const result = await proc.wait();
  assert.equal(result.stdout, "abc");
});

test("spawn: a signal by name reaches the command as its number", async () => {
  const proc = await box.spawn(["sleep", "100"]);
  await proc.signal("SIGINT");
  const result = await proc.wait();
  assert.equal(result.signal, 2);
  assert.equal(result.exitCode, null);
  assert.deepEqual(JSON.parse(String(lastSession().fromClient[1])), { type: "signal", signal: 2 });
});

test("spawn of a missing program rejects with NotFoundError", async () => {
  await assert.rejects(box.spawn(["nope"]), NotFoundError);
});

test("timeoutMs kills the command with SIGKILL and says so", async () => {
  const result = await box.exec(["sleep", "100"], { timeoutMs: 50, onStdout: () => undefined });
  assert.equal(result.signal, 9);
  assert.equal(result.timedOut, true);
  assert.deepEqual(JSON.parse(String(lastSession().fromClient[1])), { type: "signal", signal: 9 });
});

test("the connection dropping before the exit is unavailable, not a result", async () => {
  await assert.rejects(box.exec(["crash"], { onStdout: () => undefined }), (e: unknown) => {
    assert.ok(e instanceof UnavailableError);
    assert.match(e.message, /closed .* before the command's exit/);
    return true;
  });
});

test("a frame for an unknown stream is a protocol error and the session is closed", async () => {
  await assert.rejects(box.exec(["badframe"], { onStdout: () => undefined }), ProtocolError);
  const s = lastSession();
  for (let i = 0; i < 50 && !s.closedByClient; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(s.closedByClient, true);
});

test("async callbacks run one at a time, in order, and the exit waits for them", async () => {
  let running = 0;
  let maxRunning = 0;
  const lines: string[] = [];
  const result = await box.exec(["flood"], {
    onStdout: async (text) => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      await new Promise((r) => setTimeout(r, 2));
      lines.push(text);
      running--;
    },
  });
  assert.equal(maxRunning, 1);
  assert.equal(lines.length, 50);
  assert.equal(lines[0], "line 0\n");
  assert.equal(lines[49], "line 49\n");
  assert.equal(result.stdout.split("\n").length, 51);
});

test("a callback that throws ends the exec with its error", async () => {
  await assert.rejects(
    box.exec(["flood"], {
      onStdout: () => {
        throw new Error("consumer broke");
      },
    }),
    /consumer broke/,
  );
});

test("characters split across messages reach the callback whole", async () => {
  const texts: string[] = [];
  const result = await box.exec(["utf8"], { onStdout: (t) => void texts.push(t) });
  assert.equal(texts.join(""), "héllo wörld\n");
  assert.ok(!texts.some((t) => t.includes("\ufffd")));
  assert.equal(result.stdout, "héllo wörld\n");
});

test("maxOutputBytes bounds what the result keeps; the callbacks still get everything", async () => {
  let total = 0;
  const result = await box.exec(["flood"], { maxOutputBytes: 20, onStdout: (t) => void (total += t.length) });
  assert.equal(result.stdoutBytes.byteLength, 20);
  assert.equal(result.truncated, true);
  assert.ok(total > 300);
});

test("aborting closes the session (hutchd kills the command) and rejects with CancelledError", async () => {
  const controller = new AbortController();
  const pending = box.exec(["sleep", "100"], { onStdout: () => undefined, abortSignal: controller.signal });
  setTimeout(() => controller.abort(), 30);
  await assert.rejects(pending, CancelledError);
  const s = lastSession();
  for (let i = 0; i < 50 && !s.closedByClient; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(s.closedByClient, true);
});

test("an error before the upgrade is the API's error", async () => {
  const other = new Box(client, boxInfoFromJson({ ...sampleBox, id: "000000000000" }));
  await assert.rejects(other.exec(["true"], { onStdout: () => undefined }), NotFoundError);
});

test("pty: the login shell on a terminal, typed into, resized, killed", async () => {
  const chunks: string[] = [];
  const pty = await box.pty({ rows: 30, cols: 100, onData: (d) => void chunks.push(Buffer.from(d).toString()) });
  const s = lastSession();
  assert.deepEqual(s.request, { argv: [], tty: true, rows: 30, cols: 100, stdin: true, login_shell: true });
  await pty.write("ls\r");
  await pty.resize({ rows: 40, cols: 120 });
  for (let i = 0; i < 100 && !chunks.join("").includes("resized"); i++) await new Promise((r) => setTimeout(r, 5));
  assert.equal(chunks.join(""), "$ ls\rresized 40x120\r\n");
  await pty.kill();
  assert.deepEqual(await pty.wait(), { exitCode: null, signal: 9 });
});

test("pty: output before the first listener is kept for it", async () => {
  const pty = await box.pty({ command: ["sh-tty"] });
  assert.deepEqual(lastSession().request["argv"], ["sh-tty"]);
  await pty.write("typed");
  await new Promise((r) => setTimeout(r, 50));
  const got: string[] = [];
  pty.onData((d) => void got.push(Buffer.from(d).toString()));
  assert.deepEqual(got, ["typed"]);
  await pty.signal("SIGHUP");
  assert.deepEqual(await pty.wait(), { exitCode: null, signal: 1 });
});

test("spawn: piping into a command that already ended drops the bytes (no crash); write() rejects", async () => {
  const proc = await box.spawn(["echo", "early"]);
  const result = await proc.wait();
  assert.equal(result.exitCode, 3);
  await new Promise<void>((resolve, reject) => {
    const source = Readable.from(["more", "input", "nobody", "reads"]);
    proc.stdin.on("error", reject);
    proc.stdin.on("finish", resolve);
    source.pipe(proc.stdin);
  });
  await assert.rejects(proc.write("x"), /already ended/);
});
