// A box: its last known state and everything done to it or in it.

import { Client } from "./client.js";
import { type Command, type ExecResult, type ProcessSpec, baseRequest, execResultFromJson, runRequest } from "./exec.js";
import { FailedPreconditionError, InvalidArgumentError, NotFoundError } from "./errors.js";
import { Files } from "./files.js";
import {
  ExecHandle,
  type OutputCallback,
  Pty,
  type PtyOptions,
  type SpawnOptions,
  type StdinInput,
  execStreaming,
} from "./handles.js";
import {
  type BoxInfo,
  type BoxState,
  type BoxStats,
  type Checkpoint,
  type Policy,
  type PolicyInput,
  type PolicyLogEntry,
  type Port,
  type ProcessInfo,
  type ServiceInfo,
  boxInfoFromJson,
  checkpointFromJson,
  policyFromJson,
  policyLogEntryFromJson,
  policyToJson,
  portFromJson,
  processFromJson,
  serviceFromJson,
  statsFromJson,
} from "./models.js";
import { type Signal, signalNumber } from "./signals.js";
import { type Transport, pathOf } from "./transport.js";
import { type Size, sizeToMib } from "./units.js";
import { asObject, num, obj, objects } from "./wire.js";

export interface CreateBoxOptions {
  name?: string;
  /** Default "base". */
  template?: string;
  cpus?: number;
  /** MiB as a number, or "512M", "2G". */
  memory?: Size;
  /** MiB as a number, or "8G"; default the template image's size. */
  disk?: Size;
  /** A preset ("none", "allow-all", "debian-mirrors", "npm", "pypi") or a policy; default deny everything. */
  networkPolicy?: PolicyInput;
  /** Names of secrets (set with client.secrets.set) the box may use. */
  secrets?: string[];
  /** Variables every exec and process in the box gets; forks inherit them. */
  env?: Record<string, string>;
}

/** The body of POST /v1/boxes. */
export function createBoxRequest(options: CreateBoxOptions): Record<string, unknown> {
  const known = new Set(["name", "template", "cpus", "memory", "disk", "networkPolicy", "secrets", "env", "client"]);
  for (const key of Object.keys(options)) {
    if (!known.has(key)) {
      throw new InvalidArgumentError(`Unknown option '${key}' for a box; known: ${[...known].filter((k) => k !== "client").join(", ")}`);
    }
  }
  const body: Record<string, unknown> = {};
  if (options.name !== undefined) body["name"] = options.name;
  if (options.template !== undefined) body["template"] = options.template;
  if (options.cpus !== undefined) {
    if (!Number.isInteger(options.cpus) || options.cpus < 1) throw new InvalidArgumentError(`cpus must be a whole number from 1, got ${options.cpus}`);
    body["cpus"] = options.cpus;
  }
  if (options.memory !== undefined) body["memory_mib"] = sizeToMib(options.memory, "memory");
  if (options.disk !== undefined) body["disk_mib"] = sizeToMib(options.disk, "disk");
  if (options.networkPolicy !== undefined) body["network_policy"] = policyToJson(options.networkPolicy);
  if (options.secrets !== undefined) {
    if (!Array.isArray(options.secrets) || options.secrets.some((s) => typeof s !== "string")) {
      throw new InvalidArgumentError("secrets is an array of secret names");
    }
    body["secrets"] = options.secrets;
  }
  if (options.env !== undefined) {
    if (typeof options.env !== "object" || options.env === null || Array.isArray(options.env)) {
      throw new InvalidArgumentError("env is an object of variable names to values");
    }
    for (const [k, v] of Object.entries(options.env)) {
      if (k === "" || k.includes("=") || k.includes("\0")) throw new InvalidArgumentError(`'${k}' is not an environment variable name`);
      if (typeof v !== "string") throw new InvalidArgumentError(`env.${k} is ${typeof v}, not a string`);
    }
    body["env"] = options.env;
  }
  return body;
}

