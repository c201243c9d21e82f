// An in-process stand-in for hutchd: HTTP routes and the exec WebSocket, served on a unix
// socket, on loopback TCP or with TLS, recording every request it got.

import { readFileSync } from "node:fs";
import { mkdtempSync, rmSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

import { WebSocketServer, type WebSocket } from "ws";

export const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../test/fixtures");

export function fixture(name: string): string {
  return readFileSync(path.join(fixtures, name), "utf8");
}

export interface FakeRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export type Handler = (req: FakeRequest, res: http.ServerResponse) => void | Promise<void>;
export type WsHandler = (ws: WebSocket, req: FakeRequest) => void;

export class FakeHutchd {
  readonly requests: FakeRequest[] = [];
  /** TLS handshakes that completed (whether or not a request followed). */
  tlsConnections = 0;
  private readonly routes = new Map<string, Handler>();
  private wsRoutes = new Map<string, WsHandler>();
  private readonly server: http.Server;
  private readonly wss: WebSocketServer;
  private dir: string | undefined;
  socketPath = "";
  port = 0;

  private constructor(server: http.Server) {
    this.server = server;
    this.wss = new WebSocketServer({
      noServer: true,
      handleProtocols: (protocols) => (protocols.has("hutch.exec.v1") ? "hutch.exec.v1" : false),
    });
    server.on("request", (req, res) => {
      // A client that breaks off its upload ("aborted") is the test's business, not the fake's.
      this.dispatch(req, res).catch(() => res.destroy());
    });
    server.on("upgrade", (req, socket, head) => {
      const url = new URL(req.url ?? "/", "http://fake");
      const handler = this.wsRoutes.get(url.pathname);
      const record: FakeRequest = { method: "GET", path: url.pathname, query: url.searchParams, headers: req.headers, body: Buffer.alloc(0) };
      this.requests.push(record);
      if (handler === undefined) {
        socket.end('HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{"error":{"code":"not_found","message":"No such box"}}');
        return;
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => handler(ws, record));
    });
  }

  static async unix(): Promise<FakeHutchd> {
    const fake = new FakeHutchd(http.createServer());
    fake.dir = mkdtempSync(path.join(tmpdir(), "hutch-fake-"));
    fake.socketPath = path.join(fake.dir, "hutchd.sock");
    await new Promise<void>((resolve) => fake.server.listen(fake.socketPath, resolve));
    return fake;
  }

  static async tcp(): Promise<FakeHutchd> {
    const fake = new FakeHutchd(http.createServer());
    await new Promise<void>((resolve) => fake.server.listen(0, "127.0.0.1", resolve));
    fake.port = (fake.server.address() as AddressInfo).port;
    return fake;
  }

  /** TLS with test/fixtures/<name>-cert.pem and -key.pem. */
  static async tls(name: "self" | "leaf"): Promise<FakeHutchd> {
    const server = https.createServer({ cert: fixture(`${name}-cert.pem`), key: fixture(`${name}-key.pem`) });
    const fake = new FakeHutchd(server);
    server.on("secureConnection", () => fake.tlsConnections++);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    fake.port = (server.address() as AddressInfo).port;
    return fake;
  }

  get httpUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get httpsUrl(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  on(method: string, path: string, handler: Handler): this {
    this.routes.set(`${method} ${path}`, handler);
    return this;
  }

  onWs(path: string, handler: WsHandler): this {
    this.wsRoutes.set(path, handler);
    return this;
  }

  private async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://fake");
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const record: FakeRequest = {
      method: req.method ?? "",
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      body: Buffer.concat(chunks),
    };
    this.requests.push(record);
    const handler = this.routes.get(`${record.method} ${record.path}`);
    if (handler === undefined) {
      json(res, 404, { error: { code: "not_found", message: `No route ${record.method} ${record.path}` } });
      return;
    }
    await handler(record, res);
  }

  async close(): Promise<void> {
    for (const client of this.wss.clients) client.terminate();
    this.server.closeAllConnections?.();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    if (this.dir !== undefined) rmSync(this.dir, { recursive: true, force: true });
  }
}

export function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === "string" ? body : `${JSON.stringify(body)}\n`;
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

export const sampleBox = {
  id: "3f2a9c01d4e5",
  name: "dev",
  template: "base",
  cpus: 1,
  memory_mib: 512,
  disk_mib: 0,
  state: "running",
  reason: "",
  accel: "kvm",
  pid: 12345,
  boot: "restored from template snapshot abc",
  secrets: [],
  env: { A: "1" },
  owner: "alice",
  created_at: 1764400000,
  updated_at: 1764400004,
};
