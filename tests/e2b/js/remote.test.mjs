// Remote use: the same SDK over HTTPS to hutchd's TLS listener, trusting hutchd's self-signed
// certificate with NODE_EXTRA_CA_CERTS (which Node reads only at start, so a child process).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { test } from 'node:test'
import { alias } from './lib.mjs'

const httpsUrl = process.env.E2B_TEST_HTTPS_URL
const caCert = process.env.E2B_TEST_CA_CERT

const script = `
const { Sandbox } = await import(${JSON.stringify(alias)})
const sbx = await Sandbox.create('base', { timeoutMs: 120000, metadata: { kind: 'tls' } })
try {
  const r = await sbx.commands.run('echo over-tls')
  await sbx.files.write('/home/user/tls.txt', 'tls file')
  const back = await sbx.files.read('/home/user/tls.txt')
  console.log(JSON.stringify({ stdout: r.stdout, back, running: await sbx.isRunning() }))
} finally {
  await sbx.kill()
}
`

test('over HTTPS with NODE_EXTRA_CA_CERTS=<hutchd cert.pem>', () => {
  assert.ok(httpsUrl && caCert, 'E2B_TEST_HTTPS_URL and E2B_TEST_CA_CERT are not set (run.sh sets them)')
  const env = { ...process.env, E2B_API_URL: httpsUrl, E2B_SANDBOX_URL: httpsUrl, NODE_EXTRA_CA_CERTS: caCert }
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script],
    { env, encoding: 'utf8', timeout: 120_000, cwd: new URL('..', import.meta.url).pathname })
  assert.equal(child.status, 0, `child failed: ${child.stderr}`)
  const out = JSON.parse(child.stdout.trim().split('\n').pop())
  assert.deepEqual(out, { stdout: 'over-tls\n', back: 'tls file', running: true })
})

test('over HTTPS without trusting the certificate: refused', () => {
  assert.ok(httpsUrl, 'E2B_TEST_HTTPS_URL is not set')
  const env = { ...process.env, E2B_API_URL: httpsUrl, E2B_SANDBOX_URL: httpsUrl }
  delete env.NODE_EXTRA_CA_CERTS
  const child = spawnSync(process.execPath, ['--input-type=module', '-e',
    `const { Sandbox } = await import(${JSON.stringify(alias)}); await Sandbox.create('base', { timeoutMs: 60000 })`],
  { env, encoding: 'utf8', timeout: 60_000, cwd: new URL('..', import.meta.url).pathname })
  assert.notEqual(child.status, 0)
  assert.match(child.stderr, /certificate|self.signed|UNABLE_TO_VERIFY|fetch failed/i)
})