export interface ExecOptions extends ProcessSpec {
  /** Fed to the command, then EOF: text, bytes, or a stream (a stream goes over the WebSocket). */
  stdin?: StdinInput;
  /** Kill the command (SIGKILL to its process group) when it runs longer; 0: none. */
  timeoutMs?: number;
  /** Output kept per stream (default 1 MiB, at most 64 MiB); the rest is dropped, truncated set. */
  maxOutputBytes?: number;
  /** Output as it comes (the exec then runs over the WebSocket). */
  onStdout?: OutputCallback;
  onStderr?: OutputCallback;
  /** Aborting gives up on the exec (CancelledError). */
  abortSignal?: AbortSignal;
}

export interface ForkOptions {
  count?: number;
  names?: string[];
}

export interface PublishOptions {
  hostPort: number;
  boxPort: number;
  /** The host address (default 127.0.0.1). */
  address?: string;
}

export interface PolicyLog {
  entries: PolicyLogEntry[];
  /** Pass back as `after` to get what follows. */
  next: number;
}

function isPlainInput(stdin: StdinInput | undefined): stdin is string | Uint8Array | undefined {
  return stdin === undefined || typeof stdin === "string" || stdin instanceof Uint8Array;
}

/** Published ports of a box. */
export class Ports {
  /** @internal */
  constructor(
    private readonly transport: Transport,
    private readonly base: () => string,
  ) {}

  /** Makes hostPort on the host reach boxPort in the box (bound at once, also for a stopped box). */
  async publish(options: PublishOptions): Promise<Port> {
    const body: Record<string, unknown> = { host_port: options.hostPort, box_port: options.boxPort };
    if (options.address !== undefined) body["address"] = options.address;
    return this.transport.json({ method: "POST", path: `${this.base()}/ports`, json: body }, portFromJson);
  }

  async list(): Promise<Port[]> {
    return this.transport.json({ method: "GET", path: `${this.base()}/ports` }, (v) =>
      objects(asObject(v, "a port list"), "ports", "a port list").map(portFromJson),
    );
  }

  /** Unpublishes a host port (open connections are closed). */
  async remove(hostPort: number, options: { address?: string } = {}): Promise<void> {
    await this.transport.json(
      { method: "DELETE", path: `${this.base()}${pathOf`/ports/${hostPort}`}`, query: { address: options.address } },
      (v) => asObject(v, "a port removal"),
    );
  }
}

/** The box's egress policy and what it decided. */
export class PolicyApi {
  /** @internal */
  constructor(
    private readonly transport: Transport,
    private readonly base: () => string,
  ) {}

  async get(): Promise<Policy> {
    return this.transport.json({ method: "GET", path: `${this.base()}/policy` }, (v) =>
      policyFromJson(obj(asObject(v, "a box policy"), "policy", "a box policy")),
    );
  }

  /** Replaces the policy (live for a running box). */
  async set(policy: PolicyInput): Promise<Policy> {
    return this.transport.json({ method: "PUT", path: `${this.base()}/policy`, json: { policy: policyToJson(policy) } }, (v) =>
      policyFromJson(obj(asObject(v, "a box policy"), "policy", "a box policy")),
    );
  }

  /** Log entries after line `after` (0: from the start), at most `limit`. */
  async log(options: { after?: number; limit?: number } = {}): Promise<PolicyLog> {
    return this.transport.json(
      { method: "GET", path: `${this.base()}/policy/log`, query: { after: options.after, limit: options.limit } },
      (v) => {
        const o = asObject(v, "a policy log");
        return { entries: objects(o, "entries", "a policy log").map(policyLogEntryFromJson), next: num(o, "next", "a policy log") };
      },
    );
  }
}

/** Detached processes: run in the background, their output in a log file in the box. */
export class Processes {
  /** @internal */
  constructor(
    private readonly box: Box,
    private readonly transport: Transport,
    private readonly base: () => string,
  ) {}

  /** Starts a command detached (stdin /dev/null, output to a log in the box). */
  async start(command: Command, options: ProcessSpec = {}): Promise<ProcessInfo> {
    return this.transport.json(
      { method: "POST", path: `${this.base()}/processes`, json: baseRequest(command, options) },
      processFromJson,
    );
  }

  /** Running ones and the last 100 that ended. */
  async list(): Promise<ProcessInfo[]> {
    return this.transport.json({ method: "GET", path: `${this.base()}/processes` }, (v) =>
      objects(asObject(v, "a process list"), "processes", "a process list").map(processFromJson),
    );
  }

