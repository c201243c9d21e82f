// What runs over the exec WebSocket: a command run to its end with streamed output (exec with
// callbacks or a stream as stdin), a running command with a writable stdin (spawn), and a
// terminal (pty).

import { Readable, Writable } from "node:stream";

import {
  type Command,
  type ExecResult,
  OutputCollector,
  type ProcessSpec,
  baseRequest,
  defaultMaxOutput,
  specFields,
  decodeUtf8,
  maxOutputLimit,
} from "./exec.js";
import { type HutchError, InvalidArgumentError } from "./errors.js";
import { type Signal, signalNumber } from "./signals.js";
import type { Transport } from "./transport.js";
import { type Exit, type Outcome, type OutputHandler, WsSession } from "./ws_exec.js";

/**
 * Called with each chunk of output: as text (characters split between chunks are joined) and as
 * the exact bytes. If it returns a promise, no more output is read until it settles.
 */
export type OutputCallback = (text: string, bytes: Uint8Array) => unknown;

export type StdinInput = string | Uint8Array | NodeJS.ReadableStream | AsyncIterable<Uint8Array | string>;

export interface StreamOptions extends ProcessSpec {
  onStdout?: OutputCallback;
  onStderr?: OutputCallback;
  /** Kill the command (SIGKILL) when it runs longer; the result says timedOut. 0: none. */
  timeoutMs?: number;
  /** Output kept in the result per stream (default 1 MiB); the callbacks get all of it. */
  maxOutputBytes?: number;
  /** Aborting closes the session, which kills the command; the call rejects with CancelledError. */
  abortSignal?: AbortSignal;
}

function toCallback(cb: OutputCallback | undefined): OutputHandler | undefined {
  if (cb === undefined) return undefined;
  const decoder = new TextDecoder("utf-8");
  return (bytes) => cb(decoder.decode(bytes, { stream: true }), bytes);
}

function checkLimits(options: StreamOptions): number {
  const limit = options.maxOutputBytes ?? defaultMaxOutput;
  if (!Number.isSafeInteger(limit) || limit < 0 || limit > maxOutputLimit) {
    throw new InvalidArgumentError(`maxOutputBytes must be 0 to ${maxOutputLimit}, got ${limit}`);
  }
  const timeout = options.timeoutMs ?? 0;
  if (!Number.isSafeInteger(timeout) || timeout < 0) {
    throw new InvalidArgumentError(`timeoutMs must be a whole number of milliseconds, got ${timeout}`);
  }
  return limit;
}

/** The exit code the JSON exec answers for a command that could not be started. */
function startFailureCode(error: HutchError): number {
  return error.code === "not_found" ? 127 : 126;
}

function isStream(value: unknown): value is NodeJS.ReadableStream | AsyncIterable<Uint8Array | string> {
  return (
    typeof value === "object" &&
    value !== null &&
    !(value instanceof Uint8Array) &&
    (typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === "function" || value instanceof Readable)
  );
}

async function pumpStdin(session: WsSession, stdin: StdinInput): Promise<void> {
  if (typeof stdin === "string" || stdin instanceof Uint8Array) {
    await session.writeStdin(stdin);
  } else if (isStream(stdin)) {
    for await (const chunk of stdin as AsyncIterable<Uint8Array | string>) {
      if (session.ended) return;
      await session.writeStdin(typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk);
    }
  } else {
    throw new InvalidArgumentError("stdin is a string, a Uint8Array, a readable stream or an async iterable of chunks");
  }
  if (!session.ended) await session.closeStdin();
}

/** A running command's session, its output collected, its end made an ExecResult. */
class Run {
  readonly session: WsSession;
  readonly t0 = Date.now();
  timedOut = false;
  private readonly stdout: OutputCollector;
  private readonly stderr: OutputCollector;
  private timer: NodeJS.Timeout | undefined;
  private readonly onAbort: (() => void) | undefined;

  constructor(
    transport: Transport,
    path: string,
    command: Command,
    private readonly options: StreamOptions,
    extra: Record<string, unknown>,
  ) {
    const limit = checkLimits(options);
    this.stdout = new OutputCollector(limit);
    this.stderr = new OutputCollector(limit);
    const request = { ...baseRequest(command, options), ...extra };
    const onStdout = toCallback(options.onStdout);
    const onStderr = toCallback(options.onStderr);
    this.session = new WsSession(transport, path, request, {
      onStdout: (bytes) => {
        this.stdout.add(bytes);
        return onStdout?.(bytes);
      },
      onStderr: (bytes) => {
        this.stderr.add(bytes);
        return onStderr?.(bytes);
      },
    });
    const timeout = options.timeoutMs ?? 0;
    if (timeout > 0) {
      this.timer = setTimeout(() => {
        this.timedOut = true;
        this.session.signal(9).catch(() => undefined);
      }, timeout);
    }
    const abort = options.abortSignal;
    if (abort !== undefined) {
      this.onAbort = () => this.session.cancel("The exec was aborted; the command was killed");
      if (abort.aborted) this.onAbort();
      else abort.addEventListener("abort", this.onAbort, { once: true });
    }
  }

