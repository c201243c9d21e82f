// E2B's template builder from images, through the SDK: Template().fromImage(ref) of a real
// registry on loopback (Debian's docker-registry with TLS, tests/e2b/run.sh starts it),
// fromImage(ref, {username, password}) from one with basic auth that the host is not logged in
// to (E2B's fromImageRegistry), fromDockerfile(...) (parsed by the SDK), the npmInstall helper
// (RUN steps that reach npm through the build's default egress policy; aptInstall and pipInstall
// are tested from Python), the build logs endpoint, and the E2B CLI's
// `e2b template create NAME -d e2b.Dockerfile`.
//
// Env (run.sh): E2B_TEST_REGISTRY (anyone may pull: test/debian),
// E2B_TEST_REGISTRY_AUTH + E2B_TEST_REGISTRY_USER/PASSWORD (private/debian); npmInstall's test
// needs hutch's `node` template (HUTCH_TEST_NODE_IMAGE, as scripts/test.sh sets it).
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { promisify } from 'node:util'
import { sdk, Sandbox, RUN_ID, track, rejectsWith, processLines } from './lib.mjs'

const { Template, BuildError } = sdk
const REGISTRY = process.env.E2B_TEST_REGISTRY || ''
const AUTH = process.env.E2B_TEST_REGISTRY_AUTH || ''
const USER = process.env.E2B_TEST_REGISTRY_USER || ''
const PASSWORD = process.env.E2B_TEST_REGISTRY_PASSWORD || ''
const noRegistry = REGISTRY ? false : 'no registry on loopback (tests/e2b/run.sh starts one)'
const sfx = `${process.pid.toString(36)}${Date.now().toString(36)}`.slice(-10)
const BUILD = { cpuCount: 1, memoryMB: 512 }

const context = mkdtempSync(join(tmpdir(), 'e2b-template-image-'))
after(() => rmSync(context, { recursive: true, force: true }))
writeFileSync(join(context, 'hello.txt'), `hello from ${RUN_ID}\n`)

async function create(name) {
  const sbx = await Sandbox.create(name, { timeoutMs: 300_000 })
  track(sbx.sandboxId)
  return sbx
}

async function build(template, name) {
  const logs = []
  try {
    const info = await Template.build(template, name, { ...BUILD, onBuildLogs: (e) => logs.push(e) })
    return { info, text: logs.map((l) => l.message ?? String(l)).join('\n') }
  } catch (e) {
    // The SDK points a BuildError's stack at the user's step: keep its message and the build's
    // last log lines in sight too.
    const tail = logs.slice(-15).map((l) => `  | ${l.message ?? String(l)}`).join('\n')
    e.stack = `${e.name}: ${e.message}\n${tail}\n${e.stack}`
    throw e
  }
}

let debianBuild
test('template image: fromImage of a registry image; a sandbox has its files and ENV', { skip: noRegistry }, async () => {
  const name = `img-js-${sfx}`
  const { info, text } = await build(
    Template().fromImage(`${REGISTRY}/test/debian:latest`)
      .setEnvs({ IMG_TPL: 'set by the template' })
      .runCmd('echo "$IMG_TPL" > /opt/built && cat /etc/debian_version > /opt/version'),
    name)
  debianBuild = info
  assert.match(text, new RegExp(`FROM ${REGISTRY}/test/debian:latest`))
  const sbx = await create(name)
  // The image's files, what the step made of them, the image's ENV and the template's.
  const r = await sbx.commands.run('cat /opt/built; cmp /etc/debian_version /opt/version && echo same; echo "$LANG|$IMG_TPL"')
  assert.equal(r.stdout, 'set by the template\nsame\nC.UTF-8|set by the template\n')
  assert.match(await sbx.files.read('/etc/os-release'), /Debian GNU\/Linux/)
})

