// HTTP to hutchd over the unix socket, plain HTTP on loopback or HTTPS, with node:http and
// node:https, and the WebSocket (ws) over the same connections. One agent per client keeps
// connections alive; there are no retries.
//
// Pinning: hutchd's certificate is usually self-signed, so OpenSSL's own verification fails and
// Node then never calls checkServerIdentity. With a fingerprint the agent makes each TLS
// connection itself, compares the peer certificate's SHA-256 with the pinned one once the
// handshake is done, and only then hands the socket to the request: a mismatch is refused
// before a byte of the request (or the API key) is written.

import { createHash } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";
import { Readable } from "node:stream";
import type { Duplex } from "node:stream";
import * as tls from "node:tls";

import WebSocket from "ws";

import { type Endpoint, describeEndpoint, formatFingerprint } from "./config.js";
import {
  CancelledError,
  FingerprintMismatchError,
  HutchError,
  PermissionDeniedError,
  UnavailableError,
  errorFromResponse,
} from "./errors.js";
import { parseJson } from "./wire.js";

export const sdkVersion = "0.1.0";
const userAgent = `hutch-sdk-typescript/${sdkVersion} node/${process.versions.node}`;

/** A request body: text, bytes, a Node stream or any async iterable of chunks. */
export type BodyInput = string | Uint8Array | NodeJS.ReadableStream | AsyncIterable<Uint8Array | string>;

export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestSpec {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** The API path, e.g. /v1/boxes/dev (components already encoded: use `pathOf`). */
  path: string;
  query?: Query;
  json?: unknown;
  body?: BodyInput;
  contentType?: string;
  /** The length of a streamed body, when it is known (else it is sent chunked). */
  contentLength?: number;
  accept?: string;
  signal?: AbortSignal;
}

/** Builds an API path from literal segments and values to encode: pathOf`/v1/boxes/${id}`. */
export function pathOf(strings: TemplateStringsArray, ...values: (string | number)[]): string {
  let out = strings[0]!;
  values.forEach((v, i) => {
    out += encodeURIComponent(String(v)) + strings[i + 1]!;
  });
  return out;
}

function queryString(query: Query | undefined): string {
  if (query === undefined) return "";
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined) params.set(k, String(v));
  }
  const s = params.toString();
  return s === "" ? "" : `?${s}`;
}

class UnixAgent extends http.Agent {
  constructor(private readonly socketPath: string) {
    super({ keepAlive: true });
  }

  override createConnection(): Duplex {
    return net.connect(this.socketPath);
  }
}

/** Checks a finished handshake's peer certificate against the pin; null when it matches. */
export function checkFingerprint(socket: tls.TLSSocket, expected: string, where: string): Error | null {
  const cert = socket.getPeerCertificate();
  if (cert === null || cert.raw === undefined || Object.keys(cert).length === 0) {
    return new FingerprintMismatchError(`${where} presented no certificate; refusing to talk to it`, formatFingerprint(expected), "");
  }
  const actual = createHash("sha256").update(cert.raw).digest("hex");
  if (actual === expected) return null;
  return new FingerprintMismatchError(
    `The server at ${where} presented a certificate with SHA-256 fingerprint ${formatFingerprint(actual)}, ` +
      `not the pinned ${formatFingerprint(expected)}; refusing to send it anything. ` +
      `Check the fingerprint (GET /v1/info or hutch doctor on the server) or who answers at that address`,
    formatFingerprint(expected),
    formatFingerprint(actual),
  );
}

class PinnedAgent extends https.Agent {
  constructor(
    options: https.AgentOptions,
    private readonly fingerprint: string,
    private readonly where: string,
  ) {
    super(options);
  }

