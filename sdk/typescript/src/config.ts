// Where hutchd is and how to trust it: options first, then the environment, then the local
// unix socket.

import { readFileSync } from "node:fs";
import { isIP } from "node:net";

import { InvalidArgumentError } from "./errors.js";

export const defaultSocketPath = "/run/hutch/hutchd.sock";

export interface ClientOptions {
  /** `https://HOST:PORT` or `http://127.0.0.1:PORT` (plain HTTP on loopback only). Env `HUTCH_HOST`. */
  host?: string;
  /** Sent as `Authorization: Bearer KEY` on TCP. Env `HUTCH_API_KEY`. */
  apiKey?: string;
  /** The local unix socket, used when no host is given. Env `HUTCH_SOCKET`, default /run/hutch/hutchd.sock. */
  socketPath?: string;
  /** CA certificate(s) to trust: PEM text or a file path. Env `HUTCH_CA_CERT`. */
  caCert?: string;
  /**
   * The server certificate's SHA-256 as `GET /v1/info` and `hutch doctor` print it
   * ("AB:CD:..."; case and colons do not matter). The connection is refused unless the peer's
   * certificate has exactly this fingerprint. Env `HUTCH_FINGERPRINT`.
   */
  fingerprint?: string;
  /** Where to read `HUTCH_*` from (default `process.env`). */
  env?: Record<string, string | undefined>;
}

export type Endpoint =
  | { kind: "unix"; socketPath: string }
  | {
      kind: "tcp";
      secure: boolean;
      hostname: string;
      port: number;
      /** A path prefix before /v1 ("" normally). */
      basePath: string;
      apiKey: string | undefined;
      ca: string | undefined;
      /** Lowercase hex without colons. */
      fingerprint: string | undefined;
    };

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}

/** "AB:CD:..." (any case, colons optional, "sha256:" or "SHA256=" prefix) to 64 lowercase hex digits. */
export function normalizeFingerprint(text: string): string {
  const stripped = text.trim().replace(/^sha-?256[:=]\s*/i, "").replace(/[:\s]/g, "").toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(stripped)) {
    throw new InvalidArgumentError(
      `Fingerprint '${text}' is not a SHA-256 fingerprint: 32 bytes of hex, colon-separated as GET /v1/info prints it`,
    );
  }
  return stripped;
}

/** "ab12..." to "AB:12:...", the form hutchd prints. */
export function formatFingerprint(hex: string): string {
  return hex.toUpperCase().match(/../g)!.join(":");
}

function isLoopback(hostname: string): boolean {
  if (hostname === "localhost") return true;
  const kind = isIP(hostname);
  if (kind === 4) return hostname.startsWith("127.");
  if (kind === 6) return hostname === "::1" || hostname === "0:0:0:0:0:0:0:1";
  return false;
}

function readCa(caCert: string): string {
  if (caCert.includes("-----BEGIN")) return caCert;
  try {
    return readFileSync(caCert, "utf8");
  } catch (e) {
    throw new InvalidArgumentError(
      `caCert is neither PEM text nor a readable file: ${caCert}: ${(e as Error).message}`,
      { cause: e },
    );
  }
}

export function resolveEndpoint(options: ClientOptions = {}): Endpoint {
  const env = options.env ?? process.env;
  const host = nonEmpty(options.host) ?? (nonEmpty(options.socketPath) ? undefined : nonEmpty(env["HUTCH_HOST"]));
  if (host === undefined) {
    return { kind: "unix", socketPath: nonEmpty(options.socketPath) ?? nonEmpty(env["HUTCH_SOCKET"]) ?? defaultSocketPath };
  }
  let url: URL;
  try {
    url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(host) ? host : `https://${host}`);
  } catch {
    throw new InvalidArgumentError(`Host '${host}' is not a URL such as https://HOST:8443 or http://127.0.0.1:8080`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new InvalidArgumentError(`Host '${host}' must start with https:// or http://`);
  }
  if (url.username !== "" || url.password !== "" || url.search !== "" || url.hash !== "") {
    throw new InvalidArgumentError(`Host '${host}' must be only https://HOST:PORT (the key goes in apiKey)`);
  }
  const secure = url.protocol === "https:";
  const hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  if (!secure && !isLoopback(hostname)) {
    throw new InvalidArgumentError(
      `Plain HTTP would carry the API key in clear to ${hostname}; hutchd serves HTTP on loopback only: use https://`,
    );
  }
  const fingerprintText = nonEmpty(options.fingerprint) ?? nonEmpty(env["HUTCH_FINGERPRINT"]);
  const caText = nonEmpty(options.caCert) ?? nonEmpty(env["HUTCH_CA_CERT"]);
  if (!secure && (nonEmpty(options.fingerprint) !== undefined || nonEmpty(options.caCert) !== undefined)) {
    throw new InvalidArgumentError(`fingerprint and caCert check a TLS certificate; ${host} is plain HTTP`);
  }
  return {
    kind: "tcp",
    secure,
    hostname,
    port: url.port === "" ? (secure ? 443 : 80) : Number(url.port),
    basePath: url.pathname.replace(/\/+$/, ""),
    apiKey: nonEmpty(options.apiKey) ?? nonEmpty(env["HUTCH_API_KEY"]),
    ca: secure && caText !== undefined ? readCa(caText) : undefined,
    fingerprint: secure && fingerprintText !== undefined ? normalizeFingerprint(fingerprintText) : undefined,
  };
}

export function describeEndpoint(e: Endpoint): string {
  if (e.kind === "unix") return `unix:${e.socketPath}`;
  const host = isIP(e.hostname) === 6 ? `[${e.hostname}]` : e.hostname;
  return `${e.secure ? "https" : "http"}://${host}:${e.port}${e.basePath}`;
}
