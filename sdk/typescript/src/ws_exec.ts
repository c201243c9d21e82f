// The streaming exec: GET /v1/boxes/{box}/exec/ws, subprotocol hutch.exec.v1 (docs/api.md,
// "Streaming"). The first client message is the request (text); then binary messages carry
// bytes with the stream in their first byte (0 stdin, 1 stdout, 2 stderr) and text messages are
// JSON control messages (stdin_eof, resize, signal; started, exit, error).
//
// Output handlers run in order. One that returns a promise pauses the socket until it settles,
// so a slow consumer slows the command down (hutchd pulls from the box only as fast as we read).

import type { IncomingMessage } from "node:http";

import type WebSocket from "ws";

import { CancelledError, HutchError, ProtocolError, UnavailableError, errorForCode, errorFromResponse } from "./errors.js";
import type { Transport } from "./transport.js";
import { readText } from "./transport.js";
import { type JsonObject, asObject, optNum, num, str } from "./wire.js";

export const execSubprotocol = "hutch.exec.v1";

export const StreamId = { Stdin: 0, Stdout: 1, Stderr: 2 } as const;

/** Client → hutchd: stdin bytes, framed. */
export function stdinFrame(data: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(data.byteLength + 1);
  frame[0] = StreamId.Stdin;
  Buffer.from(data.buffer, data.byteOffset, data.byteLength).copy(frame, 1);
  return frame;
}

export type ControlMessage =
  | { type: "started"; pid: number }
  | { type: "exit"; exitCode: number | null; signal: number | null }
  | { type: "error"; code: string; message: string };

/** Reads one hutchd → client text message. */
export function parseControl(text: string): ControlMessage {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ProtocolError(`hutchd sent an exec control message that is not JSON: ${text.slice(0, 200)}`);
  }
  const o: JsonObject = asObject(value, "an exec control message");
  const w = "an exec control message";
  const type = str(o, "type", w);
  switch (type) {
    case "started":
      return { type, pid: num(o, "pid", w) };
    case "exit": {
      const exitCode = optNum(o, "exit_code", w);
      const signal = optNum(o, "signal", w);
      if ((exitCode === null) === (signal === null)) {
        throw new ProtocolError(`hutchd sent an exit message with ${exitCode === null ? "neither" : "both"} exit_code and signal: ${text}`);
      }
      return { type, exitCode, signal };
    }
    case "error":
      return { type, code: str(o, "code", w, "internal"), message: str(o, "message", w) };
    default:
      throw new ProtocolError(`hutchd sent an exec control message of unknown type '${type}'`);
  }
}

/** One hutchd → client binary message: which stream and its bytes. */
export function parseData(data: Buffer): { stream: 1 | 2; bytes: Buffer } {
  if (data.length === 0) throw new ProtocolError("hutchd sent an empty binary exec message (no stream byte)");
  const stream = data[0];
  if (stream !== StreamId.Stdout && stream !== StreamId.Stderr) {
    throw new ProtocolError(`hutchd sent exec data for stream ${stream}; only 1 (stdout) and 2 (stderr) go to the client`);
  }
  return { stream, bytes: data.subarray(1) };
}

export type OutputHandler = (bytes: Buffer) => unknown;

export interface SessionHandlers {
  onStdout?: OutputHandler;
  onStderr?: OutputHandler;
}

export interface Exit {
  exitCode: number | null;
  signal: number | null;
}

/** How a session ended: an exit, or an error the command could not be started with. */
export type Outcome = { kind: "exit"; exit: Exit } | { kind: "start-error"; error: HutchError };

// Chunks of stdin per message: large writes are split so no single message is huge.
const stdinChunk = 64 * 1024;

/** One WebSocket exec session. */
export class WsSession {
  /** Resolves with the command's pid once hutchd said "started". */
  readonly started: Promise<number>;
  /** Resolves when the command has ended (or could not start); rejects if the session broke. */
  readonly done: Promise<Outcome>;

  private readonly ws: WebSocket;
  private resolveStarted!: (pid: number) => void;
  private rejectStarted!: (e: Error) => void;
  private resolveDone!: (o: Outcome) => void;
  private rejectDone!: (e: Error) => void;
  private isStarted = false;
  private finished = false;
  private failure: Error | undefined;
  private queue: Promise<void> = Promise.resolve();
  private pending = 0;
  private outcome: Outcome | undefined;
  private settled = false;
  private startError: HutchError | undefined;

