// Shared helpers of the E2B JS suites (tests/e2b/run.sh runs them once per SDK version).
//
// The SDK is the unmodified npm package `e2b`, installed twice under npm aliases
// (tests/e2b/package.json): E2B_SDK=e2b-latest or E2B_SDK=e2b-old picks one. The SDK itself
// reads E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (the only configuration an E2B agent
// needs to be pointed at hutchd); E2B_TEST_KEY_B is a second, non-admin key of another owner.
//
// Where the two versions differ, tests branch on what the module exports or on whether a
// method exists, never on the version string.

import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { after } from 'node:test'

export const alias = process.env.E2B_SDK || 'e2b-latest'
export const sdk = await import(alias)
export const { Sandbox } = sdk

for (const name of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
  if (!process.env[name]) throw new Error(`${name} is not set (tests/e2b/run.sh sets it)`)
}

export const TEMPLATE = process.env.E2B_TEST_TEMPLATE || 'base'
// One id per process, in every sandbox's metadata: list filters find this run's sandboxes.
export const RUN_ID = `${process.pid}-${Date.now().toString(36)}`
export const KEY_B = process.env.E2B_TEST_KEY_B || ''

// Sandboxes made by this test file, killed when the file ends (hutchd is stopped by run.sh,
// which removes every box anyway).
const made = new Set()
after(async () => {
  await Promise.allSettled([...made].map((id) => Sandbox.kill(id).catch(() => {})))
})

export async function createSandbox(opts = {}) {
  const sbx = await Sandbox.create(TEMPLATE, {
    timeoutMs: 600_000,
    ...opts,
    metadata: { suite: 'hutch-e2b', run: RUN_ID, ...(opts.metadata || {}) },
  })
  made.add(sbx.sandboxId)
  return sbx
}

export function track(id) {
  made.add(id)
}

// The file's shared sandbox: tests that do not need a sandbox of their own reuse it.
let shared
export function sharedSandbox() {
  if (!shared) shared = createSandbox()
  return shared
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

export async function waitFor(what, fn, { timeoutMs = 20_000, intervalMs = 100 } = {}) {
  const deadline = Date.now() + timeoutMs
  let last
  for (;;) {
    last = await fn()
    if (last) return last
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(intervalMs)
  }
}

export function sha256(bytes) {
  return createHash('sha256').update(bytes).digest('hex')
}

// The class the SDK throws for a missing sandbox or file: newer SDKs have subclasses of
// NotFoundError; both versions export NotFoundError itself.
export const SandboxNotFound = sdk.SandboxNotFoundError || sdk.NotFoundError
export const FileNotFound = sdk.FileNotFoundError || sdk.NotFoundError

// assert.rejects with the error's class and message in the failure text.
export async function rejectsWith(promise, cls, what) {
  let err
  try {
    const value = await promise
    assert.fail(`${what}: expected ${cls.name}, but it resolved with ${JSON.stringify(value)}`)
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e
    err = e
  }
  assert.ok(err instanceof cls,
    `${what}: expected ${cls.name}, got ${err?.constructor?.name}: ${err?.message}`)
  return err
}

// The command lines of the box's processes (from /proc, no procps needed), to check that a
// process is or is not running.
export async function processLines(sbx) {
  const r = await sbx.commands.run(
    'for p in /proc/[0-9]*; do [ -r $p/cmdline ] && tr "\\0" " " < $p/cmdline && echo; done; true',
    { user: 'root' })
  return r.stdout.split('\n').map((l) => l.trim()).filter(Boolean)
}

export async function listAll(opts) {
  const paginator = Sandbox.list(opts)
  const out = []
  while (paginator.hasNext) {
    out.push(...(await paginator.nextItems()))
    if (out.length > 10_000) break
  }
  return out
}

// A Connect server-streaming call made by hand (no SDK): POST /<service>/<method> with one
// application/connect+json envelope; resolves with the decoded messages, the end-stream
// message and when each arrived. For what the SDKs cannot show (e.g. the server's own deadline).
export async function rawStream(sbx, path, message, headers = {}, { limitMs = 30_000 } = {}) {
  const base = process.env.E2B_SANDBOX_URL.replace(/\/$/, '')
  const json = Buffer.from(JSON.stringify(message))
  const body = Buffer.alloc(5 + json.length)
  body.writeUInt8(0, 0)
  body.writeUInt32BE(json.length, 1)
  json.copy(body, 5)
  const t0 = Date.now()
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1',
      'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983',
      ...(sbx.envdAccessToken ? { 'X-Access-Token': sbx.envdAccessToken } : {}),
      ...headers,
    },
    body,
    signal: AbortSignal.timeout(limitMs),
  })
  const out = { status: res.status, messages: [], end: undefined, endAt: undefined }
  let buf = Buffer.alloc(0)
  for await (const chunk of res.body) {
    buf = Buffer.concat([buf, chunk])
    while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
      const len = buf.readUInt32BE(1)
      const flags = buf[0]
      const msg = JSON.parse(buf.subarray(5, 5 + len).toString('utf8') || '{}')
      buf = buf.subarray(5 + len)
      if (flags & 2) { out.end = msg; out.endAt = Date.now() - t0 } else out.messages.push({ msg, at: Date.now() - t0 })
    }
  }
  return out
}
