// commands.* and pty.* through the E2B SDK, in one shared sandbox.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sdk, sharedSandbox, sleep, waitFor, rejectsWith, processLines, rawStream } from './lib.mjs'

const { CommandExitError, TimeoutError } = sdk

test('run: stdout, stderr, exitCode', async () => {
  const sbx = await sharedSandbox()
  const r = await sbx.commands.run('echo out; echo err >&2; printf "no newline"')
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'out\nno newline')
  assert.equal(r.stderr, 'err\n')
})

test('run: a non-zero exit is a CommandExitError with exitCode, stdout and stderr', async () => {
  const sbx = await sharedSandbox()
  const err = await rejectsWith(sbx.commands.run('echo partial; echo bad >&2; exit 3'),
    CommandExitError, 'exit 3')
  assert.equal(err.exitCode, 3)
  assert.equal(err.stdout, 'partial\n')
  assert.equal(err.stderr, 'bad\n')
  // A command that does not exist: bash's 127.
  const missing = await rejectsWith(sbx.commands.run('no-such-command-hutch'), CommandExitError,
    'a missing command')
  assert.equal(missing.exitCode, 127)
  assert.match(missing.stderr, /not found/)
})

test('run: onStdout/onStderr stream chunks before the command ends', async () => {
  const sbx = await sharedSandbox()
  const out = []
  const err = []
  const t0 = Date.now()
  const r = await sbx.commands.run(
    'for i in 1 2 3; do echo $i; echo e$i >&2; sleep 0.3; done', {
      onStdout: (d) => out.push({ d, at: Date.now() - t0 }),
      onStderr: (d) => err.push({ d, at: Date.now() - t0 }),
    })
  const end = Date.now() - t0
  assert.equal(r.stdout, '1\n2\n3\n')
  assert.equal(r.stderr, 'e1\ne2\ne3\n')
  assert.equal(out.map((c) => c.d).join(''), '1\n2\n3\n')
  assert.equal(err.map((c) => c.d).join(''), 'e1\ne2\ne3\n')
  assert.ok(out.length >= 2, `stdout came in ${out.length} chunk(s): ${JSON.stringify(out)}`)
  // The first line arrived while the command still had ~0.6 s of sleeping to do.
  assert.ok(out[0].at < end - 400, `first stdout chunk at ${out[0].at} ms, the command ended at ${end} ms`)
  assert.ok(err[0].at < end - 400, `first stderr chunk at ${err[0].at} ms, the command ended at ${end} ms`)
})

test('run: envs and cwd', async () => {
  const sbx = await sharedSandbox()
  const r = await sbx.commands.run('echo "$FOO-$BAR"; pwd', { envs: { FOO: 'foo', BAR: 'b a r' }, cwd: '/tmp' })
  assert.equal(r.stdout, 'foo-b a r\n/tmp\n')
})

test('run: the default user is "user" in /home/user; user: "root" is root', async () => {
  const sbx = await sharedSandbox()
  const def = await sbx.commands.run('whoami; pwd; echo $HOME')
  assert.equal(def.stdout, 'user\n/home/user\n/home/user\n')
  const root = await sbx.commands.run('whoami; id -u', { user: 'root' })
  assert.equal(root.stdout, 'root\n0\n')
  const explicit = await sbx.commands.run('whoami', { user: 'user' })
  assert.equal(explicit.stdout, 'user\n')
})

test('run: timeoutMs ends a long command with a TimeoutError, quickly, and kills it', async () => {
  const sbx = await sharedSandbox()
  const t0 = Date.now()
  await rejectsWith(sbx.commands.run('sleep 31', { timeoutMs: 2000 }), TimeoutError, 'sleep 31 with timeoutMs 2000')
  const took = Date.now() - t0
  assert.ok(took < 15_000, `the timeout took ${took} ms`)
  // The deadline is the process's lifetime (envd runs it under the request's deadline).
  await waitFor('sleep 31 to be killed', async () =>
    !(await processLines(sbx)).some((l) => l === 'sleep 31'), { timeoutMs: 10_000, intervalMs: 500 })
})

test('the server enforces Connect-Timeout-Ms: the stream ends with deadline_exceeded (no SDK)', async () => {
  // The SDKs also stop waiting on their own at timeoutMs, so this asks the server directly:
  // envd runs the process under the request's deadline and ends the stream with an error.
  const sbx = await sharedSandbox()
  const r = await rawStream(sbx, '/process.Process/Start',
    { process: { cmd: '/bin/bash', args: ['-l', '-c', 'sleep 33'] }, stdin: false },
    { 'Connect-Timeout-Ms': '1500' })
  assert.equal(r.status, 200)
  assert.ok(r.messages[0]?.msg?.event?.start?.pid > 0, `first message: ${JSON.stringify(r.messages[0])}`)
  assert.ok(r.end !== undefined, 'no end-stream message')
  assert.equal(r.end?.error?.code, 'deadline_exceeded', `end-stream: ${JSON.stringify(r.end)}`)
  assert.ok(r.endAt >= 1400 && r.endAt < 10_000, `the stream ended after ${r.endAt} ms, want ~1500`)
  await waitFor('sleep 33 to be killed', async () =>
    !(await processLines(sbx)).some((l) => l === 'sleep 33'), { timeoutMs: 10_000, intervalMs: 500 })
})

