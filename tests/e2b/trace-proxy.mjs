#!/usr/bin/env node
// A logging HTTP/1.1 reverse proxy for debugging the E2B suites: what each SDK sent to hutchd
// and what came back, one JSON line per exchange (request line, the headers that matter, the
// first bytes of both bodies; connect+json envelopes are decoded).
//
//   node tests/e2b/trace-proxy.mjs TARGET_URL LOG_FILE    prints its own URL on stdout
//
// tests/e2b/run.sh uses it with HUTCH_E2B_TRACE=1 (E2B_API_URL/E2B_SANDBOX_URL then point here).
import { appendFileSync } from 'node:fs'
import http from 'node:http'

const [target, logFile] = process.argv.slice(2)
if (!target || !logFile) {
  console.error('usage: trace-proxy.mjs TARGET_URL LOG_FILE')
  process.exit(64)
}
const up = new URL(target)
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 })
const KEEP = ['content-type', 'content-length', 'transfer-encoding', 'e2b-sandbox-id', 'e2b-sandbox-port',
  'x-access-token', 'authorization', 'connect-timeout-ms', 'keepalive-ping-interval', 'user-agent', 'x-next-token',
  'connect-protocol-version', 'x-api-key']
const LIMIT = 1200

function headers(h) {
  const out = {}
  for (const k of KEEP) {
    if (h[k] === undefined) continue
    out[k] = k === 'x-api-key' ? `${String(h[k]).slice(0, 8)}...` : h[k]
  }
  return out
}

function printable(buf) {
  const s = buf.subarray(0, LIMIT).toString('latin1')
  return s.replace(/[^\x20-\x7e\n]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`)
}

// Decodes Connect envelopes (flag byte, 4-byte length, JSON) as far as the captured bytes go.
function envelopes(buf) {
  const out = []
  let off = 0
  while (off + 5 <= buf.length && out.length < 40) {
    const flags = buf[off]
    const len = buf.readUInt32BE(off + 1)
    if (off + 5 + len > buf.length) { out.push({ flags, len, truncated: true }); break }
    const body = buf.subarray(off + 5, off + 5 + len).toString('utf8')
    out.push(flags === 2 ? { end: body } : body.slice(0, 300))
    off += 5 + len
  }
  return out
}

let seq = 0
const server = http.createServer((req, res) => {
  const id = ++seq
  const t0 = Date.now()
  const reqChunks = []
  let reqBytes = 0
  const entry = { id, method: req.method, url: req.url, req: headers(req.headers) }
  const resChunks = []
  let resBytes = 0
  let resType = ''
  const captureBody = () => {
    const body = Buffer.concat(resChunks)
    entry.resBytes = resBytes
    entry.resBody = resType.includes('connect+json') ? envelopes(body) : printable(body)
  }
  const fwd = http.request({
    host: up.hostname, port: up.port, method: req.method, path: req.url, headers: req.headers, agent,
  }, (ures) => {
    entry.status = ures.statusCode
    entry.res = headers(ures.headers)
    entry.headersAfterMs = Date.now() - t0
    res.writeHead(ures.statusCode, ures.rawHeaders)
    res.flushHeaders()
    resType = String(ures.headers['content-type'] || '')
    ures.on('data', (c) => {
      if (resBytes < 64 * 1024) resChunks.push(c)
      resBytes += c.length
      res.write(c)
    })
    ures.on('end', () => {
      res.end()
      entry.ms = Date.now() - t0
      captureBody()
      write(entry)
    })
    ures.on('error', (e) => { entry.error = `upstream response: ${e.message}`; captureBody(); write(entry); res.destroy() })
  })
  fwd.on('error', (e) => {
    entry.error = `upstream: ${e.message}`
    write(entry)
    if (!res.headersSent) { res.writeHead(502); res.end() } else res.destroy()
  })
  // The request body is forwarded whole, once it is complete (every E2B request body is
  // finite): a server that answers early and closes then cannot make the proxy lose the answer
  // to an EPIPE that a direct client would not have seen.
  const all = []
  req.on('data', (c) => {
    if (reqBytes < 16 * 1024) reqChunks.push(c)
    reqBytes += c.length
    all.push(c)
  })
  req.on('end', () => {
    const body = Buffer.concat(reqChunks)
    entry.reqBytes = reqBytes
    entry.reqBody = String(req.headers['content-type'] || '').includes('connect+json')
      ? envelopes(body) : printable(body)
    fwd.end(Buffer.concat(all))
  })
  req.on('aborted', () => { entry.aborted = Date.now() - t0; fwd.destroy() })
  res.on('close', () => {
    if (!res.writableEnded) { entry.clientClosedAfterMs = Date.now() - t0; captureBody(); write(entry); fwd.destroy() }
  })
})

const logged = new Set()
function write(entry) {
  if (logged.has(entry.id)) return
  logged.add(entry.id)
  appendFileSync(logFile, JSON.stringify(entry) + '\n')
}

server.listen(0, '127.0.0.1', () => {
  console.log(`http://127.0.0.1:${server.address().port}`)
})
