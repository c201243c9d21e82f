// Runs the integration tests against one real hutchd for the whole suite:
//   python3 tests/support/hutchd_daemon.py start --dir DIR [--build B] [--image I]
// prints the daemon's addresses and keys as one JSON line; the tests get it in
// HUTCH_TEST_DAEMON and make and remove their own boxes; `stop --dir DIR` removes every box and
// stops the daemon, whatever happened.
//
// HUTCH_TEST_DAEMON set already (that JSON) means: use that daemon, start and stop nothing.
// Arguments are passed to `node --test` (e.g. --test-name-pattern=files).

import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync } from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
// build-test/test/integration -> sdk/typescript -> the repository.
const sdkRoot = path.resolve(here, "../../..");
const repoRoot = path.resolve(sdkRoot, "../..");
const helper = path.join(repoRoot, "tests/support/hutchd_daemon.py");

function daemonArgs(): string[] {
  const args: string[] = [];
  if (process.env["HUTCH_BUILD_DIR"]) args.push("--build", process.env["HUTCH_BUILD_DIR"]);
  if (process.env["HUTCH_TEST_IMAGE"]) args.push("--image", process.env["HUTCH_TEST_IMAGE"]);
  return args;
}

function startDaemon(dir: string): string {
  if (!existsSync(helper)) {
    throw new Error(`${helper} is missing: the integration tests need the repository's daemon helper`);
  }
  console.error(`integration: starting hutchd in ${dir}`);
  const started = spawnSync("python3", [helper, "start", "--dir", dir, ...daemonArgs()], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    timeout: 10 * 60 * 1000,
  });
  if (started.status !== 0) {
    throw new Error(`hutchd_daemon.py start failed (exit ${started.status ?? started.signal}): ${started.stdout}`);
  }
  const line = started.stdout.trim().split("\n").filter((l) => l.trim().startsWith("{")).pop();
  if (line === undefined) throw new Error(`hutchd_daemon.py start printed no JSON line: ${started.stdout}`);
  JSON.parse(line);
  return line;
}

function stopDaemon(dir: string): void {
  console.error(`integration: stopping hutchd in ${dir}`);
  const stopped = spawnSync("python3", [helper, "stop", "--dir", dir], { stdio: ["ignore", "inherit", "inherit"], timeout: 5 * 60 * 1000 });
  if (stopped.status !== 0) console.error(`integration: hutchd_daemon.py stop exited ${stopped.status ?? stopped.signal}`);
}

async function main(): Promise<number> {
  const reuse = process.env["HUTCH_TEST_DAEMON"];
  let dir: string | undefined;
  let daemon = reuse;
  if (daemon === undefined || daemon === "") {
    // Short: the daemon's unix sockets live under it (sun_path is 108 bytes).
    dir = mkdtempSync("/tmp/hutch-ts-");
    daemon = startDaemon(dir);
  }
  const stop = () => {
    if (dir !== undefined) stopDaemon(dir);
    dir = undefined;
  };
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    process.on(sig, () => {
      stop();
      process.exit(130);
    });
  }
  try {
    const files = readdirSync(here)
      .filter((f) => f.endsWith(".test.js"))
      .sort()
      .map((f) => path.join(here, f));
    const child = spawn(
      process.execPath,
      ["--test", "--test-concurrency=1", ...process.argv.slice(2), ...files],
      { stdio: "inherit", env: { ...process.env, HUTCH_TEST_DAEMON: daemon }, cwd: sdkRoot },
    );
    return await new Promise<number>((resolve) => child.on("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0))));
  } finally {
    stop();
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(`integration: ${(e as Error).message}`);
    process.exit(1);
  },
);
