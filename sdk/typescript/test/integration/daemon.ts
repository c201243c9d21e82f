// The daemon the suite runs against (test/integration/run.ts starts it) and clients for it.

import assert from "node:assert/strict";
import { after } from "node:test";

import { Box, Client, type ClientOptions, type CreateBoxOptions } from "../../src/index.js";

export interface TestDaemon {
  https_url: string;
  http_url: string;
  socket: string;
  admin_key: string;
  key: string;
  fingerprint: string;
  ca_cert: string;
  pid: number;
  dir: string;
}

function load(): TestDaemon {
  const text = process.env["HUTCH_TEST_DAEMON"];
  if (text === undefined || text === "") {
    throw new Error("HUTCH_TEST_DAEMON is not set: run the integration tests with `npm run test:integration` (test/integration/run.ts)");
  }
  return JSON.parse(text) as TestDaemon;
}

export const daemon = load();

const clients: Client[] = [];
after(() => {
  for (const c of clients) c.close();
});

function make(options: ClientOptions): Client {
  const c = new Client({ env: {}, ...options });
  clients.push(c);
  return c;
}

/** The admin key over HTTPS, the certificate pinned: what most tests use. */
export function admin(): Client {
  return make({ host: daemon.https_url, apiKey: daemon.admin_key, fingerprint: daemon.fingerprint });
}

/** A key that is not admin, over HTTPS. */
export function user(): Client {
  return make({ host: daemon.https_url, apiKey: daemon.key, fingerprint: daemon.fingerprint });
}

/** The unix socket: the host administrator, no key. */
export function local(): Client {
  return make({ socketPath: daemon.socket });
}

/** Plain HTTP on loopback with the admin key. */
export function plainHttp(): Client {
  return make({ host: daemon.http_url, apiKey: daemon.admin_key });
}

export function client(options: ClientOptions): Client {
  return make(options);
}

/** The environment `new Client()` reads, pointing at the test daemon (for the README's examples). */
export function clientEnv(): Record<string, string> {
  return { HUTCH_HOST: daemon.https_url, HUTCH_API_KEY: daemon.admin_key, HUTCH_FINGERPRINT: daemon.fingerprint };
}

let counter = 0;
/** A box name unique to this run, so a leftover is easy to tell. */
export function boxName(what: string): string {
  counter++;
  return `ts-${what}-${process.pid}-${counter}`;
}

/** Runs `fn` with a new box and removes it afterwards, whatever happened. */
export async function withBox<T>(c: Client, fn: (box: Box) => Promise<T>, options: CreateBoxOptions = {}): Promise<T> {
  const box = await c.boxes.create({ name: boxName("box"), ...options });
  try {
    return await fn(box);
  } finally {
    await box.remove({ force: true }).catch((e: unknown) => {
      if ((e as { code?: string }).code !== "not_found") throw e;
    });
  }
}

export async function eventually<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    assert.ok(Date.now() < deadline, `${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
