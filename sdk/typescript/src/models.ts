// The API's objects (docs/api.md) as TypeScript interfaces with camelCase fields, and the
// functions that read them from hutchd's snake_case JSON. Maps whose keys are the user's
// (env, io_weights) are kept as they are.

import {
  type JsonObject,
  asObject,
  bigNs,
  bool,
  num,
  numberMap,
  numbers,
  obj,
  objects,
  optNum,
  str,
  stringMap,
  strings,
} from "./wire.js";

/** paused: idle, woken by the next call; suspended: memory kept on disk (stop), resumed by start. */
export type BoxState = "creating" | "running" | "paused" | "stopping" | "suspended" | "stopped" | "failed";

export interface BoxInfo {
  id: string;
  name: string;
  template: string;
  cpus: number;
  memoryMib: number;
  /** 0: the template image's size. */
  diskMib: number;
  state: BoxState;
  /** Why a box failed. */
  reason: string;
  accel: string;
  /** The VMM's pid while the box runs, else 0. */
  pid: number;
  /** How it last started ("restored from template snapshot ...", "cold boot: ..."). */
  boot: string;
  /** Names of the secrets the box may use. */
  secrets: string[];
  /** Variables every exec and process in the box gets. */
  env: Record<string, string>;
  /** The key's name that made it; "" for the host administrator. */
  owner: string;
  /** Unix seconds. */
  createdAt: number;
  updatedAt: number;
  /** Commands running longer are killed (0: no limit; detached processes are not limited). */
  maxExecMs: number;
  /** Paused after this long without work (-1: the daemon's default, 0: never). */
  idlePauseMs: number;
  /** When its lifetime ends, unix seconds (0: never); then onTimeout happens. */
  expiresAt: number;
  /** "" when it has no lifetime. */
  onTimeout: BoxExpiry;
  /** Host folders shared into it. */
  shares: BoxShare[];
}

/** What happens to a box when its lifetime ends ("" when it has none). */
export type BoxExpiry = "" | "stop" | "suspend" | "remove";

/** A host folder shared into a box (hutch run -v HOSTDIR:BOXDIR[:ro]). */
export interface BoxShare {
  hostDir: string;
  boxDir: string;
  readOnly: boolean;
}

export function boxInfoFromJson(value: unknown): BoxInfo {
  const o = asObject(value, "a box");
  const w = "a box";
  return {
    id: str(o, "id", w),
    name: str(o, "name", w),
    template: str(o, "template", w),
    cpus: num(o, "cpus", w),
    memoryMib: num(o, "memory_mib", w),
    diskMib: num(o, "disk_mib", w),
    state: str(o, "state", w) as BoxState,
    reason: str(o, "reason", w),
    accel: str(o, "accel", w),
    pid: num(o, "pid", w),
    boot: str(o, "boot", w),
    secrets: strings(o, "secrets", w),
    env: stringMap(o, "env", w),
    owner: str(o, "owner", w),
    createdAt: num(o, "created_at", w),
    updatedAt: num(o, "updated_at", w),
    maxExecMs: num(o, "max_exec_ms", w),
    idlePauseMs: num(o, "idle_pause_ms", w, -1),
    expiresAt: num(o, "expires_at", w),
    onTimeout: str(o, "on_timeout", w) as BoxExpiry,
    shares: objects(o, "shares", w).map((s) => ({
      hostDir: str(s, "host_dir", "a box's share"),
      boxDir: str(s, "box_dir", "a box's share"),
      readOnly: bool(s, "read_only", "a box's share"),
    })),
  };
}

export interface Checkpoint {
  id: string;
  kind: string;
  boxId: string;
  name: string;
  sizeBytes: number;
  createdAt: number;
}

export function checkpointFromJson(value: unknown): Checkpoint {
  const o = asObject(value, "a checkpoint");
  const w = "a checkpoint";
  return {
    id: str(o, "id", w),
    kind: str(o, "kind", w),
    boxId: str(o, "box_id", w),
    name: str(o, "name", w),
    sizeBytes: num(o, "size_bytes", w),
    createdAt: num(o, "created_at", w),
  };
}