  constructor(
    transport: Transport,
    path: string,
    request: JsonObject,
    private readonly handlers: SessionHandlers,
  ) {
    this.started = new Promise((resolve, reject) => {
      this.resolveStarted = resolve;
      this.rejectStarted = reject;
    });
    this.done = new Promise((resolve, reject) => {
      this.resolveDone = resolve;
      this.rejectDone = reject;
    });
    // Neither promise may count as unhandled when the caller awaits only the other one.
    this.started.catch(() => undefined);
    this.done.catch(() => undefined);

    const ws = transport.webSocket(path, execSubprotocol);
    this.ws = ws;
    ws.binaryType = "nodebuffer";
    ws.on("open", () => {
      if (ws.protocol !== execSubprotocol) {
        this.fail(new ProtocolError(`hutchd accepted the exec WebSocket with subprotocol '${ws.protocol}', not ${execSubprotocol}`));
        return;
      }
      ws.send(JSON.stringify(request), (err) => {
        if (err) this.fail(transport.connectionError(err));
      });
    });
    ws.on("unexpected-response", (_req, res: IncomingMessage) => {
      const status = res.statusCode ?? 0;
      readText(res, 64 * 1024).then(
        (text) => this.fail(errorFromResponse(status, text, res.headers)),
        (err) => this.fail(transport.connectionError(err)),
      );
    });
    ws.on("error", (err) => this.fail(transport.connectionError(err)));
    ws.on("message", (data: Buffer, isBinary: boolean) => {
      if (this.finished) return;
      if (isBinary) {
        let parsed: ReturnType<typeof parseData>;
        try {
          parsed = parseData(data);
        } catch (e) {
          this.fail(e as Error);
          return;
        }
        if (!this.isStarted) {
          this.fail(new ProtocolError("hutchd sent output before the started message"));
          return;
        }
        const handler = parsed.stream === StreamId.Stdout ? this.handlers.onStdout : this.handlers.onStderr;
        if (handler !== undefined) this.dispatch(() => handler(parsed.bytes));
        return;
      }
      let msg: ControlMessage;
      try {
        msg = parseControl(data.toString("utf8"));
      } catch (e) {
        this.fail(e as Error);
        return;
      }
      this.control(msg);
    });
    ws.on("close", (code, reason) => {
      if (this.outcome !== undefined) {
        // Every output handler ran before the outcome was queued; settle once they are done.
        return;
      }
      if (this.startError !== undefined && this.failure === undefined) {
        const error = this.startError;
        if (code === 1000 || code === 1005) {
          this.end({ kind: "start-error", error });
          this.rejectStarted(error);
        } else {
          this.fail(error);
        }
        return;
      }
      if (this.failure === undefined) {
        const why = reason.length > 0 ? `: ${reason.toString("utf8")}` : "";
        this.fail(new UnavailableError(`The exec WebSocket closed (code ${code}${why}) before the command's exit`));
      }
    });
  }

  private control(msg: ControlMessage): void {
    switch (msg.type) {
      case "started":
        if (this.isStarted) {
          this.fail(new ProtocolError("hutchd sent a second started message"));
          return;
        }
        this.isStarted = true;
        this.resolveStarted(msg.pid);
        return;
      case "exit":
        this.end({ kind: "exit", exit: { exitCode: msg.exitCode, signal: msg.signal } });
        return;
      case "error": {
        const error = errorForCode(msg.code, msg.message || `The command failed (${msg.code})`);
        if (!this.isStarted) {
          // Before "started" this is either the command that could not be started (no such
          // program, user or directory: the command's failure, a normal end, close 1000) or a
          // request hutchd refused (any other close code): the close frame that follows tells.
          this.startError = error;
          return;
        }
        this.fail(error);
        return;
      }
    }
  }

  /** Runs output handlers one after another; an async one pauses the socket meanwhile. */
  private dispatch(fn: () => unknown): void {
    if (this.pending === 0) {
      let result: unknown;
      try {
        result = fn();
      } catch (e) {
        this.fail(e as Error);
        return;
      }
      if (typeof result !== "object" || result === null || typeof (result as PromiseLike<unknown>).then !== "function") return;
      this.pending++;
      this.ws.pause();
      this.queue = Promise.resolve(result).then(
        () => this.settleOne(),
        (e) => {
          this.settleOne();
          this.fail(e as Error);
        },
      );
      return;
    }
    this.pending++;
    this.queue = this.queue.then(async () => {
      try {
        if (this.failure === undefined) await fn();
      } catch (e) {
        this.fail(e as Error);
      } finally {
        this.settleOne();
      }
    });
  }

  private settleOne(): void {
    this.pending--;
    if (this.pending === 0 && !this.finished) this.ws.resume();
  }

  private end(outcome: Outcome): void {
    if (this.finished) return;
    this.finished = true;
    this.outcome = outcome;
    // After the handlers that are still running: the exit comes after all output.
    void this.queue.then(() => {
      if (this.failure !== undefined) return;
      this.settled = true;
      this.resolveDone(outcome);
      this.ws.close(1000);
    });
  }

  private fail(error: Error): void {
    if (this.failure !== undefined || this.settled) return;
    this.failure = error;
    this.finished = true;
    this.rejectStarted(error);
    this.rejectDone(error);
    // Closing before the exit kills the command (SIGKILL to its process group).
    this.ws.terminate();
  }

  private sendControl(message: JsonObject): Promise<void> {
    return this.sendRaw(JSON.stringify(message), false);
  }

  private sendRaw(data: string | Buffer, binary: boolean): Promise<void> {
    if (this.finished) {
      return Promise.reject(
        this.failure ?? new HutchError("failed_precondition", "The command has already ended"),
      );
    }
    return new Promise((resolve, reject) => {
      this.ws.send(data, { binary }, (err) => (err ? reject(new UnavailableError(`Cannot send to the exec WebSocket: ${err.message}`, { cause: err })) : resolve()));
    });
  }

  async writeStdin(data: string | Uint8Array): Promise<void> {
    await this.started;
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
    for (let offset = 0; offset < bytes.byteLength; offset += stdinChunk) {
      await this.sendRaw(stdinFrame(bytes.subarray(offset, offset + stdinChunk)), true);
    }
  }

  async closeStdin(): Promise<void> {
    await this.started;
    await this.sendControl({ type: "stdin_eof" });
  }

  async resize(rows: number, cols: number): Promise<void> {
    await this.started;
    await this.sendControl({ type: "resize", rows, cols });
  }

  async signal(signal: number): Promise<void> {
    await this.started;
    await this.sendControl({ type: "signal", signal });
  }

  /** Closes the WebSocket now: hutchd kills the command if it still runs. */
  cancel(reason = "The exec was cancelled"): void {
    this.fail(new CancelledError(reason));
  }

  get ended(): boolean {
    return this.finished;
  }
}