test('background: true, commands.list shows it, commands.kill ends it', async () => {
  const sbx = await sharedSandbox()
  const h = await sbx.commands.run('sleep 45; echo never', { background: true })
  assert.ok(Number.isInteger(h.pid) && h.pid > 0, `pid ${h.pid}`)
  const list = await sbx.commands.list()
  const mine = list.find((p) => p.pid === h.pid)
  assert.ok(mine, `commands.list() lacks pid ${h.pid}: ${JSON.stringify(list)}`)
  const cmdline = [mine.cmd, ...(mine.args || [])].join(' ')
  assert.match(cmdline, /sleep 45; echo never/)
  assert.equal(await sbx.commands.kill(h.pid), true)
  // The handle ends: killed, so not exit 0 and no "never".
  const settled = await Promise.race([
    h.wait().then((r) => ({ ok: r }), (e) => ({ err: e })),
    sleep(15_000).then(() => ({ hung: true })),
  ])
  assert.ok(!settled.hung, 'the killed command\'s handle did not end within 15 s')
  assert.ok(settled.err, `a killed command resolved: ${JSON.stringify(settled.ok)}`)
  assert.doesNotMatch(h.stdout, /never/)
  const after = await sbx.commands.list()
  assert.ok(!after.some((p) => p.pid === h.pid), 'a killed command is still listed')
  assert.equal(await sbx.commands.kill(h.pid), false)
  assert.equal(await sbx.commands.kill(987654), false)
})

test('sendStdin to a background command started with stdin: true', async () => {
  const sbx = await sharedSandbox()
  const h = await sbx.commands.run('head -n1; echo done', { background: true, stdin: true })
  await sbx.commands.sendStdin(h.pid, 'hello stdin\n')
  const r = await h.wait()
  assert.equal(r.stdout, 'hello stdin\ndone\n')
  assert.equal(r.exitCode, 0)
})

test('commands.connect(pid) reattaches and gets later output and the exit', async () => {
  const sbx = await sharedSandbox()
  const h = await sbx.commands.run('for i in 1 2 3 4 5; do echo tick$i; sleep 0.5; done; exit 5',
    { background: true })
  await waitFor('the first tick', async () => h.stdout.includes('tick1'), { timeoutMs: 10_000 })
  await h.disconnect()
  const later = []
  const again = await sbx.commands.connect(h.pid, { onStdout: (d) => later.push(d) })
  assert.equal(again.pid, h.pid)
  const err = await rejectsWith(again.wait(), CommandExitError, 'the reattached command (exit 5)')
  assert.equal(err.exitCode, 5)
  assert.match(later.join(''), /tick5\n/)
  assert.match(err.stdout, /tick5\n$/)
})

test('commands.connect to an unknown pid is an error', async () => {
  const sbx = await sharedSandbox()
  await rejectsWith(sbx.commands.connect(987654), sdk.SandboxError, 'connect to pid 987654')
})

const enc = new TextEncoder()
const dec = new TextDecoder()

test('pty: create, sendInput, resize, kill', async () => {
  const sbx = await sharedSandbox()
  let data = ''
  const term = await sbx.pty.create({
    cols: 80, rows: 24, timeoutMs: 120_000,
    onData: (d) => { data += dec.decode(d, { stream: true }) },
  })
  assert.ok(term.pid > 0)
  await sbx.pty.sendInput(term.pid, enc.encode('echo hi-$((40+2))\n'))
  await waitFor('"hi-42" on the terminal', async () => data.includes('hi-42'), { timeoutMs: 20_000 })

  await sbx.pty.sendInput(term.pid, enc.encode('stty size\n'))
  await waitFor('"24 80" from stty size', async () => data.includes('24 80'), { timeoutMs: 10_000 })
  await sbx.pty.resize(term.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(term.pid, enc.encode('stty size\n'))
  await waitFor('"30 100" from stty size', async () => data.includes('30 100'), { timeoutMs: 10_000 })

  await sbx.pty.sendInput(term.pid, enc.encode('whoami\n'))
  await waitFor('whoami on the terminal', async () => /\buser\r?\n/.test(data), { timeoutMs: 10_000 })

  assert.equal(await sbx.pty.kill(term.pid), true)
  const settled = await Promise.race([
    term.wait().then(() => 'ended', () => 'ended'),
    sleep(15_000).then(() => 'hung'),
  ])
  assert.equal(settled, 'ended')
  assert.equal(await sbx.pty.kill(term.pid), false)
})
