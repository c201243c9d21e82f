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
  max_exec_ms: number;
  idle_pause_ms: number;
  expires_at: number;
  on_timeout: "" | "stop" | "suspend" | "remove";
  shares?: Share[];
  created_at: number;
  updated_at: number;
}

export interface Share {
  host_dir: string;
  box_dir: string;
  read_only?: boolean;
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
  // recipe, box, image (a registry or an archive) or build (a Dockerfile)
  source: string;
  source_box: string;
  image_key: string;
  kernel_version: string;
  disk_bytes: number;
  created: string;
  // dir and used_by: for the host administrator and admin keys only
  dir?: string;
  used_by?: string[];
  image?: {
    ref: string;
    archive?: string;
    digest: string;
    config_digest: string;
    platform: string;
    layers: number;
    bytes: number;
  };
  build?: { key: string; base_template: string; base_image: string; steps: number; cached_steps: number };
  start?: { cmd: string; ready: string };
  // PID 1 when it is not hutch-agent: the image's systemd (template create --systemd)
  init?: string;
  defaults?: {
    env: string[];
    workdir: string;
    user: string;
    entrypoint: string[];
    cmd: string[];
    exposed_ports: string[];
    labels: Record<string, string>;
    stop_signal: string;
  };
}

export interface Info {
  version: string;
  backend: string;
  state_dir?: string;
  accel: { name: string; reason: string };
  tls?: { fingerprint_sha256: string } | null;
  caller?: {
    name: string;
    admin: boolean;
    max_boxes?: number;
    max_cpus?: number;
    max_memory_mib?: number;
    max_disk_mib?: number;
  };
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
  removeTemplate(name: string): Promise<{ removed: string }> {
    return this.json("DELETE", `/v1/templates/${enc(name)}`);
  }

  // POST /v1/templates {"name", "from_image"}: an image pulled from a registry (admin only).
  // `onProgress` gets each line of the pull's log as hutchd streams it (NDJSON).
  createTemplateFromImage(
    name: string,
    image: string,
    onProgress: (line: string) => void,
    signal?: AbortSignal,
    systemd = false,
  ): Promise<Template> {
    const body = JSON.stringify(systemd ? { name, from_image: image, systemd } : { name, from_image: image });
    return this.templateStream("/v1/templates", "application/json", body, onProgress, signal);
  }

  // POST /v1/builds: a Dockerfile without a context (its text is the only file of the tar).
  buildTemplate(
    name: string,
    dockerfile: string,
    onProgress: (line: string) => void,
    signal?: AbortSignal,
  ): Promise<Template> {
    const path = `/v1/builds?name=${enc(name)}&dockerfile=Dockerfile`;
    const tar = singleFileTar("Dockerfile", new TextEncoder().encode(dockerfile));
    return this.templateStream(path, "application/x-tar", tar, onProgress, signal);
  }

  // A template creation answered as NDJSON: {"progress"}... then {"template"} or {"error"}.
  private async templateStream(
    path: string,
    contentType: string,
    body: BodyInit,
    onProgress: (line: string) => void,
    signal?: AbortSignal,
  ): Promise<Template> {
    const headers = {
      Authorization: `Bearer ${this.key}`,
      "Content-Type": contentType,
      Accept: "application/x-ndjson",
    };
    let res: Response;
    try {
      res = await fetch(this.url(path), { method: "POST", headers, body, cache: "no-store", signal });
    } catch (e) {
      if (signal?.aborted) throw new ApiError(0, "cancelled", "Cancelled");
      throw new ApiError(0, "unavailable", `hutchd cannot be reached (${String(e)})`);
    }
    if (!res.ok) throw await errorOf(res);
    if (!(res.headers.get("Content-Type") ?? "").includes("ndjson") || !res.body) {
      return (await res.json()) as Template;
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = "";
    for (;;) {
      let chunk: ReadableStreamReadResult<string>;
      try {
        chunk = await reader.read();
      } catch (e) {
        if (signal?.aborted) throw new ApiError(0, "cancelled", "Cancelled");
        throw new ApiError(0, "unavailable", `The connection to hutchd broke (${String(e)})`);
      }
      if (chunk.value) buffered += chunk.value;
      let nl: number;
      while ((nl = buffered.indexOf("\n")) >= 0 || (chunk.done && buffered.trim() !== "")) {
        const line = (nl >= 0 ? buffered.slice(0, nl) : buffered).trim();
        buffered = nl >= 0 ? buffered.slice(nl + 1) : "";
        if (line === "") continue;
        const event = JSON.parse(line) as {
          progress?: string;
          template?: Template;
          error?: { code?: string; message?: string };
        };
        if (typeof event.progress === "string") onProgress(event.progress);
        else if (event.template) return event.template;
        else if (event.error) {
          throw new ApiError(200, event.error.code ?? "internal", event.error.message ?? "The template was not made");
        }
      }
      if (chunk.done) break;
    }
    throw new ApiError(0, "unavailable", "hutchd closed the stream before the template was made");
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

// A tar (ustar) holding one regular file: what POST /v1/builds takes as the build context.
export function singleFileTar(name: string, data: Uint8Array): Uint8Array<ArrayBuffer> {
  const header = new Uint8Array(512);
  const put = (text: string, at: number, len: number) => {
    const bytes = new TextEncoder().encode(text);
    header.set(bytes.subarray(0, len), at);
  };
  const octal = (n: number, len: number) => n.toString(8).padStart(len - 1, "0");
  put(name, 0, 100);
  put(octal(0o644, 8), 100, 8);
  put(octal(0, 8), 108, 8); // uid
  put(octal(0, 8), 116, 8); // gid
  put(octal(data.length, 12), 124, 12);
  put(octal(Math.floor(Date.now() / 1000), 12), 136, 12);
  put("        ", 148, 8); // the checksum field counts as spaces
  put("0", 156, 1); // a regular file
  put("ustar\0", 257, 6);
  put("00", 263, 2);
  let sum = 0;
  for (const b of header) sum += b;
  put(`${octal(sum, 7)}\0 `, 148, 8);
  const padded = Math.ceil(data.length / 512) * 512;
  const out = new Uint8Array(512 + padded + 1024);
  out.set(header, 0);
  out.set(data, 512);
  return out;
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
