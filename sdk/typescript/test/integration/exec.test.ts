// Exec: run to completion (POST /exec), streamed over the WebSocket, with stdin, in the
// background, on a terminal.

import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { after, before, test } from "node:test";

import { Box, CancelledError, FailedPreconditionError, NotFoundError } from "../../src/index.js";
import { admin, boxName, eventually } from "./daemon.js";

let box: Box;
before(async () => {
  box = await admin().boxes.create({ name: boxName("exec"), env: { BOX_VAR: "from-box" } });
});
after(async () => {
  await box?.remove({ force: true });
});

test("an argv runs as is; a string runs through /bin/sh -c", async () => {
  const r = await box.exec(["printf", "%s|", "a b", "$HOME"]);
  assert.equal(r.stdout, "a b|$HOME|");
  assert.equal(r.exitCode, 0);
  assert.equal(r.signal, null);
  assert.equal(r.error, null);
  const sh = await box.exec("echo $HOME; echo err >&2; exit 3");
  assert.equal(sh.stdout, "/home/hutch\n");
  assert.equal(sh.stderr, "err\n");
  assert.equal(sh.exitCode, 3);
  assert.ok(sh.durationMs >= 0);
  assert.ok(sh.pid > 0);
});

test("env, cwd and user; the box's env under the request's", async () => {
  const r = await box.exec("echo $BOX_VAR $MINE; pwd; id -un", { env: { MINE: "mine" }, cwd: "/tmp", user: "root" });
  assert.equal(r.stdout, "from-box mine\n/tmp\nroot\n");
  const over = await box.exec("echo $BOX_VAR", { env: { BOX_VAR: "request-wins" } });
  assert.equal(over.stdout, "request-wins\n");
  const who = await box.exec(["id", "-un"]);
  assert.equal(who.stdout, "hutch\n");
});

test("stdin as text and as bytes; binary output comes back exactly", async () => {
  assert.equal((await box.exec(["cat"], { stdin: "héllo\n" })).stdout, "héllo\n");
  const bytes = new Uint8Array([0, 1, 2, 255, 254, 10]);
  const r = await box.exec(["cat"], { stdin: bytes });
  assert.deepEqual([...r.stdoutBytes], [...bytes]);
  const noStdin = await box.exec(["cat"]);
  assert.equal(noStdin.stdout, "");
  assert.equal(noStdin.exitCode, 0);
});

test("a program that does not exist: 127 and the error, not an exception", async () => {
  const r = await box.exec(["definitely-not-here"]);
  assert.equal(r.exitCode, 127);
  assert.equal(r.error?.code, "not_found");
  assert.ok(r.stderr.length > 0);
  const ws = await box.exec(["definitely-not-here"], { onStdout: () => undefined });
  assert.equal(ws.exitCode, 127);
  assert.equal(ws.error?.code, "not_found");
});

test("timeoutMs kills the command", async () => {
  const t0 = Date.now();
  const r = await box.exec(["sleep", "30"], { timeoutMs: 1000 });
  assert.equal(r.timedOut, true);
  assert.equal(r.signal, 9);
  assert.equal(r.exitCode, null);
  assert.ok(Date.now() - t0 < 20_000);
  const ws = await box.exec(["sleep", "30"], { timeoutMs: 1000, onStdout: () => undefined });
  assert.equal(ws.timedOut, true);
  assert.equal(ws.signal, 9);
});

test("maxOutputBytes truncates; the command still runs to its end", async () => {
  const r = await box.exec("head -c 100000 /dev/zero; echo done >&2", { maxOutputBytes: 1000 });
  assert.equal(r.stdoutBytes.byteLength, 1000);
  assert.equal(r.truncated, true);
  assert.equal(r.stderr, "done\n");
  assert.equal(r.exitCode, 0);
});

test("streamed: the callbacks see output as it comes, before the command ends", async () => {
  const events: string[] = [];
  const t0 = Date.now();
  let firstAt = 0;
  const r = await box.exec("echo one; sleep 1; echo two >&2; sleep 1; echo three", {
    onStdout: (t) => {
      if (firstAt === 0) firstAt = Date.now() - t0;
      events.push(`out:${t}`);
    },
    onStderr: (t) => void events.push(`err:${t}`),
  });
  assert.deepEqual(events, ["out:one\n", "err:two\n", "out:three\n"]);
  assert.ok(firstAt < Date.now() - t0 - 1000, `first output after ${firstAt} ms of ${Date.now() - t0}`);
  assert.equal(r.stdout, "one\nthree\n");
  assert.equal(r.stderr, "two\n");
  assert.equal(r.exitCode, 0);
});

test("streamed: several MiB through, a slow async consumer slows the command", async () => {
  let total = 0;
  const r = await box.exec("head -c 5000000 /dev/urandom | od -An -tx1 | head -c 4000000", {
    maxOutputBytes: 1024,
    onStdout: async (_t, bytes) => {
      total += bytes.byteLength;
      if (total < 200_000) await new Promise((res) => setTimeout(res, 1));
    },
  });
  assert.equal(total, 4_000_000);
  assert.equal(r.truncated, true);
  assert.equal(r.exitCode, 0);
});