export interface Port {
  boxId: string;
  address: string;
  hostPort: number;
  boxPort: number;
  /** hutchd has the host endpoint open (the box runs). */
  listening: boolean;
  /** Why a running box's port is not listening. */
  error: string;
  connections: number;
  accepted: number;
  createdAt: number;
}

export function portFromJson(value: unknown): Port {
  const o = asObject(value, "a port");
  const w = "a port";
  return {
    boxId: str(o, "box_id", w),
    address: str(o, "address", w),
    hostPort: num(o, "host_port", w),
    boxPort: num(o, "box_port", w),
    listening: bool(o, "listening", w),
    error: str(o, "error", w),
    connections: num(o, "connections", w),
    accepted: num(o, "accepted", w),
    createdAt: num(o, "created_at", w),
  };
}

export interface ProcessInfo {
  id: string;
  pid: number;
  argv: string[];
  user: string;
  /** Nanoseconds since the epoch (as a bigint: it does not fit a double). */
  startedNs: bigint;
  running: boolean;
  /** Its stdout and stderr, a file in the box. */
  log: string;
  /** Once it ended: its exit code, or the signal that killed it. */
  exitCode: number | null;
  signal: number | null;
}

export function processFromJson(value: unknown): ProcessInfo {
  const o = asObject(value, "a process");
  const w = "a process";
  return {
    id: str(o, "id", w),
    pid: num(o, "pid", w),
    argv: strings(o, "argv", w),
    user: str(o, "user", w),
    startedNs: bigNs(o, "started_ns", w),
    running: bool(o, "running", w),
    log: str(o, "log", w),
    exitCode: optNum(o, "code", w),
    signal: optNum(o, "signal", w),
  };
}

export interface ServiceInfo {
  name: string;
  state: string;
  pid: number;
  restarts: number;
  startedNs: bigint;
  lastExit: { exitCode: number | null; signal: number | null } | null;
  error: string;
  log: string;
}

export function serviceFromJson(value: unknown): ServiceInfo {
  const o = asObject(value, "a service");
  const w = "a service";
  const last = o["last_exit"] === undefined || o["last_exit"] === null ? null : obj(o, "last_exit", w);
  return {
    name: str(o, "name", w),
    state: str(o, "state", w),
    pid: num(o, "pid", w),
    restarts: num(o, "restarts", w),
    startedNs: bigNs(o, "started_ns", w),
    lastExit: last === null ? null : { exitCode: optNum(last, "code", w), signal: optNum(last, "signal", w) },
    error: str(o, "error", w),
    log: str(o, "log", w),
  };
}

export interface Template {
  name: string;
  /** "recipe", "box", "image" (a registry or an archive) or "build" (a Dockerfile). */
  source: "recipe" | "box" | "image" | "build" | string;
  sourceBox: string;
  dir: string;
  imageKey: string;
  kernelVersion: string;
  created: string;
  diskBytes: number;
  /** Names of the boxes made from it. */
  usedBy: string[];
  /** For source "image": which image, pinned by digest. */
  image?: TemplateImage;
  /** For source "build": its base and cache key. */
  build?: TemplateBuild;
  /** The start command and ready check its snapshot runs, when it has them. */
  start?: TemplateStart;
  /** What the image's config (or the Dockerfile) gives its boxes: ENV, USER, WORKDIR, ... */
  defaults?: TemplateDefaults;
  /** PID 1 when it is not hutch-agent: the image's systemd (made with `systemd: true`). */
  init?: string;
}

export interface TemplateImage {
  /** The reference pulled, or the image's name in its archive ("" when it had none). */
  ref: string;
  /** "docker-archive" or "oci-archive" for an uploaded archive, "" for a pull. */
  archive: string;
  digest: string;
  configDigest: string;
  platform: string;
  layers: number;
  /** The layers' unpacked size. */
  bytes: number;
}

export interface TemplateBuild {
  /** The cache key of its last step. */
  key: string;
  baseTemplate: string;
  /** The Dockerfile's FROM when it named an image ("" for a template base). */
  baseImage: string;
  steps: number;
  /** Steps that came from the build cache. */
  cachedSteps: number;
}

