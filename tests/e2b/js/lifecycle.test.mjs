// Sandbox lifecycle through the E2B SDK: create, connect, info, list, timeout, kill, pause,
// fork and snapshots, and the sandbox timeout being enforced.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  Sandbox, RUN_ID, TEMPLATE, createSandbox, track, sleep, waitFor, listAll, rejectsWith,
  SandboxNotFound,
} from './lib.mjs'

// Made first so that its 10 s run out while the other tests run; checked by the last test.
let shortLived
let shortLivedAt
test('create with a 10 s timeout (checked at the end of the file)', async () => {
  shortLivedAt = Date.now()
  shortLived = await createSandbox({ timeoutMs: 10_000, metadata: { kind: 'short' } })
  assert.match(shortLived.sandboxId, /\S/)
})

let sbx
let createdAt
test('Sandbox.create: template, timeout, metadata and envs', async () => {
  createdAt = Date.now()
  sbx = await createSandbox({
    timeoutMs: 120_000,
    metadata: { kind: 'lifecycle', owner: 'tests' },
    envs: { HUTCH_E2B_ENV: 'from-create', SECOND_VAR: 'two words' },
  })
  assert.equal(typeof sbx.sandboxId, 'string')
  assert.ok(sbx.sandboxId.length > 0)
  const r = await sbx.commands.run('echo "$HUTCH_E2B_ENV|$SECOND_VAR"')
  assert.equal(r.stdout, 'from-create|two words\n')
  assert.equal(r.exitCode, 0)
})

test('getInfo: templateId, metadata, startedAt/endAt, state', async () => {
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.ok(info.templateId === TEMPLATE || info.name === TEMPLATE,
    `templateId ${info.templateId} / name ${info.name} should be ${TEMPLATE}`)
  assert.equal(info.metadata.kind, 'lifecycle')
  assert.equal(info.metadata.owner, 'tests')
  assert.equal(info.metadata.run, RUN_ID)
  assert.ok(info.startedAt instanceof Date && !Number.isNaN(info.startedAt.getTime()))
  assert.ok(info.endAt instanceof Date && !Number.isNaN(info.endAt.getTime()))
  // Started during create (give the clocks 60 s), ending about timeoutMs after the start.
  assert.ok(Math.abs(info.startedAt.getTime() - createdAt) < 60_000,
    `startedAt ${info.startedAt.toISOString()} vs create at ${new Date(createdAt).toISOString()}`)
  const lifetime = info.endAt.getTime() - info.startedAt.getTime()
  assert.ok(lifetime > 100_000 && lifetime < 140_000, `endAt - startedAt = ${lifetime} ms, want ~120 s`)
  assert.equal(info.state, 'running')
  assert.match(info.envdVersion, /^\d+\.\d+\.\d+/)
  assert.ok(info.cpuCount >= 1, `cpuCount ${info.cpuCount}`)
  assert.ok(info.memoryMB >= 128, `memoryMB ${info.memoryMB}`)
  // The static form answers the same.
  const again = await Sandbox.getInfo(sbx.sandboxId)
  assert.equal(again.sandboxId, sbx.sandboxId)
  assert.deepEqual(again.metadata, info.metadata)
})

test('Sandbox.list contains it; the metadata filter selects it', async () => {
  const all = await listAll()
  const mine = all.find((s) => s.sandboxId === sbx.sandboxId)
  assert.ok(mine, `Sandbox.list() (${all.length} sandboxes) lacks ${sbx.sandboxId}`)
  assert.equal(mine.state, 'running')
  assert.equal(mine.metadata.kind, 'lifecycle')
  assert.ok(mine.templateId === TEMPLATE || mine.name === TEMPLATE)
  assert.ok(mine.startedAt instanceof Date && !Number.isNaN(mine.startedAt.getTime()))

  const filtered = await listAll({ query: { metadata: { kind: 'lifecycle', run: RUN_ID } } })
  assert.deepEqual(filtered.map((s) => s.sandboxId), [sbx.sandboxId])
  const none = await listAll({ query: { metadata: { kind: 'no-such-kind', run: RUN_ID } } })
  assert.deepEqual(none.map((s) => s.sandboxId), [])
})

