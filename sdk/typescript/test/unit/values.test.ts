import assert from "node:assert/strict";
import { test } from "node:test";

import { createBoxRequest } from "../../src/box.js";
import { execResultFromJson, runRequest, toArgv, toEnvList } from "../../src/exec.js";
import { InvalidArgumentError } from "../../src/index.js";
import { boxInfoFromJson, fileInfoFromJson, policyToJson, processFromJson } from "../../src/models.js";
import { signalNumber } from "../../src/signals.js";
import { sizeToMib } from "../../src/units.js";
import { parseJson } from "../../src/wire.js";
import { sampleBox } from "./fake_hutchd.js";

test("sizes: numbers are MiB, strings take K/M/G/T with or without iB", () => {
  assert.equal(sizeToMib(512, "memory"), 512);
  assert.equal(sizeToMib("512", "memory"), 512);
  assert.equal(sizeToMib("512M", "memory"), 512);
  assert.equal(sizeToMib("512MiB", "memory"), 512);
  assert.equal(sizeToMib("2G", "memory"), 2048);
  assert.equal(sizeToMib("2g", "memory"), 2048);
  assert.equal(sizeToMib("1.5GiB", "memory"), 1536);
  assert.equal(sizeToMib("1T", "disk"), 1024 * 1024);
  assert.equal(sizeToMib("2048K", "disk"), 2);
  assert.throws(() => sizeToMib("1000K", "disk"), /not a whole number of MiB/);
  assert.throws(() => sizeToMib("lots", "memory"), /'lots' is not a size/);
  assert.throws(() => sizeToMib(-1, "memory"), InvalidArgumentError);
  assert.throws(() => sizeToMib(1.5, "memory"), InvalidArgumentError);
});

test("a create request: sizes in MiB, the policy and env as the API spells them", () => {
  assert.deepEqual(
    createBoxRequest({
      name: "dev",
      template: "base",
      cpus: 2,
      memory: "1G",
      disk: "8G",
      networkPolicy: { allow: [{ domain: "api.example.com", ports: [443] }], deny: [], allowPrivate: ["192.168.1.0/24"] },
      secrets: ["API_KEY"],
      env: { MODE: "test" },
    }),
    {
      name: "dev",
      template: "base",
      cpus: 2,
      memory_mib: 1024,
      disk_mib: 8192,
      network_policy: { allow: [{ domain: "api.example.com", ports: [443] }], deny: [], allow_private: ["192.168.1.0/24"] },
      secrets: ["API_KEY"],
      env: { MODE: "test" },
    },
  );
  assert.deepEqual(createBoxRequest({}), {});
  assert.deepEqual(createBoxRequest({ networkPolicy: "allow-all" }), { network_policy: "allow-all" });
  assert.throws(() => createBoxRequest({ memroy: "1G" } as never), /Unknown option 'memroy'/);
  assert.throws(() => createBoxRequest({ cpus: 0 }), /cpus/);
  assert.throws(() => createBoxRequest({ env: { "A=B": "x" } }), /not an environment variable name/);
  assert.deepEqual(policyToJson({ allow: [{ domain: "*" }], deny: [{ domain: "evil.example", ports: [80] }] }), {
    allow: [{ domain: "*" }],
    deny: [{ domain: "evil.example", ports: [80] }],
  });
});

test("argv: an array is run as is, a string through /bin/sh -c", () => {
  assert.deepEqual(toArgv(["ls", "-l", "a b"]), ["ls", "-l", "a b"]);
  assert.deepEqual(toArgv("echo $HOME | wc -c"), ["/bin/sh", "-c", "echo $HOME | wc -c"]);
  assert.throws(() => toArgv([]), InvalidArgumentError);
  assert.throws(() => toArgv("  "), /empty/);
  assert.throws(() => toArgv(["a\0b"]), /NUL/);
  assert.throws(() => toArgv([1 as unknown as string]), /argv\[0\] is number/);
});

test("env: an object becomes K=V; names with '=' or NUL are refused", () => {
  assert.deepEqual(toEnvList({ A: "1", B: "x=y", C: "" }), ["A=1", "B=x=y", "C="]);
  assert.equal(toEnvList(undefined), undefined);
  assert.throws(() => toEnvList({ "": "x" }), InvalidArgumentError);
  assert.throws(() => toEnvList({ "A=B": "x" }), InvalidArgumentError);
  assert.throws(() => toEnvList({ A: 1 as unknown as string }), /env.A is number/);
  assert.throws(() => toEnvList({ A: "a\0" }), /NUL/);
});

