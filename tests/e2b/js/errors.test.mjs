// Errors the E2B SDK maps from the server's answers: unknown sandboxes, a wrong key, another
// owner's sandbox.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sdk, Sandbox, RUN_ID, KEY_B, createSandbox, listAll, rejectsWith, SandboxNotFound } from './lib.mjs'

const { AuthenticationError } = sdk
const UNKNOWN = 'no-such-sandbox-0123456789'

test('an unknown sandbox id: connect is NotFound, kill is false, getInfo is NotFound', async () => {
  await rejectsWith(Sandbox.connect(UNKNOWN), SandboxNotFound, 'connect to an unknown id')
  assert.equal(await Sandbox.kill(UNKNOWN), false)
  await rejectsWith(Sandbox.getInfo(UNKNOWN), SandboxNotFound, 'getInfo of an unknown id')
  await rejectsWith(Sandbox.setTimeout(UNKNOWN, 60_000), SandboxNotFound, 'setTimeout of an unknown id')
})

test('a wrong API key: create is an AuthenticationError', async () => {
  const wrong = 'e2b_' + '0'.repeat(40)
  await rejectsWith(Sandbox.create('base', { apiKey: wrong, timeoutMs: 60_000 }), AuthenticationError,
    'create with an unknown key')
  await rejectsWith(listAll({ apiKey: wrong }), AuthenticationError, 'list with an unknown key')
})

test('an unknown template is an error, not a sandbox', async () => {
  await rejectsWith(Sandbox.create('no-such-template-hutch', { timeoutMs: 60_000 }), sdk.SandboxError,
    'create from an unknown template')
})

test('another owner cannot see or touch the sandbox', async (t) => {
  if (!KEY_B) {
    assert.fail('E2B_TEST_KEY_B is not set (run.sh makes a second key with hutch key create)')
  }
  const mine = await createSandbox({ metadata: { kind: 'owner-a' } })
  const asB = { apiKey: KEY_B }
  await rejectsWith(Sandbox.connect(mine.sandboxId, asB), SandboxNotFound, 'B connects to A\'s sandbox')
  assert.equal(await Sandbox.kill(mine.sandboxId, asB), false)
  await rejectsWith(Sandbox.getInfo(mine.sandboxId, asB), SandboxNotFound, 'B reads A\'s sandbox info')
  await rejectsWith(Sandbox.setTimeout(mine.sandboxId, 5_000, asB), SandboxNotFound, 'B sets A\'s timeout')
  const listedB = await listAll(asB)
  assert.ok(!listedB.some((s) => s.sandboxId === mine.sandboxId), 'B\'s list shows A\'s sandbox')
  const filteredB = await listAll({ ...asB, query: { metadata: { run: RUN_ID } } })
  assert.deepEqual(filteredB.map((s) => s.sandboxId), [])
  // A's sandbox is untouched and still A's.
  assert.equal(await mine.isRunning(), true)
  assert.equal((await mine.commands.run('echo still mine')).stdout, 'still mine\n')
  const listedA = await listAll({ query: { metadata: { kind: 'owner-a', run: RUN_ID } } })
  assert.deepEqual(listedA.map((s) => s.sandboxId), [mine.sandboxId])
  // B's own sandbox is B's: A cannot see it either.
  const theirs = await Sandbox.create('base', { ...asB, timeoutMs: 120_000, metadata: { run: RUN_ID, kind: 'owner-b' } })
  try {
    assert.equal((await theirs.commands.run('whoami')).stdout, 'user\n')
    const fromA = await listAll({ query: { metadata: { kind: 'owner-b', run: RUN_ID } } })
    assert.deepEqual(fromA.map((s) => s.sandboxId), [])
    assert.equal(await Sandbox.kill(theirs.sandboxId), false)
  } finally {
    assert.equal(await Sandbox.kill(theirs.sandboxId, asB), true)
  }
})

test('another owner cannot see, use or delete a snapshot', async (t) => {
  if (typeof Sandbox.prototype.createSnapshot !== 'function') {
    t.skip('this SDK version has no createSnapshot')
    return
  }
  assert.ok(KEY_B, 'E2B_TEST_KEY_B is not set (run.sh makes a second key with hutch key create)')
  const asB = { apiKey: KEY_B }
  const mine = await createSandbox({ metadata: { kind: 'snapshot-owner-a' } })
  const snap = await mine.createSnapshot()
  try {
    assert.deepEqual(await Sandbox.listSnapshots(asB).nextItems(), [])
    await rejectsWith(Sandbox.create(snap.snapshotId, { ...asB, timeoutMs: 60_000 }), sdk.SandboxError,
      'B creates a sandbox from A\'s snapshot')
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, asB), false)
    await rejectsWith(Sandbox.createSnapshot(mine.sandboxId, asB), SandboxNotFound,
      'B snapshots A\'s sandbox')
    // hutch's own templates are not E2B's to delete.
    assert.equal(await Sandbox.deleteSnapshot('base'), false)
  } finally {
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
  }
})

test('the envd plane refuses requests without the sandbox\'s access token', async () => {
  const sbx = await createSandbox({ metadata: { kind: 'token' } })
  const base = process.env.E2B_SANDBOX_URL.replace(/\/$/, '')
  const routing = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' }
  const stat = (extra) => fetch(`${base}/filesystem.Filesystem/Stat`, {
    method: 'POST',
    headers: { ...routing, ...extra, 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1' },
    body: JSON.stringify({ path: '/home/user' }),
  })
  // The SDK's own requests work (it sends the token the create answer carried, if any).
  assert.equal((await sbx.files.getInfo('/home/user')).type, sdk.FileType.DIR)
  // Two refusals, not four: hutchd counts a wrong token toward its 10-failures-a-minute limit
  // per client address, and the suites run one after the other from 127.0.0.1.
  const res = await stat({})
  assert.equal(res.status, 401, `Stat without a token: ${res.status} ${await res.text()}`)
  const read = await fetch(`${base}/files?path=${encodeURIComponent('/etc/hostname')}`,
    { headers: { ...routing, 'X-Access-Token': 'wrong-token' } })
  assert.equal(read.status, 401, `GET /files with a wrong token: ${read.status} ${(await read.text()).slice(0, 200)}`)
})
