// A thin client of hutchd's HTTP API (docs/api.md, docs/openapi.yaml). Every call carries the
// key as "Authorization: Bearer KEY"; errors become ApiError with the API's own code and message.
// The page holds no logic the API does not have: this file only translates.

// paused: idle, its vCPUs stopped (the next exec wakes it); suspended: stopped with its memory
// kept on disk (start resumes its processes).
export type BoxState =
  | "creating"
  | "running"
  | "paused"
  | "stopping"
  | "suspended"
  | "stopped"
  | "failed";

export interface Box {
  id: string;
  name: string;
  template: string;
  cpus: number;
  memory_mib: number;
  disk_mib: number;
  state: BoxState;
  reason: string;
  accel: string;
  pid: number;
  boot: string;
  secrets: string[];
  owner?: string;
  env?: Record<string, string>;
  created_at: number;
  updated_at: number;
}

export interface BoxStats {
  id: string;
  name: string;
  uid: number;
  memory: { bytes: number; peak_bytes: number; max_bytes: number };
  cpu_ns: number;
  pids: { current: number; max: number };
  oom_kills: number;
  io_weights: Record<string, number>;
}

export interface Checkpoint {
  id: string;
  kind: "checkpoint";
  box_id: string;
  name: string;
  size_bytes: number;
  created_at: number;
}

export interface Port {
  box_id: string;
  address: string;
  host_port: number;
  box_port: number;
  listening: boolean;
  error: string;
  connections: number;
  accepted: number;
  created_at: number;
}

export interface PolicyLogEntry {
  box: string;
  time_ms: number;
  proto: string;
  host: string;
  port: number;
  address: string;
  decision: "allow" | "deny";
  reason: string;
  bytes_up: number;
  bytes_down: number;
  secrets: string[];
}

export interface Template {
  name: string;
  source: string;
  disk_bytes?: number;
}

export interface Info {
  version: string;
  backend: string;
  accel: { name: string; reason: string };
  caller?: { name: string; admin: boolean };
  listeners?: string[];
}

export interface CreateBoxRequest {
  name?: string;
  template?: string;
  cpus?: number;
  memory_mib?: number;
}