export interface TemplateStart {
  cmd: string;
  ready: string;
}

export interface TemplateDefaults {
  env: string[];
  workdir: string;
  user: string;
  entrypoint: string[];
  cmd: string[];
  exposedPorts: string[];
  labels: Record<string, string>;
  stopSignal: string;
}

export function templateFromJson(value: unknown): Template {
  const o = asObject(value, "a template");
  const w = "a template";
  const t: Template = {
    name: str(o, "name", w),
    source: str(o, "source", w),
    sourceBox: str(o, "source_box", w),
    dir: str(o, "dir", w),
    imageKey: str(o, "image_key", w),
    kernelVersion: str(o, "kernel_version", w),
    created: str(o, "created", w),
    diskBytes: num(o, "disk_bytes", w),
    usedBy: strings(o, "used_by", w),
  };
  if (o["image"] !== undefined && o["image"] !== null) {
    const i = obj(o, "image", w);
    const wi = "a template's image";
    t.image = {
      ref: str(i, "ref", wi),
      archive: str(i, "archive", wi),
      digest: str(i, "digest", wi),
      configDigest: str(i, "config_digest", wi),
      platform: str(i, "platform", wi),
      layers: num(i, "layers", wi),
      bytes: num(i, "bytes", wi),
    };
  }
  if (o["build"] !== undefined && o["build"] !== null) {
    const b = obj(o, "build", w);
    const wb = "a template's build";
    t.build = {
      key: str(b, "key", wb),
      baseTemplate: str(b, "base_template", wb),
      baseImage: str(b, "base_image", wb),
      steps: num(b, "steps", wb),
      cachedSteps: num(b, "cached_steps", wb),
    };
  }
  if (o["start"] !== undefined && o["start"] !== null) {
    const s = obj(o, "start", w);
    t.start = { cmd: str(s, "cmd", "a template's start"), ready: str(s, "ready", "a template's start") };
  }
  if (o["defaults"] !== undefined && o["defaults"] !== null) {
    const d = obj(o, "defaults", w);
    const wd = "a template's defaults";
    t.defaults = {
      env: strings(d, "env", wd),
      workdir: str(d, "workdir", wd),
      user: str(d, "user", wd),
      entrypoint: strings(d, "entrypoint", wd),
      cmd: strings(d, "cmd", wd),
      exposedPorts: strings(d, "exposed_ports", wd),
      labels: stringMap(d, "labels", wd),
      stopSignal: str(d, "stop_signal", wd),
    };
  }
  if (o["init"] !== undefined && o["init"] !== null) t.init = str(o, "init", w);
  return t;
}

export interface Secret {
  name: string;
  domains: string[];
  header: string;
  format: string;
  updatedAt: number;
}

export function secretFromJson(value: unknown): Secret {
  const o = asObject(value, "a secret");
  const w = "a secret";
  return {
    name: str(o, "name", w),
    domains: strings(o, "domains", w),
    header: str(o, "header", w),
    format: str(o, "format", w),
    updatedAt: num(o, "updated_at", w),
  };
}

/** A registry hutchd pulls images from with credentials it keeps (never the password). */
export interface RegistryLogin {
  /** host[:port], or "docker.io". */
  registry: string;
  username: string;
}

export function registryLoginFromJson(value: unknown): RegistryLogin {
  const o = asObject(value, "a registry login");
  const w = "a registry login";
  return { registry: str(o, "registry", w), username: str(o, "username", w) };
}

export interface Limits {
  /** 0 means no limit. */
  maxBoxes: number;
  maxCpus: number;
  maxMemoryMib: number;
  maxDiskMib: number;
}

export interface ApiKey extends Limits {
  name: string;
  id: string;
  admin: boolean;
  createdAt: number;
  lastUsedAt: number;
  /** The secret itself: only in the answer that made the key. */
  key?: string;
}

function limitsFromJson(o: JsonObject, w: string): Limits {
  return {
    maxBoxes: num(o, "max_boxes", w),
    maxCpus: num(o, "max_cpus", w),
    maxMemoryMib: num(o, "max_memory_mib", w),
    maxDiskMib: num(o, "max_disk_mib", w),
  };
}