test("streamed stdin from a Readable, then EOF", async () => {
  const chunks = Array.from({ length: 100 }, (_, i) => `line ${i}\n`);
  const r = await box.exec(["sh", "-c", "tee /tmp/copy | wc -l"], { stdin: Readable.from(chunks) });
  assert.equal(r.stdout.trim(), "100");
  assert.equal((await box.exec(["tail", "-n", "1", "/tmp/copy"])).stdout, "line 99\n");
});

test("spawn: talk to a running command through its stdin", async () => {
  let replies = "";
  const proc = await box.spawn(["python3", "-u", "-c", "import sys\nfor l in sys.stdin: print(l.strip()[::-1], flush=True)"], {
    onStdout: (t) => void (replies += t),
  });
  assert.ok(proc.pid > 0);
  await proc.write("abc\n");
  // The answer comes while the command still runs and its stdin is open.
  await eventually("the first reply", async () => (replies === "cba\n" ? true : undefined));
  await proc.write(new Uint8Array(Buffer.from("hutch\n")));
  await proc.closeStdin();
  const r = await proc.wait();
  assert.equal(r.stdout, "cba\nhctuh\n");
  assert.equal(r.exitCode, 0);
});

test("spawn with callbacks and a signal", async () => {
  let seen = "";
  const proc = await box.spawn(["sh", "-c", "echo ready; trap 'echo got TERM; exit 42' TERM; while :; do sleep 0.1; done"], {
    onStdout: (t) => void (seen += t),
  });
  await eventually("ready", async () => (seen.includes("ready") ? true : undefined));
  await proc.signal("SIGTERM");
  const r = await proc.wait();
  assert.equal(r.exitCode, 42);
  assert.match(seen, /got TERM/);
});

test("closing a spawn session kills the command", async () => {
  const proc = await box.spawn(["sh", "-c", "echo $$ > /tmp/spawned.pid; exec sleep 600"]);
  await eventually("the pid file", async () => ((await box.exec(["test", "-s", "/tmp/spawned.pid"])).exitCode === 0 ? true : undefined));
  proc.close();
  await assert.rejects(proc.wait(), CancelledError);
  await eventually("the command gone", async () => {
    const r = await box.exec("kill -0 $(cat /tmp/spawned.pid) 2>/dev/null && echo alive || echo gone");
    return r.stdout.trim() === "gone" ? true : undefined;
  });
});

test("pty: a login shell on a terminal of the asked size, resized, exited", async () => {
  let screen = "";
  const pty = await box.pty({ rows: 30, cols: 100, onData: (d) => (screen += Buffer.from(d).toString()) });
  assert.ok(pty.pid > 0);
  await pty.write("stty size; tty; echo $0\n");
  await eventually("stty's and tty's answers", async () => (screen.includes("30 100") && /\/dev\/pts\/\d+/.test(screen) ? true : undefined));
  assert.match(screen, /-bash|bash/);
  await pty.resize({ rows: 50, cols: 160 });
  await pty.write("stty size\n");
  await eventually("the new size", async () => (screen.includes("50 160") ? true : undefined));
  await pty.write("exit 7\n");
  assert.deepEqual(await pty.wait(), { exitCode: 7, signal: null });
});

test("pty: a command on a terminal, killed", async () => {
  const pty = await box.pty({ command: ["cat"], user: "root" });
  let echoed = "";
  pty.onData((d) => (echoed += Buffer.from(d).toString()));
  await pty.write("typed\n");
  await eventually("the echo", async () => (echoed.includes("typed") ? true : undefined));
  await pty.kill();
  assert.deepEqual(await pty.wait(), { exitCode: null, signal: 9 });
});

test("processes: start detached, list, read its log, signal it", async () => {
  const p = await box.processes.start(["sh", "-c", "echo hello from the background; exec sleep 600"], { env: { X: "1" } });
  assert.ok(p.id !== "");
  assert.ok(p.pid > 0);
  assert.equal(p.running, true);
  assert.ok(p.log.startsWith("/"), p.log);
  const listed = await eventually("the process in the list", async () => (await box.processes.list()).find((q) => q.id === p.id));
  assert.equal(listed.running, true);
  assert.deepEqual(listed.argv, ["sh", "-c", "echo hello from the background; exec sleep 600"]);
  assert.ok(listed.startedNs > 1_700_000_000_000_000_000n);
  const log = await eventually("the log line", async () => {
    const text = await box.processes.logs(p);
    return text.includes("hello") ? text : undefined;
  });
  assert.equal(log, "hello from the background\n");
  await box.processes.signal(p.id, "SIGTERM");
  const ended = await eventually("the process ended", async () => {
    const q = (await box.processes.list()).find((x) => x.id === p.id);
    return q !== undefined && !q.running ? q : undefined;
  });
  assert.equal(ended.signal, 15);
  await assert.rejects(box.processes.signal(p.id), FailedPreconditionError);
  await assert.rejects(box.processes.signal("no-such-process"), NotFoundError);
});