test('template image: GET .../builds/{buildID}/logs with cursor, direction, level and limit', { skip: noRegistry || !sdk.ApiClient ? 'needs the build above and the SDK\'s ApiClient' : false }, async () => {
  assert.ok(debianBuild, 'the fromImage build ran')
  const client = new sdk.ApiClient(new sdk.ConnectionConfig())
  const logs = async (query) => {
    const res = await client.api.GET('/templates/{templateID}/builds/{buildID}/logs', {
      params: { path: { templateID: debianBuild.templateId, buildID: debianBuild.buildId }, query },
    })
    assert.equal(res.response.status, 200, JSON.stringify(res.error))
    return res.data.logs
  }
  const all = await logs({})
  assert.ok(all.length >= 3, JSON.stringify(all))
  for (const e of all) {
    assert.match(e.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    assert.ok(['debug', 'info', 'warn', 'error'].includes(e.level))
  }
  assert.ok(all.some((e) => e.message.includes('RUN echo')), JSON.stringify(all))
  // Forward from a cursor: the entries at or after it, oldest first; limit caps them.
  const cursor = Date.parse(all[1].timestamp)
  const forward = await logs({ cursor, limit: 2 })
  assert.equal(forward.length, 2)
  assert.ok(Date.parse(forward[0].timestamp) >= cursor)
  assert.ok(Date.parse(forward[1].timestamp) >= Date.parse(forward[0].timestamp))
  // Backward: the newest first.
  const backward = await logs({ direction: 'backward', limit: 3 })
  assert.equal(backward[0].message, all[all.length - 1].message)
  assert.ok(Date.parse(backward[0].timestamp) >= Date.parse(backward[2].timestamp))
  // A level keeps that level and above: this build logged no warnings or errors.
  assert.deepEqual(await logs({ level: 'error' }), [])
  const bad = await client.api.GET('/templates/{templateID}/builds/{buildID}/logs', {
    params: { path: { templateID: debianBuild.templateId, buildID: debianBuild.buildId }, query: { direction: 'sideways' } },
  })
  assert.equal(bad.response.status, 400)
  assert.match(JSON.stringify(bad.error), /direction/)
})

test('template image: fromImage with registry credentials pulls from a private registry, for that build only', { skip: noRegistry }, async () => {
  const ref = `${AUTH}/private/debian:latest`
  // The host is not logged in to it: without the build's own credentials the pull is refused.
  const refused = await rejectsWith(build(Template().fromImage(ref), `priv-js-none-${sfx}`), BuildError, 'no credentials')
  assert.match(refused.message, /refused|credentials|login|unauthorized|denied/i)
  const wrong = await rejectsWith(
    build(Template().fromImage(ref, { username: USER, password: 'not-the-password' }), `priv-js-bad-${sfx}`),
    BuildError, 'a wrong password')
  assert.doesNotMatch(wrong.message, /not-the-password/)
  const name = `priv-js-${sfx}`
  const { text } = await build(
    Template().fromImage(ref, { username: USER, password: PASSWORD }).runCmd('echo pulled > /tmp/pulled'),
    name)
  assert.doesNotMatch(text, new RegExp(PASSWORD))
  const sbx = await create(name)
  const r = await sbx.commands.run('cat /tmp/pulled; echo "$LANG"; id -un')
  assert.equal(r.stdout, 'pulled\nC.UTF-8\nuser\n')
  // Cloud registries' credential types are refused, saying what to use instead.
  const aws = await rejectsWith(build(Template().fromAWSRegistry(ref,
    { accessKeyId: 'AKIAEXAMPLE', secretAccessKey: 'secret-example', region: 'us-east-1' }), `aws-js-${sfx}`), Error, 'fromAWSRegistry')
  assert.match(aws.message, /not supported/)
  assert.doesNotMatch(aws.message, /secret-example/)
})

test('template image: fromDockerfile (FROM, ENV, ARG, WORKDIR, COPY, RUN, USER, CMD) as the SDK parses it', { skip: noRegistry }, async () => {
  const name = `df-js-${sfx}`
  const dockerfile = [
    `FROM ${REGISTRY}/test/debian:latest`,
    'ARG GREETING=hello-arg',
    'ENV DF_ENV=from-the-dockerfile',
    'WORKDIR /app',
    'COPY hello.txt ./',
    'RUN echo "$GREETING" > /app/arg.txt && id -un > /app/ran-as',
    'USER user',
    'CMD ["sleep", "infinity"]',
  ].join('\n')
  await build(Template({ fileContextPath: context }).fromDockerfile(dockerfile), name)
  const sbx = await create(name)
  const r = await sbx.commands.run('cat /app/hello.txt /app/arg.txt /app/ran-as; echo "$DF_ENV|$LANG"; id -un')
  assert.equal(r.stdout, `hello from ${RUN_ID}\nhello-arg\nroot\nfrom-the-dockerfile|C.UTF-8\nuser\n`)
  // CMD is the template's start command (the SDK gives it E2B's ready check, sleep 20).
  const procs = await processLines(sbx)
  assert.ok(procs.some((l) => l.includes('sleep infinity')), procs.join(' | '))
})

const node = process.env.HUTCH_TEST_NODE_IMAGE ? false : 'no node template (HUTCH_TEST_NODE_IMAGE)'

// aptInstall and pipInstall: tests/e2b/py/test_template_image.py (one SDK each, to keep CI's time).
test('template image: npmInstall reaches npm', { skip: node }, async () => {
  const name = `npm-js-${sfx}`
  await build(
    Template().fromTemplate('node').setUser('root').setWorkdir('/opt/app')
      .npmInstall(['left-pad@1.3.0']).npmInstall(['is-number@7.0.0'], { g: true }),
    name)
  const sbx = await create(name)
  const r = await sbx.commands.run(
    'node -e "console.log(require(\'/opt/app/node_modules/left-pad\')(\'x\', 3))"; ' +
    'node -p "require(require(\'path\').join(require(\'child_process\').execSync(\'npm root -g\').toString().trim(), \'is-number\'))(5)"',
    { cwd: '/opt/app' })
  assert.equal(r.stdout, '  x\ntrue\n')
})

const execFileP = promisify(execFile)
const cli = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '..', 'node_modules', '.bin', 'e2b')

test('template image: the E2B CLI, e2b template create NAME -d e2b.Dockerfile', { skip: noRegistry || (process.env.E2B_SDK === 'e2b-old' ? 'once, in the latest lane' : false) }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'e2b-cli-'))
  after(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'e2b.Dockerfile'),
    `FROM ${REGISTRY}/test/debian:latest\nCOPY note.txt /opt/note.txt\nRUN echo cli-built > /opt/cli\n`)
  writeFileSync(join(dir, 'note.txt'), 'a note\n')
  const name = `cli-js-${sfx}`
  const { stdout, stderr } = await execFileP(cli, ['template', 'create', name, '-d', 'e2b.Dockerfile', '--cpu-count', '1', '--memory-mb', '512'], {
    cwd: dir,
    env: { ...process.env, E2B_API_KEY: process.env.E2B_API_KEY, E2B_DOMAIN: '', NO_COLOR: '1' },
    timeout: 600_000,
  })
  assert.match(stdout + stderr, new RegExp(name))
  const sbx = await create(name)
  const r = await sbx.commands.run('cat /opt/note.txt /opt/cli', { user: 'root' })
  assert.equal(r.stdout, 'a note\ncli-built\n')
})
