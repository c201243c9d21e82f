// Exec requests and results: argv, env and stdin checked and put in the API's shape, and the
// answer of POST /v1/boxes/{box}/exec read back (base64 streams decoded).

import { InvalidArgumentError } from "./errors.js";
import { type JsonObject, asObject, bool, num, optNum, str } from "./wire.js";

/** An argv (run as is, argv[0] looked up in PATH) or a shell command line (run by /bin/sh -c). */
export type Command = string | readonly string[];

export interface ExecError {
  code: string;
  message: string;
}

export interface ExecResult {
  /** stdout as UTF-8 text (invalid bytes become U+FFFD; `stdoutBytes` has them exactly). */
  stdout: string;
  stderr: string;
  stdoutBytes: Uint8Array;
  stderrBytes: Uint8Array;
  /** Exactly one of exitCode and signal is set. */
  exitCode: number | null;
  signal: number | null;
  durationMs: number;
  /** Output passed maxOutputBytes on a stream and the rest was dropped. */
  truncated: boolean;
  /** timeoutMs passed and the command was killed. */
  timedOut: boolean;
  pid: number;
  /** Why the command could not be started (exitCode is then 127 or 126). */
  error: ExecError | null;
}

export function toArgv(command: Command): string[] {
  if (typeof command === "string") {
    if (command.trim() === "") throw new InvalidArgumentError("The command is empty");
    checkNoNul(command, "The command");
    return ["/bin/sh", "-c", command];
  }
  if (!Array.isArray(command) || command.length === 0) {
    throw new InvalidArgumentError("The command is an argv (a non-empty array of strings) or a shell command line (a string)");
  }
  return command.map((arg, i) => {
    if (typeof arg !== "string") throw new InvalidArgumentError(`argv[${i}] is ${typeof arg}, not a string`);
    checkNoNul(arg, `argv[${i}]`);
    return arg;
  });
}

function checkNoNul(text: string, what: string): void {
  if (text.includes("\0")) throw new InvalidArgumentError(`${what} contains a NUL byte`);
}

/** {K: V} to the API's ["K=V", ...], refusing names that cannot be variables. */
export function toEnvList(env: Record<string, string> | undefined): string[] | undefined {
  if (env === undefined) return undefined;
  if (typeof env !== "object" || env === null || Array.isArray(env)) {
    throw new InvalidArgumentError("env is an object of variable names to values");
  }
  return Object.entries(env).map(([k, v]) => {
    if (k === "" || k.includes("=") || k.includes("\0")) {
      throw new InvalidArgumentError(`'${k}' is not an environment variable name (empty, or has '=' or NUL)`);
    }
    if (typeof v !== "string") {
      throw new InvalidArgumentError(`env.${k} is ${typeof v}, not a string`);
    }
    checkNoNul(v, `env.${k}`);
    return `${k}=${v}`;
  });
}

export interface ProcessSpec {
  env?: Record<string, string>;
  cwd?: string;
  user?: string;
}

/** The fields every exec form shares. */
export function baseRequest(command: Command, spec: ProcessSpec): JsonObject {
  return { argv: toArgv(command), ...specFields(spec) };
}

/** env, cwd and user in the API's shape (left out when not given). */
export function specFields(spec: ProcessSpec): JsonObject {
  const request: JsonObject = {};
  const env = toEnvList(spec.env);
  if (env !== undefined && env.length > 0) request["env"] = env;
  if (spec.cwd !== undefined && spec.cwd !== "") request["cwd"] = spec.cwd;
  if (spec.user !== undefined && spec.user !== "") request["user"] = spec.user;
  return request;
}

export interface RunSpec extends ProcessSpec {
  stdin?: string | Uint8Array;
  timeoutMs?: number;
  maxOutputBytes?: number;
}

function checkCount(value: number | undefined, what: string, max?: number): void {
  if (value === undefined) return;
  if (!Number.isSafeInteger(value) || value < 0 || (max !== undefined && value > max)) {
    throw new InvalidArgumentError(`${what} must be a whole number from 0${max === undefined ? "" : ` to ${max}`}, got ${value}`);
  }
}

export const maxOutputLimit = 64 * 1024 * 1024;
export const defaultMaxOutput = 1024 * 1024;

/** The ExecRun body of POST /v1/boxes/{box}/exec. */
export function runRequest(command: Command, spec: RunSpec): JsonObject {
  const request = baseRequest(command, spec);
  if (typeof spec.stdin === "string") {
    request["stdin"] = spec.stdin;
  } else if (spec.stdin instanceof Uint8Array) {
    request["stdin_base64"] = Buffer.from(spec.stdin.buffer, spec.stdin.byteOffset, spec.stdin.byteLength).toString("base64");
  } else if (spec.stdin !== undefined) {
    throw new InvalidArgumentError("stdin is a string, a Uint8Array, or (for a stream) a readable stream");
  }
  checkCount(spec.timeoutMs, "timeoutMs");
  checkCount(spec.maxOutputBytes, "maxOutputBytes", maxOutputLimit);
  if (spec.timeoutMs !== undefined && spec.timeoutMs > 0) request["timeout_ms"] = spec.timeoutMs;
  if (spec.maxOutputBytes !== undefined) request["max_output_bytes"] = spec.maxOutputBytes;
  return request;
}

const utf8 = new TextDecoder("utf-8");

function decodeStream(o: JsonObject, key: string): Uint8Array {
  const text = str(o, key, "an exec result");
  const encoding = str(o, `${key}_encoding`, "an exec result", "utf-8").toLowerCase();
  if (encoding === "base64") return new Uint8Array(Buffer.from(text, "base64"));
  return new Uint8Array(Buffer.from(text, "utf8"));
}

/** Reads ExecResult from the JSON answer. */
export function execResultFromJson(value: unknown): ExecResult {
  const o = asObject(value, "an exec result");
  const w = "an exec result";
  const stdoutBytes = decodeStream(o, "stdout");
  const stderrBytes = decodeStream(o, "stderr");
  const error = o["error"] === undefined || o["error"] === null ? null : asObject(o["error"], "an exec result's error");
  return {
    stdout: utf8.decode(stdoutBytes),
    stderr: utf8.decode(stderrBytes),
    stdoutBytes,
    stderrBytes,
    exitCode: optNum(o, "exit_code", w),
    signal: optNum(o, "signal", w),
    durationMs: num(o, "duration_ms", w),
    truncated: bool(o, "truncated", w),
    timedOut: bool(o, "timed_out", w),
    pid: num(o, "pid", w),
    error: error === null ? null : { code: str(error, "code", w), message: str(error, "message", w) },
  };
}

/** Output kept for an ExecResult: at most `limit` bytes per stream, the rest counted as dropped. */
export class OutputCollector {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  truncated = false;

  constructor(private readonly limit: number) {}

  add(data: Uint8Array): void {
    const room = this.limit - this.size;
    if (data.byteLength > room) {
      this.truncated = true;
      if (room > 0) {
        this.chunks.push(Buffer.from(data.subarray(0, room)));
        this.size += room;
      }
      return;
    }
    this.chunks.push(Buffer.from(data));
    this.size += data.byteLength;
  }

  bytes(): Uint8Array {
    return new Uint8Array(Buffer.concat(this.chunks));
  }
}

export function decodeUtf8(bytes: Uint8Array): string {
  return utf8.decode(bytes);
}