test('setTimeout moves endAt', async () => {
  await sbx.setTimeout(300_000)
  const info = await sbx.getInfo()
  const left = info.endAt.getTime() - Date.now()
  assert.ok(left > 240_000 && left < 360_000, `endAt is ${left} ms away, want ~300 s`)
  await Sandbox.setTimeout(sbx.sandboxId, 200_000)
  const info2 = await sbx.getInfo()
  const left2 = info2.endAt.getTime() - Date.now()
  assert.ok(left2 > 140_000 && left2 < 260_000, `endAt is ${left2} ms away, want ~200 s`)
})

test('Sandbox.connect(id) reaches the same sandbox', async () => {
  await sbx.files.write('/tmp/connect-marker', 'written before connect')
  const other = await Sandbox.connect(sbx.sandboxId)
  assert.equal(other.sandboxId, sbx.sandboxId)
  const r = await other.commands.run('cat /tmp/connect-marker')
  assert.equal(r.stdout, 'written before connect')
  assert.equal(await other.files.read('/tmp/connect-marker'), 'written before connect')
})

test('isRunning is true, then kill, then false; kill again is false', async () => {
  assert.equal(await sbx.isRunning(), true)
  const killed = await sbx.kill()
  // e2b >= 2.15 answers true; older versions resolve with nothing.
  if (killed !== undefined) assert.equal(killed, true)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  assert.equal(await sbx.isRunning(), false)
  const all = await listAll()
  assert.ok(!all.some((s) => s.sandboxId === sbx.sandboxId), 'a killed sandbox is still listed')
  await rejectsWith(Sandbox.getInfo(sbx.sandboxId), SandboxNotFound, 'getInfo of a killed sandbox')
})

// E2B's pause keeps the sandbox's memory: files, a tmpfs file and a running process come back.
test('pause, then Sandbox.connect resumes it with its files, memory and processes', async () => {
  const p = await createSandbox({ metadata: { kind: 'pause' } })
  await p.files.write('/home/user/kept.txt', 'survives pause')
  await p.commands.run('echo from-disk > /home/user/kept2.txt && sync')
  await p.commands.run('echo only-in-ram > /dev/shm/ram.txt')
  const sleeper = await p.commands.run('sleep 3600', { background: true })
  const paused = await p.pause()
  assert.equal(paused, true)
  const info = await Sandbox.getInfo(p.sandboxId)
  assert.equal(info.state, 'paused')
  const listedPaused = await listAll({ query: { metadata: { kind: 'pause', run: RUN_ID }, state: ['paused'] } })
  assert.deepEqual(listedPaused.map((s) => s.sandboxId), [p.sandboxId])

  const resumed = await Sandbox.connect(p.sandboxId)
  assert.equal(resumed.sandboxId, p.sandboxId)
  assert.equal(await resumed.isRunning(), true)
  assert.equal((await resumed.getInfo()).state, 'running')
  assert.equal(await resumed.files.read('/home/user/kept.txt'), 'survives pause')
  assert.equal((await resumed.commands.run('cat /home/user/kept2.txt')).stdout, 'from-disk\n')
  assert.equal((await resumed.commands.run('cat /dev/shm/ram.txt')).stdout, 'only-in-ram\n')
  assert.equal((await resumed.commands.run(`kill -0 ${sleeper.pid}`)).exitCode, 0)
  // The object made before the pause works again too (same id, same URLs).
  assert.equal((await p.commands.run('echo again')).stdout, 'again\n')
})

test('fork (where the SDK has it): the child has the parent\'s files, then diverges', async (t) => {
  if (typeof Sandbox.prototype.fork !== 'function') {
    t.skip('this SDK version has no Sandbox.fork (added after 2.14)')
    return
  }
  const parent = await createSandbox({ metadata: { kind: 'fork-parent' } })
  await parent.files.write('/home/user/fork.txt', 'from the parent')
  const children = await parent.fork()
  assert.equal(children.length, 1)
  const [child] = children
  assert.ok(!(child instanceof Error), `fork answered an error: ${child?.message}`)
  track(child.sandboxId)
  assert.notEqual(child.sandboxId, parent.sandboxId)
  assert.equal(await child.files.read('/home/user/fork.txt'), 'from the parent')
  await child.files.write('/home/user/fork.txt', 'from the child')
  assert.equal(await parent.files.read('/home/user/fork.txt'), 'from the parent')
  assert.equal(await child.files.read('/home/user/fork.txt'), 'from the child')
  assert.equal(await parent.isRunning(), true)
})

