// files.* through the E2B SDK, in one shared sandbox.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { sdk, sharedSandbox, waitFor, rejectsWith, sha256, FileNotFound } from './lib.mjs'

const { FileType, FilesystemEventType, SandboxError } = sdk

test('write and read text; WriteInfo names the file', async () => {
  const sbx = await sharedSandbox()
  const info = await sbx.files.write('/home/user/t/a.txt', 'hello files\n')
  assert.equal(info.name, 'a.txt')
  assert.equal(info.path, '/home/user/t/a.txt')
  if (info.type !== undefined) assert.equal(info.type, FileType.FILE)
  assert.equal(await sbx.files.read('/home/user/t/a.txt'), 'hello files\n')
  // The default user owns what it writes; the shell sees the same bytes.
  const r = await sbx.commands.run('stat -c "%U %s" /home/user/t/a.txt; cat /home/user/t/a.txt')
  assert.equal(r.stdout, 'user 12\nhello files\n')
  // UTF-8 round trip.
  await sbx.files.write('/home/user/t/utf8.txt', 'žluťoučký kůň — 🐇')
  assert.equal(await sbx.files.read('/home/user/t/utf8.txt'), 'žluťoučký kůň — 🐇')
})

test('write and read bytes exactly (NUL, 0xff, every byte value)', async () => {
  const sbx = await sharedSandbox()
  const bytes = new Uint8Array(512)
  for (let i = 0; i < 256; i++) { bytes[i] = i; bytes[511 - i] = i }
  bytes.set([0, 0xff, 0, 0xfe], 100)
  await sbx.files.write('/home/user/t/bin.dat', bytes.buffer.slice(0))
  const back = await sbx.files.read('/home/user/t/bin.dat', { format: 'bytes' })
  assert.ok(back instanceof Uint8Array)
  assert.equal(back.length, 512)
  assert.deepEqual(Buffer.from(back), Buffer.from(bytes))
  const r = await sbx.commands.run('sha256sum /home/user/t/bin.dat')
  assert.equal(r.stdout.split(' ')[0], sha256(bytes))
  // A file made in the box, read as bytes and as a Blob.
  await sbx.commands.run('printf "\\000\\377\\001x" > /home/user/t/made.dat')
  const made = await sbx.files.read('/home/user/t/made.dat', { format: 'bytes' })
  assert.deepEqual([...made], [0, 255, 1, 120])
  const blob = await sbx.files.read('/home/user/t/made.dat', { format: 'blob' })
  assert.deepEqual([...new Uint8Array(await blob.arrayBuffer())], [0, 255, 1, 120])
  // An empty file.
  await sbx.files.write('/home/user/t/empty', '')
  assert.equal(await sbx.files.read('/home/user/t/empty'), '')
  assert.equal((await sbx.files.getInfo('/home/user/t/empty')).size, 0)
})

test('a 20 MiB file both ways, checked by size and sha256 in the box', async () => {
  const sbx = await sharedSandbox()
  const big = randomBytes(20 * 1024 * 1024)
  await sbx.files.write('/home/user/t/big.bin', big.buffer.slice(big.byteOffset, big.byteOffset + big.length))
  const r = await sbx.commands.run('stat -c %s /home/user/t/big.bin; sha256sum < /home/user/t/big.bin')
  const [size, sum] = r.stdout.split('\n')
  assert.equal(Number(size), big.length)
  assert.equal(sum.split(' ')[0], sha256(big))
  const back = await sbx.files.read('/home/user/t/big.bin', { format: 'bytes' })
  assert.equal(back.length, big.length)
  assert.equal(sha256(back), sha256(big))
})

test('relative paths resolve against /home/user', async () => {
  const sbx = await sharedSandbox()
  const info = await sbx.files.write('rel-dir/r.txt', 'relative')
  assert.equal(info.path, '/home/user/rel-dir/r.txt')
  assert.equal(await sbx.files.exists('/home/user/rel-dir/r.txt'), true)
  assert.equal(await sbx.files.read('rel-dir/r.txt'), 'relative')
  assert.equal((await sbx.commands.run('cat /home/user/rel-dir/r.txt')).stdout, 'relative')
  const listed = await sbx.files.list('rel-dir')
  assert.deepEqual(listed.map((e) => e.path), ['/home/user/rel-dir/r.txt'])
})

test('list: name, type, path, size; depth 2 sees nested entries', async () => {
  const sbx = await sharedSandbox()
  await sbx.commands.run('rm -rf /home/user/l && mkdir -p /home/user/l/sub/deeper && printf 12345 > /home/user/l/f.txt && printf ab > /home/user/l/sub/g.txt && touch /home/user/l/sub/deeper/h')
  const one = await sbx.files.list('/home/user/l')
  const byName = Object.fromEntries(one.map((e) => [e.name, e]))
  assert.deepEqual(Object.keys(byName).sort(), ['f.txt', 'sub'])
  assert.equal(byName['f.txt'].type, FileType.FILE)
  assert.equal(byName['f.txt'].path, '/home/user/l/f.txt')
  assert.equal(byName['f.txt'].size, 5)
  assert.equal(byName.sub.type, FileType.DIR)
  assert.equal(byName.sub.path, '/home/user/l/sub')
  const two = await sbx.files.list('/home/user/l', { depth: 2 })
  const paths = two.map((e) => e.path).sort()
  assert.deepEqual(paths, ['/home/user/l/f.txt', '/home/user/l/sub', '/home/user/l/sub/deeper', '/home/user/l/sub/g.txt'])
  assert.equal(two.find((e) => e.name === 'g.txt').size, 2)
})

