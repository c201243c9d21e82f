// E2B's template builder through the SDK: Template().fromTemplate(...) with copy, runCmd,
// setEnvs, setWorkdir, setUser and setStartCmd, built with Template.build (its logs) and with
// buildInBackground + getBuildStatus, Template.exists, tags, then Sandbox.create of the result;
// a failing step is the SDK's BuildError at the user's line; another key's name is refused.
// The base is hutch's `base` template (no registry on the internet is reachable here).
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, writeFileSync, mkdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { promisify } from 'node:util'
import { sdk, Sandbox, RUN_ID, KEY_B, track, waitFor, processLines, rejectsWith, sleep } from './lib.mjs'

const { Template, BuildError, waitForFile } = sdk

// The files COPY sends, in a context directory of their own.
const context = mkdtempSync(join(tmpdir(), 'e2b-template-'))
after(() => rmSync(context, { recursive: true, force: true }))
writeFileSync(join(context, 'hello.txt'), `hello from ${RUN_ID}\n`)
mkdirSync(join(context, 'app', 'lib'), { recursive: true })
writeFileSync(join(context, 'app', 'main.sh'), '#!/bin/sh\necho main\n', { mode: 0o755 })
writeFileSync(join(context, 'app', 'lib', 'util.txt'), 'util\n')

const sfx = `${process.pid.toString(36)}${Date.now().toString(36)}`.slice(-10)
const NAME = `tpl-js-${sfx}`
const BUILD = { cpuCount: 1, memoryMB: 512 }

function recipe(marker) {
  return Template({ fileContextPath: context })
    .fromTemplate('base')
    .copy('hello.txt', '/opt/hello/')
    .copy('app', '/srv/app', { user: 'user' })
    .runCmd(`echo ${marker} > /opt/marker && id -un > /opt/ran-as`)
    .setEnvs({ TPL_GREETING: 'hi there', TPL_RUN: RUN_ID })
    .setWorkdir('/srv/app')
    .runCmd('pwd > /tmp/pwd-at-build && echo "$TPL_GREETING" > /tmp/env-at-build', { user: 'root' })
    .setUser('user')
    .runCmd('id -un > /tmp/user-at-build')
    .setStartCmd('sh -c "touch /tmp/started; exec sleep 100000"', waitForFile('/tmp/started'))
}

async function create(name, opts = {}) {
  const sbx = await Sandbox.create(name, { timeoutMs: 300_000, ...opts })
  track(sbx.sandboxId)
  return sbx
}

let built
test('template: Template.build from base with copy, runCmd, envs, workdir, user and start command', async () => {
  const logs = []
  built = await Template.build(recipe('first'), NAME, {
    ...BUILD,
    onBuildLogs: (entry) => logs.push(entry),
  })
  assert.equal(built.name ?? built.alias, NAME)
  assert.match(built.templateId, /\S/)
  assert.match(built.buildId, /\S/)
  const text = logs.map((l) => l.message ?? String(l)).join('\n')
  // The SDK's own lines and hutchd's, from the status polls.
  assert.match(text, /Uploaded 'hello.txt'|Skipping upload of 'hello.txt'/)
  assert.match(text, /RUN echo first/)
  assert.match(text, /built/)
  assert.ok(await Template.exists(NAME), 'Template.exists after the build')
})

test('template: Sandbox.create(name) has the files, env, workdir, user and start command', async () => {
  const sbx = await create(NAME)
  const hello = await sbx.files.read('/opt/hello/hello.txt')
  assert.equal(hello, `hello from ${RUN_ID}\n`)
  // A directory's contents merged into the target, owned by the COPY's user.
  assert.equal(await sbx.files.read('/srv/app/lib/util.txt'), 'util\n')
  const owner = await sbx.commands.run('stat -c "%U %a" /srv/app/main.sh /srv/app/lib/util.txt')
  assert.equal(owner.stdout, 'user 755\nuser 644\n')
  const marks = await sbx.commands.run(
    'cat /opt/marker /opt/ran-as /tmp/pwd-at-build /tmp/env-at-build /tmp/user-at-build')
  assert.equal(marks.stdout, 'first\nroot\n/srv/app\nhi there\nuser\n')
  // The build's last WORKDIR and USER are its sandboxes' defaults (E2B's envd defaultWorkdir
  // and defaultUser); a command naming its own cwd or user still gets those.
  assert.equal((await sbx.commands.run('pwd; id -un')).stdout, '/srv/app\nuser\n')
  assert.equal((await sbx.commands.run('pwd', { cwd: '/tmp', user: 'root' })).stdout, '/tmp\n')
  // The template's ENV in the sandbox's commands.
  const env = await sbx.commands.run('echo "$TPL_GREETING|$TPL_RUN"')
  assert.equal(env.stdout, `hi there|${RUN_ID}\n`)
  // The start command runs in every sandbox of it (from the template's snapshot).
  const procs = await processLines(sbx)
  assert.ok(procs.some((l) => l.includes('sleep 100000')), `no start command among ${procs.join(' | ')}`)
  assert.ok(await sbx.files.exists('/tmp/started'))
  const info = await sbx.getInfo()
  assert.ok(info.templateId === NAME || info.name === NAME, `templateId ${info.templateId}`)
})