  async result(): Promise<ExecResult> {
    let outcome: Outcome;
    try {
      outcome = await this.session.done;
    } finally {
      clearTimeout(this.timer);
      if (this.onAbort !== undefined) this.options.abortSignal?.removeEventListener("abort", this.onAbort);
    }
    const durationMs = Date.now() - this.t0;
    if (outcome.kind === "start-error") {
      const message = outcome.error.message;
      const stderrBytes = new Uint8Array(Buffer.from(`${message}\n`, "utf8"));
      return {
        stdout: "",
        stderr: `${message}\n`,
        stdoutBytes: new Uint8Array(0),
        stderrBytes,
        exitCode: startFailureCode(outcome.error),
        signal: null,
        durationMs,
        truncated: false,
        timedOut: false,
        pid: 0,
        error: { code: outcome.error.code, message },
      };
    }
    const stdoutBytes = this.stdout.bytes();
    const stderrBytes = this.stderr.bytes();
    const pid = await this.session.started.catch(() => 0);
    return {
      stdout: decodeUtf8(stdoutBytes),
      stderr: decodeUtf8(stderrBytes),
      stdoutBytes,
      stderrBytes,
      exitCode: outcome.exit.exitCode,
      signal: outcome.exit.signal,
      durationMs,
      truncated: this.stdout.truncated || this.stderr.truncated,
      timedOut: this.timedOut,
      pid,
      error: null,
    };
  }
}

export interface StreamExecOptions extends StreamOptions {
  stdin?: StdinInput;
}

/** exec over the WebSocket: to its end, output streamed to the callbacks as it comes. */
export async function execStreaming(
  transport: Transport,
  path: string,
  command: Command,
  options: StreamExecOptions,
): Promise<ExecResult> {
  const run = new Run(transport, path, command, options, { stdin: options.stdin !== undefined });
  if (options.stdin !== undefined) {
    const stdin = options.stdin;
    run.session.started.then(
      () =>
        pumpStdin(run.session, stdin).catch((e: unknown) => {
          if (!run.session.ended) run.session.cancel(`Reading stdin failed: ${(e as Error).message}`);
        }),
      () => undefined,
    );
  }
  return run.result();
}

export interface SpawnOptions extends StreamOptions {}

/**
 * A command running in the box with its stdin open: write to it (`write`, `stdin` as a Node
 * Writable), signal it, and wait for its ExecResult.
 */
export class ExecHandle {
  /** The command's pid in the box. */
  readonly pid: number;
  /** stdin as a Node stream: pipe into it; ending it sends EOF. Writes after the command ended are dropped. */
  readonly stdin: Writable;
  private readonly run: Run;
  private readonly resultPromise: Promise<ExecResult>;

  /** @internal Use Box.spawn. */
  constructor(run: Run, pid: number) {
    this.run = run;
    this.pid = pid;
    this.resultPromise = run.result();
    this.resultPromise.catch(() => undefined);
    const session = run.session;
    // Like a pipe to a process that is gone, bytes written after the command ended are dropped
    // (a command such as `head` may well end before its input does); write() still rejects.
    this.stdin = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        if (session.ended) return callback();
        session.writeStdin(chunk).then(() => callback(), (e: Error) => (session.ended ? callback() : callback(e)));
      },
      final(callback) {
        if (session.ended) return callback();
        session.closeStdin().then(() => callback(), (e: Error) => (session.ended ? callback() : callback(e)));
      },
    });
  }

  /** @internal */
  static async start(transport: Transport, path: string, command: Command, options: SpawnOptions): Promise<ExecHandle> {
    const run = new Run(transport, path, command, options, { stdin: true });
    const pid = await run.session.started;
    return new ExecHandle(run, pid);
  }

  /** Writes to the command's stdin. */
  write(data: string | Uint8Array): Promise<void> {
    return this.run.session.writeStdin(data);
  }

  /** Closes the command's stdin (EOF). */
  closeStdin(): Promise<void> {
    return this.run.session.closeStdin();
  }

  /** Sends a signal (number or name, Linux numbering) to the command. */
  signal(signal: Signal = "SIGTERM"): Promise<void> {
    return this.run.session.signal(signalNumber(signal));
  }

  kill(): Promise<void> {
    return this.signal(9);
  }

  /** The command's end: its exit code or signal and the collected output. */
  wait(): Promise<ExecResult> {
    return this.resultPromise;
  }

  /** Closes the session at once; hutchd kills the command. wait() rejects with CancelledError. */
  close(): void {
    this.run.session.cancel("The exec session was closed; the command was killed");
  }
}