test("a run request: text stdin as stdin, bytes as stdin_base64, limits checked", () => {
  assert.deepEqual(runRequest(["cat"], { stdin: "hi", env: { K: "V" }, cwd: "/tmp", user: "root", timeoutMs: 500, maxOutputBytes: 10 }), {
    argv: ["cat"],
    env: ["K=V"],
    cwd: "/tmp",
    user: "root",
    stdin: "hi",
    timeout_ms: 500,
    max_output_bytes: 10,
  });
  assert.deepEqual(runRequest("cat", { stdin: new Uint8Array([0, 255, 10]) }), {
    argv: ["/bin/sh", "-c", "cat"],
    stdin_base64: "AP8K",
  });
  assert.deepEqual(runRequest(["true"], { timeoutMs: 0 }), { argv: ["true"] });
  assert.throws(() => runRequest(["true"], { maxOutputBytes: 65 * 1024 * 1024 }), /maxOutputBytes/);
  assert.throws(() => runRequest(["true"], { timeoutMs: -1 }), /timeoutMs/);
});

test("an exec result: base64 streams decoded, exactly the bytes", () => {
  const r = execResultFromJson({
    stdout: Buffer.from([0xff, 0x00, 0x41]).toString("base64"),
    stdout_encoding: "base64",
    stderr: "err\n",
    stderr_encoding: "utf-8",
    exit_code: null,
    signal: 9,
    duration_ms: 12,
    truncated: true,
    timed_out: true,
    pid: 412,
    error: null,
  });
  assert.deepEqual([...r.stdoutBytes], [0xff, 0x00, 0x41]);
  assert.equal(r.stdout, "\ufffd\u0000A");
  assert.equal(r.stderr, "err\n");
  assert.equal(r.exitCode, null);
  assert.equal(r.signal, 9);
  assert.equal(r.truncated, true);
  assert.equal(r.timedOut, true);
  const failed = execResultFromJson({
    stdout: "",
    stderr: "nope: not found\n",
    exit_code: 127,
    signal: null,
    duration_ms: 1,
    truncated: false,
    timed_out: false,
    pid: 0,
    error: { code: "not_found", message: "nope: not found" },
  });
  assert.deepEqual(failed.error, { code: "not_found", message: "nope: not found" });
  assert.equal(failed.exitCode, 127);
});

test("signals by Linux number or name", () => {
  assert.equal(signalNumber("SIGTERM"), 15);
  assert.equal(signalNumber("term"), 15);
  assert.equal(signalNumber("KILL"), 9);
  assert.equal(signalNumber("SIGUSR1"), 10);
  assert.equal(signalNumber(2), 2);
  assert.throws(() => signalNumber("SIGNOPE"), /Unknown signal/);
  assert.throws(() => signalNumber(0), InvalidArgumentError);
});

test("a box from JSON in camelCase; env kept as the user wrote it", () => {
  const b = boxInfoFromJson({ ...sampleBox, env: { MY_VAR: "x", lower: "y" } });
  assert.equal(b.memoryMib, 512);
  assert.equal(b.createdAt, 1764400000);
  assert.deepEqual(b.env, { MY_VAR: "x", lower: "y" });
  assert.equal(b.owner, "alice");
  const old = boxInfoFromJson({ id: "a", name: "b", state: "stopped" });
  assert.deepEqual(old.env, {});
  assert.deepEqual(old.secrets, []);
  assert.throws(() => boxInfoFromJson({ ...sampleBox, cpus: "two" }), /'cpus' is string, not a number/);
  assert.throws(() => boxInfoFromJson([]), /not a JSON object/);
});

test("a box's limits, lifetime and shares (the fields docs/openapi.yaml's Box gained)", () => {
  const b = boxInfoFromJson({
    ...sampleBox,
    max_exec_ms: 60000,
    idle_pause_ms: 0,
    expires_at: 1764403600,
    on_timeout: "suspend",
    shares: [{ host_dir: "/srv/data", box_dir: "/data", read_only: true }],
  });
  assert.equal(b.maxExecMs, 60000);
  assert.equal(b.idlePauseMs, 0);
  assert.equal(b.expiresAt, 1764403600);
  assert.equal(b.onTimeout, "suspend");
  assert.deepEqual(b.shares, [{ hostDir: "/srv/data", boxDir: "/data", readOnly: true }]);
  // An older hutchd sends none of them.
  const old = boxInfoFromJson({ id: "a", name: "b", state: "stopped" });
  assert.equal(old.idlePauseMs, -1);
  assert.equal(old.onTimeout, "");
  assert.deepEqual(old.shares, []);
});

test("nanosecond times survive JSON (they pass 2^53)", () => {
  const value = parseJson('{"name":"a.txt","mtime_ns": 1764400000123456789,"size":13,"note":"\\"mtime_ns\\": 5"}');
  const f = fileInfoFromJson(value);
  assert.equal(f.mtimeNs, 1764400000123456789n);
  assert.equal(f.mtime.getTime(), 1764400000123);
  assert.equal(f.size, 13);
  assert.equal((value as { note: string }).note, '"mtime_ns": 5');
  const p = processFromJson(parseJson('{"id":"p1","pid":7,"started_ns":1764400000999999999,"running":false,"code":3}'));
  assert.equal(p.startedNs, 1764400000999999999n);
  assert.equal(p.exitCode, 3);
  assert.equal(p.signal, null);
});
