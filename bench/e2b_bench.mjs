#!/usr/bin/env node
// The E2B facade against hutch's own API, side by side, with one hutchd:
//
//   (a) create -> first command answered: E2B `Sandbox.create('base')` + `commands.run('true')`
//       vs hutch `Box.create()` + `box.exec(['true'])` (the sandbox/box is removed afterwards,
//       untimed); --creates runs each, taking turns, after one untimed create (the template's
//       snapshot is made by the first create).
//   (b) the round trip of `true` in a running sandbox/box: E2B `commands.run('true')` (a
//       Connect server stream, process.Process/Start) vs hutch `box.exec(['true'])` (one JSON
//       POST /v1/boxes/{id}/exec); --execs each, taking turns, after 3 unmeasured warm-ups.
//   Both also as hutch `box.exec(['/bin/bash', '-l', '-c', 'true'])`: the process E2B's SDKs
//   start for every command (a login shell), so the protocol's cost and bash's are told apart.
//
// Both clients talk plain HTTP to hutchd's loopback listener (E2B: E2B_API_URL and
// E2B_SANDBOX_URL; hutch: host http://127.0.0.1:PORT), with a non-admin key. The E2B SDK is
// e2b-latest from tests/e2b (npm ci there first: tests/e2b/run.sh does it), the hutch SDK is
// sdk/typescript/dist (cd sdk/typescript && npm ci && npm run build).
//
// Usage (root: hutchd jails QEMU):
//   node bench/e2b_bench.mjs [--creates 5] [--execs 50] [--sdk e2b-latest|e2b-old] [--image DIR]
// Starts hutchd with tests/support/hutchd_daemon.py (from copies of the built binaries, HUTCH_BUILD_DIR,
// default build/), prints a markdown table and the command that reproduces it, stops hutchd.
// Not a test: nothing fails on a slow number.

import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import os from 'node:os'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const { values: args } = parseArgs({
  options: {
    creates: { type: 'string', default: '5' },
    execs: { type: 'string', default: '50' },
    sdk: { type: 'string', default: 'e2b-latest' },
    image: { type: 'string' },
  },
})
const N_CREATE = Number(args.creates)
const N_EXEC = Number(args.execs)

const e2bEntry = join(ROOT, 'tests/e2b/node_modules', args.sdk, 'dist/index.mjs')
const hutchEntry = join(ROOT, 'sdk/typescript/dist/index.js')
if (!existsSync(e2bEntry)) throw new Error(`${e2bEntry} is missing: cd tests/e2b && npm ci`)
if (!existsSync(hutchEntry)) throw new Error(`${hutchEntry} is missing: cd sdk/typescript && npm ci && npm run build`)

function newestImage() {
  if (args.image) return args.image
  if (process.env.HUTCH_TEST_IMAGE) return process.env.HUTCH_TEST_IMAGE
  const dir = '/var/cache/hutch/images'
  const found = readdirSync(dir).filter((n) => n.startsWith('base-') && existsSync(join(dir, n, 'rootfs.img')))
    .map((n) => join(dir, n)).sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)
  if (!found.length) throw new Error('no base image: set HUTCH_TEST_IMAGE or --image')
  return found[0]
}

// Copies of the binaries (others may relink build/ meanwhile), then one hutchd.
const build = process.env.HUTCH_BUILD_DIR || join(ROOT, 'build')
const scratch = mkdtempSync(join(os.tmpdir(), 'hutch-e2b-bench.'))
for (const rel of ['src/daemon/hutchd', 'src/cli/hutch', 'src/jail/hutch-jail',
  'src/egress/proxy/hutch-egress', 'src/jail/hutch-ram-preload.so']) {
  const src = join(build, rel)
  if (!existsSync(src)) continue
  mkdirSync(dirname(join(scratch, 'build', rel)), { recursive: true })
  copyFileSync(src, join(scratch, 'build', rel))
  execFileSync('chmod', ['--reference', src, join(scratch, 'build', rel)])
}
const image = newestImage()
const daemonPy = join(ROOT, 'tests/support/hutchd_daemon.py')
const started = spawnSync('python3', [daemonPy, 'start', '--dir', scratch, '--build', join(scratch, 'build'), '--image', image],
  { encoding: 'utf8' })
if (started.status !== 0) throw new Error(`hutchd did not start: ${started.stderr}`)
const daemon = JSON.parse(started.stdout.trim().split('\n').pop())
const stop = () => {
  spawnSync('python3', [daemonPy, 'stop', '--dir', scratch], { stdio: 'inherit' })
  // The state (template snapshots) and the binaries' copies go; hutchd's log stays.
  for (const sub of ['state', 'build']) rmSync(join(scratch, sub), { recursive: true, force: true })
}
process.on('SIGINT', () => { stop(); process.exit(130) })

process.env.E2B_API_URL = daemon.http_url
process.env.E2B_SANDBOX_URL = daemon.http_url
process.env.E2B_API_KEY = daemon.key
const { Sandbox } = await import(pathToFileURL(e2bEntry))
const { Client, Box } = await import(pathToFileURL(hutchEntry))
const client = new Client({ host: daemon.http_url, apiKey: daemon.key, env: {} })
let accel = '?'
try {
  const info = await (await fetch(`${daemon.http_url}/v1/info`, { headers: { Authorization: `Bearer ${daemon.admin_key}` } })).json()
  accel = `accel ${info.accel?.name}${info.accel?.reason ? ` (${info.accel.reason})` : ''}`
} catch (e) { accel = `accel unknown: ${e.message}` }