  override createConnection(
    options: https.RequestOptions,
    callback?: (err: Error | null, stream: Duplex) => void,
  ): Duplex | null | undefined {
    const socket = tls.connect({
      ...(options as tls.ConnectionOptions),
      // Without a CA the certificate is self-signed: the pin is the trust. With a CA both hold.
      rejectUnauthorized: options.ca !== undefined,
    });
    let done = false;
    const finish = (err: Error | null): void => {
      if (done) return;
      done = true;
      socket.removeListener("error", finish);
      if (err !== null) {
        socket.destroy();
        callback?.(err, socket);
        return;
      }
      callback?.(null, socket);
    };
    socket.once("secureConnect", () => finish(checkFingerprint(socket, this.fingerprint, this.where)));
    socket.once("error", finish);
    return undefined;
  }
}

const tlsTrustCodes = new Set([
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_GET_ISSUER_CERT",
  "CERT_UNTRUSTED",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
]);

export class Transport {
  readonly endpoint: Endpoint;
  readonly where: string;
  private readonly agent: http.Agent;

  constructor(endpoint: Endpoint) {
    this.endpoint = endpoint;
    this.where = describeEndpoint(endpoint);
    if (endpoint.kind === "unix") {
      this.agent = new UnixAgent(endpoint.socketPath);
    } else if (!endpoint.secure) {
      this.agent = new http.Agent({ keepAlive: true });
    } else {
      const options: https.AgentOptions = { keepAlive: true, minVersion: "TLSv1.2" };
      if (endpoint.ca !== undefined) options.ca = endpoint.ca;
      this.agent =
        endpoint.fingerprint !== undefined
          ? new PinnedAgent(options, endpoint.fingerprint, this.where)
          : new https.Agent(options);
    }
  }

  /** Closes idle connections; requests still running go on. */
  close(): void {
    this.agent.destroy();
  }

  private headers(spec: { contentType?: string; accept?: string }): Record<string, string> {
    const h: Record<string, string> = { "User-Agent": userAgent };
    if (this.endpoint.kind === "tcp" && this.endpoint.apiKey !== undefined) {
      h["Authorization"] = `Bearer ${this.endpoint.apiKey}`;
    }
    if (spec.contentType !== undefined) h["Content-Type"] = spec.contentType;
    h["Accept"] = spec.accept ?? "application/json";
    return h;
  }

  private requestOptions(method: string, path: string, headers: Record<string, string>): http.RequestOptions {
    const e = this.endpoint;
    if (e.kind === "unix") {
      return { agent: this.agent, method, path, headers, host: "hutchd" };
    }
    return { agent: this.agent, method, path: e.basePath + path, headers, host: e.hostname, port: e.port };
  }

  /** What a connection failure means, said for this endpoint. */
  connectionError(err: unknown): HutchError | Error {
    if (err instanceof HutchError) return err;
    const e = err as NodeJS.ErrnoException;
    if (e?.name === "AbortError") return new CancelledError("The request was aborted", { cause: e });
    const code = e?.code ?? "";
    if (this.endpoint.kind === "unix") {
      const socket = this.endpoint.socketPath;
      if (code === "ENOENT" || code === "ECONNREFUSED") {
        return new UnavailableError(
          `hutchd is not running at ${socket} (${code}): start it (hutchd &), or set HUTCH_HOST and HUTCH_API_KEY for a remote one`,
          { cause: e },
        );
      }
      if (code === "EACCES" || code === "EPERM") {
        return new PermissionDeniedError(
          `Cannot open ${socket}: permission denied; the socket is root's (mode 0660): run as root, or reach hutchd over TCP with a key`,
          { cause: e },
        );
      }
    }
    if (tlsTrustCodes.has(code)) {
      return new UnavailableError(
        `The TLS certificate of ${this.where} is not trusted (${code}: ${e.message}); hutchd's own certificate is ` +
          `self-signed: pin it with fingerprint (HUTCH_FINGERPRINT, from GET /v1/info or hutch doctor) or pass caCert`,
        { cause: e },
      );
    }
    return new UnavailableError(`Cannot reach hutchd at ${this.where}: ${e?.message ?? String(err)}`, { cause: e });
  }

