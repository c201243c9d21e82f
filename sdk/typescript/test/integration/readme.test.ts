// The README's examples, run as a user would run them: each a module of its own, `new Client()`
// pointed at the test daemon through the environment.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { clientEnv } from "./daemon.js";

interface Example {
  name: string;
  line: number;
  run: boolean;
  why: string;
  expect: string[];
}

const here = path.dirname(fileURLToPath(import.meta.url));
const sdkRoot = path.resolve(here, "../../..");
const examples = JSON.parse(readFileSync(path.join(sdkRoot, "test/readme/examples.json"), "utf8")) as Example[];

function run(file: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [file], {
      cwd: sdkRoot,
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: process.env["HOME"] ?? "/root", ...clientEnv() },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 10 * 60 * 1000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

test("the README has runnable examples", () => {
  assert.ok(examples.filter((e) => e.run).length >= 5);
});

for (const example of examples) {
  test(`README.md line ${example.line}`, { skip: example.run ? false : `not run: ${example.why}` }, async () => {
    const file = path.join(sdkRoot, "build-test/test/readme", `${example.name}.js`);
    const r = await run(file);
    assert.equal(r.code, 0, `the example failed:\n${r.stderr}\n${r.stdout}`);
    for (const text of example.expect) assert.ok(r.stdout.includes(text), `prints '${text}'; printed:\n${r.stdout}`);
  });
}