  async get(id: string): Promise<ProcessInfo> {
    const found = (await this.list()).find((p) => p.id === id);
    if (found === undefined) {
      throw new NotFoundError(`No process ${id} in box ${this.box.name}`);
    }
    return found;
  }

  /** Sends a signal (default SIGTERM). */
  async signal(id: string, signal: Signal = "SIGTERM"): Promise<void> {
    await this.transport.json(
      { method: "POST", path: `${this.base()}${pathOf`/processes/${id}/signal`}`, json: { signal: signalNumber(signal) } },
      (v) => asObject(v, "a signal answer"),
    );
  }

  kill(id: string): Promise<void> {
    return this.signal(id, 9);
  }

  /** What the process wrote so far (its log file, read as root with `tail -c +1`). */
  async logs(process: string | ProcessInfo): Promise<string> {
    const info = typeof process === "string" ? await this.get(process) : process;
    const result = await this.box.exec(["tail", "-c", "+1", info.log], { user: "root", maxOutputBytes: 64 * 1024 * 1024 });
    if (result.exitCode !== 0) {
      throw new FailedPreconditionError(`Cannot read ${info.log}: ${result.stderr.trim()}`);
    }
    return result.stdout;
  }
}

export class Box {
  readonly client: Client;
  /** Files without exec. */
  readonly files: Files;
  readonly ports: Ports;
  readonly policy: PolicyApi;
  readonly processes: Processes;
  private current: BoxInfo;

  /** @internal Use Box.create, Box.get or client.boxes. */
  constructor(client: Client, info: BoxInfo) {
    this.client = client;
    this.current = info;
    const base = () => pathOf`/v1/boxes/${this.current.id}`;
    this.files = new Files(client.transport, base);
    this.ports = new Ports(client.transport, base);
    this.policy = new PolicyApi(client.transport, base);
    this.processes = new Processes(this, client.transport, base);
  }

  /** Boots a box and resolves once its guest agent answers. */
  static async create(options: CreateBoxOptions & { client?: Client } = {}): Promise<Box> {
    const client = options.client ?? new Client();
    return client.boxes.create(options);
  }

  /** A box by name, id or unique id prefix. */
  static async get(box: string, options: { client?: Client } = {}): Promise<Box> {
    const client = options.client ?? new Client();
    return client.boxes.get(box);
  }

  static async list(options: { client?: Client } = {}): Promise<Box[]> {
    const client = options.client ?? new Client();
    return client.boxes.list();
  }

  private get transport(): Transport {
    return this.client.transport;
  }

  private get path(): string {
    return pathOf`/v1/boxes/${this.current.id}`;
  }

  /** The box as last seen (refresh() asks again). */
  get info(): BoxInfo {
    return this.current;
  }
  get id(): string {
    return this.current.id;
  }
  get name(): string {
    return this.current.name;
  }
  get state(): BoxState {
    return this.current.state;
  }
  get template(): string {
    return this.current.template;
  }

  toJSON(): BoxInfo {
    return this.current;
  }

  private update(info: BoxInfo): this {
    this.current = info;
    return this;
  }

  async refresh(): Promise<this> {
    return this.update(await this.transport.json({ method: "GET", path: this.path }, boxInfoFromJson));
  }

  /**
   * Runs a command to its end. `command` is an argv, or a string run by /bin/sh -c. Without
   * callbacks and with text or bytes as stdin this is one POST /exec; with onStdout/onStderr or
   * a stream as stdin it runs over the exec WebSocket, output streamed as it comes.
   */
  async exec(command: Command, options: ExecOptions = {}): Promise<ExecResult> {
    if (options.onStdout !== undefined || options.onStderr !== undefined || !isPlainInput(options.stdin)) {
      return execStreaming(this.transport, `${this.path}/exec/ws`, command, options);
    }
    const body = runRequest(command, {
      env: options.env,
      cwd: options.cwd,
      user: options.user,
      stdin: options.stdin as string | Uint8Array | undefined,
      timeoutMs: options.timeoutMs,
      maxOutputBytes: options.maxOutputBytes,
    });
    return this.transport.json({ method: "POST", path: `${this.path}/exec`, json: body, signal: options.abortSignal }, execResultFromJson);
  }