export function keyFromJson(value: unknown): ApiKey {
  const o = asObject(value, "a key");
  const w = "a key";
  const key: ApiKey = {
    name: str(o, "name", w),
    id: str(o, "id", w),
    admin: bool(o, "admin", w),
    ...limitsFromJson(o, w),
    createdAt: num(o, "created_at", w),
    lastUsedAt: num(o, "last_used_at", w),
  };
  if (typeof o["key"] === "string") key.key = o["key"];
  return key;
}

export interface Caller extends Limits {
  /** The key's name; "" for the host administrator (unix socket). */
  name: string;
  admin: boolean;
}

export interface Info {
  version: string;
  backend: string;
  stateDir: string;
  accel: { name: string; reason: string };
  /** When a TLS listener runs: its certificate's SHA-256, colon-separated hex. */
  tls: { fingerprintSha256: string } | null;
  listeners: string[];
  caller: Caller | null;
}

export function infoFromJson(value: unknown): Info {
  const o = asObject(value, "the daemon's info");
  const w = "the daemon's info";
  const accel = obj(o, "accel", w);
  const tls = o["tls"] === undefined || o["tls"] === null ? null : obj(o, "tls", w);
  const caller = o["caller"] === undefined || o["caller"] === null ? null : obj(o, "caller", w);
  return {
    version: str(o, "version", w),
    backend: str(o, "backend", w),
    stateDir: str(o, "state_dir", w),
    accel: { name: str(accel, "name", w), reason: str(accel, "reason", w) },
    tls: tls === null ? null : { fingerprintSha256: str(tls, "fingerprint_sha256", w) },
    listeners: strings(o, "listeners", w),
    caller:
      caller === null
        ? null
        : { name: str(caller, "name", w), admin: bool(caller, "admin", w), ...limitsFromJson(caller, w) },
  };
}

export interface BoxStats {
  id: string;
  name: string;
  uid: number;
  memory: { bytes: number; peakBytes: number; maxBytes: number };
  cpuNs: number;
  pids: { current: number; max: number };
  oomKills: number;
  ioWeights: Record<string, number>;
}

export function statsFromJson(value: unknown): BoxStats {
  const o = asObject(value, "box stats");
  const w = "box stats";
  const memory = obj(o, "memory", w);
  const pids = obj(o, "pids", w);
  return {
    id: str(o, "id", w),
    name: str(o, "name", w),
    uid: num(o, "uid", w),
    memory: {
      bytes: num(memory, "bytes", w),
      peakBytes: num(memory, "peak_bytes", w),
      maxBytes: num(memory, "max_bytes", w),
    },
    cpuNs: num(o, "cpu_ns", w),
    pids: { current: num(pids, "current", w), max: num(pids, "max", w) },
    oomKills: num(o, "oom_kills", w),
    ioWeights: numberMap(o, "io_weights", w),
  };
}

export interface PolicyRule {
  /** "api.example.com", "*.example.com" or "*". */
  domain: string;
  ports?: number[];
}

export interface Policy {
  allow: PolicyRule[];
  deny: PolicyRule[];
  /** Private networks (CIDR) the proxy may connect to for allowed names. */
  allowPrivate?: string[];
}

/** A preset name or a policy. */
export type PolicyInput = "none" | "allow-all" | "debian-mirrors" | "npm" | "pypi" | Policy;

function ruleFromJson(o: JsonObject): PolicyRule {
  const rule: PolicyRule = { domain: str(o, "domain", "a policy rule") };
  if (o["ports"] !== undefined) rule.ports = numbers(o, "ports", "a policy rule");
  return rule;
}

export function policyFromJson(value: unknown): Policy {
  const o = asObject(value, "a policy");
  const policy: Policy = {
    allow: objects(o, "allow", "a policy").map(ruleFromJson),
    deny: objects(o, "deny", "a policy").map(ruleFromJson),
  };
  if (o["allow_private"] !== undefined) policy.allowPrivate = strings(o, "allow_private", "a policy");
  return policy;
}