test('exists, getInfo (type, size, permissions, mode, owner, modifiedTime)', async () => {
  const sbx = await sharedSandbox()
  await sbx.files.write('/home/user/t/info.txt', 'seven!!')
  await sbx.commands.run('chmod 640 /home/user/t/info.txt')
  assert.equal(await sbx.files.exists('/home/user/t/info.txt'), true)
  assert.equal(await sbx.files.exists('/home/user/t'), true)
  assert.equal(await sbx.files.exists('/home/user/t/no-such-file'), false)
  const info = await sbx.files.getInfo('/home/user/t/info.txt')
  assert.equal(info.name, 'info.txt')
  assert.equal(info.path, '/home/user/t/info.txt')
  assert.equal(info.type, FileType.FILE)
  assert.equal(info.size, 7)
  assert.equal(info.permissions, '-rw-r-----')
  assert.equal(info.mode & 0o777, 0o640)
  assert.equal(info.owner, 'user')
  assert.equal(info.group, 'user')
  assert.ok(info.modifiedTime instanceof Date, `modifiedTime ${info.modifiedTime}`)
  const mtime = Number((await sbx.commands.run('stat -c %Y /home/user/t/info.txt')).stdout.trim())
  assert.equal(Math.floor(info.modifiedTime.getTime() / 1000), mtime)
  const dir = await sbx.files.getInfo('/home/user/t')
  assert.equal(dir.type, FileType.DIR)
  assert.equal(dir.name, 't')
  assert.match(dir.permissions, /^d/)
})

test('makeDir is true, then false for an existing directory', async () => {
  const sbx = await sharedSandbox()
  assert.equal(await sbx.files.makeDir('/home/user/md/a/b'), true)
  assert.equal(await sbx.files.makeDir('/home/user/md/a/b'), false)
  assert.equal((await sbx.files.getInfo('/home/user/md/a/b')).type, FileType.DIR)
  assert.equal((await sbx.commands.run('stat -c %U /home/user/md/a/b')).stdout, 'user\n')
})

test('rename and remove (a file, then a directory with contents)', async () => {
  const sbx = await sharedSandbox()
  await sbx.files.write('/home/user/mv/from.txt', 'moving')
  const moved = await sbx.files.rename('/home/user/mv/from.txt', '/home/user/mv/to.txt')
  assert.equal(moved.path, '/home/user/mv/to.txt')
  assert.equal(moved.name, 'to.txt')
  assert.equal(await sbx.files.exists('/home/user/mv/from.txt'), false)
  assert.equal(await sbx.files.read('/home/user/mv/to.txt'), 'moving')
  await sbx.files.remove('/home/user/mv/to.txt')
  assert.equal(await sbx.files.exists('/home/user/mv/to.txt'), false)
  await sbx.files.write('/home/user/mv/sub/x', 'x')
  await sbx.files.remove('/home/user/mv')
  assert.equal(await sbx.files.exists('/home/user/mv'), false)
})

test('watchDir reports a file created in the watched directory', async () => {
  const sbx = await sharedSandbox()
  await sbx.files.makeDir('/home/user/w')
  const events = []
  const handle = await sbx.files.watchDir('/home/user/w', (e) => { events.push(e) }, { timeoutMs: 60_000 })
  try {
    await sbx.files.write('/home/user/w/new.txt', 'watched')
    await waitFor('a create event for new.txt', async () =>
      events.some((e) => e.name === 'new.txt' && e.type === FilesystemEventType.CREATE), { timeoutMs: 15_000 })
    await sbx.commands.run('rm /home/user/w/new.txt')
    await waitFor('a remove event for new.txt', async () =>
      events.some((e) => e.name === 'new.txt' && e.type === FilesystemEventType.REMOVE), { timeoutMs: 15_000 })
  } finally {
    await handle.stop()
  }
})

test('errors: a missing file, a directory read as a file, a file as a directory', async () => {
  const sbx = await sharedSandbox()
  await rejectsWith(sbx.files.read('/home/user/definitely-missing.txt'), FileNotFound, 'read of a missing file')
  await rejectsWith(sbx.files.getInfo('/home/user/definitely-missing.txt'), FileNotFound, 'getInfo of a missing file')
  await rejectsWith(sbx.files.list('/home/user/definitely-missing-dir'), FileNotFound, 'list of a missing dir')
  await sbx.files.makeDir('/home/user/a-dir')
  await rejectsWith(sbx.files.read('/home/user/a-dir'), SandboxError, 'read of a directory')
  await sbx.files.write('/home/user/a-file', 'x')
  await rejectsWith(sbx.files.list('/home/user/a-file'), SandboxError, 'list of a file')
  // The default user may not write where only root may.
  await rejectsWith(sbx.files.write('/root/forbidden.txt', 'x'), SandboxError, 'write to /root as user')
  const asRoot = await sbx.files.write('/root/allowed.txt', 'root here', { user: 'root' })
  assert.equal(asRoot.path, '/root/allowed.txt')
  assert.equal(await sbx.files.read('/root/allowed.txt', { user: 'root' }), 'root here')
})