// An error answer of the API ({"error": {"code", "message"}}), or a failure to reach it
// (code "unavailable", status 0).
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export class Api {
  // `base` is where /v1 lives: hutchd's origin, seen from the page at /ui/.
  constructor(
    private readonly key: string,
    private readonly base: URL,
  ) {}

  private url(path: string): URL {
    return new URL(path.replace(/^\//, ""), this.base);
  }

  private async send(method: string, path: string, body?: unknown): Promise<Response> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.key}` };
    let payload: string | undefined;
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      payload = JSON.stringify(body);
    }
    let res: Response;
    try {
      res = await fetch(this.url(path), { method, headers, body: payload, cache: "no-store" });
    } catch (e) {
      throw new ApiError(0, "unavailable", `hutchd cannot be reached (${String(e)})`);
    }
    if (!res.ok) throw await errorOf(res);
    return res;
  }

  async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.send(method, path, body);
    return (await res.json()) as T;
  }

  async text(path: string): Promise<string> {
    return (await this.send("GET", path)).text();
  }

  info(): Promise<Info> {
    return this.json("GET", "/v1/info");
  }
  async boxes(): Promise<Box[]> {
    return (await this.json<{ boxes: Box[] }>("GET", "/v1/boxes")).boxes;
  }
  box(box: string): Promise<Box> {
    return this.json("GET", `/v1/boxes/${enc(box)}`);
  }
  createBox(request: CreateBoxRequest): Promise<Box> {
    return this.json("POST", "/v1/boxes", request);
  }
  stats(box: string): Promise<BoxStats> {
    return this.json("GET", `/v1/boxes/${enc(box)}/stats`);
  }
  start(box: string): Promise<Box> {
    return this.json("POST", `/v1/boxes/${enc(box)}/start`);
  }
  stop(box: string): Promise<Box> {
    return this.json("POST", `/v1/boxes/${enc(box)}/stop`);
  }
  remove(box: string, force: boolean): Promise<{ removed: string }> {
    return this.json("DELETE", `/v1/boxes/${enc(box)}${force ? "?force=true" : ""}`);
  }
  async fork(box: string, names?: string[]): Promise<Box[]> {
    const body = names && names.length > 0 ? { names } : {};
    return (await this.json<{ boxes: Box[] }>("POST", `/v1/boxes/${enc(box)}/fork`, body)).boxes;
  }
  async checkpoints(box: string): Promise<Checkpoint[]> {
    const path = `/v1/boxes/${enc(box)}/checkpoints`;
    return (await this.json<{ checkpoints: Checkpoint[] }>("GET", path)).checkpoints;
  }
  checkpoint(box: string, name?: string): Promise<Checkpoint> {
    return this.json("POST", `/v1/boxes/${enc(box)}/checkpoints`, name ? { name } : {});
  }
  removeCheckpoint(box: string, name: string): Promise<{ removed: string }> {
    return this.json("DELETE", `/v1/boxes/${enc(box)}/checkpoints/${enc(name)}`);
  }
  rollback(box: string, checkpoint: string): Promise<Box> {
    return this.json("POST", `/v1/boxes/${enc(box)}/rollback`, { checkpoint });
  }
  async ports(box: string): Promise<Port[]> {
    return (await this.json<{ ports: Port[] }>("GET", `/v1/boxes/${enc(box)}/ports`)).ports;
  }
  publishPort(box: string, hostPort: number, boxPort: number, address?: string): Promise<Port> {
    const body: Record<string, unknown> = { host_port: hostPort, box_port: boxPort };
    if (address) body.address = address;
    return this.json("POST", `/v1/boxes/${enc(box)}/ports`, body);
  }
  unpublishPort(box: string, port: Port): Promise<{ removed: number }> {
    const path = `/v1/boxes/${enc(box)}/ports/${port.host_port}?address=${enc(port.address)}`;
    return this.json("DELETE", path);
  }
  policyLog(box: string, after: number): Promise<{ entries: PolicyLogEntry[]; next: number }> {
    return this.json("GET", `/v1/boxes/${enc(box)}/policy/log?after=${after}&limit=500`);
  }
  logs(box: string): Promise<string> {
    return this.text(`/v1/boxes/${enc(box)}/logs`);
  }
  async templates(): Promise<Template[]> {
    return (await this.json<{ templates: Template[] }>("GET", "/v1/templates")).templates;
  }

  // The streaming exec (GET /v1/boxes/{box}/exec/ws, subprotocol hutch.exec.v1). Browsers cannot
  // set headers on a WebSocket, so the key goes as a second subprotocol, hutch.key.KEY; hutchd
  // answers with hutch.exec.v1 only.
  execSocket(box: string): WebSocket {
    const url = this.url(`/v1/boxes/${enc(box)}/exec/ws`);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(url, ["hutch.exec.v1", `hutch.key.${this.key}`]);
    ws.binaryType = "arraybuffer";
    return ws;
  }
}

function enc(segment: string): string {
  return encodeURIComponent(segment);
}

async function errorOf(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => "");
  try {
    const body = JSON.parse(text) as { error?: { code?: string; message?: string } };
    if (body.error?.code && body.error.message) {
      return new ApiError(res.status, body.error.code, body.error.message);
    }
  } catch {
    // not the API's error shape: said below
  }
  return new ApiError(res.status, "internal", `HTTP ${res.status} ${res.statusText} ${text}`.trim());
}

// Where /v1 is, seen from this page: hutchd serves the page at /ui/, so one level up.
export function apiBase(location: Location): URL {
  return new URL("../", new URL(".", location.href));
}