export function policyToJson(policy: PolicyInput): unknown {
  if (typeof policy === "string") return policy;
  const rule = (r: PolicyRule) => (r.ports === undefined ? { domain: r.domain } : { domain: r.domain, ports: r.ports });
  const out: JsonObject = { allow: (policy.allow ?? []).map(rule), deny: (policy.deny ?? []).map(rule) };
  if (policy.allowPrivate !== undefined) out["allow_private"] = policy.allowPrivate;
  return out;
}

export interface PolicyLogEntry {
  box: string;
  timeMs: number;
  proto: string;
  host: string;
  port: number;
  address: string;
  decision: "allow" | "deny" | string;
  reason: string;
  bytesUp: number;
  bytesDown: number;
  secrets: string[];
}

export function policyLogEntryFromJson(value: unknown): PolicyLogEntry {
  const o = asObject(value, "a policy log entry");
  const w = "a policy log entry";
  return {
    box: str(o, "box", w),
    timeMs: num(o, "time_ms", w),
    proto: str(o, "proto", w),
    host: str(o, "host", w),
    port: num(o, "port", w),
    address: str(o, "address", w),
    decision: str(o, "decision", w),
    reason: str(o, "reason", w),
    bytesUp: num(o, "bytes_up", w),
    bytesDown: num(o, "bytes_down", w),
    secrets: strings(o, "secrets", w),
  };
}

export type FileType = "file" | "dir" | "symlink" | "other";

export interface FileInfo {
  name: string;
  path: string;
  type: FileType;
  size: number;
  /** Permission bits (and setuid, setgid, sticky), e.g. 0o644. */
  mode: number;
  /** "-rw-r--r--". */
  permissions: string;
  uid: number;
  gid: number;
  owner: string;
  group: string;
  /** Nanoseconds since the epoch, exact. */
  mtimeNs: bigint;
  /** The same, as a Date (millisecond precision). */
  mtime: Date;
  symlinkTarget: string;
}

export function fileInfoFromJson(value: unknown): FileInfo {
  const o = asObject(value, "a file");
  const w = "a file";
  const mtimeNs = bigNs(o, "mtime_ns", w);
  return {
    name: str(o, "name", w),
    path: str(o, "path", w),
    type: str(o, "type", w) as FileType,
    size: num(o, "size", w),
    mode: num(o, "mode", w),
    permissions: str(o, "permissions", w),
    uid: num(o, "uid", w),
    gid: num(o, "gid", w),
    owner: str(o, "owner", w),
    group: str(o, "group", w),
    mtimeNs,
    mtime: new Date(Number(mtimeNs / 1_000_000n)),
    symlinkTarget: str(o, "symlink_target", w),
  };
}

export interface DiskUsageLine {
  count: number;
  bytes: number;
}

export interface DiskUsage {
  templates: DiskUsageLine;
  templateSnapshots: DiskUsageLine;
  checkpoints: DiskUsageLine;
  layers: DiskUsageLine;
  boxes: DiskUsageLine;
}

export function diskUsageFromJson(value: unknown): DiskUsage {
  const o = asObject(value, "disk usage");
  const line = (key: string): DiskUsageLine => {
    const l = obj(o, key, "disk usage");
    return { count: num(l, "count", "disk usage"), bytes: num(l, "bytes", "disk usage") };
  };
  return {
    templates: line("templates"),
    templateSnapshots: line("template_snapshots"),
    checkpoints: line("checkpoints"),
    layers: line("layers"),
    boxes: line("boxes"),
  };
}

export interface PoolStatus {
  template: string;
  cpus: number;
  memoryMib: number;
  ready: number;
  size: number;
  filling: boolean;
}

export function poolFromJson(value: unknown): PoolStatus {
  const o = asObject(value, "a pool");
  const w = "a pool";
  return {
    template: str(o, "template", w),
    cpus: num(o, "cpus", w),
    memoryMib: num(o, "memory_mib", w),
    ready: num(o, "ready", w),
    size: num(o, "size", w),
    filling: bool(o, "filling", w),
  };
}