test('template: a rebuild with a tag; Sandbox.create("name:tag") and the default tag', async () => {
  const logs = []
  await Template.build(recipe('second'), `${NAME}:v2`, { ...BUILD, onBuildLogs: (e) => logs.push(e) })
  const text = logs.map((l) => l.message ?? String(l)).join('\n')
  // The steps before the changed RUN come from the cache.
  assert.match(text, /CACHED COPY hello.txt/)
  const v2 = await create(`${NAME}:v2`)
  assert.equal((await v2.commands.run('cat /opt/marker')).stdout, 'second\n')
  const dflt = await create(NAME)
  assert.equal((await dflt.commands.run('cat /opt/marker')).stdout, 'first\n')
  if (typeof Template.getTags === 'function') {
    const tags = await Template.getTags(built.templateId)
    assert.deepEqual(tags.map((t) => t.tag).sort(), ['default', 'v2'])
  }
  if (typeof Template.assignTags === 'function') {
    const assigned = await Template.assignTags(`${NAME}:v2`, ['stable'])
    assert.deepEqual(assigned.tags, ['stable'])
    const stable = await create(`${NAME}:stable`)
    assert.equal((await stable.commands.run('cat /opt/marker')).stdout, 'second\n')
    await Template.removeTags(NAME, ['stable'])
    await assert.rejects(create(`${NAME}:stable`))
  }
})

test('template: buildInBackground and getBuildStatus until ready', async () => {
  const name = `${NAME}-bg`
  const info = await Template.buildInBackground(
    Template().fromTemplate('base').runCmd('echo background > /opt/bg'), name, BUILD)
  assert.match(info.buildId, /\S/)
  let offset = 0
  const messages = []
  const status = await waitFor('the background build', async () => {
    const s = await Template.getBuildStatus(info, { logsOffset: offset })
    offset += s.logEntries.length
    messages.push(...s.logEntries.map((e) => e.message))
    return s.status === 'ready' || s.status === 'error' ? s : undefined
  }, { timeoutMs: 300_000, intervalMs: 500 })
  assert.equal(status.status, 'ready', JSON.stringify(status.reason))
  assert.ok(messages.some((m) => m.includes('RUN echo background')), messages.join('\n'))
  const sbx = await create(name)
  assert.equal((await sbx.commands.run('cat /opt/bg')).stdout, 'background\n')
})

test('template: a failing runCmd is a BuildError at the line of that step', async () => {
  const t = Template().fromTemplate('base').runCmd('echo fine')
  t.runCmd('echo about to fail; exit 7') // the failing step
  const err = await rejectsWith(Template.build(t, `${NAME}-fail`, BUILD), BuildError, 'build')
  assert.match(err.message, /exit code 7/)
  // The SDK points the error at the user's call of the failing step (reason.step).
  assert.match(err.stack, /template\.test\.mjs:\d+/)
  const line = err.stack.match(/template\.test\.mjs:(\d+)/)[1]
  const src = (await import('node:fs')).readFileSync(new URL(import.meta.url), 'utf8').split('\n')
  assert.match(src[Number(line) - 1], /the failing step/)
  // Nothing half-made: no sandbox of it.
  await assert.rejects(create(`${NAME}-fail`))
})

test("template: another key's name: exists, but not theirs to build or use", async (t) => {
  if (!KEY_B) return t.skip('no second key (E2B_TEST_KEY_B)')
  assert.equal(await Template.exists(NAME, { apiKey: KEY_B }), true)
  await rejectsWith(Template.build(Template().fromTemplate('base'), NAME, { ...BUILD, apiKey: KEY_B }),
    Error, 'a build of the name by key B')
  await assert.rejects(Sandbox.create(NAME, { apiKey: KEY_B }))
  assert.equal(await Template.exists(`tpl-none-${sfx}`), false)
})

test('template: the last setUser and setWorkdir are the sandbox defaults, through fromTemplate too', async () => {
  const name = `${NAME}-root`
  await Template.build(Template().fromTemplate(NAME).setUser('root').setWorkdir('/opt'), name, BUILD)
  const sbx = await create(name)
  assert.equal((await sbx.commands.run('pwd; id -un')).stdout, '/opt\nroot\n')
  // A file operation without a user is the default user's too.
  await sbx.files.write('/opt/by-default.txt', 'x')
  assert.equal((await sbx.commands.run('stat -c %U /opt/by-default.txt')).stdout, 'root\n')
  // Neither set: the base template's (NAME's /srv/app and user) are inherited.
  const child = `${NAME}-child`
  await Template.build(Template().fromTemplate(NAME).runCmd('true'), child, BUILD)
  const inherited = await create(child)
  assert.equal((await inherited.commands.run('pwd; id -un')).stdout, '/srv/app\nuser\n')
})

const cli = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '..', 'node_modules', '.bin', 'e2b')
const e2bCli = (args) => promisify(execFile)(cli, args, {
  env: { ...process.env, E2B_DOMAIN: '', NO_COLOR: '1' },
  timeout: 120_000,
})

test("template: e2b template publish lets every key use it (not build it); unpublish takes that back", { skip: process.env.E2B_SDK === 'e2b-old' ? 'once, in the latest lane' : false }, async (t) => {
  if (!KEY_B) return t.skip('no second key (E2B_TEST_KEY_B)')
  const published = await e2bCli(['template', 'publish', NAME, '-y'])
  assert.match(published.stdout, new RegExp(`Published as: ${NAME}`))
  const theirs = await Sandbox.create(NAME, { apiKey: KEY_B, timeoutMs: 300_000 })
  try {
    assert.equal((await theirs.commands.run('cat /opt/marker')).stdout, 'first\n')
  } finally {
    await theirs.kill()
  }
  // Still not theirs to build, tag or delete.
  await rejectsWith(Template.build(Template().fromTemplate('base'), NAME, { ...BUILD, apiKey: KEY_B }),
    Error, 'a build of a published name by key B')
  await e2bCli(['template', 'unpublish', NAME, '-y'])
  await assert.rejects(Sandbox.create(NAME, { apiKey: KEY_B }))
})

test('template: Template.exists of hutch templates', async () => {
  assert.equal(await Template.exists('base'), true)
  await sleep(0)
})