const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6
const now = () => process.hrtime.bigint()
function stats(xs) {
  const s = [...xs].sort((a, b) => a - b)
  const q = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]
  return { n: s.length, median: q(0.5), p90: q(0.9), min: s[0], max: s[s.length - 1] }
}

const LOGIN = ['/bin/bash', '-l', '-c', 'true']
const failures = { e2bCreate: 0, hutchCreate: 0, hutchCreateLogin: 0, e2bExec: 0, hutchExec: 0, hutchExecLogin: 0 }
const createE2b = []
const createHutch = []
const createHutchLogin = []
const execE2b = []
const execHutch = []
const execHutchLogin = []
try {
  // One untimed create first: the first box from a template pays for its template snapshot
  // (docs/snapshots.md), whichever client asks.
  await (await Box.create({ client })).remove({ force: true })
  // (a) create -> first command answered, taking turns.
  for (let i = 0; i < N_CREATE; i++) {
    try {
      const t0 = now()
      const sbx = await Sandbox.create('base', { timeoutMs: 300_000 })
      const r = await sbx.commands.run('true')
      createE2b.push(ms(t0))
      if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}`)
      await sbx.kill()
    } catch (e) { failures.e2bCreate++; console.error('e2b create:', e.message) }
    try {
      const t0 = now()
      const box = await Box.create({ client })
      const r = await box.exec(['true'])
      createHutch.push(ms(t0))
      if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}`)
      await box.remove({ force: true })
    } catch (e) { failures.hutchCreate++; console.error('hutch create:', e.message) }
    try {
      const t0 = now()
      const box = await Box.create({ client })
      const r = await box.exec(LOGIN)
      createHutchLogin.push(ms(t0))
      if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}`)
      await box.remove({ force: true })
    } catch (e) { failures.hutchCreateLogin++; console.error('hutch create (login shell):', e.message) }
  }

  // (b) the exec round trip in one running sandbox / box each.
  const sbx = await Sandbox.create('base', { timeoutMs: 600_000 })
  const box = await Box.create({ client })
  try {
    for (let i = 0; i < 3; i++) { await sbx.commands.run('true'); await box.exec(['true']); await box.exec(LOGIN) }
    for (let i = 0; i < N_EXEC; i++) {
      try { const t0 = now(); await sbx.commands.run('true'); execE2b.push(ms(t0)) } catch (e) { failures.e2bExec++; console.error('e2b exec:', e.message) }
      try { const t0 = now(); await box.exec(['true']); execHutch.push(ms(t0)) } catch (e) { failures.hutchExec++; console.error('hutch exec:', e.message) }
      try { const t0 = now(); await box.exec(LOGIN); execHutchLogin.push(ms(t0)) } catch (e) { failures.hutchExecLogin++; console.error('hutch exec (login shell):', e.message) }
    }
  } finally {
    await sbx.kill().catch(() => {})
    await box.remove({ force: true }).catch(() => {})
  }
} finally {
  stop()
}

const f = (x) => (x === undefined ? '-' : x.toFixed(x < 100 ? 1 : 0))
const rowCreate = (name, xs, failed) => {
  const s = stats(xs)
  return `| ${name} | ${s.n}${failed ? ` (+${failed} failed)` : ''} | ${f(s.median)} | ${f(s.min)} | ${f(s.max)} |`
}
const rowExec = (name, xs, failed) => {
  const s = stats(xs)
  return `| ${name} | ${s.n}${failed ? ` (+${failed} failed)` : ''} | ${f(s.median)} | ${f(s.p90)} | ${f(s.min)} | ${f(s.max)} |`
}

console.log(`\nE2B facade vs hutch API, one hutchd (${daemon.http_url}, plain HTTP on loopback), ` +
  `${os.cpus().length} CPUs, ${accel}, image ${image.split('/').pop()}, E2B SDK ${args.sdk}\n`)
console.log('create -> first `true` answered (ms)\n')
console.log('| client | runs | median | min | max |\n|---|---|---|---|---|')
console.log(rowCreate('E2B SDK: Sandbox.create + commands.run', createE2b, failures.e2bCreate))
console.log(rowCreate('hutch SDK: Box.create + exec `true`', createHutch, failures.hutchCreate))
console.log(rowCreate('hutch SDK: Box.create + exec `bash -l -c true`', createHutchLogin, failures.hutchCreateLogin))
console.log('\n`true` round trip in a running box (ms)\n')
console.log('| client | runs | median | p90 | min | max |\n|---|---|---|---|---|---|')
console.log(rowExec('E2B SDK: commands.run (Connect stream; runs `bash -l -c true`)', execE2b, failures.e2bExec))
console.log(rowExec('hutch SDK: exec `true` (JSON POST)', execHutch, failures.hutchExec))
console.log(rowExec('hutch SDK: exec `bash -l -c true` (JSON POST)', execHutchLogin, failures.hutchExecLogin))
console.log(`\nReproduce: sudo node bench/e2b_bench.mjs --creates ${N_CREATE} --execs ${N_EXEC} --sdk ${args.sdk}` +
  ` --image ${image}`)