// A snapshot is the box saved with its memory (hutch's saved boxes, docs/e2b.md): files, a
// tmpfs file and a running process are all in a sandbox made from it, after the source is gone.
test('createSnapshot keeps memory and outlives its sandbox; Sandbox.create starts from it', async (t) => {
  if (typeof Sandbox.prototype.createSnapshot !== 'function') {
    t.skip('this SDK version has no createSnapshot')
    return
  }
  const src = await createSandbox({ metadata: { kind: 'snapshot-src' } })
  await src.files.write('/home/user/snap.txt', 'in the snapshot')
  // Only in memory: a file on tmpfs and a process that runs.
  await src.commands.run('echo only-in-ram > /dev/shm/ram.txt')
  await src.commands.run("sh -c 'echo $$ > /dev/shm/sleeper.pid; exec sleep 3600'", { background: true })
  await waitFor('the sleeper to write its pid',
    async () => (await src.commands.run('cat /dev/shm/sleeper.pid 2>/dev/null || true')).stdout.trim() !== '')
  const name = `snap-${RUN_ID}`
  const snap = await src.createSnapshot({ name })
  assert.equal(typeof snap.snapshotId, 'string')
  assert.ok(snap.snapshotId.length > 0)
  // SDKs before names (2.14) send no name and get only the id back: the snapshot's name is
  // then hutch's own, and only its id is used below.
  const named = snap.names !== undefined
  if (named) assert.deepEqual(snap.names, [name])
  // The source keeps running after the snapshot.
  assert.equal((await src.commands.run('cat /home/user/snap.txt')).stdout, 'in the snapshot')
  const listed = await Sandbox.listSnapshots({ sandboxId: src.sandboxId }).nextItems()
  assert.deepEqual(listed.map((s) => s.snapshotId), [snap.snapshotId])
  if (named) {
    const dup = await rejectsWith(src.createSnapshot({ name }), Error, 'a second snapshot of the same name')
    assert.match(dup.message, /already exists/)
  }
  await src.kill()

  const restored = await Sandbox.create(snap.snapshotId, { timeoutMs: 300_000, metadata: { run: RUN_ID } })
  track(restored.sandboxId)
  assert.notEqual(restored.sandboxId, src.sandboxId)
  assert.equal(await restored.files.read('/home/user/snap.txt'), 'in the snapshot')
  assert.equal((await restored.commands.run('cat /dev/shm/ram.txt')).stdout, 'only-in-ram\n')
  assert.equal((await restored.commands.run('kill -0 "$(cat /dev/shm/sleeper.pid)"')).exitCode, 0)
  assert.equal((await restored.getInfo()).metadata.run, RUN_ID)
  // Its name works as well as its id (where the SDK names it); two restored boxes are separate
  // machines.
  const byName = await Sandbox.create(named ? name : snap.snapshotId, { timeoutMs: 300_000, metadata: { run: RUN_ID } })
  track(byName.sandboxId)
  await byName.files.write('/home/user/snap.txt', 'changed in one')
  assert.equal(await restored.files.read('/home/user/snap.txt'), 'in the snapshot')
  await byName.kill()
  await restored.kill()

  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
  const after = await Sandbox.listSnapshots({ sandboxId: src.sandboxId }).nextItems()
  assert.deepEqual(after, [])
})

test('the 10 s timeout was enforced: the sandbox is gone', async () => {
  assert.ok(shortLived, 'the short-lived sandbox was not created')
  const wait = shortLivedAt + 10_000 - Date.now()
  if (wait > 0) await sleep(wait)
  // E2B kills a sandbox whose timeout passed (lifecycle onTimeout defaults to kill). No tight
  // timing: allow a minute past the deadline.
  await waitFor('the timed-out sandbox to stop running', async () => !(await shortLived.isRunning()),
    { timeoutMs: 60_000, intervalMs: 1000 })
  const listed = await listAll({ query: { metadata: { run: RUN_ID, kind: 'short' } } })
  assert.deepEqual(listed.filter((s) => s.state === 'running').map((s) => s.sandboxId), [])
  await rejectsWith(Sandbox.connect(shortLived.sandboxId), SandboxNotFound,
    'connect to a sandbox killed by its timeout')
})
