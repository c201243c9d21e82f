// E2B's semantics where hutch has the feature (issue 38, item 3), through the E2B SDK: the
// answers E2B's own suites expect of getMetrics, connect and setTimeout, Sandbox.list's order
// and pages, and envd's files (modes, symlinks, a relative cwd, remove, uploads).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Sandbox, createSandbox, sharedSandbox, waitFor, RUN_ID } from './lib.mjs'

test('getMetrics: memory, CPU and disk fields; none for a window before the sandbox', async (t) => {
  const sbx = await sharedSandbox()
  if (typeof sbx.getMetrics !== 'function') return t.skip('this SDK has no getMetrics')
  const metrics = await waitFor('a metric', async () => {
    const m = await sbx.getMetrics()
    return m.length > 0 ? m : null
  })
  for (const key of ['cpuCount', 'cpuUsedPct', 'memUsed', 'memTotal', 'diskUsed', 'diskTotal']) {
    assert.notEqual(metrics[0][key], undefined, key)
  }
  assert.ok(metrics[0].memUsed > 0)
  // e2b 2.14 puts start and end among the path parameters, so they are never sent (any server
  // answers the whole window); later versions send them as the query.
  if (/path:\s*\{\s*sandboxID:\s*sandboxId,\s*start/.test(String(Sandbox.getMetrics))) {
    t.diagnostic('this SDK version never sends start/end (they are in its path parameters)')
    return
  }
  const start = new Date()
  const before = await sbx.getMetrics({
    start: new Date(start.getTime() - 60 * 60 * 1000),
    end: new Date(start.getTime() - 30 * 60 * 1000),
  })
  assert.equal(before.length, 0)
})

test('connect with a shorter timeout keeps endAt; setTimeout(0) ends the sandbox', async () => {
  const sbx = await createSandbox({ timeoutMs: 300_000 })
  const before = await Sandbox.getInfo(sbx.sandboxId)
  await Sandbox.connect(sbx.sandboxId, { timeoutMs: 10_000 })
  const after = await Sandbox.getInfo(sbx.sandboxId)
  assert.equal(after.endAt.getTime(), before.endAt.getTime())
  await sbx.setTimeout(0)
  await waitFor('the sandbox to end', async () => !(await sbx.isRunning()), { timeoutMs: 30_000 })
})

test('list is newest first, and pages of one follow each other', async () => {
  const tag = `${RUN_ID}-order`
  const older = await createSandbox({ metadata: { order: tag } })
  const newer = await createSandbox({ metadata: { order: tag } })
  const paginator = Sandbox.list({ limit: 1, query: { metadata: { order: tag } } })
  const first = await paginator.nextItems()
  assert.deepEqual(first.map((s) => s.sandboxId), [newer.sandboxId])
  assert.ok(paginator.hasNext)
  const second = await paginator.nextItems()
  assert.deepEqual(second.map((s) => s.sandboxId), [older.sandboxId])
  assert.ok(!paginator.hasNext)
  await Promise.all([older.kill(), newer.kill()])
})

test('entries as envd: a directory is 0o755, a symlink names its absolute target', async () => {
  const sbx = await sharedSandbox()
  await sbx.files.makeDir('sem-dir')
  await sbx.files.write('sem-file.txt', 'x')
  await sbx.commands.run('ln -sf sem-file.txt sem-link')
  const dir = await sbx.files.getInfo('sem-dir')
  assert.equal(dir.mode, 0o755)
  const listed = await sbx.files.list('/home/user')
  assert.equal(listed.find((e) => e.name === 'sem-dir').mode, 0o755)
  const link = await sbx.files.getInfo('sem-link')
  assert.equal(link.symlinkTarget, '/home/user/sem-file.txt')
})

test('a relative cwd is taken from the home; removing a missing path succeeds', async () => {
  const sbx = await sharedSandbox()
  await sbx.files.makeDir('sem-cwd/inner')
  const r = await sbx.commands.run('pwd', { cwd: 'sem-cwd/inner' })
  assert.equal(r.stdout, '/home/user/sem-cwd/inner\n')
  await sbx.files.remove('/home/user/sem-never-was')
  assert.equal(await sbx.files.exists('/home/user/sem-never-was'), false)
})

test('several files as the user, one in a new directory under /, as envd makes it', async () => {
  const sbx = await sharedSandbox()
  const files = [
    { path: '/sem-js/0/multi0.txt', data: 'zero' },
    { path: '/home/user/sem-multi1.txt', data: 'one' },
  ]
  const infos = await sbx.files.write(files)
  assert.deepEqual(infos.map((i) => i.path), files.map((f) => f.path))
  assert.equal(await sbx.files.read('/sem-js/0/multi0.txt'), 'zero')
  const owners = await sbx.commands.run('stat -c "%U %a" /sem-js /sem-js/0 /sem-js/0/multi0.txt')
  assert.equal(owners.stdout, 'user 755\nuser 755\nuser 644\n')
})

test('a gzip upload is stored inflated', async () => {
  const sbx = await sharedSandbox()
  const content = 'Streamed gzipped octet-stream upload. '.repeat(10_000)
  // gzip forces an octet-stream upload with Content-Encoding: gzip; SDKs without the option
  // send it plain, which must read back the same.
  await sbx.files.write('sem-gzip.txt', content, { gzip: true })
  assert.equal(await sbx.files.read('sem-gzip.txt'), content)
})

test('an expired signed URL is 401 "signature is already expired"', async (t) => {
  const sbx = await sharedSandbox()
  if (typeof sbx.downloadUrl !== 'function') return t.skip('this SDK has no downloadUrl')
  await sbx.files.write('sem-signed.txt', 'hello world')
  let url
  try {
    url = await sbx.downloadUrl('sem-signed.txt', { useSignatureExpiration: -10_000 })
  } catch (e) {
    return t.skip(`this SDK signs no expiring URLs: ${e.message}`)
  }
  if (!url.includes('signature_expiration')) return t.skip('this SDK signs no expiring URLs')
  const res = await fetch(url)
  assert.equal(res.status, 401)
  assert.deepEqual(await res.json(), { code: 401, message: 'signature is already expired' })
  const fresh = await sbx.downloadUrl('sem-signed.txt', { useSignatureExpiration: 10_000 })
  const ok = await fetch(fresh)
  assert.equal(ok.status, 200)
  assert.equal(await ok.text(), 'hello world')
})