export interface PtyOptions extends ProcessSpec {
  /** What to run; default the user's login shell. */
  command?: Command;
  rows?: number;
  cols?: number;
  /** Terminal output as it comes (a listener added later with onData gets what follows). */
  onData?: (data: Uint8Array) => void;
  /** Aborting closes the terminal (the command is killed). */
  abortSignal?: AbortSignal;
}

/** A terminal in the box: the command's stdin, stdout and stderr are one PTY. */
export class Pty {
  readonly pid: number;
  private readonly session: WsSession;
  private readonly listeners = new Set<(data: Uint8Array) => void>();
  private backlog: Uint8Array[] | undefined = [];
  private backlogBytes = 0;
  private readonly exitPromise: Promise<Exit>;

  private constructor(session: WsSession, pid: number, listeners: Set<(data: Uint8Array) => void>) {
    this.session = session;
    this.pid = pid;
    this.listeners = listeners;
    this.exitPromise = session.done.then((outcome) => {
      if (outcome.kind === "start-error") throw outcome.error;
      return outcome.exit;
    });
    this.exitPromise.catch(() => undefined);
  }

  /** @internal Use Box.pty. */
  static async open(transport: Transport, path: string, options: PtyOptions): Promise<Pty> {
    const rows = options.rows ?? 24;
    const cols = options.cols ?? 80;
    for (const [what, n] of [["rows", rows], ["cols", cols]] as const) {
      if (!Number.isInteger(n) || n < 1 || n > 65535) throw new InvalidArgumentError(`${what} must be 1-65535, got ${n}`);
    }
    const extra: Record<string, unknown> = { tty: true, rows, cols, stdin: true };
    let request: Record<string, unknown>;
    if (options.command === undefined) {
      // The user's login shell: an empty argv with login_shell.
      request = { argv: [], ...specFields(options), ...extra, login_shell: true };
    } else {
      request = { ...baseRequest(options.command, options), ...extra };
    }
    const listeners = new Set<(data: Uint8Array) => void>();
    let pty: Pty | undefined;
    const early: Uint8Array[] = [];
    const session = new WsSession(transport, path, request, {
      onStdout: (bytes) => {
        if (pty === undefined) early.push(Buffer.from(bytes));
        else pty.emit(bytes);
      },
      onStderr: (bytes) => {
        if (pty === undefined) early.push(Buffer.from(bytes));
        else pty.emit(bytes);
      },
    });
    const abort = options.abortSignal;
    if (abort !== undefined) {
      const onAbort = () => session.cancel("The terminal was aborted; its command was killed");
      if (abort.aborted) onAbort();
      else abort.addEventListener("abort", onAbort, { once: true });
      session.done.finally(() => abort.removeEventListener("abort", onAbort)).catch(() => undefined);
    }
    const pid = await session.started;
    pty = new Pty(session, pid, listeners);
    if (options.onData !== undefined) pty.onData(options.onData);
    for (const chunk of early) pty.emit(chunk);
    return pty;
  }

  private emit(bytes: Uint8Array): void {
    if (this.listeners.size === 0 && this.backlog !== undefined) {
      // Kept (up to 1 MiB) for the first listener, so a prompt printed before onData is not lost.
      if (this.backlogBytes + bytes.byteLength <= 1024 * 1024) {
        this.backlog.push(Buffer.from(bytes));
        this.backlogBytes += bytes.byteLength;
      }
      return;
    }
    for (const listener of this.listeners) listener(bytes);
  }

  /** Adds a listener for terminal output; returns a function that removes it. */
  onData(listener: (data: Uint8Array) => void): () => void {
    this.listeners.add(listener);
    if (this.backlog !== undefined) {
      const backlog = this.backlog;
      this.backlog = undefined;
      for (const chunk of backlog) listener(chunk);
    }
    return () => this.listeners.delete(listener);
  }

  /** Types into the terminal. */
  write(data: string | Uint8Array): Promise<void> {
    return this.session.writeStdin(data);
  }

  resize(size: { rows: number; cols: number }): Promise<void> {
    for (const [what, n] of [["rows", size.rows], ["cols", size.cols]] as const) {
      if (!Number.isInteger(n) || n < 1 || n > 65535) {
        return Promise.reject(new InvalidArgumentError(`${what} must be 1-65535, got ${n}`));
      }
    }
    return this.session.resize(size.rows, size.cols);
  }

  signal(signal: Signal = "SIGTERM"): Promise<void> {
    return this.session.signal(signalNumber(signal));
  }

  kill(): Promise<void> {
    return this.signal(9);
  }

  /** Resolves when the command ends. */
  wait(): Promise<Exit> {
    return this.exitPromise;
  }

  /** Closes the terminal at once; hutchd kills the command. */
  close(): void {
    this.session.cancel("The terminal was closed; its command was killed");
  }
}

export type { Exit };