  /**
   * Sends a request; resolves with the response once its status is a success (2xx), rejects
   * with the API's error otherwise. The caller reads (or discards) the body.
   */
  send(spec: RequestSpec): Promise<http.IncomingMessage> {
    const contentType = spec.json !== undefined ? "application/json" : spec.contentType;
    const headers = this.headers({ contentType, accept: spec.accept });
    const options = this.requestOptions(spec.method, spec.path + queryString(spec.query), headers);
    if (spec.signal !== undefined) options.signal = spec.signal;
    let body: string | Uint8Array | undefined;
    let stream: Readable | undefined;
    if (spec.json !== undefined) {
      body = JSON.stringify(spec.json);
    } else if (typeof spec.body === "string" || spec.body instanceof Uint8Array) {
      body = spec.body;
    } else if (spec.body !== undefined) {
      const source = spec.body;
      stream =
        source instanceof Readable
          ? source
          : Readable.from(source as AsyncIterable<Uint8Array | string>, { objectMode: false });
    }
    if (body !== undefined) {
      headers["Content-Length"] = String(typeof body === "string" ? Buffer.byteLength(body) : body.byteLength);
    } else if (stream !== undefined && spec.contentLength !== undefined) {
      headers["Content-Length"] = String(spec.contentLength);
    } else if (stream === undefined && spec.method !== "GET" && spec.method !== "DELETE") {
      headers["Content-Length"] = "0";
    }
    const lib = this.endpoint.kind === "tcp" && this.endpoint.secure ? https : http;
    return new Promise((resolve, reject) => {
      let settled = false;
      let bodyError: unknown;
      const settle = (f: () => void): void => {
        if (!settled) {
          settled = true;
          f();
        }
      };
      const req = lib.request(options, (res) => {
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) {
          settle(() => resolve(res));
          return;
        }
        readText(res, 64 * 1024).then(
          (text) => settle(() => reject(errorFromResponse(status, text, res.headers))),
          (err) => settle(() => reject(this.connectionError(err))),
        );
      });
      req.on("error", (err) => {
        settle(() => reject(bodyError ?? this.connectionError(err)));
      });
      if (stream === undefined) {
        req.end(body);
        return;
      }
      stream.on("error", (err) => {
        bodyError = err;
        req.destroy(err);
      });
      stream.pipe(req);
    });
  }

  /** A request whose answer is JSON, read by `parse`. */
  async json<T>(spec: RequestSpec, parse: (value: unknown) => T): Promise<T> {
    const res = await this.send(spec);
    const text = await readText(res).catch((err) => {
      throw this.connectionError(err);
    });
    return parse(parseJson(text, `the answer to ${spec.method} ${spec.path}`));
  }

  async text(spec: RequestSpec): Promise<string> {
    const res = await this.send(spec);
    return readText(res).catch((err) => {
      throw this.connectionError(err);
    });
  }

  /** The WebSocket URL and options for `path` on this endpoint. */
  webSocket(path: string, protocol: string): WebSocket {
    const e = this.endpoint;
    const url =
      e.kind === "unix"
        ? `ws://hutchd${path}`
        : `${e.secure ? "wss" : "ws"}://${net.isIP(e.hostname) === 6 ? `[${e.hostname}]` : e.hostname}:${e.port}${e.basePath}${path}`;
    const headers: Record<string, string> = { "User-Agent": userAgent };
    if (e.kind === "tcp" && e.apiKey !== undefined) headers["Authorization"] = `Bearer ${e.apiKey}`;
    return new WebSocket(url, [protocol], {
      agent: this.agent,
      headers,
      perMessageDeflate: false,
      // The default (100 MiB) is far above what hutchd sends (64 KiB chunks); keep it bounded.
      maxPayload: 16 * 1024 * 1024,
    });
  }
}

/** Reads a whole response body as UTF-8 text (at most `limit` bytes are kept). */
export function readText(res: http.IncomingMessage, limit = Number.POSITIVE_INFINITY): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on("data", (chunk: Buffer) => {
      if (size < limit) {
        chunks.push(chunk);
        size += chunk.length;
      }
    });
    res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    res.on("error", reject);
    res.on("close", () => {
      if (!res.complete) reject(new UnavailableError("hutchd closed the connection before the answer was complete"));
    });
  });
}