  /** Starts a command with its stdin open; resolves once it runs. */
  spawn(command: Command, options: SpawnOptions = {}): Promise<ExecHandle> {
    return ExecHandle.start(this.transport, `${this.path}/exec/ws`, command, options);
  }

  /** A terminal: the user's login shell (or `command`) on a PTY. */
  pty(options: PtyOptions = {}): Promise<Pty> {
    return Pty.open(this.transport, `${this.path}/exec/ws`, options);
  }

  /** Children that start from this box's memory and disk; resolves once each one's agent answers. */
  async fork(count: number | ForkOptions = 1): Promise<Box[]> {
    const options = typeof count === "number" ? { count } : count;
    const body: Record<string, unknown> = {};
    if (options.count !== undefined) {
      if (!Number.isInteger(options.count) || options.count < 1) throw new InvalidArgumentError(`count must be a whole number from 1, got ${options.count}`);
      body["count"] = options.count;
    }
    if (options.names !== undefined) body["names"] = options.names;
    const infos = await this.transport.json({ method: "POST", path: `${this.path}/fork`, json: body }, (v) =>
      objects(asObject(v, "a fork answer"), "boxes", "a fork answer").map(boxInfoFromJson),
    );
    return infos.map((info) => new Box(this.client, info));
  }

  async checkpoint(name?: string): Promise<Checkpoint> {
    return this.transport.json(
      { method: "POST", path: `${this.path}/checkpoints`, json: name === undefined ? {} : { name } },
      checkpointFromJson,
    );
  }

  /** Oldest first. */
  async checkpoints(): Promise<Checkpoint[]> {
    return this.transport.json({ method: "GET", path: `${this.path}/checkpoints` }, (v) =>
      objects(asObject(v, "a checkpoint list"), "checkpoints", "a checkpoint list").map(checkpointFromJson),
    );
  }

  async removeCheckpoint(name: string): Promise<void> {
    await this.transport.json({ method: "DELETE", path: `${this.path}${pathOf`/checkpoints/${name}`}` }, (v) =>
      asObject(v, "a checkpoint removal"),
    );
  }

  /** Restores the box to a checkpoint; resolves with it running again. */
  async rollback(checkpoint: string): Promise<this> {
    return this.update(
      await this.transport.json({ method: "POST", path: `${this.path}/rollback`, json: { checkpoint } }, boxInfoFromJson),
    );
  }

  /**
   * Suspends the box: its memory and processes are kept on disk and start() resumes them. With
   * shutdown the guest powers off cleanly instead (the disk is kept).
   */
  async stop(options: { shutdown?: boolean } = {}): Promise<this> {
    return this.update(
      await this.transport.json(
        { method: "POST", path: `${this.path}/stop`, query: { shutdown: options.shutdown ? "true" : undefined } },
        boxInfoFromJson,
      ),
    );
  }

  /** Resumes a suspended box (every process as it was); boots a stopped (or failed) one from its own disk. */
  async start(): Promise<this> {
    return this.update(await this.transport.json({ method: "POST", path: `${this.path}/start` }, boxInfoFromJson));
  }

  /** Removes the box; a running one needs force. */
  async remove(options: { force?: boolean } = {}): Promise<void> {
    await this.transport.json(
      { method: "DELETE", path: this.path, query: { force: options.force ? "true" : undefined } },
      (v) => asObject(v, "a box removal"),
    );
  }

  /** The box's serial console. */
  async logs(): Promise<string> {
    return this.transport.text({ method: "GET", path: `${this.path}/logs`, accept: "text/plain" });
  }

  /** What the box's VMM uses of the host (a running box). */
  async stats(): Promise<BoxStats> {
    return this.transport.json({ method: "GET", path: `${this.path}/stats` }, statsFromJson);
  }

  /** The image's supervised services. */
  async services(): Promise<ServiceInfo[]> {
    return this.transport.json({ method: "GET", path: `${this.path}/services` }, (v) =>
      objects(asObject(v, "a service list"), "services", "a service list").map(serviceFromJson),
    );
  }
}
